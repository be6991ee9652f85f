"""The lifecycle's handlers: one small idempotent step each (the table in `lifecycle.py` says which
runs when). A handler returns a `Step`; it raises only when a call to MAAS or the platform failed,
and `lifecycle.run_step` turns that into a step too."""
# size: one handler per stage of the lifecycle table, side by side (the table's other half)

from __future__ import annotations

from clients.maas import MaasError, MaasStatus, MachineDetail, datasource_failure

from .bootstrap import reported_failure, verdict
from .plan import checks_fingerprint
from .records import (
    OWNER_ATTEMPTS,
    OWNER_ATTEMPTS_FOR,
    OWNER_CHECKS,
    OWNER_FINGERPRINT,
    OWNER_MANAGED,
    OWNER_NODE_ID,
    OWNER_RESOURCE,
    Context,
    FailCode,
    Goal,
    LifecycleRecord,
    Step,
)
from .script_failures import failed_scripts
from .spec import EraseMode, MachineSpec, TeardownMode
from .status import MachineOutcome, Stage
from .user_data import deploy_user_data

MAX_RECOMMISSIONS = 1  # automatic re-commissions per machine and run (docs/machines.md)


def _event(ctx: Context, m: LifecycleRecord) -> str:
    try:
        return ctx.ops.last_event(m.system_id or "") or "(no event)"
    except MaasError:
        return "(event log unavailable)"


def _failed_scripts(ctx: Context, m: LifecycleRecord) -> str:
    """The failing scripts of the machine's current testing (or commissioning) run as MAAS recorded them, with
    their output's tail, redacted (script_failures.py), e.g. `MAAS testing results: smartctl-validate: failed,
    exit 1, output: ...`; "" when MAAS names none."""
    assert m.view is not None and m.system_id
    kind = "testing" if m.view.status is MaasStatus.FAILED_TESTING else "commissioning"
    return failed_scripts(ctx.ops, m.system_id, kind)


