"""The machine lifecycle as a table: MAAS status -> stage, stage -> one small handler.

Each handler does one idempotent step and returns a `Step`: advance to another stage now, wait
(poll MAAS again after a back-off), or finish. A run killed anywhere resumes on the next `up`:
the stage is always re-derived from MAAS's status and the owner data we store on the machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from environments.model import EraseMode, TeardownMode

from .cloud_init import render_user_data
from .ports import Enrollment, MaasError, MachineDetail, MachineOps, MachineView
from .spec import Deadlines, LifecyclePolicy, MachineSpec
from .status import MaasStatus, MachineOutcome, Stage

# Owner-data keys we keep on the MAAS machine (survive a killed provider; MAAS is the record).
OWNER_FINGERPRINT = "gpuaas_deploy_fingerprint"
OWNER_NODE_ID = "gpuaas_node_id"
OWNER_MANAGED = "gpuaas_managed_by"

DATASOURCE_MARKERS = ("datasource", "cloud-init")


class Goal(StrEnum):
    DEPLOYED = "deployed"
    RELEASED = "released"


class StepKind(StrEnum):
    ADVANCE = "advance"
    WAIT = "wait"
    DONE = "done"


@dataclass(frozen=True)
class Step:
    kind: StepKind
    stage: Stage
    outcome: MachineOutcome | None = None
    reason: str = ""

    @staticmethod
    def advance(stage: Stage) -> Step:
        return Step(StepKind.ADVANCE, stage)

    @staticmethod
    def wait(stage: Stage) -> Step:
        return Step(StepKind.WAIT, stage)

    @staticmethod
    def done(outcome: MachineOutcome, stage: Stage, reason: str = "") -> Step:
        return Step(StepKind.DONE, stage, outcome, reason)

    @staticmethod
    def fail(reason: str) -> Step:
        return Step(StepKind.DONE, Stage.FAILED, MachineOutcome.FAILED, reason)


@dataclass
class Tracked:
    """One machine during one run (in memory; MAAS owner data is the durable record)."""

    spec: MachineSpec
    goal: Goal
    teardown: TeardownMode = TeardownMode.FULL_DECOMMISSION
    system_id: str | None = None
    view: MachineView | None = None
    stage: Stage = Stage.RESOLVE
    deploy_attempts: int = 0
    commission_attempts: int = 0
    transient_errors: int = 0
    node_id: str | None = None
    notes: list[str] = field(default_factory=list)
    outcome: MachineOutcome | None = None
    reason: str = ""
    # scheduling
    waiting: bool = False
    next_poll: float = 0.0
    poll_interval: float = 0.0
    deadline: float = float("inf")
    holds_slot: bool = False
    stage_times: dict[str, float] = field(default_factory=dict)
    detail: MachineDetail | None = None
    owner_data_recorded: bool = False
    wait_stage: Stage | None = None


@dataclass
class Context:
    ops: MachineOps
    enrollment: Enrollment
    policy: LifecyclePolicy
    deadlines: Deadlines
    platform_url: str = ""
    bmc_credentials: Callable[[str], tuple[str, str]] | None = None
    """Vault ref -> (user, password) of a machine's BMC, read at create time (never stored)."""
    clock: Callable[[], float] = time.monotonic
    log: Callable[[str], None] = print


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


def stage_for(m: Tracked) -> Stage:
    """The stage a freshly read machine is in, from its MAAS status (the resume point)."""
    assert m.view is not None
    table = ONBOARD_TABLE if m.goal is Goal.DEPLOYED else TEARDOWN_TABLE
    status = m.view.status
    if m.goal is Goal.DEPLOYED and status is MaasStatus.DEPLOYED:
        fingerprint = m.view.owner_data.get(OWNER_FINGERPRINT)
        if fingerprint is not None and fingerprint != m.spec.deploy_fingerprint():
            return Stage.RELEASE  # our deploy inputs changed: release, then deploy again
    return table.get(status, Stage.FAILED)


# --------------------------------------------------------------------------------------------
# Handlers: one step each.


def _event(ctx: Context, m: Tracked) -> str:
    try:
        return ctx.ops.last_event(m.system_id or "") or "(no event)"
    except MaasError:
        return "(event log unavailable)"


