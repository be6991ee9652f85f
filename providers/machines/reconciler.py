"""The machines kind's reconciler: verbs over typed specs and per-machine records, no Pulumi.

- the plan (`plan.py`): the record state keeps, what a change does (`change`), a run's plan (pure).
- `converge(ctx, specs, prior, leaving)`: run the lifecycle for the machines the plan says need it
  (join, reidentify: release the old hardware first, redeploy, repair), carry every untouched machine's
  record forward unchanged, release the machines that leave.
- `release(ctx, items)`: teardown per each machine's mode.
- `observe(ops, records)`: one bulk read; what refresh records (drift is decided here, once).
- `apply_in_place(ctx, old, new, system_id)`: hostname, tags, power settings (read back).
- `check_failures(kind, results)`: a bounded error for Pulumi; the full report goes to stderr.

MaasMachine and MachinePool are thin translations onto these verbs (a MaasMachine is a pool of one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clients.maas import MachineView

from .bootstrap import OUTPUT_MARK
from .drift import identity_drift
from .plan import DEPLOYED, MachineRecord, Plan, checks_fingerprint, plan, written_for
from .ports import MachineOps
from .progress import report_line
from .records import OWNER_CHECKS, OWNER_FINGERPRINT, OWNER_RESOURCE, Context, FailCode
from .scheduler import MachineResult, Scheduler
from .spec import MachineIdentity, MachineSpec, PowerType
from .status import MachineOutcome

MISSING = "Missing"
REPORT_MAX_FAILURES = 10
REPORT_MAX_CHARS = 7000
REPORT_MAX_REASON = 600  # characters of one machine's reason in the summary (the node's raw output gives way)


@dataclass(frozen=True)
class Converged:
    plan: Plan
    records: dict[str, MachineRecord]
    """Every wanted machine, plus leaving machines whose release failed (marked `leaving`)."""
    results: list[MachineResult] = field(default_factory=list)


def record_of(
    spec: MachineSpec, result: MachineResult | None, platform_url: str, prior: MachineRecord | None
) -> MachineRecord:
    """The record after a run: the result's facts, or, for a machine not part of the run, the prior
    record's facts unchanged under the spec it now has (in-place fields are applied by the caller)."""
    if result is None and prior is not None:
        return written_for(prior, spec)
    base: dict[str, Any] = {
        **spec.identity().model_dump(),
        "system_id": (result.system_id if result else None) or (prior.system_id if prior else None),
        "deploy_fingerprint": spec.deploy_fingerprint(),
        "checks_fingerprint": checks_fingerprint(spec),
        "spec_fingerprint": spec.spec_fingerprint(),
    }
    if result is not None:
        base |= {
            "status": result.maas_status,
            "stage": result.stage,
            "outcome": result.outcome,
            "node_id": result.node_id or (prior.node_id if prior else None),
            "deploy_attempts": result.deploy_attempts,
            "adopted": result.adopted,
        }
    return MachineRecord.model_validate(base)


def converge(
    ctx: Context,
    specs: Sequence[MachineSpec],
    prior: Mapping[str, MachineRecord],
    leaving: Sequence[tuple[Departing, MachineRecord | None]] = (),
) -> Converged:
    """Bring `specs` to Deployed + enrolled; release `leaving`. Machines the plan leaves alone
    are not touched, and their records are carried forward exactly as they were. A machine whose spec
    names other hardware (`reidentify`) is released first, then found again (or created) and deployed."""
    p = plan(prior, specs)
    ctx.log(f"machines: {p.summary()}")
    results: list[MachineResult] = []
    old_hardware = [(ident, prior[h]) for h in p.reidentify if (ident := prior[h].identity()) is not None]
    released = _teardown(ctx, [*leaving, *old_hardware]) if leaving or old_hardware else []
    results += released
    kept = {r.hostname for r in released if r.outcome.failed and r.hostname in p.reidentify}
    todo = [s for s in specs if s.hostname not in p.untouched and s.hostname not in kept]
    if todo:
        known = {h: r.system_id for h, r in prior.items() if r.system_id and h not in p.reidentify}
        results += Scheduler(ctx).onboard(todo, known)
    report(ctx, results)
    onboarded = {r.hostname: r for r in results if r not in released}
    records = {
        s.hostname: record_of(s, onboarded.get(s.hostname), ctx.platform_url, prior.get(s.hostname)) for s in specs
    }
    failed_release = {r.hostname: r for r in released if r.outcome.failed}
    for spec, rec in [*leaving, *old_hardware]:  # a failed release stays recorded: the next up retries it
        r = failed_release.get(spec.hostname)
        if r is None:
            continue
        base = rec or MachineRecord(hostname=spec.hostname)
        ident = spec if isinstance(spec, MachineIdentity) else spec.identity()
        update = {**dict(ident), "outcome": r.outcome} | ({} if spec.hostname in p.reidentify else {"leaving": True})
        records[spec.hostname] = base.model_copy(update=update)
    return Converged(p, records, results)


