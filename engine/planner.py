"""Pure planning: from old state, checked inputs and the provider's DiffResponse to one step decision.

No I/O here; ``deployment`` runs what this decides. The rules follow Pulumi's step generator:
DIFF_UNKNOWN means "engine, diff the inputs yourself"; replaces (from the provider or from
``replace_on_changes``) turn an update into a replacement; create-before-delete unless the provider or
the resource options ask for delete-before-replace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pulumi.runtime.proto import provider_pb2

from engine.model import DiffKind, PropertyDiff, StepOp
from engine.values import Props, strip_secrets

DIFF_UNKNOWN = provider_pb2.DiffResponse.DIFF_UNKNOWN
DIFF_NONE = provider_pb2.DiffResponse.DIFF_NONE
DIFF_SOME = provider_pb2.DiffResponse.DIFF_SOME


@dataclass
class Decision:
    op: StepOp
    diff_reasons: list[str] = field(default_factory=list)
    replace_reasons: list[str] = field(default_factory=list)
    detailed: dict[str, PropertyDiff] = field(default_factory=dict)
    delete_before_replace: bool = False


def changed_keys(old: Props, new: Props) -> list[str]:
    """Top-level keys whose plaintext values differ (secrets unwrapped; unknowns always differ)."""
    keys = set(old) | set(new)
    return sorted(
        k for k in keys if strip_secrets(old.get(k)) != strip_secrets(new.get(k)) or k not in old or k not in new
    )


def detailed_diff(
    old: Props, new: Props, keys: list[str], replace: set[str], input_diff: bool = True
) -> dict[str, PropertyDiff]:
    out: dict[str, PropertyDiff] = {}
    for key in keys:
        if key not in old:
            kind = DiffKind.ADD_REPLACE if key in replace else DiffKind.ADD
        elif key not in new:
            kind = DiffKind.DELETE_REPLACE if key in replace else DiffKind.DELETE
        else:
            kind = DiffKind.UPDATE_REPLACE if key in replace else DiffKind.UPDATE
        out[key] = PropertyDiff(kind=kind, inputDiff=input_diff)
    return out


def _split_path(path: str) -> list[str]:
    return [p for p in path.replace("[", ".").replace("]", "").split(".") if p]


def apply_ignore_changes(old_inputs: Props, news: Props, paths: list[str]) -> Props:
    """Keep the old input value at every ignored path (before Check, as the engine does)."""
    out: Any = _deep_copy(news)
    for path in paths:
        parts = _split_path(path)
        if not parts:
            continue
        src: Any = old_inputs
        found = True
        for part in parts:
            if isinstance(src, dict) and part in src:
                src = src[part]
            else:
                found = False
                break
        dst = out
        for part in parts[:-1]:
            if not isinstance(dst, dict):
                break
            dst = dst.setdefault(part, {})
        if not isinstance(dst, dict):
            continue
        if found:
            dst[parts[-1]] = _deep_copy(src)
        else:
            dst.pop(parts[-1], None)
    return out


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def decide(
    old_inputs: Props,
    news: Props,
    changes: int,
    provider_replaces: list[str],
    provider_diffs: list[str],
    provider_dbr: bool,
    replace_on_changes: list[str],
    option_dbr: bool | None,
) -> Decision:
    """One resource's op from the provider's DiffResponse (see the module doc for the rules).

    As in step_generator.go ``diffResource``: only DIFF_UNKNOWN makes the engine diff the inputs itself
    (changed keys and an input detailed diff); a provider that answers DIFF_SOME without ``diffs`` (every
    Python dynamic provider: ``pulumi/dynamic/__main__.py`` ``Diff`` sets only changes, replaces and
    deleteBeforeReplace) gets no diffReasons and a null detailedDiff, exactly as the CLI shows it."""
    if changes == DIFF_NONE:
        return Decision(StepOp.SAME)
    if changes == DIFF_UNKNOWN:
        changed = changed_keys(old_inputs, news)
        if not changed and not provider_replaces:
            return Decision(StepOp.SAME)
        detailed_from_engine = True
    else:
        changed = list(provider_diffs)
        detailed_from_engine = False
    # applyReplaceOnChanges: replace keys are the provider's plus changed keys under replace_on_changes.
    replace = set(provider_replaces)
    if "*" in replace_on_changes:
        replace |= set(changed)
    else:
        replace |= {k for k in changed if k in replace_on_changes}
    detailed = detailed_diff(old_inputs, news, changed, replace) if detailed_from_engine else {}
    if replace:
        # The resource option, when set, wins over the provider (step_generator.go: a goal's
        # DeleteBeforeReplace of false forces create-before-delete).
        dbr = provider_dbr if option_dbr is None else option_dbr
        return Decision(StepOp.REPLACE, changed, sorted(replace), detailed, dbr)
    return Decision(StepOp.UPDATE, changed, [], detailed)
