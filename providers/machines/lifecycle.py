"""The machine lifecycle as tables: MAAS status -> stage, stage -> one small handler, and the one
pre-check that runs before any handler (Metal3's ReconcileState: detach, vanished, deadline,
capacity, failed calls). A reader learns from this file every transition a run can make; the
scheduler only schedules (slots, polls, threads) and applies the `Step` that `run_step` returns.

A run killed anywhere resumes on the next `up`: the stage is always re-derived from MAAS's status
and the owner data we store on the machine.
"""

from __future__ import annotations

from collections.abc import Callable

from clients.maas import MaasStatus, MaasUnavailable, PortError

from . import handlers as h
from .lease import LeaseUnavailable
from .plan import redeploy_due
from .records import (
    OWNER_CHECKS,
    OWNER_FINGERPRINT,
    Context,
    FailCode,
    Goal,
    LifecycleRecord,
    Step,
)
from .spec import TeardownMode
from .status import MachineOutcome, Stage

MAX_ERRORS = 30  # failed calls per machine and run before it stops retrying

# --------------------------------------------------------------------------------------------
# Which stage handles a machine in a given MAAS status (onboarding toward Deployed).

ONBOARD_TABLE: dict[MaasStatus, Stage] = {
    MaasStatus.NEW: Stage.COMMISSION,
    MaasStatus.COMMISSIONING: Stage.AWAIT_COMMISSION,
    MaasStatus.TESTING: Stage.AWAIT_COMMISSION,
    MaasStatus.FAILED_COMMISSIONING: Stage.COMMISSION,
    MaasStatus.FAILED_TESTING: Stage.COMMISSION,
    MaasStatus.READY: Stage.PXE_PREFLIGHT,
    MaasStatus.ALLOCATED: Stage.PXE_PREFLIGHT,
    MaasStatus.DEPLOYING: Stage.AWAIT_DEPLOY,
    MaasStatus.DEPLOYED: Stage.AWAIT_ENROLL,
    MaasStatus.FAILED_DEPLOYMENT: Stage.RECOVER_DEPLOY,
    MaasStatus.RELEASING: Stage.AWAIT_RELEASE,
    MaasStatus.DISK_ERASING: Stage.AWAIT_RELEASE,
}

# Teardown (release toward Ready / powered off).
TEARDOWN_TABLE: dict[MaasStatus, Stage] = {
    MaasStatus.DEPLOYED: Stage.RELEASE,
    MaasStatus.DEPLOYING: Stage.RELEASE,
    MaasStatus.ALLOCATED: Stage.RELEASE,
    MaasStatus.FAILED_DEPLOYMENT: Stage.RELEASE,
    MaasStatus.FAILED_DISK_ERASING: Stage.RELEASE,
    MaasStatus.FAILED_RELEASING: Stage.RELEASE,
    MaasStatus.RELEASING: Stage.AWAIT_RELEASE,
    MaasStatus.DISK_ERASING: Stage.AWAIT_RELEASE,
    MaasStatus.READY: Stage.POWER_OFF,
    MaasStatus.NEW: Stage.FORGET_NODE,
    MaasStatus.COMMISSIONING: Stage.AWAIT_COMMISSION,
    MaasStatus.TESTING: Stage.AWAIT_COMMISSION,
    MaasStatus.FAILED_COMMISSIONING: Stage.FORGET_NODE,
    MaasStatus.FAILED_TESTING: Stage.FORGET_NODE,
}

# Restricted release (customer handoff, seed 002): the machine goes to the customer as it is. It is
# released WITHOUT erase whatever the profile's erase mode, a failed erase found on the machine is
# released without erasing again, and nothing powers it off (Ready is the end of MAAS's part).
HANDOFF_TEARDOWN_TABLE: dict[MaasStatus, Stage] = {
    **TEARDOWN_TABLE,
    MaasStatus.DEPLOYED: Stage.HANDOFF_RELEASE,
    MaasStatus.DEPLOYING: Stage.HANDOFF_RELEASE,
    MaasStatus.ALLOCATED: Stage.HANDOFF_RELEASE,
    MaasStatus.FAILED_DEPLOYMENT: Stage.HANDOFF_RELEASE,
    MaasStatus.FAILED_DISK_ERASING: Stage.HANDOFF_RELEASE,
    MaasStatus.FAILED_RELEASING: Stage.HANDOFF_RELEASE,
    MaasStatus.READY: Stage.FORGET_NODE,
}