Departing = MachineSpec | MachineIdentity  # what a machine to release is known by


def release(ctx: Context, items: Sequence[tuple[Departing, MachineRecord | None]]) -> list[MachineResult]:
    """Release each machine per its teardown mode (detach never touches MAAS); the per-machine
    report (notes such as "released WITHOUT erase") goes to the run's output."""
    results = _teardown(ctx, items)
    report(ctx, results)
    return results


def _teardown(ctx: Context, items: Sequence[tuple[Departing, MachineRecord | None]]) -> list[MachineResult]:
    node_ids = {s.hostname: r.node_id for s, r in items if r is not None and r.node_id}
    specs = [(s if isinstance(s, MachineSpec) else s.teardown_spec(), r) for s, r in items]
    return Scheduler(ctx).teardown([(s, r.system_id if r else None, s.teardown_mode) for s, r in specs], node_ids)


def observe(
    ops: MachineOps,
    records: Mapping[str, MachineRecord],
    specs: Mapping[str, MachineSpec | MachineIdentity] | None = None,
) -> dict[str, MachineRecord]:
    """What refresh records: MAAS's status per machine (one bulk read) and drift as an outcome;
    with `specs` (hostname -> spec), a hostname or declared tags changed by hand are drift too."""
    ids = {r.system_id: h for h, r in records.items() if r.system_id}
    seen: dict[str, MachineView] = {v.system_id: v for v in ops.read_many(list(ids))} if ids else {}
    out = dict(records)
    for sid, hostname in ids.items():
        out[hostname] = observed(records[hostname], seen.get(sid), (specs or {}).get(hostname))
    return out


def observed(
    rec: MachineRecord, view: MachineView | None, spec: MachineSpec | MachineIdentity | None = None
) -> MachineRecord:
    """One machine's record after a read: gone, not Deployed, deployed from other inputs, renamed or
    missing a declared tag is drift (`drift` says what differs)."""
    if view is None:
        gone = {"status": MISSING, "outcome": MachineOutcome.DRIFTED, "drift": ("gone from MAAS",)}
        return rec.model_copy(update=gone)
    what: list[str] = []
    if view.status.label != DEPLOYED:
        what.append(f"status is {view.status.label} in MAAS")
    deployed_from = {"deploy": view.owner_data.get(OWNER_FINGERPRINT), "checks": view.owner_data.get(OWNER_CHECKS)}
    recorded = rec.recorded_fingerprints()
    if any(v is not None and recorded.get(k) is not None and v != recorded[k] for k, v in deployed_from.items()):
        what.append("deployed from other inputs (owner-data fingerprint)")
    if spec is not None:
        what += identity_drift(spec, view)
    update: dict[str, Any] = {"status": view.status.label, "drift": tuple(what)}
    if what:
        update["outcome"] = MachineOutcome.DRIFTED
    elif rec.outcome is MachineOutcome.DRIFTED and rec.drift:
        update["outcome"] = MachineOutcome.READY  # the drift was undone by hand before any up
    return rec.model_copy(update=update)


def claim(ctx: Context, system_ids: Sequence[str]) -> list[str]:
    """Record this run's resource as the manager of deployed machines whose owner data names another (or
    none: machines deployed before it was recorded). One bulk read; returns the system_ids claimed."""
    if not ctx.owner or not system_ids:
        return []
    claimed = []
    for view in ctx.ops.read_many(list(system_ids)):
        if view.status.label == DEPLOYED and view.owner_data.get(OWNER_RESOURCE) != ctx.owner:
            ctx.ops.set_owner_data(view.system_id, {OWNER_RESOURCE: ctx.owner})
            claimed.append(view.system_id)
    return claimed


class InPlaceError(Exception):
    """An in-place change MAAS did not take (read back after the call)."""


POWER_FIELDS = ("power_type", "ipmi_address", "power_user_path")


