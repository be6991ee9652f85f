"""The reconciler's verbs and the lifecycle's pre-checks, without MAAS, the platform or Pulumi."""

from __future__ import annotations

from typing import Any, cast

import pytest

from clients.maas import MaasError, MaasStatus, MachineView, PowerSettings
from environments import load_environment
from providers.machines import reconciler as rc
from providers.machines.bootstrap import node_failure as bootstrap_failure
from providers.machines.lifecycle import MAX_ERRORS, failed_call, precheck, run_step
from providers.machines.plan import MachineRecord, plan, rekey, renames
from providers.machines.ports import BootstrapView
from providers.machines.records import OWNER_FINGERPRINT, Context, Goal, LifecycleRecord, StepKind
from providers.machines.scheduler import MachineResult
from providers.machines.spec import Deadlines, LifecyclePolicy, MachineIdentity, MachineSpec, TeardownMode
from providers.machines.status import MachineOutcome, Stage
from simulators.localstack import machine_specs

SPECS = {h: MachineSpec.model_validate(s) for h, s in machine_specs(load_environment("local")).items()}


class NoCalls:
    """Ops/enrollment that fail the test on any call."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected call: {name}")


def _ctx(ops: Any = None, logs: list[str] | None = None) -> Context:
    return Context(
        ops=ops or NoCalls(),
        enrollment=cast(Any, NoCalls()),
        policy=LifecyclePolicy(),
        deadlines=Deadlines(),
        log=(logs.append if logs is not None else lambda _m: None),
    )


def _record(h: str, **kw: Any) -> MachineRecord:
    base = {"hostname": h, "system_id": f"sid-{h}", "status": "Deployed", "outcome": "ready",
            "node_id": f"node-{h}", "deploy_fingerprint": SPECS[h].deploy_fingerprint()}
    return MachineRecord.model_validate({**base, **kw})


# --- plan / converge -------------------------------------------------------------------------

def test_converge_leaves_untouched_machines_and_their_records_alone() -> None:
    """Issue 14 bug 1: a pool update must carry every untouched machine's record forward as it was."""
    hosts = ("local-gpu-2", "local-gpu-3", "local-gpu-4")
    prior = {h: _record(h, deploy_attempts=2, adopted=True) for h in hosts}
    done = rc.converge(_ctx(), [SPECS[h] for h in hosts], prior)  # any MAAS/platform call would fail
    assert done.plan.stay == hosts and done.results == []
    facts = lambda r: r.model_dump(exclude={*MachineIdentity.model_fields, "spec_fingerprint"})  # noqa: E731
    assert {h: facts(r) for h, r in done.records.items()} == {h: facts(r) for h, r in prior.items()}
    # ... now recording the spec they stay under (issue 18: the pool's state keeps no old spec).
    assert all(done.records[h].identity() == SPECS[h].identity() for h in hosts)
    assert all(done.records[h].spec_fingerprint == SPECS[h].spec_fingerprint() for h in hosts)


# --- observe (drift, once) -------------------------------------------------------------------

class Views:
    def __init__(self, views: list[MachineView]) -> None:
        self.views = views
        self.calls = 0

    def read_many(self, ids: list[str]) -> list[MachineView]:
        self.calls += 1
        return [v for v in self.views if v.system_id in ids]


def _view(h: str, status: MaasStatus, fingerprint: str | None = None) -> MachineView:
    owner = {OWNER_FINGERPRINT: fingerprint} if fingerprint else {}
    return MachineView(system_id=f"sid-{h}", hostname=h, status=status, owner_data=owner)


def test_observe_records_drift_as_an_enum_outcome_with_one_bulk_read() -> None:
    records = {h: _record(h) for h in ("local-gpu-1", "local-gpu-2", "local-gpu-3", "local-gpu-4")}
    ops = Views([
        _view("local-gpu-1", MaasStatus.DEPLOYED, SPECS["local-gpu-1"].deploy_fingerprint()),
        _view("local-gpu-2", MaasStatus.READY),  # released by hand
        _view("local-gpu-3", MaasStatus.DEPLOYED, "0" * 64),  # redeployed from other inputs
    ])  # local-gpu-4: deleted from MAAS
    seen = rc.observe(cast(Any, ops), records)
    assert ops.calls == 1
    assert seen["local-gpu-1"] == records["local-gpu-1"]
    assert (seen["local-gpu-2"].status, seen["local-gpu-2"].outcome) == ("Ready", MachineOutcome.DRIFTED)
    assert seen["local-gpu-3"].outcome is MachineOutcome.DRIFTED
    assert (seen["local-gpu-4"].status, seen["local-gpu-4"].outcome) == ("Missing", MachineOutcome.DRIFTED)
    assert seen["local-gpu-2"].state()["outcome"] == "drifted" and seen["local-gpu-2"].needs_attention
    assert seen["local-gpu-2"].node_id == "node-local-gpu-2", "drift keeps what teardown needs"