def handle_commission(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.view is not None and m.system_id
    if m.view.status in (MaasStatus.FAILED_COMMISSIONING, MaasStatus.FAILED_TESTING):
        # One failure (seen in this run, or found on resume) earns one automatic re-commission. What failed:
        # MAAS's per-script results (the failing script, its exit status, its output's tail), else its last
        # event (which, beside the results, only says "1 test scripts failed to run": it would push the output
        # out of the bounded summary Pulumi shows).
        event = _failed_scripts(ctx, m) or _event(ctx, m)
        if m.recommissions >= MAX_RECOMMISSIONS:
            return Step.fail(
                FailCode.COMMISSIONING,
                f"{m.ident()}: commissioning failed again after {m.recommissions} automatic re-commission(s) "
                f"in this run: {event}; fix the hardware or script, then run up again (it re-commissions once more)"
            )
        m.recommissions += 1
        m.notes.append(f"commissioning failed ({event}); re-commissioning once")
    if (
        m.goal is Goal.DEPLOYED
        and m.view.status is MaasStatus.NEW
        and m.view.owner_data.get(OWNER_MANAGED) is None
        and m.view.hostname != m.spec.hostname
    ):
        # The single New machine the declared IPMI address / PXE MAC found, under another name
        # (resolve stops on several): claimed only if the profile allows it.
        if not ctx.policy.auto_claim_single_new_machine:
            return Step.fail(
                FailCode.UNCLAIMED_NEW,
                f"{m.ident()}: New machine {m.system_id} matches {m.spec.hostname} by IPMI address/PXE MAC but is "
                f"named {m.view.hostname!r}; set auto_claim_single_new_machine: true on the profile to claim it, "
                "or rename it in MAAS"
            )
        if (failed := _claim(ctx, m)) is not None:
            return failed
    m.commission_attempts += 1
    ctx.ops.commission(m.system_id, list(ctx.policy.commissioning_scripts), list(ctx.policy.testing_scripts))
    return Step.wait(Stage.AWAIT_COMMISSION)


def _claim(ctx: Context, m: LifecycleRecord) -> Step | None:
    """auto_claim_single_new_machine: rename the machine to the declared hostname and set its power
    driver before commissioning (enrollment checks the hostname MAAS reports)."""
    assert m.view is not None and m.system_id
    user = password = None
    if m.spec.power_user_path and ctx.bmc_credentials is not None:
        try:
            user, password = ctx.bmc_credentials(m.spec.power_user_path)
        except Exception as e:  # noqa: BLE001 - e.g. VaultError: names the path, never a value
            return Step.fail(FailCode.BMC_CREDENTIALS, f"{m.spec.hostname}: BMC credentials unavailable: {e}")
    ctx.ops.set_hostname(m.system_id, m.spec.hostname)
    ctx.ops.set_power(
        m.system_id,
        power_type=m.spec.power_type.value,
        power_address=m.spec.ipmi_address,
        power_user=user,
        power_pass=password,
    )
    m.notes.append(f"claimed New machine {m.system_id} ({m.view.hostname!r}) as {m.spec.hostname}")
    m.adopted = True
    return None


def handle_await(ctx: Context, m: LifecycleRecord) -> Step:
    return Step.wait(m.stage)


def handle_pxe_preflight(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.system_id
    d = m.detail or ctx.ops.detail(m.system_id)  # the bulk poll that saw commissioning end read it
    if ctx.policy.strict_pxe_preflight:
        problem = pxe_problem(m.spec, d)
        if problem:
            return Step.fail(FailCode.PXE_PREFLIGHT, f"{m.ident()}: PXE preflight failed: {problem}")
    m.detail = d
    if m.spec.tags:  # tags the environment declares travel with the machine (applied before deploy)
        ctx.ops.set_tags(m.system_id, list(m.spec.tags))
    return Step.complete(Stage.PREPARE_STORAGE)


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


def handle_prepare_storage(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.system_id
    d: MachineDetail = m.detail or ctx.ops.detail(m.system_id)
    disk = choose_boot_disk(m.spec, d)
    if disk is None:
        hint = m.spec.storage.boot_disk_hint.model_dump(exclude_none=True)
        models = ", ".join(f"{b.name}:{b.model}" for b in d.block_devices) or "none"
        return Step.fail(
            FailCode.BOOT_DISK,
            f"{m.ident()}: no block device matches the SKU's boot disk hint {hint} (devices: {models})"
        )
    if d.boot_disk_id != disk:
        ctx.ops.set_boot_disk(m.system_id, disk)
    ctx.ops.set_storage_layout(m.system_id, m.spec.storage.maas_layout.value, disk, m.spec.storage.root_size_gb)
    return Step.complete(Stage.ROCE_LINKS)


def handle_roce_links(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.system_id
    if m.spec.roce_links:
        d: MachineDetail = m.detail or ctx.ops.detail(m.system_id)
        by_name = {i.name: i for i in d.interfaces}
        for link in m.spec.roce_links:
            iface = by_name.get(link.interface)
            if iface is None:
                return Step.fail(
                    FailCode.ROCE_INTERFACE,
                    f"{m.ident()}: RoCE interface {link.interface} not found on the machine"
                )
            if any(lk.get("ip_address") == link.address for lk in iface.links):
                continue  # already linked: idempotent
            try:
                ctx.ops.link_static(m.system_id, iface.id, link.subnet, link.address)
            except MaasError:
                holder = next((h for h in ctx.ops.static_holdings({link.subnet})
                               if h.address == link.address and h.system_id != m.system_id), None)
                if holder is None:
                    raise
                return Step.fail(FailCode.ROCE_ADDRESS_HELD, (
                    f"{m.ident()}: RoCE address {link.address} ({link.subnet}) for {link.interface} is held in MAAS "
                    f"by {holder.hostname or '?'}/{holder.interface or '?'} ({holder.system_id}); fix: run `pulumi "
                    "up` again: the site's RoCE assignment offers this machine a free address (an address not "
                    "applied yet is never kept when MAAS gives it to another interface); if the holder should not "
                    "have it, unlink it in MAAS"))
    return Step.complete(Stage.DEPLOY)


def handle_deploy(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.system_id
    if m.deploy_attempts >= _max_attempts(ctx):
        return Step.fail(FailCode.DEPLOY, f"{m.ident()}: deploy failed {m.deploy_attempts} time(s): {_event(ctx, m)}; "
                         + _budget_hint(m))
    m.deploy_attempts += 1
    # A fresh enrollment token per attempt: tokens are single-use and expire.
    token = ctx.enrollment.mint_token(
        site=m.spec.site,
        hostname=m.spec.hostname,
        system_id=m.system_id,
        ttl_seconds=ctx.policy.enrollment_token_ttl_seconds,
    )
    m.node_id = token.node_id
    user_data = deploy_user_data(ctx, m, token.node_id, token.token.get_secret_value())
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


def _record_owner_data(ctx: Context, m: LifecycleRecord) -> None:
    assert m.system_id and m.node_id
    ctx.ops.set_owner_data(
        m.system_id,
        {
            OWNER_FINGERPRINT: m.spec.deploy_fingerprint(),
            OWNER_CHECKS: checks_fingerprint(m.spec),
            OWNER_NODE_ID: m.node_id,
            OWNER_MANAGED: "gpuaas-infra",
            OWNER_ATTEMPTS: str(m.deploy_attempts),
            OWNER_ATTEMPTS_FOR: m.attempts_key(),
            **({OWNER_RESOURCE: ctx.owner} if ctx.owner else {}),
        },
    )
    m.owner_data_recorded = True


def handle_await_deploy(ctx: Context, m: LifecycleRecord) -> Step:
    # A failed set_owner_data after a successful deploy call is repaired here (idempotent).
    if m.node_id and not m.owner_data_recorded:
        _record_owner_data(ctx, m)
    return Step.wait(Stage.AWAIT_DEPLOY)


def _max_attempts(ctx: Context) -> int:
    return ctx.policy.max_deploy_retry_attempts if ctx.policy.enable_deploy_retry_on_datasource_failure else 1


def _budget_hint(m: LifecycleRecord) -> str:
    return (
        f"the retry budget for this deploy is spent (counted across runs in MAAS owner data); fix the cause, then "
        f"raise the machine's retry_generation to {m.spec.retry_generation + 1} (or change its deploy inputs) "
        "and run up again"
    )


def handle_recover_deploy(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.system_id
    node_id = m.node_id or (m.view.owner_data.get(OWNER_NODE_ID) if m.view is not None else None)
    reported = reported_failure(ctx, m, node_id)  # the node's launcher failed a step: its report says which
    if reported is not None:
        return reported
    event = _event(ctx, m)
    found = datasource_failure(ctx.ops.recent_events(m.system_id, 10))  # MAAS's wording (clients/maas)
    datasource = found is not None
    if found is not None:
        event = f"{event} [{found.text()}]"
    m.load_attempts()  # attempts earlier runs spent on this fingerprint survive the run
    if m.deploy_attempts == 0:
        m.deploy_attempts = 1  # found failed on resume without our record: that failure counts
    if not datasource or m.deploy_attempts >= _max_attempts(ctx):
        why = "datasource failure, retries exhausted" if datasource else "not a datasource failure"
        hint = _budget_hint(m) if datasource else "the next up releases and redeploys it"
        return Step.fail(
            FailCode.DEPLOY,
            f"{m.ident()}: deployment failed ({why}, {m.deploy_attempts} attempt(s)): {event}; {hint}"
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


def handle_release(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.system_id and m.view is not None
    if m.view.status is MaasStatus.FAILED_DISK_ERASING and m.erase_attempts >= 1:
        # The erase this run asked for failed: fall back (if the profile allows it) or stop here.
        event = _event(ctx, m)
        if not ctx.policy.release_fallback_no_erase:
            return Step.fail(
                FailCode.ERASE,
                f"{m.ident()}: disk erase failed: {event}; fix the disks and run again (the next run retries "
                "the erase), or set release_fallback_no_erase: true on the profile to release without erasing"
            )
        warning = (
            f"erase failed ({event}); released WITHOUT erase (release_fallback_no_erase): the disks still hold data"
        )
        m.notes.append(warning)
        ctx.log(f"WARNING: {m.spec.hostname} (system_id {m.system_id}): {warning}")
        ctx.ops.release(m.system_id, erase=False, secure_erase=False, quick_erase=False, force=True)
        return Step.wait(Stage.AWAIT_RELEASE)
    # Failed disk erasing found on resume ("fix the disks and run again"): erase again.
    flags = _erase_flags(ctx.policy.release_erase_mode)
    if flags["erase"]:
        m.erase_attempts += 1
    ctx.ops.release(m.system_id, force=m.view.status is MaasStatus.DEPLOYING, **flags)
    return Step.wait(Stage.AWAIT_RELEASE)


def handle_handoff_release(ctx: Context, m: LifecycleRecord) -> Step:
    """Customer handoff: release without erase (whatever the profile's erase mode); never powers off."""
    assert m.system_id and m.view is not None
    m.notes.append("customer handoff: released without erase and left powered as it was")
    ctx.ops.release(
        m.system_id,
        erase=False,
        secure_erase=False,
        quick_erase=False,
        force=m.view.status in (MaasStatus.DEPLOYING, MaasStatus.FAILED_DISK_ERASING),
    )
    return Step.wait(Stage.AWAIT_RELEASE)


def handle_power_off(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.system_id and m.view is not None
    if m.teardown is TeardownMode.FULL_DECOMMISSION and m.view.power_state != "off":
        try:
            ctx.ops.power_off(m.system_id)
        except MaasError as e:
            if e.status is not None and e.status < 500:
                return Step.fail(FailCode.POWER_OFF, f"{m.ident()}: power off failed: {e}")
            raise
    return Step.complete(Stage.FORGET_NODE)


def handle_await_enroll(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.view is not None
    node_id = m.node_id or m.view.owner_data.get(OWNER_NODE_ID) or _node_on_platform(ctx, m)
    if node_id is None:
        m.notes.append("adopted a machine deployed outside gpuaas-infra: enrollment not tracked")
        return Step.finish(MachineOutcome.READY, Stage.READY)
    m.node_id = node_id
    if not m.owner_data_recorded and OWNER_FINGERPRINT not in m.view.owner_data and m.system_id:
        _record_owner_data(ctx, m)
    elif ctx.owner and m.view.owner_data.get(OWNER_RESOURCE) != ctx.owner and m.system_id:
        ctx.ops.set_owner_data(m.system_id, {OWNER_RESOURCE: ctx.owner})  # adopted: this resource manages it now
    state = ctx.enrollment.node_state(node_id)
    status = state.status
    decided = verdict(ctx, m, state)
    if decided is not None:
        return decided
    if status in ("quarantined", "retired", "deleted", "removing"):
        return Step.fail(FailCode.NODE_STATE, f"{m.ident()}: platform node {node_id} is {status}, not active")
    if status == "bootstrap_issued" and state.bootstrap is None:
        m.waiting_for = NEVER_ENROLLED  # past the deadline: redeployed with a fresh token (lifecycle.precheck)
    return Step.wait(Stage.AWAIT_ENROLL)


NEVER_ENROLLED = ("the node to enroll (its launcher has not reached the platform: no enrollment, no report; on the "
                  "node, /var/log/gpuaas-launcher.log and its route to the platform)")


def never_enrolled(ctx: Context, m: LifecycleRecord) -> Step:
    """AWAIT_ENROLL past its deadline with the node never heard of: its token may be spent or expired and nothing
    on the node will enroll it now. A redeploy (release, then deploy with a fresh token and URL) within the
    deploy retry budget; past it, a coded failure saying what to run."""
    if m.deploy_attempts < _max_attempts(ctx):
        m.notes.append(f"deployed but never enrolled within {ctx.deadlines.enroll_s:.0f} s; releasing to redeploy "
                       f"(attempt {m.deploy_attempts + 1} of {_max_attempts(ctx)})")
        m.waiting_for = ""
        return Step.complete(Stage.RELEASE)
    return Step.fail(FailCode.DEADLINE, f"{m.ident()}: deployed {m.deploy_attempts} time(s) and never enrolled: still "
                     f"waiting for {NEVER_ENROLLED}; " + _budget_hint(m), MachineOutcome.TIMED_OUT)


def _node_on_platform(ctx: Context, m: LifecycleRecord) -> str | None:
    """A run killed (or a 503) between the deploy call and the owner-data write leaves the node id
    only on the platform: ask it by system_id before calling the machine "deployed outside"."""
    if not m.system_id:
        return None
    node_id = ctx.enrollment.find_node(system_id=m.system_id)
    if node_id is not None:
        m.notes.append(f"node id {node_id} recovered from the platform (owner data was not written)")
    return node_id


def handle_forget_node(ctx: Context, m: LifecycleRecord) -> Step:
    node_id = m.node_id or (m.view.owner_data.get(OWNER_NODE_ID) if m.view else None) or _node_on_platform(ctx, m)
    if node_id is None:
        return _torn_down(m)
    m.node_id = node_id
    ctx.enrollment.remove_node(node_id)
    return Step.wait(Stage.AWAIT_FORGET)


def handle_await_forget(ctx: Context, m: LifecycleRecord) -> Step:
    assert m.node_id
    if ctx.enrollment.node_status(m.node_id) in ("deleted", "unknown"):
        return _torn_down(m)
    return Step.wait(Stage.AWAIT_FORGET)


def _torn_down(m: LifecycleRecord) -> Step:
    if m.teardown is TeardownMode.DETACH:
        return Step.finish(MachineOutcome.DETACHED, Stage.DETACHED)
    return Step.finish(MachineOutcome.RELEASED, Stage.RELEASED)


def handle_terminal(ctx: Context, m: LifecycleRecord) -> Step:
    if m.stage is Stage.RELEASED:
        return Step.complete(Stage.FORGET_NODE)  # nothing (left) to release in MAAS
    assert m.view is not None
    return Step.fail(
        FailCode.NEEDS_OPERATOR,
        f"{m.ident()}: MAAS status {m.view.status.label} needs an operator: {_event(ctx, m)}"
    )
