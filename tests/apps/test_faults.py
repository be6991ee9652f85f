"""Faults against the platform simulator: failed operations, 5xx bursts (lost responses), a run that
died between two operations. Each checks the operations the platform ran, not just the outcome."""

from __future__ import annotations

import pytest

from clients.platform import models as m
from providers.apps.failures import AppInstanceFailed
from simulators.platform import ErrorBurst, FaultPlan, OperationFailure

from .conftest import Lab
from .test_reconciler import hosts, kinds


def test_a_failed_add_is_reported_then_only_it_is_retried(lab: Lab) -> None:
    out = lab.rec(lab.spec()).converge()
    lab.sim.inject(FaultPlan(operation_failures=[
        OperationFailure(kind=m.OperationKind.MEMBER_ADD, code="slurmd_join_failed", message="munge key mismatch")]))
    with pytest.raises(AppInstanceFailed) as err:
        lab.rec(lab.spec(workers=3)).converge(out.instance_id, hosts(out))
    failed = next(o for o in lab.sim.operations() if o.status is m.OperationStatus.FAILED)
    text = str(err.value)
    assert "1 operation(s) failed" in text and "slurmd_join_failed: munge key mismatch" in text
    assert f"correlation_id={failed.correlation_id}" in text and f"operation_id={failed.operation_id}" in text
    assert [(f.code, f.operation_id) for f in err.value.failures] == [("slurmd_join_failed", failed.operation_id)]
    assert kinds(lab) == ["member_add", "member_add"]

    again = lab.rec(lab.spec(workers=3)).converge(out.instance_id, hosts(out))
    assert kinds(lab)[2:] == ["member_replace"], "only the failed member is redone"
    assert again.status is m.InstanceStatus.READY
    assert [x.status for x in again.members] == [m.MemberStatus.ACTIVE] * 4


def test_a_failed_member_on_a_pinned_node_is_removed_and_added_back_on_it(lab: Lab) -> None:
    lab.sim.inject(FaultPlan(operation_failures=[OperationFailure(kind=m.OperationKind.MEMBER_REPLACE)]))
    out = lab.rec(lab.spec()).converge()
    with pytest.raises(AppInstanceFailed, match="adapter_step_failed"):
        lab.rec(lab.spec(worker_nodes=("gpu-2",))).converge(out.instance_id, hosts(out))
    again = lab.rec(lab.spec(worker_nodes=("gpu-2",))).converge(out.instance_id, hosts(out))
    # the failed replacement holds gpu-2: free it, add on gpu-2; the old worker on gpu-1 is surplus
    assert sorted(kinds(lab)[1:]) == ["member_add", "member_drain", "member_remove", "member_remove"]
    assert [(w.node_id, w.status) for w in again.members if w.component_key == "worker"] == [
        (lab.nodes["gpu-2"], m.MemberStatus.ACTIVE)]


def test_lost_responses_are_replayed_by_idempotency_keys_not_repeated(lab: Lab) -> None:
    base = f"/api/v1/projects/{lab.pid}/app-instances"
    lab.sim.inject(FaultPlan(error_bursts=[ErrorBurst(status=503, count=2, path_prefix=base, methods=["POST"],
                                                      after_commit=True)]))
    out = lab.rec(lab.spec()).converge()
    creates = [o for o in lab.sim.operations() if o.kind is m.OperationKind.INSTANCE_CREATE]
    assert len(creates) == 1 and len(lab.sim.store.instances) == 1

    lab.sim.inject(FaultPlan(error_bursts=[ErrorBurst(status=502, count=3, path_prefix=base, methods=["POST"],
                                                      after_commit=True)]))
    up = lab.rec(lab.spec(workers=4)).converge(out.instance_id, hosts(out))
    assert kinds(lab) == ["member_add"] * 3 and len(up.members) == 5
    replays = [e for e in lab.sim.audit() if e.action == "member.operation"]
    assert len(replays) == 3, "a replay leaves no audit record"


