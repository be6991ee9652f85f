"""The pure member planner (providers/apps/plan.py) case by case. The adapter's `check`:
tests/apps/test_app_instance.py."""

from __future__ import annotations

from typing import Any

from clients.platform.models import MemberStatus as S
from providers.apps.plan import Observed, Phase, plan_members
from providers.apps.spec import Slot


def slot(key: str, i: int, host: str | None = None, node: str | None = None) -> Slot:
    return Slot(component_key=key, index=i, host=host, node_id=node)


def member(mid: str, key: str = "worker", status: S = S.ACTIVE, node: str | None = None) -> Observed:
    return Observed(member_id=mid, component_key=key, status=status, node_id=node or f"node-{mid}")


def ops(plan: Any) -> list[tuple[str, str | None, str | None]]:
    return [(a.kind.value, a.member_id, a.node_id) for a in plan.actions]


def test_matching_keeps_what_fits_and_moves_only_what_changed() -> None:
    slots = [slot("controller", 0, "lab-1"), slot("worker", 0, "gpu-1", "n1"), slot("worker", 1)]
    members = [member("c", "controller"), member("w1", node="n1"), member("w2")]
    plan = plan_members(slots, members, {"c": "lab-1", "w1": "gpu-1", "w2": None})
    assert ops(plan) == [] and plan.assigned == {"c": "lab-1", "w1": "gpu-1", "w2": None}
    # rebinding the pinned worker replaces it onto the new node; the unbound one stays
    moved = plan_members([slots[0], slot("worker", 0, "gpu-2", "n2"), slots[2]], members,
                         {"c": "lab-1", "w1": "gpu-1", "w2": None})
    assert ops(moved) == [("replace", "w1", "n2")]
    # a controller moved to another host the platform places: replace without a node id
    assert ops(plan_members([slot("controller", 0, "lab-2"), *slots[1:]], members,
                            {"c": "lab-1", "w1": "gpu-1", "w2": None})) == [("replace", "c", None)]


def test_fresh_members_fill_host_slots_and_surplus_is_drained_then_removed() -> None:
    slots = [slot("controller", 0, "lab-1"), slot("worker", 0)]
    members = [member("c", "controller"), member("w1"), member("w2"), member("w3", status=S.DRAINED)]
    plan = plan_members(slots, members, {})
    assert plan.assigned["c"] == "lab-1"
    assert [(a.phase, a.kind.value, a.member_id) for a in plan.actions] == [
        (Phase.FREE, "remove", "w3"), (Phase.DRAIN, "drain", "w2"), (Phase.REMOVE, "remove", "w2")]


def test_failed_members_are_healed_and_control_plane_is_never_drained() -> None:
    slots = [slot("controller", 0, "lab-1"), slot("worker", 0, "gpu-1", "n1"), slot("worker", 1)]
    members = [member("c", "controller", S.FAILED), member("w1", status=S.FAILED, node="n1"),
               member("w2", status=S.FAILED), member("x", status=S.REMOVED)]
    plan = plan_members(slots, members, {"c": "lab-1", "w1": "gpu-1", "w2": None})
    assert ops(plan) == [("remove", "w1", None), ("replace", "c", None), ("add", None, "n1"),
                         ("replace", "w2", None)]
    surplus = plan_members([slot("worker", 0)], [member("c", "controller"), member("w")], {},
                           control_plane=frozenset({"controller"}))
    assert ops(surplus) == [("remove", "c", None)]
