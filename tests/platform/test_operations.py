"""Asynchronous operations over scaled time, the Slurm adapter's rules, and operations that fail."""

from __future__ import annotations

import time

import pytest

from clients.platform import PlatformApiError, PlatformClient
from clients.platform import models as m
from simulators.platform import FaultPlan, OperationFailure
from tests.fixtures.platform_sim import RunningSim, enroll_alive

from .conftest import ClientFor
from .test_client_roundtrip import SLURM, make_site_and_profile

K = m.OperationKind


def ready_instance(api: PlatformClient, pid: str) -> str:
    return api.wait_for_operation(pid, api.create_instance(pid, SLURM).operation_id, timeout_s=10).instance_id


def test_operations_progress_through_their_steps_over_simulated_time(
    platform_sim: RunningSim, client_for: ClientFor
) -> None:
    platform_sim.set_time_scale(1000.0)  # only `advance` moves it (at 0.01 a step is tens of real ms)
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    op = api.create_instance(pid, SLURM)
    assert op.status is m.OperationStatus.PENDING and op.step is None
    platform_sim.advance(0.6)  # past the start delay
    running = api.get_operation(pid, op.operation_id)
    assert (running.status, running.step) == (m.OperationStatus.RUNNING, "allocate_nodes")
    assert {x.status for x in api.list_members(pid, op.instance_id)} == {m.MemberStatus.PROVISIONING}
    assert api.get_instance(pid, op.instance_id).status is m.InstanceStatus.PROVISIONING
    platform_sim.advance(5)
    assert api.get_operation(pid, op.operation_id).step == "join_workers"
    controller = next(x for x in api.list_members(pid, op.instance_id) if x.component_key == "controller")
    assert controller.status is m.MemberStatus.ACTIVE and controller.adapter_detail["state"] == "up"
    platform_sim.advance(3)
    done = api.get_operation(pid, op.operation_id)
    assert done.status is m.OperationStatus.SUCCEEDED and done.finished_at is not None
    assert api.get_instance(pid, op.instance_id).status is m.InstanceStatus.READY


