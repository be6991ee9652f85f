"""Stack references: the builtin provider's ``pulumi:pulumi:StackReference`` for a self-hosted backend.

The CLI's builtin provider (pkg/resource/deploy/builtins.go) reads another stack's outputs from the
backend: the resource's only input is ``name`` (the referenced stack), its outputs are ``name``,
``outputs`` (the referenced stack's outputs, secrets still secret) and ``secretOutputNames`` (the
top-level output names holding a secret, sorted). The Python SDK declares it as a read
(``ResourceOptions(id=<stack name>)``, so ``ReadResource``) and marks each ``get_output`` secret from
``secretOutputNames``.

This engine has no backend: each referenced stack maps to its state file (``--stack-state NAME=PATH``,
``Engine(..., stack_states={...})``). A reference to a stack that is not mapped, or whose state file
does not exist, fails the run (the CLI fails the same way on a stack the backend does not have).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.state import StateError, read_state
from engine.values import Props, contains_secret, is_secret

STACK_REFERENCE_TYPE = "pulumi:pulumi:StackReference"


class StackReferenceError(Exception):
    pass


def _elide(value: Any) -> Any:
    """A secret that cannot be decrypted becomes null (builtins.go: "eliding undecryptable secrets")."""
    if is_secret(value):
        return None
    if isinstance(value, dict):
        return {k: _elide(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_elide(v) for v in value]
    return value


class StackReferences:
    """Resolves a referenced stack's name to its state file and reads its outputs."""

    def __init__(self, project: str, states: dict[str, Path], passphrase: str) -> None:
        self.project = project
        self.states = dict(states)
        self.passphrase = passphrase

    def path(self, name: str) -> Path:
        """``name``, ``<project>/name`` or ``organization/<project>/name`` (the DIY backend's forms)."""
        candidates = [name]
        for prefix in (f"organization/{self.project}/", f"{self.project}/"):
            if name.startswith(prefix):
                candidates.append(name[len(prefix):])
        for candidate in candidates:
            if candidate in self.states:
                return self.states[candidate]
        known = ", ".join(sorted(self.states)) or "none"
        raise StackReferenceError(
            f"unknown stack {name!r}: this engine reads a referenced stack from the state file mapped with "
            f"--stack-state {name}=PATH (Engine(stack_states=...)); mapped stacks: {known}")

    def read(self, name: str) -> tuple[Props, list[str], bool]:
        """The referenced stack's outputs (secrets as secret values), the names of the secret ones, and
        whether secrets were elided because this run's passphrase does not decrypt them."""
        path = self.path(name)
        if not path.exists():
            raise StackReferenceError(
                f"stack {name!r} has no state at {path} (it was never deployed): run `up` of {name} first")
        elided = False
        try:
            outputs = read_state(path, self.passphrase).outputs
        except StateError as exn:
            if "PULUMI_CONFIG_PASSPHRASE" not in str(exn):
                raise StackReferenceError(f"stack reference {name!r}: {exn}") from None
            outputs, elided = _elide(read_state(path).outputs), True
        secret_names = sorted(k for k, v in outputs.items() if contains_secret(v))
        return outputs, secret_names, elided

    def state(self, name: str) -> tuple[Props, bool]:
        """The resource's outputs as builtins.go ``readStackReference`` returns them."""
        outputs, secret_names, elided = self.read(name)
        return {"name": name, "outputs": outputs, "secretOutputNames": secret_names}, elided


def check_inputs(props: Props) -> str:
    """builtins.go Read: ``name`` is the only input (the SDK's null ``outputs`` placeholders aside)."""
    extra = sorted(k for k, v in props.items() if k != "name" and v is not None)
    if extra:
        raise StackReferenceError(f'unknown property "{extra[0]}"')
    name = props.get("name")
    if not isinstance(name, str) or not name:
        raise StackReferenceError("stack reference can not be imported" if name is None
                                  else 'property "name" must be a string')
    return name
