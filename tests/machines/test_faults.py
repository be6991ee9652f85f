"""Fault tests: each ends with the machine where it should be and no duplicate in MAAS."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from clients.platform import PlatformApiError, PlatformClient
from clients.platform.models import EnrollmentRequest
from environments.model import TeardownMode
from providers.machines.plan import MachineRecord
from providers.machines.reconciler import release
from providers.machines.scheduler import Scheduler
from providers.machines.status import MachineOutcome
from simulators.maas import ApiErrorBurst, ApiFaults, MachineFaults
from tests.fixtures.maas_counts import deploy_counts

from .conftest import World


def _one(w: World, hostname: str = "local-gpu-1"):
    return w.specs[hostname]


def _assert_no_duplicates(w: World) -> None:
    names = [m["hostname"] for m in w.maas.admin.machines()]
    assert len(names) == len(set(names)) == len(w.specs)


def test_datasource_failure_twice_then_success_with_three_attempts(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    w.maas.admin.set_machine_faults("local-gpu-1", MachineFaults(deploy_failures=2))
    logs: list[str] = []
    r = Scheduler(w.context(logs=logs, max_deploy_retry_attempts=3)).onboard([_one(w)])[0]
    assert r.outcome is MachineOutcome.READY, r.reason
    assert r.deploy_attempts == 3
    assert sum("failed on datasource" in n for n in r.notes) == 2
    _assert_no_duplicates_subset(w)


def _assert_no_duplicates_subset(w: World) -> None:
    """No machine was enlisted twice: MAAS refuses a second hostname, not a second machine under another
    name, so count machines, MACs and system ids from MAAS's own JSON against the racked inventory."""
    machines = w.maas.admin.dump_state()["machines"]
    ids = [m["system_id"] for m in machines]
    macs = [i["mac_address"].lower() for m in machines for i in m["interface_set"]]
    assert len(ids) == len(set(ids)) and len(macs) == len(set(macs)), "a machine was created twice"
    racked = w.maas.admin.dump_state()["racked_not_enlisted"]
    assert len(machines) + len(racked) == len(w.env.machines), "MAAS holds a machine the inventory does not"


def _deploys(w: World) -> int:
    return w.maas.admin.request_counts()["MachineHandler"].get("deploy", 0)


