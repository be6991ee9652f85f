"""The pure planner case by case, and `check` speaking the environment's codes."""

from __future__ import annotations

from typing import Any

from clients.platform.models import MemberStatus as S
from providers.app_instance import AppInstanceProvider
from providers.apps.plan import Observed, Phase, plan_members
from providers.apps.spec import Slot
from providers.kind import UNKNOWN

from .conftest import Lab


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


def check(lab: Lab, **change: Any) -> list[str]:
    spec = lab.spec().model_dump(mode="json")
    for dotted, value in change.items():
        target = spec
        *path, leaf = dotted.split("__")
        for part in path:
            target = target[part]
        target[leaf] = value
    return [f.reason for f in AppInstanceProvider().check({}, spec).failures]


def test_check_uses_the_environment_codes(lab: Lab) -> None:
    assert check(lab) == []
    role = check(lab, instance__members={"controller": {"count": 1, "nodes": ["gpu-1"]},
                                         "worker": {"count": 1, "nodes": ["gpu-1"]}},
                 placements={"controller": [None], "worker": [None]})
    assert any(r.startswith("ROLE002 app_instances[slurm-t]: members.controller.nodes[0]") for r in role), role
    runtime = check(lab, instance__runtime={"operating_mode": "platform_managed", "control_plane_scope": "tenant",
                                            "runtime_backend": "ray", "tenant_boundary_mode": "shared_nodes"})
    assert runtime and runtime[0].startswith("APP003") and "fix: use one of" in runtime[0]
    counts = check(lab, instance__members={"controller": {"count": 2}, "worker": {"count": 0}},
                   placements={"controller": [], "worker": []})
    assert counts and counts[0].startswith("APP004 app_instances[slurm-t]: members.controller.count")
    shape = check(lab, placements={"controller": [None], "worker": []})
    assert shape and shape[0].startswith("ENV004 app_instances[slurm-t]: placements.worker: 0 node ids for 1")
    assert any(r.startswith("ENV004 app_instances[slurm-t]: app.slug: the platform has no app type 'ray'")
               for r in check(lab, instance__app={"slug": "ray", "version": "2.9"}))
    bad = check(lab, max_parallel=0)
    assert bad and bad[0].startswith("ENV005 app_instances[slurm-t]: max_parallel")
    assert check(lab, placements={"controller": [None], "worker": [UNKNOWN]}) == [], "preview: node ids unknown"
    assert check(lab, placements={"controller": [None], "worker": UNKNOWN}) == []
    assert check(lab, placements=UNKNOWN) == []
