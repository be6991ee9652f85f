"""Pure planning: desired member slots vs the members the platform reports -> member operations.

No I/O here. The reconciler observes, calls `plan_members`, runs the actions phase by phase and
observes again; `diff` runs the same function over the last observed members to detect drift.

Matching, per component key, in this order (each member fills at most one slot):
  1. a slot pinned to a platform node takes the member bound to that node;
  2. a slot bound to a declared host the platform cannot place (no node id) takes the member this
     stack assigned to that host before (kept in the resource's outputs), or else a member this
     stack has never assigned (the members a create or an adoption brought);
  3. an unbound slot takes any remaining member, preferring ones that were never bound to a host;
  4. a slot still empty takes a remaining member by `replace` (rebinding), else gets an `add`;
  5. members left over are surplus: `drain` then `remove` (a failed one, or a control-plane member,
     which the app replaces rather than drains, is just removed).
A matched member that failed is healed: `replace` in place, or for a slot pinned to a node (the
failed member still holds that node) `remove` then `add` on the same node.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from enum import IntEnum, StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from clients.platform.models import InstanceStatus, MemberStatus

from .spec import AppInstanceSpec, Slot

M = MemberStatus


class Disposition(StrEnum):
    SERVING = "serving"  # counts towards its slot
    BROKEN = "broken"  # counts, but must be healed
    LEAVING = "leaving"  # drained (or draining): only removal is left
    GONE = "gone"  # removed or being removed: ignored


# Every member status the platform reports -> what the planner makes of it.
DISPOSITION: dict[MemberStatus, Disposition] = {
    M.PENDING: Disposition.SERVING,
    M.PROVISIONING: Disposition.SERVING,
    M.ACTIVE: Disposition.SERVING,
    M.UPDATING: Disposition.SERVING,
    M.DRAINING: Disposition.LEAVING,
    M.DRAINED: Disposition.LEAVING,
    M.REMOVING: Disposition.GONE,
    M.REMOVED: Disposition.GONE,
    M.FAILED: Disposition.BROKEN,
}


class ActionKind(StrEnum):
    ADD = "add"
    DRAIN = "drain"
    REMOVE = "remove"
    REPLACE = "replace"


class Phase(IntEnum):
    """Actions run phase by phase; a phase with a failure stops the run (the next up resumes)."""

    FREE = 1  # remove drained members and failed members whose node a slot needs
    FILL = 2  # add and replace: capacity first
    DRAIN = 3  # then drain the surplus
    REMOVE = 4  # and remove what was drained


class Observed(BaseModel):
    model_config = ConfigDict(frozen=True)

    member_id: str
    component_key: str
    status: MemberStatus
    node_id: str | None = None
    hostname: str | None = None


class Action(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: ActionKind
    phase: Phase
    component_key: str
    member_id: str | None = None
    node_id: str | None = None
    slot: Slot | None = None
    """The slot an add/replace fills (its host is recorded for the new member)."""

    def describe(self) -> str:
        target = f"member {self.member_id}" if self.member_id else self.component_key
        where = f" onto node {self.node_id}" if self.node_id else ""
        return f"{self.kind.value} {target}{where}" + (f" ({self.slot.label()})" if self.slot else "")


class MemberPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    actions: tuple[Action, ...]
    assigned: dict[str, str | None]
    """member_id -> declared host of the slot it fills (members kept as they are)."""

    def phase(self, phase: Phase) -> list[Action]:
        return [a for a in self.actions if a.phase is phase]


def _key_plan(slots: list[Slot], members: list[Observed], hosts: dict[str, str | None],
              drainable: bool) -> tuple[list[Action], dict[str, str | None]]:
    # size: the five matching passes of the module docstring, in order, read as one.
    live = [m for m in members if DISPOSITION[m.status] in (Disposition.SERVING, Disposition.BROKEN)]
    actions = [Action(kind=ActionKind.REMOVE, phase=Phase.FREE, component_key=m.component_key, member_id=m.member_id)
               for m in members if DISPOSITION[m.status] is Disposition.LEAVING]
    fill: dict[int, Observed] = {}
    free = {m.member_id: m for m in live}  # ordered by member id; dict lookups keep big instances linear
    pinned = {s.node_id for s in slots if s.node_id}
    by_node: dict[str, str] = {}
    by_host: dict[str, list[str]] = {}
    for o in live:
        if o.node_id:
            by_node.setdefault(o.node_id, o.member_id)
        if hosts.get(o.member_id):
            by_host.setdefault(hosts[o.member_id] or "", []).append(o.member_id)

    def take(slot: Slot, member_id: str) -> None:
        fill[slot.index] = free.pop(member_id)

    def first(candidates: Iterator[str]) -> str | None:
        return next((mid for mid in candidates if mid in free), None)

    for s in slots:  # 1. pinned to a node
        if s.node_id and (mid := first(iter([by_node.get(s.node_id, "")]))):
            take(s, mid)
    for s in slots:  # 2. bound to a host the platform places
        if s.host and not s.node_id and (mid := first(iter(by_host.get(s.host, [])))):
            take(s, mid)
    fresh = iter([mid for mid, m in free.items() if mid not in hosts and m.node_id not in pinned])
    for s in slots:  # 2b. ... or, right after create/adoption, a member this stack has not assigned yet
        if s.host and not s.node_id and s.index not in fill and (mid := first(fresh)):
            take(s, mid)
    unbound_first = iter(sorted(free, key=lambda mid: hosts.get(mid) is not None))
    for s in slots:  # 3. unbound: never-bound members first
        if s.host is None and s.index not in fill and (mid := first(unbound_first)):
            take(s, mid)
    assigned: dict[str, str | None] = {}
    for s in slots:
        m = fill.get(s.index)
        if m is None:  # 4. rebind a leftover member, else add
            if free:
                moved = free.pop(next(iter(free)))
                actions.append(Action(kind=ActionKind.REPLACE, phase=Phase.FILL, component_key=s.component_key,
                                      member_id=moved.member_id, node_id=s.node_id, slot=s))
            else:
                actions.append(Action(kind=ActionKind.ADD, phase=Phase.FILL, component_key=s.component_key,
                                      node_id=s.node_id, slot=s))
        elif DISPOSITION[m.status] is Disposition.BROKEN:
            if s.node_id:  # the failed member holds the node: free it, then add on it
                actions.append(Action(kind=ActionKind.REMOVE, phase=Phase.FREE, component_key=s.component_key,
                                      member_id=m.member_id))
                actions.append(Action(kind=ActionKind.ADD, phase=Phase.FILL, component_key=s.component_key,
                                      node_id=s.node_id, slot=s))
            else:
                actions.append(Action(kind=ActionKind.REPLACE, phase=Phase.FILL, component_key=s.component_key,
                                      member_id=m.member_id, slot=s))
        else:
            assigned[m.member_id] = s.host
    for m in free.values():  # 5. surplus
        if drainable and DISPOSITION[m.status] is Disposition.SERVING:
            actions.append(Action(kind=ActionKind.DRAIN, phase=Phase.DRAIN, component_key=m.component_key,
                                  member_id=m.member_id))
        actions.append(Action(kind=ActionKind.REMOVE, phase=Phase.REMOVE, component_key=m.component_key,
                              member_id=m.member_id))
    return actions, assigned


def plan_members(slots: Iterable[Slot], members: Iterable[Observed], hosts: dict[str, str | None],
                 control_plane: frozenset[str] = frozenset(), drainable: frozenset[str] | None = None) -> MemberPlan:
    """`hosts`: member_id -> the declared host this stack assigned it (from the previous outputs).
    `control_plane`: component keys whose surplus members are not drained (replaced or removed outright);
    `drainable`: the keys the app can drain at all (None: every key)."""
    slots, members = list(slots), list(members)
    actions: list[Action] = []
    assigned: dict[str, str | None] = {}
    for key in sorted({s.component_key for s in slots} | {m.component_key for m in members}):
        a, kept = _key_plan([s for s in slots if s.component_key == key],
                            sorted((m for m in members if m.component_key == key), key=lambda m: m.member_id), hosts,
                            drainable=key not in control_plane and (drainable is None or key in drainable))
        actions += a
        assigned.update(kept)
    return MemberPlan(actions=tuple(sorted(actions, key=lambda a: a.phase)), assigned=assigned)


def outstanding(spec: AppInstanceSpec, last: Mapping[str, Any]) -> list[str]:
    """What the last observation (the recorded outputs of create/update/refresh) says still needs doing
    for `spec`: the instance not ready, another version, or member operations to run."""
    if not last.get("members") and not last.get("instance_id"):
        return []
    found = []
    if last.get("status") not in (InstanceStatus.READY.value, None):
        found.append("status")
    if last.get("app_version") not in (spec.instance.app.version, None):
        found.append("app_version")
    if last.get("ui_routes") is not None and set(last["ui_routes"]) != {r.name for r in spec.instance.ui_routes}:
        found.append("ui_routes")
    members = last.get("members") or []
    observed = [Observed(member_id=m["member_id"], component_key=m["component_key"], status=m["status"],
                         node_id=m.get("node_id"), hostname=m.get("hostname")) for m in members]
    hosts = {m["member_id"]: m.get("host") for m in members}
    if plan_members(spec.slots(), observed, hosts, spec.control_plane_keys(), spec.drainable_keys()).actions:
        found.append("members")
    return found