def test_datasource_failures_exhausted_give_a_clear_error_and_a_new_generation_resumes(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    w.maas.admin.set_machine_faults("local-gpu-1", MachineFaults(deploy_failures=3))
    r = Scheduler(w.context(max_deploy_retry_attempts=3)).onboard([_one(w)])[0]
    assert r.outcome is MachineOutcome.FAILED
    assert r.system_id in r.reason and "Failed deployment" in r.reason and "datasource" in r.reason.lower()
    assert "retry_generation to 1" in r.reason
    # The operator fixed the cause and raised retry_generation: the next run finishes the same machine.
    fresh = _one(w).model_copy(update={"retry_generation": 1})
    again = Scheduler(w.context(max_deploy_retry_attempts=3)).onboard([fresh], {r.hostname: r.system_id})[0]
    assert again.outcome is MachineOutcome.READY, again.reason
    assert again.system_id == r.system_id
    _assert_no_duplicates_subset(w)


def test_deploy_retry_budget_is_spent_across_runs(world_factory: Callable[..., World]) -> None:
    """Run 1 spends 2 attempts (limit 2); run 2 (limit raised to 3) gets exactly one more; run 3 gets
    none: a machine that always fails is not retried forever, run after run."""
    w = world_factory()
    w.maas.admin.set_machine_faults("local-gpu-1", MachineFaults(deploy_failures=100))
    first = Scheduler(w.context(max_deploy_retry_attempts=2)).onboard([_one(w)])[0]
    assert first.outcome is MachineOutcome.FAILED and first.deploy_attempts == 2 and _deploys(w) == 2
    known = {first.hostname: first.system_id}
    second = Scheduler(w.context(max_deploy_retry_attempts=3)).onboard([_one(w)], known)[0]
    assert second.outcome is MachineOutcome.FAILED and second.deploy_attempts == 3, second.reason
    assert _deploys(w) == 3, "one more attempt, not a fresh budget"
    third = Scheduler(w.context(max_deploy_retry_attempts=3)).onboard([_one(w)], known)[0]
    assert third.outcome is MachineOutcome.FAILED and _deploys(w) == 3, "budget spent: no deploy at all"
    assert third.reason.startswith("MCH008") and "retry budget" in third.reason and "3 attempt(s)" in third.reason
    owner = w.client().read_many([first.system_id])[0].owner_data
    assert owner["gpuaas_deploy_attempts"] == "3"
    assert owner["gpuaas_deploy_attempts_for"] == f"{_one(w).deploy_fingerprint()}/0"


def test_retry_disabled_fails_on_first_datasource_error(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    w.maas.admin.set_machine_faults("local-gpu-1", MachineFaults(deploy_failures=1))
    r = Scheduler(w.context(enable_deploy_retry_on_datasource_failure=False)).onboard([_one(w)])[0]
    assert r.outcome is MachineOutcome.FAILED and r.deploy_attempts == 1


def test_one_commissioning_failure_is_recommissioned_automatically(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    w.maas.admin.set_machine_faults("local-gpu-2", MachineFaults(commissioning_failures=1))
    r = Scheduler(w.context()).onboard([_one(w, "local-gpu-2")])[0]
    assert r.outcome is MachineOutcome.READY, r.reason
    assert sum("re-commissioning once" in n for n in r.notes) == 1
    assert w.maas.admin.request_counts()["MachineHandler"]["commission"] == 2
    _assert_no_duplicates_subset(w)


def test_commissioning_failing_twice_fails_with_maas_text_then_next_run_recommissions(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    w.maas.admin.set_machine_faults("local-gpu-2", MachineFaults(commissioning_failures=2))
    specs = [_one(w, "local-gpu-1"), _one(w, "local-gpu-2")]
    results = {r.hostname: r for r in Scheduler(w.context()).onboard(specs)}
    bad = results["local-gpu-2"]
    assert results["local-gpu-1"].outcome is MachineOutcome.READY  # one failure never stops the others
    assert bad.outcome is MachineOutcome.FAILED and bad.reason.startswith("MCH003")
    assert "after 1 automatic re-commission" in bad.reason
    assert "MAAS commissioning results: 20-maas-03-machine-resources: failed, exit 1, output: " \
        "20-maas-03-machine-resources: injected fault: exit 1" in bad.reason, "MAAS's script result"
    assert w.maas.admin.status(bad.system_id).label == "Failed commissioning"
    counts = w.maas.admin.request_counts()["MachineHandler"]["commission"]
    assert counts == 3, "local-gpu-1 once, local-gpu-2 twice (exactly one automatic retry)"
    again = Scheduler(w.context()).onboard([specs[1]], {bad.hostname: bad.system_id})[0]
    assert again.outcome is MachineOutcome.READY and again.system_id == bad.system_id
    _assert_no_duplicates_subset(w)


def test_a_testing_failure_names_the_failing_script_and_maas_result_others_ready(
    world_factory: Callable[..., World],
) -> None:
    """The commission requests the profile's testing scripts; an injected testing failure (twice: the
    automatic re-commission fails too) ends that machine alone, naming the script and MAAS's result as
    read from MAAS's script results (`nodes/{system_id}/results/current-testing/`)."""
    w = world_factory()
    w.maas.admin.set_machine_faults("local-gpu-2", MachineFaults(testing_failures=2))
    specs = [_one(w, "local-gpu-1"), _one(w, "local-gpu-2")]
    ctx = w.context(testing_scripts=["memtester", "smartctl-validate"])
    results = {r.hostname: r for r in Scheduler(ctx).onboard(specs)}
    good, bad = results["local-gpu-1"], results["local-gpu-2"]
    assert good.outcome is MachineOutcome.READY, good.reason  # one failure never stops the others
    assert bad.outcome is MachineOutcome.FAILED and bad.reason.startswith("MCH003"), bad.reason
    assert "MAAS testing results: memtester: failed, exit 1" in bad.reason, bad.reason
    assert "smartctl-validate" not in bad.reason, "only the failing script is named"
    assert w.maas.admin.status(bad.system_id).label == "Failed testing"
    assert any("memtester: failed, exit 1" in n and "re-commissioning once" in n for n in bad.notes), bad.notes
    passed = w.client().script_results(good.system_id, "testing")
    assert [(r.name, r.status_name, r.exit_status) for r in passed] == [
        ("memtester", "Passed", 0), ("smartctl-validate", "Passed", 0)]
    _assert_no_duplicates_subset(w)


def test_erase_failure_without_fallback_stops_then_fix_the_disks_and_run_again(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    r = Scheduler(w.context()).onboard([_one(w)])[0]
    w.maas.admin.set_machine_faults("local-gpu-1", MachineFaults(erase_failures=1))
    down = Scheduler(w.context(release_erase_mode="secure")).teardown(
        [(_one(w), r.system_id, TeardownMode.FULL_DECOMMISSION)]
    )[0]
    assert down.outcome is MachineOutcome.FAILED and down.reason.startswith("MCH009")
    assert "erase failed" in down.reason and "wipe-disks script failed" in down.reason
    assert "fix the disks and run again" in down.reason and "release_fallback_no_erase" in down.reason
    assert w.maas.admin.status(r.system_id).label == "Failed disk erasing"
    # The disks are fixed (the fault is spent): the next teardown erases again and finishes.
    again = Scheduler(w.context(release_erase_mode="secure")).teardown(
        [(_one(w), r.system_id, TeardownMode.FULL_DECOMMISSION)]
    )[0]
    assert again.outcome is MachineOutcome.RELEASED, again.reason
    assert w.maas.admin.status(r.system_id).label == "Ready"
    erases = [e for e in w.maas.admin.events(r.system_id) if "disk erase" in e["description"]]
    assert len(erases) == 2, "the second run released with erase again (not without)"


def test_erase_failure_with_fallback_releases_without_erase_and_says_so(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    r = Scheduler(w.context()).onboard([_one(w)])[0]
    w.maas.admin.set_machine_faults("local-gpu-1", MachineFaults(erase_failures=1))
    logs: list[str] = []
    ctx = w.context(logs=logs, release_erase_mode="secure", release_fallback_no_erase=True)
    (down,) = release(ctx, [(_one(w), MachineRecord(hostname="local-gpu-1", system_id=r.system_id))])
    assert down.outcome is MachineOutcome.RELEASED, down.reason
    assert any("WITHOUT erase" in n and "wipe-disks script failed" in n for n in down.notes)
    warnings = [line for line in logs if line.startswith("WARNING") and "WITHOUT erase" in line]
    assert warnings and r.system_id in warnings[0], logs
    assert any("note:" in line and "WITHOUT erase" in line for line in logs), "the run's report says it too"
    assert w.maas.admin.status(r.system_id).label == "Ready"


def test_503_bursts_in_every_stage(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    bursts = [
        ApiErrorBurst(status=503, count=2, handler=h, op=op)
        for h, op in [
            ("MachinesHandler", "create"),
            ("MachinesHandler", "read"),
            ("MachineHandler", "commission"),
            ("MachinesHandler", "power_parameters"),
            ("MachineHandler", "set_storage_layout"),
            ("InterfaceHandler", "link_subnet"),
            ("MachineHandler", "deploy"),
            ("MachineHandler", "set_owner_data"),
            ("MachineHandler", "release"),
        ]
    ]
    w.maas.admin.set_api_faults(ApiFaults(errors=bursts))
    specs = [_one(w, "local-gpu-1"), _one(w, "local-gpu-2")]
    up = Scheduler(w.context()).onboard(specs)
    assert {r.outcome for r in up} == {MachineOutcome.READY}, [r.reason for r in up]
    down = Scheduler(w.context()).teardown(
        [(s, r.system_id, TeardownMode.FULL_DECOMMISSION) for s, r in zip(specs, up, strict=True)]
    )
    assert {r.outcome for r in down} == {MachineOutcome.RELEASED}, [r.reason for r in down]
    left = sum(b.count for b in w.maas.admin.faults().api.errors)
    assert left == 0, "every burst fired"
    _assert_no_duplicates_subset(w)


def test_deadline_mid_deploy_then_resume(world_factory: Callable[..., World]) -> None:
    """A run that stops mid-deploy (deadline, or a killed provider) leaves MAAS as the record:
    the next run resolves the same machine and finishes it, without a second create or deploy."""
    w = world_factory()
    ctx = w.context()
    ctx.deadlines = ctx.deadlines.model_copy(update={"deploy_s": 0.0})
    deploy = ctx.ops.deploy

    def slow_deploy(*args: Any, **kwargs: Any) -> Any:
        # This deploy lasts 1.8 s (not 0.09 s): the first poll sees it Deploying however loaded the host.
        w.maas.admin.set_time_scale(2e-3)
        return deploy(*args, **kwargs)

    ctx.ops.deploy = slow_deploy  # type: ignore[method-assign]
    r = Scheduler(ctx).onboard([_one(w)])[0]
    assert r.outcome is MachineOutcome.TIMED_OUT and "await_deploy" in r.reason
    counts_before = w.maas.admin.request_counts()
    again = Scheduler(w.context()).onboard([_one(w)], {})[0]  # state lost too: resolve by hostname
    assert again.outcome is MachineOutcome.READY and again.system_id == r.system_id
    after = w.maas.admin.request_counts()
    assert after["MachinesHandler"].get("create", 0) == counts_before["MachinesHandler"].get("create", 0)
    assert after["MachineHandler"]["deploy"] == counts_before["MachineHandler"]["deploy"], "no second deploy"


def test_expired_enrollment_token_between_retries(world_factory: Callable[..., World]) -> None:
    """A deploy attempt fails; its token expires before the next run; the next attempt mints a fresh
    one and the node enrolls. The expired token itself is refused by the platform."""
    w = world_factory()
    w.maas.admin.set_machine_faults("local-gpu-1", MachineFaults(deploy_failures=1))
    first = Scheduler(
        w.context(enrollment_token_ttl_seconds=60, enable_deploy_retry_on_datasource_failure=False)
    ).onboard([_one(w)])[0]
    assert first.outcome is MachineOutcome.FAILED
    stale = json.loads(
        yaml.safe_load((w.maas.admin.user_data(first.system_id) or b"").decode())["write_files"][0]["content"]
    )
    w.platform.advance(3600 + 60)  # past the profile's token TTL (the platform profile's default, 1 h)
    admin = PlatformClient(w.platform.url, w.platform.creds.platform_admin)
    with pytest.raises(PlatformApiError) as refused:
        admin.enroll(
            EnrollmentRequest(
                node_id=stale["node_id"],
                enrollment_token=stale["enrollment_token"],
                hostname="local-gpu-1",
                system_id=first.system_id,
            )
        )
    assert refused.value.status in (401, 403, 409, 410, 422)
    again = Scheduler(w.context()).onboard([_one(w)], {first.hostname: first.system_id})[0]
    assert again.outcome is MachineOutcome.READY, again.reason
    assert admin.get_node(again.node_id).status.value == "active"
    mints = [a for a in w.platform.audit() if "mint" in str(a).lower()]
    assert len(mints) == 2, "one fresh token per deploy attempt"


def test_customer_handoff_teardown_never_erases_and_never_powers_off(world_factory: Callable[..., World]) -> None:
    """Restricted release (seed 002): a lifecycle rule (HANDOFF_TEARDOWN_TABLE), not only validation:
    whatever the profile's erase mode and the machine's teardown mode."""
    w = world_factory()
    specs = [_one(w, "local-gpu-1"), _one(w, "local-gpu-2")]
    up = Scheduler(w.context()).onboard(specs)
    assert {r.outcome for r in up} == {MachineOutcome.READY}
    # local-gpu-2 is found in Failed disk erasing (an earlier erase, before the site was handed off).
    w.maas.admin.set_machine_faults("local-gpu-2", MachineFaults(erase_failures=1))
    Scheduler(w.context(release_erase_mode="quick")).teardown([(specs[1], up[1].system_id, TeardownMode.REIMAGE)])
    assert w.maas.admin.status(up[1].system_id).label == "Failed disk erasing"
    before = w.maas.admin.request_counts()["MachineHandler"]
    ctx = w.context(customer_handoff=True, release_erase_mode="secure")
    down = Scheduler(ctx).teardown(
        [(s, r.system_id, TeardownMode.FULL_DECOMMISSION) for s, r in zip(specs, up, strict=True)]
    )
    assert {r.outcome for r in down} == {MachineOutcome.RELEASED}, [r.reason for r in down]
    after = w.maas.admin.request_counts()["MachineHandler"]
    assert after.get("power_off", 0) == before.get("power_off", 0), "never powers off"
    for r in up:
        assert w.maas.admin.status(r.system_id).label == "Ready"
    erases_gpu1 = [e for e in w.maas.admin.events(up[0].system_id) if "disk erase" in e["description"]]
    assert erases_gpu1 == [], "never erases"
    erases_gpu2 = [e for e in w.maas.admin.events(up[1].system_id) if "disk erase" in e["description"]]
    assert len(erases_gpu2) == 1, "only the erase from before the handoff"
    assert all(any("customer handoff" in n for n in r.notes) for r in down)


ENROLL_ROUTE = "/api/v1/node-bootstrap/enroll"


def _deploys_of(w: World, system_id: str) -> int:
    return deploy_counts(w.maas).get(system_id, 0)


def test_a_lost_enrollment_redeploys_the_machine_within_the_retry_budget(world_factory: Callable[..., World]) -> None:
    """One 502 from the platform on the node's enrollment: the machine is Deployed and its node never enrolls
    (nothing on the node will try again). Past the enroll deadline the lifecycle releases it and deploys it
    again with a fresh token, instead of failing every later run with MCH014."""
    from simulators.platform import ErrorBurst, FaultPlan

    w = world_factory()
    w.platform.inject(FaultPlan(error_bursts=[ErrorBurst(status=502, count=1, path_prefix=ENROLL_ROUTE,
                                                         methods=["POST"])]))
    (r,) = Scheduler(w.context(max_deploy_retry_attempts=3)).onboard([_one(w)])
    assert r.outcome is MachineOutcome.READY, r.reason
    assert any("never enrolled" in n and "releasing to redeploy (attempt 2 of 3)" in n for n in r.notes), r.notes
    assert _deploys_of(w, r.system_id) == 2
    admin = PlatformClient(w.platform.url, w.platform.creds.platform_admin)
    assert admin.get_node(r.node_id).status.value == "active"
    assert [m["hostname"] for m in w.maas.admin.machines()] == ["local-gpu-1"]  # the same machine, once


def test_enrollments_lost_past_the_budget_end_with_a_coded_failure_saying_what_to_run(
        world_factory: Callable[..., World]) -> None:
    from simulators.platform import ErrorBurst, FaultPlan

    w = world_factory()
    w.platform.inject(FaultPlan(error_bursts=[ErrorBurst(status=502, count=10, path_prefix=ENROLL_ROUTE,
                                                         methods=["POST"])]))
    (r,) = Scheduler(w.context(max_deploy_retry_attempts=2)).onboard([_one(w)])
    assert r.outcome is MachineOutcome.TIMED_OUT, r.reason
    assert r.reason.startswith("MCH014 ") and "deployed 2 time(s) and never enrolled" in r.reason, r.reason
    assert "raise the machine's retry_generation to 1" in r.reason and "gpuaas-launcher.log" in r.reason
    assert _deploys_of(w, r.system_id) == 2


def test_a_redeploy_with_erase_under_503_bursts_never_needs_an_operator(world_factory: Callable[..., World]) -> None:
    """A changed deploy input redeploys (release with the profile's quick erase, then deploy) while MAAS answers
    503s on reads, on the release (its answer lost after MAAS took it) and on the event log when read: Disk erasing and
    Releasing are stages to wait through, never MCH012."""
    w = world_factory()
    spec = _one(w)
    (first,) = Scheduler(w.context()).onboard([spec])
    assert first.outcome is MachineOutcome.READY, first.reason
    changed = spec.model_copy(update={"deploy": spec.deploy.model_copy(update={"hwe_kernel": "ga-22.04"})})
    w.maas.admin.set_api_faults(ApiFaults(errors=[
        ApiErrorBurst(status=503, count=3, handler="MachinesHandler", op="read"),
        ApiErrorBurst(status=503, count=1, handler="MachineHandler", op="release", after_action=True),
        ApiErrorBurst(status=503, count=5, handler="EventsHandler", op="query"),
        ApiErrorBurst(status=503, count=3, handler="MachinesHandler", op="read"),
    ]))
    (again,) = Scheduler(w.context(release_erase_mode="quick")).onboard([changed], {spec.hostname: first.system_id})
    assert again.outcome is MachineOutcome.READY, again.reason
    assert again.system_id == first.system_id and _deploys_of(w, first.system_id) == 2
    erased = [e for e in w.maas.admin.events(first.system_id) if "Disk erasing" in e["description"]]
    assert erased, "the redeploy erased the disks (quick erase)"
    fired = {(b.handler, b.op): b.count for b in w.maas.admin.faults().api.errors}
    assert fired.get(("MachineHandler", "release"), 0) == 0 and fired.get(("MachinesHandler", "read"), 0) == 0, fired
