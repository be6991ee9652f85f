"""The AppInstance adapter (providers/app_instance.py): `check` speaks the environment's codes (ROLE, APP, ENV)
and lets a preview's unknowns through. The planner: tests/apps/test_plan.py."""

from __future__ import annotations

from typing import Any

from providers.app_instance import AppInstanceProvider
from providers.kind import UNKNOWN

from .conftest import Lab


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