def _ident(m: Tracked) -> str:
    status = m.view.status.label if m.view else "unknown"
    return f"{m.spec.hostname} (system_id {m.system_id or '-'}, status {status})"


def handle_commission(ctx: Context, m: Tracked) -> Step:
    assert m.view is not None and m.system_id
    if m.view.status in (MaasStatus.FAILED_COMMISSIONING, MaasStatus.FAILED_TESTING) and m.commission_attempts >= 1:
        return Step.fail(
            f"{_ident(m)}: commissioning failed: {_event(ctx, m)}; fix the hardware or script, "
            "then run up again (it re-commissions)"
        )
    if (
        m.goal is Goal.DEPLOYED
        and m.view.status is MaasStatus.NEW
        and not ctx.policy.auto_claim_single_new_machine
        and m.view.owner_data.get(OWNER_MANAGED) is None
        and m.view.hostname != m.spec.hostname
    ):
        # A New machine found by MAC/IPMI under another name: claim it only if the profile allows it.
        return Step.fail(
            f"{_ident(m)}: a New machine matches {m.spec.hostname} by MAC/IPMI but is named "
            f"{m.view.hostname!r}; set auto_claim_single_new_machine: true to claim it, or rename it in MAAS"
        )
    m.commission_attempts += 1
    ctx.ops.commission(m.system_id, list(ctx.policy.commissioning_scripts), list(ctx.policy.testing_scripts))
    return Step.wait(Stage.AWAIT_COMMISSION)


def handle_await(ctx: Context, m: Tracked) -> Step:
    return Step.wait(m.stage)


def handle_pxe_preflight(ctx: Context, m: Tracked) -> Step:
    assert m.system_id
    d = ctx.ops.detail(m.system_id)
    if ctx.policy.strict_pxe_preflight:
        problem = pxe_problem(m.spec, d)
        if problem:
            return Step.fail(f"{_ident(m)}: PXE preflight failed: {problem}")
    m.detail = d
    if m.spec.tags:  # tags the environment declares travel with the machine (applied before deploy)
        ctx.ops.set_tags(m.system_id, list(m.spec.tags))
    return Step.advance(Stage.PREPARE_STORAGE)


def pxe_problem(spec: MachineSpec, d: MachineDetail) -> str | None:
    boot = (d.boot_interface_mac or "").lower()
    if boot != spec.pxe_mac:
        return (
            f"boot interface is {boot or 'unset'}, declared PXE MAC is {spec.pxe_mac}; "
            "fix pxe_mac in the environment or the machine's boot interface in MAAS"
        )
    macs = [i.mac_address.lower() for i in d.interfaces]
    if macs.count(spec.pxe_mac) != 1:
        return f"the PXE MAC {spec.pxe_mac} appears on {macs.count(spec.pxe_mac)} interfaces"
    return None


def choose_boot_disk(spec: MachineSpec, d: MachineDetail) -> int | None:
    hint = spec.storage.boot_disk_hint
    disks = list(d.block_devices)
    if hint.name:
        disks = [b for b in disks if b.name == hint.name]
    if hint.model_contains:
        disks = [b for b in disks if hint.model_contains.lower() in b.model.lower()]
    if not disks:
        return None
    return min(disks, key=lambda b: (b.size, b.id)).id if hint.smallest or len(disks) > 1 else disks[0].id


def handle_prepare_storage(ctx: Context, m: Tracked) -> Step:
    assert m.system_id
    d: MachineDetail = m.detail or ctx.ops.detail(m.system_id)
    disk = choose_boot_disk(m.spec, d)
    if disk is None:
        hint = m.spec.storage.boot_disk_hint.model_dump(exclude_none=True)
        models = ", ".join(f"{b.name}:{b.model}" for b in d.block_devices) or "none"
        return Step.fail(f"{_ident(m)}: no block device matches the SKU's boot disk hint {hint} (devices: {models})")
    if d.boot_disk_id != disk:
        ctx.ops.set_boot_disk(m.system_id, disk)
    ctx.ops.set_storage_layout(m.system_id, m.spec.storage.maas_layout.value, disk, m.spec.storage.root_size_gb)
    return Step.advance(Stage.ROCE_LINKS)


