"""`gpuaas-infra secrets <env>`: the Vault entries an environment needs, from the environment model.

One function, `secret_checklist(env, host_secret_refs)`, builds the list (path, key, expected shape,
which resource kinds read it and when), the stack's host-role secrets (`hostRoles.secret_refs`)
included; `--template` prints a YAML fill-in sheet with empty values; `doctor` checks
the same list against Vault. Nothing here reads a secret value.
"""

from __future__ import annotations

import argparse
import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

import yaml
from pydantic import BaseModel, ConfigDict, SecretStr

from components.settings import NAMESPACE, StackConfigInvalid, StackSettings
from environments import Environment, EnvironmentInvalid, load_environment


class Shape(StrEnum):
    """What the value under a key must look like."""

    MAAS_API_KEY = "maas_api_key"
    BEARER_TOKEN = "bearer_token"
    S3_KEYS = "json_s3_keys"
    USER_PASSWORD = "json_user_password"
    PEM_PRIVATE_KEY = "pem_private_key"
    SSH_PUBLIC_KEY = "ssh_public_key"
    PASSWORD_HASH = "crypt_password_hash"
    STRING = "string"


SHAPE_TEXT: dict[Shape, str] = {
    Shape.MAAS_API_KEY: 'string "<consumer>:<token>:<secret>" (MAAS UI > Preferences > API keys)',
    Shape.BEARER_TOKEN: "string: a platform bearer token",
    Shape.S3_KEYS: 'JSON {"access_key_id", "secret_access_key"}',
    Shape.USER_PASSWORD: 'JSON {"user", "password"} (BMC/IPMI)',
    Shape.PEM_PRIVATE_KEY: "PEM private key (-----BEGIN ... PRIVATE KEY-----)",
    Shape.SSH_PUBLIC_KEY: "string: one OpenSSH public key line (ssh-ed25519 AAAA... comment)",
    Shape.PASSWORD_HASH: "string: a crypt(3) password hash ($6$... or $y$...; mkpasswd -m sha-512), never the password",
    Shape.STRING: "string (a host role's secret: munge key, runner token, password)",
}

JSON_KEYS: dict[Shape, tuple[str, ...]] = {
    Shape.S3_KEYS: ("access_key_id", "secret_access_key"),
    Shape.USER_PASSWORD: ("user", "password"),
}


class Phase(StrEnum):
    """When a provider reads the secret (no provider reads one in `check`: previews stay offline)."""

    CREATE = "create"
    UPDATE = "update"
    REFRESH = "refresh"
    DELETE = "delete"


_ALL = (Phase.CREATE, Phase.UPDATE, Phase.REFRESH, Phase.DELETE)
_APPLY = (Phase.CREATE, Phase.UPDATE)