def test_a_hundred_failures_make_a_bounded_error_and_a_full_report_on_the_output() -> None:
    results = [
        MachineResult(hostname=f"gpu-{i:03}", system_id=f"s{i}", outcome=MachineOutcome.FAILED, stage=Stage.FAILED,
                      maas_status="Failed deployment", reason=f"gpu-{i:03}: deployment failed: " + "x" * 500,
                      notes=("retried",))
        for i in range(100)
    ]
    with pytest.raises(rc.MachinesFailed) as e:
        rc.raise_failures("pool big", results)
    text = str(e.value)
    assert len(text) <= rc.REPORT_MAX_CHARS and len(text.splitlines()) <= 50
    assert "100 of 100" in text and "and 90 more" in text
    logs: list[str] = []
    rc.report(_ctx(logs=logs), results)
    assert sum("deployment failed" in line for line in logs) == 100


# --- in place: power read back -------------------------------------------------------------

class PowerOps:
    def __init__(self, applies: bool) -> None:
        self.applies = applies
        self.now = PowerSettings(power_type="ipmi", power_address="10.0.0.1", power_user="root")

    def set_power(self, system_id: str, **kw: Any) -> None:
        if self.applies:
            self.now = PowerSettings(power_type=kw["power_type"], power_address=kw["power_address"],
                                     power_user=kw["power_user"])

    def power_settings(self, system_id: str) -> PowerSettings:
        return self.now


def test_power_change_is_read_back_and_an_ignored_change_fails() -> None:
    old = SPECS["local-gpu-1"]
    new = old.model_copy(update={"ipmi_address": "10.9.9.9"})
    assert rc.apply_in_place(_ctx(PowerOps(applies=True)), old, new, "sid") == ["power"]
    with pytest.raises(rc.InPlaceError, match="power_address '10.0.0.1' \\(wanted '10.9.9.9'\\)"):
        rc.apply_in_place(_ctx(PowerOps(applies=False)), old, new, "sid")
    assert rc.apply_in_place(_ctx(), old, old, "sid") == [], "nothing changed: no MAAS call"


# --- the pre-checks beside the tables --------------------------------------------------------

def _rec(goal: Goal = Goal.DEPLOYED, **kw: Any) -> LifecycleRecord:
    return LifecycleRecord(spec=SPECS["local-gpu-1"], goal=goal, system_id="sid", **kw)


def _pre(rec: LifecycleRecord, *, deadline: bool = False, slot: bool = True) -> Any:
    return precheck(_ctx(), rec, deadline_passed=deadline, take_slot=lambda: slot)


def test_precheck_detach_vanished_deadline_capacity() -> None:
    detach = _rec(Goal.RELEASED, teardown=TeardownMode.DETACH)
    step = _pre(detach)
    assert (step.kind, step.stage) == (StepKind.COMPLETE, Stage.FORGET_NODE)
    assert "MAAS was not touched" in detach.notes[0]
    gone = _pre(_rec(Goal.DEPLOYED, vanished=True, stage=Stage.AWAIT_DEPLOY))
    assert gone.kind is StepKind.FAILED and "vanished" in gone.reason
    released = _pre(_rec(Goal.RELEASED, vanished=True))
    assert (released.kind, released.stage) == (StepKind.COMPLETE, Stage.FORGET_NODE)
    late = _pre(_rec(stage=Stage.AWAIT_DEPLOY), deadline=True)
    assert (late.kind, late.outcome) == (StepKind.FAILED, MachineOutcome.TIMED_OUT)
    assert _pre(_rec(stage=Stage.DEPLOY), slot=False).kind is StepKind.DELAYED
    assert _pre(_rec(stage=Stage.PXE_PREFLIGHT), slot=False) is None, "only the heavy stages take a slot"
    assert _pre(_rec(create_error="create failed: 400")).kind is StepKind.FAILED


def test_failed_calls_4xx_stop_409_and_5xx_retry_until_too_many() -> None:
    assert failed_call(_rec(), MaasError("bad", status=400)).kind is StepKind.FAILED
    assert failed_call(_rec(), MaasError("wrong state", status=409)).kind is StepKind.ERROR
    assert failed_call(_rec(), MaasError("busy", status=503)).kind is StepKind.ERROR
    assert failed_call(_rec(errors=MAX_ERRORS), MaasError("busy", status=503)).kind is StepKind.FAILED