# Stages that occupy one of the profile's batch_max_parallel slots (MAAS does heavy work).
# Releases count too, so a changed deploy input redeploys a pool in rolling batches.
SLOT_STAGES = frozenset(
    {
        Stage.COMMISSION,
        Stage.AWAIT_COMMISSION,
        Stage.DEPLOY,
        Stage.AWAIT_DEPLOY,
        Stage.RECOVER_DEPLOY,
        Stage.RELEASE,
        Stage.HANDOFF_RELEASE,
        Stage.AWAIT_RELEASE,
    }
)

# Waiting stages and the deadline that bounds them.
WAIT_DEADLINE: dict[Stage, str] = {
    Stage.AWAIT_COMMISSION: "commission_s",
    Stage.AWAIT_DEPLOY: "deploy_s",
    Stage.AWAIT_RELEASE: "release_s",
    Stage.AWAIT_ENROLL: "enroll_s",
    Stage.AWAIT_FORGET: "enroll_s",
}

# Waiting stages whose progress is read from the platform, not from MAAS (never polled in MAAS,
# so a detached machine's MAAS record is never touched).
PLATFORM_WAITS = frozenset({Stage.AWAIT_FORGET})


def stage_for(m: LifecycleRecord) -> Stage:
    """The stage a freshly read machine is in, from its MAAS status (the resume point)."""
    assert m.view is not None
    teardown = HANDOFF_TEARDOWN_TABLE if m.handoff else TEARDOWN_TABLE
    table = ONBOARD_TABLE if m.goal is Goal.DEPLOYED else teardown
    status = m.view.status
    if m.goal is Goal.DEPLOYED and status is MaasStatus.DEPLOYED:
        deployed_from = {"deploy": m.view.owner_data.get(OWNER_FINGERPRINT),
                         "checks": m.view.owner_data.get(OWNER_CHECKS)}
        if redeploy_due(deployed_from, m.spec):
            return Stage.RELEASE  # the plan's rule: a change that redeploys; release, then deploy again
    return table.get(status, Stage.FAILED)


# --------------------------------------------------------------------------------------------
# Before any handler: the checks that can end or hold a machine whatever its stage.

_TEARDOWN_LEFT = frozenset({Stage.FORGET_NODE, Stage.AWAIT_FORGET, Stage.RELEASED, Stage.DETACHED})


def precheck(ctx: Context, m: LifecycleRecord, *, deadline_passed: bool, take_slot: Callable[[], bool]) -> Step | None:
    """A step that replaces the stage's handler this time, or None (run the handler)."""
    if m.create_error:
        return Step.fail(None, m.create_error)
    if m.last_error is not None and (step := _call_check(m)) is not None:
        return step
    if m.goal is Goal.RELEASED and m.teardown is TeardownMode.DETACH and m.stage not in _TEARDOWN_LEFT:
        m.notes.append("detached: MAAS was not touched")
        return Step.complete(Stage.FORGET_NODE)
    if m.vanished:
        m.vanished = False
        if m.goal is Goal.RELEASED:  # 404 on delete is success: only the platform's node record is left
            m.notes.append("not in MAAS any more: nothing to release")
            return Step.complete(Stage.FORGET_NODE)
        return Step.fail(
            FailCode.VANISHED,
            f"{m.spec.hostname}: system_id {m.system_id} vanished from MAAS (deleted out of band?)"
        )
    if deadline_passed and m.stage is Stage.AWAIT_ENROLL and m.waiting_for == h.NEVER_ENROLLED:
        return h.never_enrolled(ctx, m)
    if deadline_passed:
        failing = f"; meanwhile calls kept failing, the last: {m.recent_error}" if m.recent_error else ""
        waiting = f"; still waiting for {m.waiting_for}" if m.waiting_for else ""
        return Step.fail(
            FailCode.DEADLINE,
            f"{m.ident()} did not leave {m.stage.value} before its deadline "
            f"({WAIT_DEADLINE.get(m.stage, 'retrying failed calls')}){waiting}{failing}; the next up resumes from here",
            MachineOutcome.TIMED_OUT,
        )
    if m.stage in SLOT_STAGES:
        try:
            if not take_slot():
                return Step.delayed()  # Metal3's provisioning limit: no capacity, retried when a slot frees
        except LeaseUnavailable as e:
            return Step.fail(FailCode.SLOT_LEASE, f"{m.ident()}: no batch_max_parallel slot could be taken, "
                             f"so {m.stage.value} did not start: {e}")
    return None