class Reader(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: str
    """The resource kind (provider) that reads it."""
    of: str
    """Which of the environment's objects that resource stands for."""
    phases: tuple[Phase, ...]

    def text(self) -> str:
        return f"{self.kind} ({self.of}): {'/'.join(p.value for p in self.phases)}"


class SecretEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    ref: str
    path: str
    key: str
    shape: Shape
    readers: tuple[Reader, ...]
    field: str
    """Where the environment names it (e.g. `sites[local].maas_api_key_path`), for fix hints."""


class _Use(NamedTuple):
    ref: str
    shape: Shape
    reader: Reader
    field: str


def _use(ref: str, shape: Shape, field: str, kind: str, of: str, phases: tuple[Phase, ...]) -> _Use:
    return _Use(ref, shape, Reader(kind=kind, of=of, phases=phases), field)


def _entries(env: Environment) -> list[_Use]:
    """Who reads what, and when: mirrors the providers (site_profile, roce_assignment, machines,
    bootstrap_bundle, apps, host_convergence); a new credential in the model belongs here too."""
    token, store = env.platform.admin_token_path, env.artifact_store.credentials_path
    out = [
        _use(
            s.maas_api_key_path, Shape.MAAS_API_KEY, f"sites[{s.name}].maas_api_key_path", kind, f"site {s.name}", _ALL
        )
        for s in env.sites
        for kind in ("SiteProfile", "RoceAssignment", "MaasMachine/MachinePool")
    ]
    out += [
        _use(token, Shape.BEARER_TOKEN, "platform.admin_token_path", "SiteProfile", "every site", _ALL),
        _use(token, Shape.BEARER_TOKEN, "platform.admin_token_path", "MaasMachine/MachinePool", "enrollment", _APPLY),
        _use(store, Shape.S3_KEYS, "artifact_store.credentials_path", "BootstrapBundle",
             f"bucket {env.artifact_store.bucket}", (*_APPLY, Phase.REFRESH)),
        _use(store, Shape.S3_KEYS, "artifact_store.credentials_path", "SiteProfile", "commissioning scripts", _APPLY),
    ]  # fmt: skip
    out += [
        _use(a.service_account_token_path, Shape.BEARER_TOKEN, f"app_instances[{a.name}].service_account_token_path",
             "AppInstance", f"{a.name} (project {a.project_id})", _ALL)
        for a in env.app_instances
    ]  # fmt: skip
    out += [
        _use(h.ssh_key_path, Shape.PEM_PRIVATE_KEY, f"hosts[{h.hostname}].ssh_key_path", "HostConvergence",
             f"host {h.hostname}", _APPLY)
        for h in env.hosts
    ]  # fmt: skip
    out += [
        _use(m.power_user_path, Shape.USER_PASSWORD, f"machines[{m.hostname}].power_user_path",
             "MaasMachine/MachinePool", f"machine {m.hostname}", _APPLY)
        for m in env.machines
        if m.power_user_path
    ]  # fmt: skip
    return out + _login_user_entries(env)


def _login_user_entries(env: Environment) -> list[_Use]:
    """A profile's login user: its public keys and password hash, read when a machine of the profile deploys."""
    out: list[_Use] = []
    for s in env.sites:
        for p in s.profiles:
            user, where = p.login_user, f"sites[{s.name}].profiles[{p.name}].login_user"
            if user is None:
                continue
            of = f"login user {user.name} ({s.name}/{p.name})"
            out += [_use(ref, Shape.SSH_PUBLIC_KEY, f"{where}.ssh_authorized_keys", "MaasMachine/MachinePool", of,
                         _APPLY) for ref in user.ssh_authorized_keys]
            if user.password.hash_ref:
                out.append(_use(user.password.hash_ref, Shape.PASSWORD_HASH, f"{where}.password.hash_ref",
                                "MaasMachine/MachinePool", of, _APPLY))
    return out


def _host_role_entries(env: Environment, refs: dict[str, str]) -> list[_Use]:
    """The stack's `hostRoles.secret_refs` (stack config, not the environment): read by HostConvergence
    when it converges the hosts whose roles render that variable."""
    hosts = ", ".join(h.hostname for h in env.hosts) or "no hosts"
    return [
        _use(ref, Shape.STRING, f"{NAMESPACE}:hostRoles.secret_refs.{var}", "HostConvergence", hosts, _APPLY)
        for var, ref in sorted(refs.items())
    ]


def secret_checklist(env: Environment, host_secret_refs: dict[str, str] | None = None) -> list[SecretEntry]:
    """Every Vault entry `env` needs (and, given the stack's `hostRoles.secret_refs`, those of its host
    roles), one per reference, readers merged; sorted by path and key."""
    merged: dict[str, SecretEntry] = {}
    for ref, shape, reader, where in _entries(env) + _host_role_entries(env, host_secret_refs or {}):
        path, _, key = ref.partition("#")
        old = merged.get(ref)
        if old is None:
            merged[ref] = SecretEntry(ref=ref, path=path, key=key, shape=shape, readers=(reader,), field=where)
            continue
        if old.shape is not shape:  # one value cannot have two shapes; the environment must split them
            raise ValueError(
                f"environment {env.name}: Vault reference {ref!r} is used as {SHAPE_TEXT[old.shape]} by "
                f"{old.field} and as {SHAPE_TEXT[shape]} by {where}; fix: give each its own path or key"
            )
        readers = _merge(old.readers, reader)
        merged[ref] = old.model_copy(update={"readers": readers})
    return sorted(merged.values(), key=lambda e: (e.path, e.key))


def _merge(readers: tuple[Reader, ...], new: Reader) -> tuple[Reader, ...]:
    """Same kind and phases: one reader naming every object (`host a, host b`)."""
    for i, r in enumerate(readers):
        if r.kind == new.kind and r.phases == new.phases:
            if new.of in r.of.split(", "):
                return readers
            return (*readers[:i], r.model_copy(update={"of": f"{r.of}, {new.of}"}), *readers[i + 1 :])
    return (*readers, new)


def shape_problem(shape: Shape, value: SecretStr) -> str | None:
    """Why `value` does not have `shape` (never quoting it), or None when it fits."""
    raw = value.get_secret_value()
    if not raw.strip():
        return "the value is empty"
    if shape is Shape.MAAS_API_KEY:
        parts = raw.strip().split(":")
        return None if len(parts) == 3 and all(parts) else f"expected 3 ':'-separated parts, found {len(parts)}"
    if shape is Shape.PEM_PRIVATE_KEY:
        text = raw.strip()
        ok = text.startswith("-----BEGIN ") and "PRIVATE KEY-----" in text.splitlines()[0] and "-----END " in text
        return None if ok else "not a PEM private key (no -----BEGIN ... PRIVATE KEY----- / -----END line)"
    if shape is Shape.SSH_PUBLIC_KEY:
        parts = raw.strip().split()
        ok = len(parts) >= 2 and parts[0].startswith(("ssh-", "ecdsa-", "sk-")) and "\n" not in raw.strip()
        return None if ok else "not one OpenSSH public key line (<type> <base64> [comment])"
    if shape is Shape.PASSWORD_HASH:
        ok = raw.strip().startswith(("$6$", "$5$", "$y$", "$2b$")) and len(raw.strip()) > 20
        return None if ok else "not a crypt(3) hash ($6$..., $y$...): store the hash, never the password"
    if shape in JSON_KEYS:
        try:
            obj = json.loads(raw)
        except ValueError:
            return "not a JSON object"
        if not isinstance(obj, dict):
            return "not a JSON object"
        missing = [k for k in JSON_KEYS[shape] if not isinstance(obj.get(k), str) or not obj.get(k)]
        return f"JSON member(s) missing or empty: {', '.join(missing)}" if missing else None
    return None


def render_table(env: Environment, entries: list[SecretEntry]) -> str:
    lines = [
        f"Vault entries of environment {env.name} (KV v2 mount {env.vault.kv_mount!r} at {env.vault.address}):",
        "",
    ]
    for e in entries:
        lines.append(f"{e.path}#{e.key}")
        lines.append(f"    shape: {SHAPE_TEXT[e.shape]}")
        lines.append(f"    named by: {e.field}")
        lines += [f"    read by: {r.text()}" for r in e.readers]
    return "\n".join(lines) + "\n"


def render_template(env: Environment, entries: list[SecretEntry]) -> str:
    """A YAML fill-in sheet: mount, then path -> key -> empty value (JSON shapes as a mapping)."""
    q = json.dumps  # a JSON string is a valid YAML scalar: paths and keys quoted safely
    lines = [
        f"# Vault entries of environment {env.name}; fill every value, then write each path with",
        f"#   vault kv put -mount={env.vault.kv_mount} <path> <key>=<value> ...",
        "# (a mapping value is stored as one JSON object string). Never commit a filled copy.",
        f"mount: {q(env.vault.kv_mount)}",
        "secrets:",
    ]
    by_path: dict[str, list[SecretEntry]] = {}
    for e in entries:
        by_path.setdefault(e.path, []).append(e)
    for path, items in by_path.items():
        lines.append(f"  {q(path)}:")
        for e in items:
            lines.append(f"    # {SHAPE_TEXT[e.shape]}; read by {'; '.join(r.text() for r in e.readers)}")
            if e.shape in JSON_KEYS:
                members = ", ".join(f'{k}: ""' for k in JSON_KEYS[e.shape])
                lines.append(f"    {q(e.key)}: {{{members}}}")
            else:
                lines.append(f'    {q(e.key)}: ""')
    return "\n".join(lines) + "\n"


STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"


def stack_config(stack: str, overrides: list[str], stacks_dir: Path = STACKS_DIR) -> dict[str, str]:
    """Plain values of stacks/Pulumi.<stack>.yaml (encrypted ones cannot be read without Pulumi;
    mappings such as hostRoles as JSON), then `--config key=value` overrides; keys without the
    `gpuaas-infra:` namespace."""
    out: dict[str, str] = {}
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    if path.exists():
        for key, value in ((yaml.safe_load(path.read_text()) or {}).get("config") or {}).items():
            if isinstance(value, str | int | float | bool):
                out[str(key).removeprefix(f"{NAMESPACE}:")] = str(value)
            elif isinstance(value, dict) and "secure" not in value:
                out[str(key).removeprefix(f"{NAMESPACE}:")] = json.dumps(value)
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--config {item.split('=')[0]!r}: write key=value (e.g. embedded_maas_url=http://...)")
        out[key.removeprefix(f"{NAMESPACE}:")] = value
    return out


def stack_secret_refs(stack: str, env: Environment) -> dict[str, str]:
    """The stack's host-convergence Vault references: `hostRoles.secret_refs` and each runner's token (empty when
    the stack converges no hosts or has no file)."""
    settings = StackSettings.from_config(stack, {**stack_config(stack, []), "environment": env.name})
    from components.host_roles import host_secret_refs  # the component compiles the runners' references

    return host_secret_refs(env, settings.host_roles)


def load(name: str) -> Environment | None:
    """The compiled environment, or None after printing its findings (bad input, exit 2)."""
    try:
        return load_environment(name)
    except EnvironmentInvalid as invalid:
        sys.stderr.write(f"{invalid}\n")
        return None
    except FileNotFoundError as missing:
        sys.stderr.write(f"gpuaas-infra: {missing}; fix: name one of environments/*.yaml\n")
        return None


def secrets_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="gpuaas-infra secrets", description="List the Vault entries an environment needs (never their values)."
    )
    parser.add_argument("env", help="environment name (environments/<env>.yaml) or a .yaml path")
    parser.add_argument("--template", action="store_true", help="print a YAML fill-in template (values empty)")
    parser.add_argument("--stack", help="the stack whose hostRoles secrets to add (default: the environment's name)")
    args = parser.parse_args(argv)
    env = load(args.env)
    if env is None:
        return 2
    try:
        entries = secret_checklist(env, stack_secret_refs(args.stack or env.name, env))
    except StackConfigInvalid as invalid:
        sys.stderr.write(f"{invalid}\n")
        return 2
    except ValueError as conflict:
        sys.stderr.write(f"{conflict}\n")
        return 2
    sys.stdout.write(render_template(env, entries) if args.template else render_table(env, entries))
    if not args.template:
        sys.stdout.write(PIPELINE_IDENTITIES.format(env=env.name))
    return 0


# Not Vault entries but what reads them: the pipeline's two AppRoles per stack (docs/operations.md).
PIPELINE_IDENTITIES = """
Pipeline identities (AppRole role_id/secret_id as masked CI/CD variables, not Vault entries):
  deploy   scope {env} (the deploy jobs)        transit encrypt+decrypt gpuaas-{env}, read on every path above
  preview  scope preview/<stack> (MR previews)  transit decrypt gpuaas-{env} only; `doctor` checks it is read-only
"""
