"""The reconciler against the platform simulator over HTTP (real client, real OpenBao): the lifecycle
in small steps, each checked against the operations the platform ran."""

from __future__ import annotations

import pytest

from clients.platform import models as m
from providers.apps.reconciler import InstanceOut

from .conftest import Lab


def kinds(lab: Lab, since: int = 0) -> list[str]:
    return [k for k, _ in lab.member_ops()[since:]]


def workers(out: InstanceOut) -> list[tuple[str | None, str | None]]:
    return sorted(((w.host, w.node_id) for w in out.members if w.component_key == "worker"), key=str)


def hosts(out: InstanceOut) -> dict[str, str | None]:
    return {x.member_id: x.host for x in out.members}


def test_create_same_scale_rebind_upgrade_remove(lab: Lab) -> None:
    out = lab.rec(lab.spec()).converge()
    assert out.status is m.InstanceStatus.READY
    assert [(x.component_key, x.host, x.status) for x in out.members] == [
        ("controller", "lab-1", m.MemberStatus.ACTIVE), ("worker", "gpu-1", m.MemberStatus.ACTIVE)]
    assert workers(out) == [("gpu-1", lab.nodes["gpu-1"])]
    assert all(x.last_operation_status is m.OperationStatus.SUCCEEDED for x in out.members)
    assert kinds(lab) == []  # members came with the create

    same = lab.rec(lab.spec()).converge(out.instance_id, hosts(out))
    assert kinds(lab) == [] and same.members == out.members

    up3 = lab.rec(lab.spec(workers=3)).converge(out.instance_id, hosts(out))
    assert kinds(lab) == ["member_add", "member_add"]
    assert len(workers(up3)) == 3 and ("gpu-1", lab.nodes["gpu-1"]) in workers(up3)

    n = len(lab.member_ops())
    down2 = lab.rec(lab.spec(workers=2)).converge(up3.instance_id, hosts(up3))
    assert kinds(lab, n) == ["member_drain", "member_remove"]
    drained = {mid for _, mid in lab.member_ops()[n:]}
    assert len(drained) == 1 and drained.isdisjoint(hosts(down2))
    assert ("gpu-1", lab.nodes["gpu-1"]) in workers(down2), "the pinned worker stays"

    n = len(lab.member_ops())
    rebound = lab.rec(lab.spec(workers=2, worker_nodes=("gpu-2",))).converge(down2.instance_id, hosts(down2))
    assert kinds(lab, n) == ["member_replace"]
    assert ("gpu-2", lab.nodes["gpu-2"]) in workers(rebound) and len(workers(rebound)) == 2
    assert lab.nodes["gpu-1"] not in {w[1] for w in workers(rebound)}

    n = len(lab.member_ops())
    upgraded = lab.rec(lab.spec(workers=2, worker_nodes=("gpu-2",), version="24.05.1")).converge(
        rebound.instance_id, hosts(rebound))
    assert upgraded.app_version == "24.05.1" and kinds(lab, n) == []
    assert [o.kind for o in lab.sim.operations()].count(m.OperationKind.INSTANCE_UPGRADE) == 1

    n = len(lab.member_ops())
    lab.rec(lab.spec(workers=2, worker_nodes=("gpu-2",), version="24.05.1")).release(upgraded.instance_id)
    assert kinds(lab, n) == ["member_drain", "member_drain"], "workers drained; the controller is not drainable"
    assert lab.api.get_instance(lab.pid, upgraded.instance_id).status is m.InstanceStatus.DECOMMISSIONED


def test_failure_reports_are_bounded_with_full_detail_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    from providers.apps.failures import MESSAGE_CHARS, SHOWN_FAILURES, AppInstanceFailed, OpFailure

    failures = [OpFailure(action=f"add worker[{i}]", code="adapter_step_failed", message="x" * 5000 + f" end-{i}",
                          correlation_id=f"corr-{i}", operation_id=f"op-{i}") for i in range(40)]
    err = AppInstanceFailed("app instance slurm-t (project p)", failures, "run up again")
    text = str(err)
    assert text.startswith("AIN003 app instance slurm-t (project p): 40 operation(s) failed: add worker[0]")
    assert "and 37 more" in text and text.endswith("; fix: run up again")
    assert len(text) < (SHOWN_FAILURES + 1) * (MESSAGE_CHARS + 10) + 200
    err_out = capsys.readouterr().err
    assert all(f"end-{i} (correlation_id=corr-{i}, operation_id=op-{i})" in err_out for i in range(40))
    few = [f.model_copy(update={"message": "short"}) for f in failures[:2]]
    assert "short (correlation_id=corr-1, operation_id=op-1)" in str(AppInstanceFailed("w", few, "h"))
    assert capsys.readouterr().err == "", "short reports need no stderr copy"


def test_observed_generation_names_one_intent() -> None:
    """Same observation, same key (a retry replays); a second removal of the slot's member, or any other
    operation on the instance, gives a new one."""
    from providers.apps.reconciler import observed_generation

    def member(mid: str, status: m.MemberStatus) -> m.Member:
        return m.Member.model_construct(member_id=mid, component_key="worker", status=status)

    def inst(last: str) -> m.AppInstance:
        return m.AppInstance.model_construct(last_operation_id=last)

    a, r = m.MemberStatus.ACTIVE, m.MemberStatus.REMOVED
    first = observed_generation(inst("op-2"), [member("c", a), member("w1", r)])
    assert first == observed_generation(inst("op-2"), [member("w1", r), member("c", a)])
    second = observed_generation(inst("op-4"), [member("c", a), member("w1", r), member("w2", r)])
    assert second != first
    # even if the platform forgot removed members, the instance's last operation moved
    assert observed_generation(inst("op-4"), [member("c", m.MemberStatus.ACTIVE)]) != observed_generation(
        inst("op-2"), [member("c", m.MemberStatus.ACTIVE)])