def _call_check(m: LifecycleRecord) -> Step | None:
    """A failed call: a 4xx (other than 409, "wrong state": re-read and decide again) or too many
    failures stop the machine; anything else is retried after a re-read."""
    e, m.last_error = m.last_error, None
    assert e is not None
    if isinstance(e, MaasUnavailable):  # the client already retried through the outage, within its budget
        return Step.fail(FailCode.MAAS_UNAVAILABLE, f"{m.ident()}: {e}")
    if m.errors > MAX_ERRORS or (e.status is not None and 400 <= e.status < 500 and e.status != 409):
        return Step.fail(FailCode.MAAS_ERROR, f"{m.spec.hostname} (system_id {m.system_id}): MAAS error: {e}")
    return None


def failed_call(m: LifecycleRecord, e: PortError) -> Step:
    """What a failed MAAS/platform call means for the machine (a handler's or the bulk poll's)."""
    m.errors += 1
    m.last_error = e
    m.recent_error = str(e)[:300]
    return _call_check(m) or Step.error(f"{m.spec.hostname}: {m.stage.value}: {e} (will re-read and retry)")


def run_step(ctx: Context, m: LifecycleRecord, *, deadline_passed: bool, take_slot: Callable[[], bool]) -> Step:
    """One step for one machine: the pre-checks, else its stage's handler."""
    step = precheck(ctx, m, deadline_passed=deadline_passed, take_slot=take_slot)
    if step is not None:
        return step
    try:
        return HANDLERS[m.stage](ctx, m)
    except PortError as e:
        return failed_call(m, e)
    except Exception as e:  # noqa: BLE001 - a bug must fail one machine, not the whole pool
        return Step.fail(
            FailCode.INTERNAL,
            f"{m.spec.hostname}: internal error in {m.stage.value}: {type(e).__name__}: {e}"
        )


HANDLERS: dict[Stage, Callable[[Context, LifecycleRecord], Step]] = {
    Stage.COMMISSION: h.handle_commission,
    Stage.AWAIT_COMMISSION: h.handle_await,
    Stage.PXE_PREFLIGHT: h.handle_pxe_preflight,
    Stage.PREPARE_STORAGE: h.handle_prepare_storage,
    Stage.ROCE_LINKS: h.handle_roce_links,
    Stage.DEPLOY: h.handle_deploy,
    Stage.AWAIT_DEPLOY: h.handle_await_deploy,
    Stage.RECOVER_DEPLOY: h.handle_recover_deploy,
    Stage.AWAIT_RELEASE: h.handle_await,
    Stage.AWAIT_ENROLL: h.handle_await_enroll,
    Stage.RELEASE: h.handle_release,
    Stage.HANDOFF_RELEASE: h.handle_handoff_release,
    Stage.POWER_OFF: h.handle_power_off,
    Stage.FORGET_NODE: h.handle_forget_node,
    Stage.AWAIT_FORGET: h.handle_await_forget,
    Stage.RELEASED: h.handle_terminal,
    Stage.FAILED: h.handle_terminal,
}