def handle_roce_links(ctx: Context, m: Tracked) -> Step:
    assert m.system_id
    if m.spec.roce_links:
        d: MachineDetail = m.detail or ctx.ops.detail(m.system_id)
        by_name = {i.name: i for i in d.interfaces}
        for link in m.spec.roce_links:
            iface = by_name.get(link.interface)
            if iface is None:
                return Step.fail(f"{_ident(m)}: RoCE interface {link.interface} not found on the machine")
            if any(lk.get("ip_address") == link.address for lk in iface.links):
                continue  # already linked: idempotent
            ctx.ops.link_static(m.system_id, iface.id, link.subnet, link.address)
    return Step.advance(Stage.DEPLOY)


def handle_deploy(ctx: Context, m: Tracked) -> Step:
    assert m.system_id
    if m.deploy_attempts >= _max_attempts(ctx):
        return Step.fail(
            f"{_ident(m)}: deploy failed {m.deploy_attempts} time(s): {_event(ctx, m)}; the next up resumes from here"
        )
    m.deploy_attempts += 1
    # A fresh enrollment token per attempt: tokens are single-use and expire.
    token = ctx.enrollment.mint_token(
        site=m.spec.site,
        hostname=m.spec.hostname,
        system_id=m.system_id,
        ttl_seconds=ctx.policy.enrollment_token_ttl_seconds,
    )
    m.node_id = token.node_id
    user_data = render_user_data(
        m.spec, platform_url=ctx.platform_url, node_id=token.node_id, token=token.token.get_secret_value()
    )
    ctx.ops.deploy(
        m.system_id,
        user_data=user_data,
        distro_series=m.spec.deploy.distro_series,
        hwe_kernel=m.spec.deploy.hwe_kernel,
        enable_hw_sync=ctx.policy.require_hw_sync,
    )
    # MAAS accepts owner data only once the machine is acquired, i.e. after the deploy call.
    _record_owner_data(ctx, m)
    return Step.wait(Stage.AWAIT_DEPLOY)


def _record_owner_data(ctx: Context, m: Tracked) -> None:
    assert m.system_id and m.node_id
    ctx.ops.set_owner_data(
        m.system_id,
        {OWNER_FINGERPRINT: m.spec.deploy_fingerprint(), OWNER_NODE_ID: m.node_id, OWNER_MANAGED: "gpuaas-infra"},
    )
    m.owner_data_recorded = True


def handle_await_deploy(ctx: Context, m: Tracked) -> Step:
    # A failed set_owner_data after a successful deploy call is repaired here (idempotent).
    if m.node_id and not m.owner_data_recorded:
        _record_owner_data(ctx, m)
    return Step.wait(Stage.AWAIT_DEPLOY)


def _max_attempts(ctx: Context) -> int:
    return ctx.policy.max_deploy_retry_attempts if ctx.policy.enable_deploy_retry_on_datasource_failure else 1


def handle_recover_deploy(ctx: Context, m: Tracked) -> Step:
    assert m.system_id
    event = _event(ctx, m)
    datasource = any(marker in event.lower() for marker in DATASOURCE_MARKERS)
    if m.deploy_attempts == 0:
        m.deploy_attempts = 1  # found failed on resume: that failure counts
    if not datasource or m.deploy_attempts >= _max_attempts(ctx):
        why = "datasource failure, retries exhausted" if datasource else "not a datasource failure"
        return Step.fail(
            f"{_ident(m)}: deployment failed ({why}, {m.deploy_attempts} attempt(s)): {event}; "
            "the next up releases and redeploys it"
        )
    m.notes.append(f"deploy attempt {m.deploy_attempts} failed on datasource; releasing to retry")
    ctx.ops.release(m.system_id, erase=False, secure_erase=False, quick_erase=False, force=False)
    return Step.wait(Stage.AWAIT_RELEASE)


def _erase_flags(mode: EraseMode) -> dict[str, bool]:
    return {
        "erase": mode is not EraseMode.NONE,
        "secure_erase": mode is EraseMode.SECURE,
        "quick_erase": mode is EraseMode.QUICK,
    }