def test_a_bug_in_a_handler_fails_that_machine_only() -> None:
    class Broken(NoCalls):
        def detail(self, system_id: str) -> Any:
            raise ZeroDivisionError("oops")

    step = run_step(_ctx(Broken()), _rec(stage=Stage.PXE_PREFLIGHT), deadline_passed=False, take_slot=lambda: True)
    assert step.kind is StepKind.FAILED and "internal error in pxe_preflight: ZeroDivisionError" in step.reason


def test_a_renamed_pool_machine_stays_and_is_renamed_in_place() -> None:
    old_specs = {h: SPECS[h] for h in ("local-gpu-2", "local-gpu-3")}
    renamed = SPECS["local-gpu-3"].model_copy(update={"hostname": "local-gpu-3b"})
    new = [SPECS["local-gpu-2"], renamed]
    moved = renames(old_specs, new)
    assert moved == {"local-gpu-3": "local-gpu-3b"}
    prior = rekey({h: _record(h) for h in old_specs}, moved)
    assert prior["local-gpu-3b"].system_id == "sid-local-gpu-3" and prior["local-gpu-3b"].hostname == "local-gpu-3b"
    assert plan(prior, new).stay == ("local-gpu-2", "local-gpu-3b")

    class Renames(NoCalls):
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []

        def set_hostname(self, system_id: str, hostname: str) -> None:
            self.calls.append((system_id, hostname))

    ops = Renames()
    assert rc.apply_in_place(_ctx(ops), SPECS["local-gpu-3"], renamed, "sid-local-gpu-3") == ["hostname"]
    assert ops.calls == [("sid-local-gpu-3", "local-gpu-3b")]


def test_failure_codes_are_unique_used_and_lead_the_reason() -> None:
    from pathlib import Path

    from providers.machines.records import FailCode

    assert len({c.value for c in FailCode}) == len(FailCode)
    source = "".join(p.read_text() for p in Path("providers/machines").glob("*.py") if p.name != "records.py")
    assert [c.name for c in FailCode if f"FailCode.{c.name}" not in source] == []
    assert _pre(_rec(Goal.DEPLOYED, vanished=True)).reason.startswith("MCH013 ")
    assert failed_call(_rec(), MaasError("bad", status=400)).reason.startswith("MCH015 ")


def test_a_long_reason_keeps_its_head_and_its_what_to_do() -> None:
    """The summary cuts one machine's reason in its middle: the machine and the step stay, so does what to do."""
    reason = "MCH022 gpu-1 (system_id s1): launcher step 'fetch' failed: " + "y" * 600 + "; run up again"
    result = MachineResult(hostname="gpu-1", system_id="s1", outcome=MachineOutcome.FAILED, stage=Stage.FAILED,
                           maas_status="Failed deployment", reason=reason)
    with pytest.raises(rc.MachinesFailed) as e:
        rc.raise_failures("pool p", [result])
    line = next(ln for ln in str(e.value).splitlines() if "MCH022" in ln)
    assert "launcher step 'fetch' failed" in line and line.endswith("; run up again") and " ... " in line
    assert len(line.strip(" -")) <= rc.REPORT_MAX_REASON


def test_a_node_failure_keeps_the_nodes_key_sentence_and_the_advice_its_raw_output_gives_way() -> None:
    """The tampered-bundle case: the node's refusal (both digests) and the advice naming the object and the
    command survive the summary's bound; the raw output tail before it is what is cut."""
    got, want = "3" * 64, "b" * 64
    refusal = f"bundle refused: its sha256 is {got}, the user_data pins {want}"
    view = BootstrapView(ok=False, pending=False, failed_step="fetch", bundle_digest=want,
                         output_tail="x" * 900 + "\n" + refusal + "\n")
    m = _rec()
    step = bootstrap_failure(m, view)
    assert step.reason is not None and step.reason.startswith("MCH022 ")
    result = MachineResult(hostname=m.spec.hostname, system_id="s1", outcome=MachineOutcome.FAILED,
                           stage=Stage.FAILED, maas_status="Deployed", reason=step.reason)
    with pytest.raises(rc.MachinesFailed) as e:
        rc.raise_failures("pool p", [result])
    line = next(ln for ln in str(e.value).splitlines() if "MCH022" in ln)
    assert refusal in line and "`pulumi up --refresh`" in line and m.spec.deploy.bundle_ref in line, line
    assert len(line.strip(" -")) <= rc.REPORT_MAX_REASON