def apply_in_place(ctx: Context, old: MachineIdentity | None, new: MachineSpec, system_id: str) -> list[str]:
    """Hostname, tags and power settings changed on the machine as it is (no redeploy); the power
    settings are read back, because an ignored parameter must fail here, not look applied."""
    done: list[str] = []
    if old is None:
        return done  # a machine new to state got everything from the lifecycle itself
    if old.hostname != new.hostname:
        ctx.ops.set_hostname(system_id, new.hostname)
        done.append("hostname")
    if sorted(old.tags) != sorted(new.tags):
        ctx.ops.set_tags(system_id, list(new.tags), remove=list(old.tags))
        done.append("tags")
    if any(getattr(old, f) != getattr(new, f) for f in POWER_FIELDS):
        _apply_power(ctx, new, system_id)
        done.append("power")
    return done


def _apply_power(ctx: Context, spec: MachineSpec, system_id: str) -> None:
    user = password = None
    if spec.power_user_path and ctx.bmc_credentials is not None:
        user, password = ctx.bmc_credentials(spec.power_user_path)
    ctx.ops.set_power(
        system_id,
        power_type=spec.power_type.value,
        power_address=spec.ipmi_address,
        power_user=user,
        power_pass=password,
    )
    back = ctx.ops.power_settings(system_id)
    wrong = []
    if back.power_type != spec.power_type.value:
        wrong.append(f"power_type {back.power_type!r} (wanted {spec.power_type.value!r})")
    if spec.power_type is not PowerType.MANUAL and back.power_address != spec.ipmi_address:
        wrong.append(f"power_address {back.power_address!r} (wanted {spec.ipmi_address!r})")
    if user is not None and back.power_user != user:
        wrong.append("power_user (differs from the Vault value)")
    if wrong:
        raise InPlaceError(
            FailCode.POWER_NOT_APPLIED(
                f"{spec.hostname} (system_id {system_id}): MAAS did not apply the power settings: it shows "
                + "; ".join(wrong)
                + ". Check the power driver in MAAS (Machine > Configuration > Power), then run up again."
            )
        )


# ------------------------------------------------------------------------------------------------
# Reports: the full per-machine report to stderr; a bounded summary in the error Pulumi shows.


def report(ctx: Context, results: Sequence[MachineResult]) -> None:
    for r in results:
        ctx.log(report_line(r.hostname, r.outcome, r.stage, r.maas_status, r.stage_seconds))
        for note in r.notes:
            ctx.log(f"{r.hostname}: note: {note}")
        if r.reason and r.outcome.failed:
            ctx.log(f"{r.hostname}: {r.reason}")


class MachinesFailed(Exception):
    """Some machines did not converge; the message is bounded (counts + the first failures)."""


def failure_summary(what: str, results: Sequence[MachineResult]) -> str | None:
    failed = [r for r in results if r.outcome.failed]
    if not failed:
        return None
    counts: dict[str, int] = {}
    for r in results:
        counts[r.outcome.value] = counts.get(r.outcome.value, 0) + 1
    lines = [
        f"{what}: {len(failed)} of {len(results)} machine(s) did not converge ("
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + ")"
    ]
    for r in failed[:REPORT_MAX_FAILURES]:
        reason = r.reason or f"{r.hostname}: {r.outcome.value} in {r.stage.value} (MAAS: {r.maas_status})"
        lines.append(f"  - {_bounded(reason)}")
    if len(failed) > REPORT_MAX_FAILURES:
        lines.append(f"  ... and {len(failed) - REPORT_MAX_FAILURES} more (the full report is in the run's output)")
    lines.append("Machines that converged are recorded; the next `up` resumes the others (nothing is duplicated).")
    text = "\n".join(lines)
    return text if len(text) <= REPORT_MAX_CHARS else text[: REPORT_MAX_CHARS - 3] + "..."


def _bounded(reason: str, limit: int = REPORT_MAX_REASON) -> str:
    """A reason cut to `limit` characters. A node's raw output tail (after OUTPUT_MARK, placed after the node's
    key sentence and the advice) gives way first; else the middle: the head names the machine and what failed,
    the end says what to do."""
    if len(reason) <= limit:
        return reason
    key, mark, tail = reason.partition(OUTPUT_MARK)
    if mark:
        room = limit - len(key) - len(mark) - 3
        if room >= 20:
            return f"{key}{mark}...{tail[-room:]}"
        reason = key
        if len(reason) <= limit:
            return reason
    head = (limit - 5) * 3 // 5
    return f"{reason[:head]} ... {reason[-(limit - 5 - head):]}"


def raise_failures(what: str, results: Sequence[MachineResult]) -> None:
    summary = failure_summary(what, results)
    if summary is not None:
        raise MachinesFailed(summary)
