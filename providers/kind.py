"""What a resource kind says about itself: which inputs identify it, which replace it, which change
in place. The adapter's `diff`, the preview note and the docs all read this one descriptor, so a rule
about a kind is written once.

Paths are dotted input paths (`machine.hostname`, `policy`); the most specific rule that covers a
changed leaf decides. A changed path no rule covers is a replace: the safe reading of an input nobody
classified (and `test_kinds.py` fails on any spec field left unclassified).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # pulumi.runtime.rpc.UNKNOWN over gRPC


def is_unknown(value: Any) -> bool:
    """Preview hands unresolved values over as the UNKNOWN sentinel (or the SDK's Unknown object)."""
    return (isinstance(value, str) and value == UNKNOWN) or type(value).__name__ == "Unknown"


class Change(StrEnum):
    UPDATE = "update"  # applied to the existing object
    REPLACE = "replace"  # a new object (delete-before-replace when the descriptor says so)
    IGNORE = "ignore"  # recorded for reference only (never drives a step)


@dataclass(frozen=True)
class InputDiff:
    """Changed input paths, split by what their change means."""

    replaces: tuple[str, ...] = ()
    updates: tuple[str, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.replaces or self.updates)


@dataclass(frozen=True)
class KindDescriptor:
    """One resource kind's identity and change rules (Pulumi type `gpuaas:<name>`)."""

    name: str
    identity: tuple[str, ...]
    """Inputs naming the external object; a change is always a replace."""
    replaces: tuple[str, ...] = ()
    in_place: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    delete_before_replace: bool = False
    summary_outputs: tuple[str, ...] = ()
    """Outputs a reviewer wants next to the change (the preview note shows them)."""
    doc: str = ""
    notes: dict[str, str] = field(default_factory=dict)
    """path -> why it is classified so (shown in docs)."""

    @property
    def type_token(self) -> str:
        return f"pulumi-python:dynamic/gpuaas:{self.name}"

    def rule(self, path: str) -> Change:
        """What a change at `path` means: the longest rule prefix covering it wins."""
        best: tuple[int, Change] = (-1, Change.REPLACE)
        for rules, change in (
            (self.identity, Change.REPLACE),
            (self.replaces, Change.REPLACE),
            (self.in_place, Change.UPDATE),
            (self.ignored, Change.IGNORE),
        ):
            for rule in rules:
                if (path == rule or path.startswith(rule + ".")) and len(rule) > best[0]:
                    best = (len(rule), change)
        return best[1]

    def diff(self, old: Mapping[str, Any], new: Mapping[str, Any], *, inputs: Iterable[str] | None = None) -> InputDiff:
        """Compare old and new inputs (top-level keys `inputs`, default: both sides' keys minus `__*`).
        An unknown new value (preview) counts as changed."""
        keys = set(inputs) if inputs is not None else {k for k in (*old, *new) if not str(k).startswith("__")}
        replaces: list[str] = []
        updates: list[str] = []
        for path in sorted(_changed_paths(old, new, keys)):
            change = self.rule(path)
            if change is Change.REPLACE:
                replaces.append(path)
            elif change is Change.UPDATE:
                updates.append(path)
        return InputDiff(tuple(replaces), tuple(updates))


def _changed_paths(old: Mapping[str, Any], new: Mapping[str, Any], keys: Iterable[str], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key in keys:
        path = f"{prefix}{key}"
        a, b = old.get(key), new.get(key)
        if is_unknown(b):
            out.append(path)
        elif isinstance(a, Mapping) and isinstance(b, Mapping):
            out += _changed_paths(a, b, {*a, *b}, path + ".")
        elif _normal(a) != _normal(b):
            out.append(path)
    return out


def _normal(value: Any) -> Any:
    """Pulumi hands numbers over as floats (4 -> 4.0) and lists as lists or tuples: compare values."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:  # most values: no ABC isinstance for them
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _normal(v) for k, v in value.items()}
    return value


REGISTRY: dict[str, KindDescriptor] = {}


def register(descriptor: KindDescriptor) -> KindDescriptor:
    """Each kind's module registers its descriptor once (the preview note and docs look kinds up here)."""
    REGISTRY[descriptor.name] = descriptor
    return descriptor


# The modules that define a kind (each calls `register` at import). Their import paths are part of
# the state contract: Pulumi state pickles the provider classes by reference.
KIND_MODULES = (
    "providers.site_profile",
    "providers.bootstrap_bundle",
    "providers.roce_assignment",
    "providers.maas_machine",
    "providers.machine_pool",
    "providers.app_instance",
    "providers.host_convergence",
)


def all_kinds() -> dict[str, KindDescriptor]:
    """Every registered kind, by name (imports the kind modules on first use)."""
    import importlib

    for module in KIND_MODULES:
        importlib.import_module(module)
    return dict(REGISTRY)