def test_slurm_component_rules(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    bad = [
        ([m.ComponentSpec(component_key="worker", count=2)], "component_missing"),
        ([m.ComponentSpec(component_key="controller", count=2)], "component_cardinality"),
        (
            [m.ComponentSpec(component_key="controller", count=1), m.ComponentSpec(component_key="gpu", count=1)],
            "unknown_component_key",
        ),
    ]
    for components, code in bad:
        with pytest.raises(PlatformApiError) as err:
            api.create_instance(pid, SLURM.model_copy(update={"components": components}))
        assert (err.value.status, err.value.code) == (422, code)
    inst = ready_instance(api, pid)
    controller = next(x for x in api.list_members(pid, inst) if x.component_key == "controller")
    for call, status, code in [
        (lambda: api.add_member(pid, inst, "controller"), 409, "component_cardinality"),
        (lambda: api.drain_member(pid, inst, controller.member_id), 422, "operation_not_supported"),
        (lambda: api.remove_member(pid, inst, controller.member_id), 409, "component_cardinality"),
        (lambda: api.add_member(pid, inst, "login"), 422, "unknown_component_key"),
    ]:
        with pytest.raises(PlatformApiError) as err:
            call()
        assert (err.value.status, err.value.code) == (status, code)


def test_conflicting_operations_are_refused_while_one_runs(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    inst = ready_instance(api, pid)
    worker = next(x for x in api.list_members(pid, inst) if x.component_key == "worker")
    # The drain (3 simulated seconds) must still run when the conflicting calls arrive: at the fixture's 0.01 it lasts
    # 30 ms, which a loaded host let pass between two calls (run24). At 10 it lasts 30 s; nothing here waits for it.
    platform_sim.set_time_scale(10.0)
    drain = api.drain_member(pid, inst, worker.member_id)
    with pytest.raises(PlatformApiError) as err:
        api.remove_member(pid, inst, worker.member_id)
    assert (err.value.status, err.value.code) == (409, "operation_in_progress")
    assert err.value.details["operation_id"] == drain.operation_id
    with pytest.raises(PlatformApiError) as err:
        api.upgrade_instance(pid, inst, m.AppInstanceUpgrade(app_version="25.1"))
    assert err.value.code == "operation_in_progress"
    # Another member may change meanwhile.
    assert api.add_member(pid, inst, "worker").kind is K.MEMBER_ADD


def test_an_injected_failure_fails_the_operation_and_degrades_the_instance(
    platform_sim: RunningSim, client_for: ClientFor
) -> None:
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    inst = ready_instance(api, pid)
    platform_sim.inject(
        FaultPlan(
            operation_failures=[
                OperationFailure(
                    kind=K.MEMBER_ADD, component_key="worker", at_step=1, code="slurmd_join_failed", message="munge key"
                )
            ]
        )
    )
    op = api.add_member(pid, inst, "worker")
    with pytest.raises(PlatformApiError) as err:
        api.wait_for_operation(pid, op.operation_id, timeout_s=10)
    assert (err.value.code, err.value.operation_id) == ("slurmd_join_failed", op.operation_id)
    assert err.value.correlation_id == op.correlation_id
    failed = api.get_operation(pid, op.operation_id)
    assert failed.status is m.OperationStatus.FAILED and failed.step == "join"
    member = api.get_member(pid, inst, op.member_id or "")
    assert member.status is m.MemberStatus.FAILED and member.last_operation_id == op.operation_id
    assert member.adapter_detail["state"] == "DOWN+NOT_RESPONDING"
    assert api.get_instance(pid, inst).status is m.InstanceStatus.DEGRADED
    # Recovery through the public contract: replace the failed member.
    fix = api.wait_for_operation(pid, api.replace_member(pid, inst, member.member_id).operation_id, timeout_s=10)
    assert api.get_member(pid, inst, fix.replacement_member_id or "").status is m.MemberStatus.ACTIVE
    assert api.get_instance(pid, inst).status is m.InstanceStatus.READY


def test_a_failed_create_leaves_a_failed_instance_that_can_be_decommissioned(
    platform_sim: RunningSim, client_for: ClientFor
) -> None:
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    platform_sim.inject(FaultPlan(operation_failures=[OperationFailure(kind=K.INSTANCE_CREATE, at_step=0)]))
    op = api.wait_for_operation(pid, api.create_instance(pid, SLURM).operation_id, timeout_s=10, raise_on_failure=False)
    assert op.status is m.OperationStatus.FAILED and op.error and op.error.code == "adapter_step_failed"
    assert api.get_instance(pid, op.instance_id).status is m.InstanceStatus.FAILED
    api.wait_for_operation(pid, api.decommission_instance(pid, op.instance_id).operation_id, timeout_s=10)
    assert api.get_instance(pid, op.instance_id).status is m.InstanceStatus.DECOMMISSIONED
    with pytest.raises(PlatformApiError) as err:
        api.decommission_instance(pid, op.instance_id)
    assert err.value.code == "instance_decommissioned"


def test_members_bind_to_enrolled_nodes(platform_sim: RunningSim, client_for: ClientFor) -> None:
    admin, api, pid = client_for("platform_admin"), client_for("service_account"), platform_sim.creds.project_id
    site, profile = make_site_and_profile(admin)
    grant = admin.mint_enrollment_token(
        site.site_id, m.EnrollmentTokenRequest(profile_id=profile.profile_id, hostname="ctl-01", system_id="ctl001")
    )
    spec = SLURM.model_copy(
        update={
            "components": [
                m.ComponentSpec(component_key="controller", count=1, node_ids=[grant.node_id]),
                m.ComponentSpec(component_key="worker", count=1),
            ]
        }
    )
    with pytest.raises(PlatformApiError) as err:  # not enrolled yet
        api.create_instance(pid, spec)
    assert err.value.code == "node_not_available"
    enroll_alive(platform_sim.url, m.EnrollmentRequest(
        node_id=grant.node_id, enrollment_token=grant.enrollment_token, hostname="ctl-01", system_id="ctl001"))
    admin.wait_for_node(grant.node_id, timeout_s=10)
    inst = api.wait_for_operation(pid, api.create_instance(pid, spec).operation_id, timeout_s=10).instance_id
    controller = next(x for x in api.list_members(pid, inst) if x.component_key == "controller")
    assert controller.node == m.NodeBinding(node_id=grant.node_id, hostname="ctl-01")
    with pytest.raises(PlatformApiError) as err:
        api.add_member(pid, inst, "worker", node_id=grant.node_id)
    assert (err.value.status, err.value.code) == (409, "node_already_bound")


def test_the_state_tables_are_complete() -> None:
    from simulators.platform.apps import INSTANCE_ACCEPTS, MEMBER_OP_FROM, MEMBER_OP_KIND
    from simulators.platform.engine import PLANS

    assert set(PLANS) == set(K)
    for kind, (steps, _) in PLANS.items():
        names = [s.name for s in steps]
        assert steps and len(set(names)) == len(names) and all(s.seconds > 0 for s in steps), kind
    assert set(INSTANCE_ACCEPTS) == set(K) - {K.INSTANCE_CREATE}
    assert set(MEMBER_OP_KIND.values()) == {k for k in K if k.value.startswith("member_")}
    assert set(MEMBER_OP_FROM) == set(MEMBER_OP_KIND) - {m.AddMember}


def test_the_clock_refuses_nonsense() -> None:
    from simulators.platform.clock import SimClock

    with pytest.raises(ValueError, match="time_scale must be > 0"):
        SimClock(0)
    clock = SimClock(0.01)
    before = clock.seconds()
    assert clock.advance(100) >= before + 100
    with pytest.raises(ValueError, match="only moves forward"):
        clock.advance(-1)


def test_a_new_time_scale_keeps_the_simulated_time_and_sets_the_pace() -> None:
    from simulators.platform.clock import SimClock

    clock = SimClock(0.001)
    clock.advance(50)
    clock.set_time_scale(100.0)  # a simulated second now takes 100 real ones
    before = clock.seconds()
    time.sleep(0.5)
    after = clock.seconds()
    assert before >= 50 and before <= after < before + 0.05, (before, after)  # 0.5 s is 0.005 simulated seconds
    with pytest.raises(ValueError, match="time_scale must be > 0"):
        clock.set_time_scale(0)
