"""Steps grouped into one change per resource, with the fields that change.

A replacement arrives as up to three steps for one URN (create-replacement, replace,
delete-replaced); a reviewer wants one line "replace", so steps are folded per URN here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from preview_note.model import Op, PreviewDigest, ResourceState, Step
from preview_note.values import ABSENT, SECRET_TEXT, changed_paths, flatten, is_secret


class Action(StrEnum):
    """What a reviewer is asked to approve for one resource (ordered by how loudly it is shown)."""

    DELETE = "delete"
    REPLACE = "replace"
    DISCARD = "discard"
    UPDATE = "update"
    CREATE = "create"
    IMPORT = "import"
    DRIFT = "drift"


ACTION_ORDER = {a: i for i, a in enumerate(Action)}

# Engine plumbing and the project's grouping components (no external object behind them): never shown.
_HIDDEN_TYPES = ("pulumi:pulumi:Stack", "pulumi:providers:", "gpuaas:index:")


class FieldChange(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    path: str
    before: Any
    after: Any
    forces_replace: bool = False


class Change(BaseModel):
    model_config = ConfigDict(frozen=True)

    urn: str
    type: str
    kind: str
    name: str
    action: Action
    old: ResourceState | None
    new: ResourceState | None
    replace_reasons: tuple[str, ...] = ()
    delete_before_replace: bool = False

    def inputs(self, which: str) -> dict[str, Any]:
        state = self.old if which == "old" else self.new
        return dict(state.inputs) if state else {}


def parse_urn(urn: str) -> tuple[str, str]:
    """(type, name) from `urn:pulumi:<stack>::<project>::<parent$...$type>::<name>`."""
    parts = urn.split("::")
    if len(parts) < 4:
        return "", urn
    return parts[2].rsplit("$", 1)[-1], "::".join(parts[3:])


def kind_of(type_: str) -> str:
    """`pulumi-python:dynamic/gpuaas:MaasMachine` -> `MaasMachine`; `gpuaas:components:Site` -> `Site`."""
    return type_.rsplit(":", 1)[-1] or type_


def _fold(urn: str, steps: list[Step]) -> Change | None:
    # size: one resource's steps folded into one change, every op the CLI sends handled in one place
    # `preview --refresh`: a refresh step (old = the state before the refresh) and then the step planned
    # against the refreshed state, whose old state is the one that counts.
    planned = [s for s in steps if s.op not in (Op.REFRESH, Op.READ, Op.SAME)]
    if planned and len(planned) < len(steps):
        steps = planned
    ops = [s.op for s in steps]
    old = next((s.old_state for s in steps if s.old_state is not None), None)
    new = next((s.new_state for s in reversed(steps) if s.new_state is not None), None)
    replace_ops = {
        Op.REPLACE,
        Op.CREATE_REPLACEMENT,
        Op.DELETE_REPLACED,
        Op.DISCARD_REPLACED,
        Op.IMPORT_REPLACEMENT,
        Op.READ_REPLACEMENT,
    }
    action: Action | None
    if replace_ops & set(ops):
        action = Action.REPLACE
    elif Op.DELETE in ops:
        action = Action.DELETE
    elif Op.DISCARD in ops:
        action = Action.DISCARD
    elif Op.CREATE in ops:
        action = Action.CREATE
    elif Op.UPDATE in ops:
        action = Action.UPDATE
    elif Op.IMPORT in ops:
        action = Action.IMPORT
    elif {Op.REFRESH, Op.READ} & set(ops):
        # A read or refresh changes nothing by itself; it matters only when the world drifted.
        drifted = old is not None and new is not None and flatten(old.outputs) != flatten(new.outputs)
        action = Action.DRIFT if drifted else None
    else:
        action = None  # same, remove-pending-replace: nothing for a reviewer
    if action is None:
        return None
    type_, name = parse_urn(urn)
    some = new or old
    state_type = some.type if some is not None else ""
    type_ = state_type or type_
    reasons: list[str] = []
    for s in steps:
        for r in s.replace_reasons or []:
            if r not in reasons:
                reasons.append(r)
    dbr = (
        Op.DELETE_REPLACED in ops
        and Op.CREATE_REPLACEMENT in ops
        and (ops.index(Op.DELETE_REPLACED) < ops.index(Op.CREATE_REPLACEMENT))
    )
    return Change(
        urn=urn,
        type=type_,
        kind=kind_of(type_),
        name=name,
        action=action,
        old=old,
        new=new,
        replace_reasons=tuple(reasons),
        delete_before_replace=dbr,
    )


def group_changes(digest: PreviewDigest) -> tuple[list[Change], dict[str, list[Step]]]:
    """One Change per URN that does something, in kind/name order; also the raw steps per URN."""
    by_urn: dict[str, list[Step]] = {}
    for step in digest.steps:
        by_urn.setdefault(step.urn, []).append(step)
    changes = []
    for urn, steps in by_urn.items():
        type_, _ = parse_urn(urn)
        if type_.startswith(_HIDDEN_TYPES):
            continue
        change = _fold(urn, steps)
        if change is not None:
            changes.append(change)
    return changes, by_urn


def field_changes(change: Change, steps: list[Step], skip: frozenset[str] = frozenset()) -> list[FieldChange]:
    """Fields that change, before -> after. Creates list their inputs; deletes list nothing."""
    if change.action is Action.DELETE or change.action is Action.DISCARD:
        return []
    if change.action is Action.DRIFT:
        old = change.old.outputs if change.old else {}
        new = change.new.outputs if change.new else {}
    elif change.action in (Action.CREATE, Action.IMPORT):
        old, new = {}, change.inputs("new")
    else:
        old, new = change.inputs("old"), change.inputs("new")
    rows = changed_paths(old, new, skip)
    seen_tops = {r[0].split(".")[0].split("[")[0] for r in rows}
    # Keys the provider or engine says changed but whose values look equal here: secret to secret.
    reported: list[str] = []
    for s in steps:
        reported += list(s.diff_reasons or []) + list(s.replace_reasons or [])
        reported += [k.split(".")[0].split("[")[0] for k in (s.detailed_diff or {})]
    for key in dict.fromkeys(reported):
        if key in seen_tops or key in skip or key.startswith("__"):
            continue
        b, a = old.get(key, ABSENT), new.get(key, ABSENT)
        if is_secret(b) or is_secret(a):
            rows.append((key, SECRET_TEXT if b is not ABSENT else b, SECRET_TEXT if a is not ABSENT else a))
            seen_tops.add(key)
    reasons = set(change.replace_reasons)
    out = [FieldChange(path=p, before=b, after=a, forces_replace=_under_any(p, reasons)) for p, b, a in rows]
    return sorted(out, key=lambda f: (not f.forces_replace, f.path))


def _under_any(path: str, reasons: set[str]) -> bool:
    """A replace reason names a top-level key or a nested path (`machine.deploy.hwe_kernel`); a changed
    field forces the replacement when it is that path or lies under it."""
    top = path.split(".")[0].split("[")[0]
    return top in reasons or any(path == r or path.startswith((r + ".", r + "[")) for r in reasons)