def test_a_burst_longer_than_the_retries_fails_the_run_and_the_next_run_adopts(lab: Lab) -> None:
    base = f"/api/v1/projects/{lab.pid}/app-instances"
    lab.sim.inject(FaultPlan(error_bursts=[ErrorBurst(status=503, count=20, path_prefix=base, methods=["POST"],
                                                      after_commit=True)]))
    with pytest.raises(AppInstanceFailed, match=r"create instance: injected_fault: .*\(correlation_id=req-"):
        lab.rec(lab.spec()).converge()
    lab.sim.clear_faults()
    out = lab.rec(lab.spec()).converge()  # no instance id known: found by name, not created again
    assert [i.instance_id for i in lab.sim.store.instances.values()] == [out.instance_id]
    assert [o.kind for o in lab.sim.operations()] == [m.OperationKind.INSTANCE_CREATE]


def test_a_run_that_died_after_a_drain_resumes_with_the_remove_only(lab: Lab) -> None:
    out = lab.rec(lab.spec(workers=2)).converge()
    surplus = next(x for x in out.members if x.component_key == "worker" and x.host is None)
    lab.api.drain_member(lab.pid, out.instance_id, surplus.member_id)  # what the dead run got done
    down = lab.rec(lab.spec(workers=1)).converge(out.instance_id, hosts(out))  # waits for the drain first
    assert kinds(lab) == ["member_drain", "member_remove"]
    assert [x.member_id for x in down.members if x.component_key == "worker"] != [surplus.member_id]


def test_a_failed_create_is_decommissioned_and_created_again(lab: Lab) -> None:
    lab.sim.inject(FaultPlan(operation_failures=[OperationFailure(kind=m.OperationKind.INSTANCE_CREATE)]))
    with pytest.raises(AppInstanceFailed, match="create instance: adapter_step_failed"):
        lab.rec(lab.spec()).converge()
    out = lab.rec(lab.spec()).converge()
    statuses = sorted(i.status.value for i in lab.sim.store.instances.values())
    assert statuses == ["decommissioned", "ready"] and out.status is m.InstanceStatus.READY


def test_refresh_sees_a_member_removed_out_of_band(lab: Lab) -> None:
    from providers.app_instance import drift

    spec = lab.spec(workers=2)
    out = lab.rec(spec).converge()
    olds = {**spec.model_dump(mode="json"), **out.model_dump(mode="json")}
    assert drift(olds, olds) == []
    gone = next(x for x in out.members if x.component_key == "worker")
    lab.api.wait_for_operation(lab.pid, lab.api.remove_member(lab.pid, out.instance_id, gone.member_id).operation_id)
    seen = lab.rec(spec).observe(out.instance_id, hosts(out))
    assert seen is not None and gone.member_id not in {x.member_id for x in seen.members}
    refreshed = {**olds, **seen.model_dump(mode="json")}
    assert drift(refreshed, olds) == ["members"]


def test_a_failed_upgrade_is_retried_in_place(lab: Lab) -> None:
    out = lab.rec(lab.spec()).converge()
    lab.sim.inject(FaultPlan(operation_failures=[OperationFailure(kind=m.OperationKind.INSTANCE_UPGRADE)]))
    with pytest.raises(AppInstanceFailed, match=r"upgrade 23.11.10 -> 24.05.1: adapter_step_failed"):
        lab.rec(lab.spec(version="24.05.1")).converge(out.instance_id, hosts(out))
    assert lab.api.get_instance(lab.pid, out.instance_id).app_version == "23.11.10", "the app rolled back"
    again = lab.rec(lab.spec(version="24.05.1")).converge(out.instance_id, hosts(out))
    assert again.app_version == "24.05.1" and again.instance_id == out.instance_id
    upgrades = [o.status.value for o in lab.sim.operations() if o.kind is m.OperationKind.INSTANCE_UPGRADE]
    assert upgrades == ["failed", "succeeded"] and kinds(lab) == []


def test_an_operation_past_its_deadline_is_reported_and_awaited_by_the_next_run(slow_lab: Lab) -> None:
    lab = slow_lab
    out = lab.rec(lab.spec()).converge()
    with pytest.raises(AppInstanceFailed) as err:  # a deadline shorter than any add
        lab.rec(lab.spec(workers=3, operation_timeout_s=0.001)).converge(out.instance_id, hosts(out))
    assert [f.code for f in err.value.failures] == ["wait_timeout", "wait_timeout"]
    assert all(f.operation_id and f.correlation_id for f in err.value.failures)
    done = lab.rec(lab.spec(workers=3)).converge(out.instance_id, hosts(out))
    assert kinds(lab) == ["member_add", "member_add"], "the adds still running are awaited, not repeated"
    assert len([x for x in done.members if x.component_key == "worker"]) == 3