def handle_release(ctx: Context, m: Tracked) -> Step:
    assert m.system_id and m.view is not None
    if m.view.status is MaasStatus.FAILED_DISK_ERASING:
        if not ctx.policy.release_fallback_no_erase:
            return Step.fail(
                f"{_ident(m)}: disk erase failed: {_event(ctx, m)}; fix the disks and run again, or set "
                "release_fallback_no_erase: true on the profile to release without erasing"
            )
        m.notes.append("erase failed; released WITHOUT erase (release_fallback_no_erase)")
        ctx.ops.release(m.system_id, erase=False, secure_erase=False, quick_erase=False, force=True)
        return Step.wait(Stage.AWAIT_RELEASE)
    flags = _erase_flags(ctx.policy.release_erase_mode)
    ctx.ops.release(m.system_id, force=m.view.status is MaasStatus.DEPLOYING, **flags)
    return Step.wait(Stage.AWAIT_RELEASE)


def handle_power_off(ctx: Context, m: Tracked) -> Step:
    assert m.system_id and m.view is not None
    if m.teardown is TeardownMode.FULL_DECOMMISSION and m.view.power_state != "off":
        try:
            ctx.ops.power_off(m.system_id)
        except MaasError as e:
            if e.status is not None and e.status < 500:
                return Step.fail(f"{_ident(m)}: power off failed: {e}")
            raise
    return Step.advance(Stage.FORGET_NODE)


def handle_await_enroll(ctx: Context, m: Tracked) -> Step:
    assert m.view is not None
    node_id = m.node_id or m.view.owner_data.get(OWNER_NODE_ID)
    if node_id is None:
        m.notes.append("adopted a machine deployed outside gpuaas-infra: enrollment not tracked")
        return Step.done(MachineOutcome.READY, Stage.READY)
    m.node_id = node_id
    if not m.owner_data_recorded and OWNER_FINGERPRINT not in m.view.owner_data and m.system_id:
        _record_owner_data(ctx, m)
    status = ctx.enrollment.node_status(node_id)
    if status == "active":
        return Step.done(MachineOutcome.READY, Stage.READY)
    if status in ("quarantined", "retired", "deleted", "removing"):
        return Step.fail(f"{_ident(m)}: platform node {node_id} is {status}, not active")
    return Step.wait(Stage.AWAIT_ENROLL)


def handle_forget_node(ctx: Context, m: Tracked) -> Step:
    node_id = m.node_id or (m.view.owner_data.get(OWNER_NODE_ID) if m.view else None)
    if node_id is None:
        return _torn_down(m)
    m.node_id = node_id
    ctx.enrollment.remove_node(node_id)
    return Step.wait(Stage.AWAIT_FORGET)


def handle_await_forget(ctx: Context, m: Tracked) -> Step:
    assert m.node_id
    if ctx.enrollment.node_status(m.node_id) in ("deleted", "unknown"):
        return _torn_down(m)
    return Step.wait(Stage.AWAIT_FORGET)


def _torn_down(m: Tracked) -> Step:
    if m.teardown is TeardownMode.DETACH:
        return Step.done(MachineOutcome.DETACHED, Stage.DETACHED)
    return Step.done(MachineOutcome.RELEASED, Stage.RELEASED)


def handle_terminal(ctx: Context, m: Tracked) -> Step:
    if m.stage is Stage.RELEASED:
        return Step.advance(Stage.FORGET_NODE)  # nothing (left) to release in MAAS
    assert m.view is not None
    return Step.fail(f"{_ident(m)}: MAAS status {m.view.status.label} needs an operator: {_event(ctx, m)}")


HANDLERS: dict[Stage, Callable[[Context, Tracked], Step]] = {
    Stage.COMMISSION: handle_commission,
    Stage.AWAIT_COMMISSION: handle_await,
    Stage.PXE_PREFLIGHT: handle_pxe_preflight,
    Stage.PREPARE_STORAGE: handle_prepare_storage,
    Stage.ROCE_LINKS: handle_roce_links,
    Stage.DEPLOY: handle_deploy,
    Stage.AWAIT_DEPLOY: handle_await_deploy,
    Stage.RECOVER_DEPLOY: handle_recover_deploy,
    Stage.AWAIT_RELEASE: handle_await,
    Stage.AWAIT_ENROLL: handle_await_enroll,
    Stage.RELEASE: handle_release,
    Stage.POWER_OFF: handle_power_off,
    Stage.FORGET_NODE: handle_forget_node,
    Stage.AWAIT_FORGET: handle_await_forget,
    Stage.RELEASED: handle_terminal,
    Stage.FAILED: handle_terminal,
}
