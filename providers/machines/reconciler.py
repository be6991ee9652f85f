"""The machines kind's reconciler: verbs over typed specs and per-machine records, no Pulumi.

- `plan(prior, specs)`: which machines join, redeploy, repair, stay (pure).
- `converge(ctx, specs, prior, leaving)`: run the lifecycle for the machines that need it, carry
  every untouched machine's record forward unchanged, release the machines that leave.
- `release(ctx, items)`: teardown per each machine's mode.
- `observe(ops, records)`: one bulk read; what refresh records (drift is decided here, once).
- `apply_in_place(ctx, old, new, system_id)`: hostname, tags, power settings (read back).
- `check_failures(kind, results)`: a bounded error for Pulumi; the full report goes to stderr.

MaasMachine and MachinePool are thin translations onto these verbs (a MaasMachine is a pool of one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from .drift import identity_drift
from .ports import MachineOps, MachineView
from .progress import report_line
from .records import OWNER_FINGERPRINT, Context, FailCode
from .scheduler import MachineResult, Scheduler
from .spec import MachineIdentity, MachineSpec, PowerType, TeardownMode
from .status import MachineOutcome, Stage

DEPLOYED = "Deployed"
MISSING = "Missing"
REPORT_MAX_FAILURES = 10
REPORT_MAX_CHARS = 4000
REPORT_MAX_REASON = 360  # characters of one machine's reason in the summary (its middle gives way)


class MachineRecord(BaseModel):
    """What state keeps per machine: what diff, drift and teardown need, never a secret (issue 18:
    a few hundred bytes; the spec itself is only in the pool's inputs). Reads old state too (extra
    keys such as notes, stage_seconds, user_data_digest and bundle_digest are dropped)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    hostname: str
    system_id: str | None = None
    status: str | None = None
    """MAAS's status label at the last run or refresh ("Missing": gone from MAAS)."""
    stage: Stage | None = None
    outcome: MachineOutcome | None = None
    node_id: str | None = None
    deploy_fingerprint: str | None = None
    spec_fingerprint: str | None = None
    """MachineSpec.spec_fingerprint of the spec this record was written for: what a pool's diff compares."""
    # The spec's identity (MachineIdentity), so a pool needs no old spec: rename, in place, teardown.
    ipmi_address: str | None = None
    pxe_mac: str | None = None
    power_type: PowerType = PowerType.IPMI
    power_user_path: str | None = None
    site: str | None = None
    profile: str | None = None
    tags: tuple[str, ...] = ()
    teardown_mode: TeardownMode = TeardownMode.FULL_DECOMMISSION
    deploy_attempts: int = 0
    adopted: bool = False
    leaving: bool = False
    """A machine that left its pool but whose release failed: the next up retries it."""
    drift: tuple[str, ...] = ()
    """What refresh found different from the spec (hostname, declared tags); `up` repairs it."""

    @property
    def needs_attention(self) -> bool:
        """Refresh found drift, the last run did not converge, or a release is pending."""
        if self.leaving or self.drift:
            return True
        if not self.system_id:
            return False
        return self.status not in (None, DEPLOYED) or self.outcome not in (None, MachineOutcome.READY)

    def state(self, identity: bool = True) -> dict[str, Any]:
        """The record as state keeps it: defaults left out (a clean create and a clean read write the
        same shape). `identity=False` for a MaasMachine, whose state holds its whole spec anyway."""
        drop = set() if identity else (set(MachineIdentity.model_fields) | {"spec_fingerprint"}) - {"hostname"}
        return self.model_dump(mode="json", exclude_none=True, exclude_defaults=True, exclude=drop) | {
            "hostname": self.hostname
        }

    def identity(self) -> MachineIdentity | None:
        """The identity of the spec this record was written for (None: state older than issue 18)."""
        if self.ipmi_address is None or self.pxe_mac is None or self.site is None or self.profile is None:
            return None
        return MachineIdentity.model_validate({k: getattr(self, k) for k in MachineIdentity.model_fields})

    @staticmethod
    def parse(hostname: str, raw: Any) -> MachineRecord | None:
        """A record from state, or None if state holds nothing usable for it."""
        if not isinstance(raw, Mapping):
            return None
        try:
            return MachineRecord.model_validate({**raw, "hostname": raw.get("hostname") or hostname})
        except ValidationError:
            return None


def parse_records(raw: Any) -> dict[str, MachineRecord]:
    """`machines_state` from (possibly old) state: hostname -> record."""
    if not isinstance(raw, Mapping):
        return {}
    out = {h: MachineRecord.parse(h, r) for h, r in raw.items()}
    return {h: r for h, r in out.items() if r is not None}


@dataclass(frozen=True)
class Plan:
    join: tuple[str, ...] = ()
    redeploy: tuple[str, ...] = ()
    repair: tuple[str, ...] = ()
    stay: tuple[str, ...] = ()
    leave: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, list[str]]:
        return {k: list(getattr(self, k)) for k in ("join", "redeploy", "repair", "stay", "leave")}

    def summary(self) -> str:
        return ", ".join(f"{k} {len(v)}" for k, v in self.as_dict().items() if v) or "nothing to do"


def plan(prior: Mapping[str, MachineRecord], specs: Iterable[MachineSpec]) -> Plan:
    """Which machines join, redeploy, repair, stay, or leave (from prior records and new specs)."""
    wanted = {s.hostname: s for s in specs}
    out: dict[str, list[str]] = {"join": [], "redeploy": [], "repair": [], "stay": []}
    for hostname, spec in sorted(wanted.items()):
        rec = prior.get(hostname)
        if rec is None or not rec.system_id:
            out["join"].append(hostname)
        elif rec.deploy_fingerprint != spec.deploy_fingerprint():
            out["redeploy"].append(hostname)
        elif rec.needs_attention:
            out["repair"].append(hostname)
        else:
            out["stay"].append(hostname)
    leave = sorted(set(prior) - set(wanted))
    return Plan(
        join=tuple(out["join"]),
        redeploy=tuple(out["redeploy"]),
        repair=tuple(out["repair"]),
        stay=tuple(out["stay"]),
        leave=tuple(leave),
    )


def renames(old_specs: Mapping[str, MachineIdentity], specs: Iterable[MachineSpec]) -> dict[str, str]:
    """old hostname -> new hostname for machines renamed in place: the same hardware (PXE MAC)
    under a new name. Without this a rename would release the machine and deploy it again."""
    wanted = {s.hostname: s for s in specs}
    by_mac = {s.pxe_mac: h for h, s in old_specs.items() if h not in wanted}
    return {by_mac[s.pxe_mac]: h for h, s in wanted.items() if h not in old_specs and s.pxe_mac in by_mac}


def rekey(records: Mapping[str, MachineRecord], moved: Mapping[str, str]) -> dict[str, MachineRecord]:
    """Records under their new hostnames (after `renames`)."""
    return {
        moved.get(h, h): r.model_copy(update={"hostname": moved[h]}) if h in moved else r for h, r in records.items()
    }


def written_for(rec: MachineRecord, spec: MachineSpec) -> MachineRecord:
    """`rec`, now recording `spec` (its identity and spec fingerprint); MAAS facts unchanged."""
    return rec.model_copy(update={**dict(spec.identity()), "spec_fingerprint": spec.spec_fingerprint()})


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
    are not touched, and their records are carried forward exactly as they were."""
    p = plan(prior, specs)
    ctx.log(f"machines: {p.summary()}")
    results: list[MachineResult] = []
    if leaving:
        results += _teardown(ctx, leaving)
    todo = [s for s in specs if s.hostname not in p.stay]
    if todo:
        known = {h: r.system_id for h, r in prior.items() if r.system_id}
        results += Scheduler(ctx).onboard(todo, known)
    report(ctx, results)
    by_host = {r.hostname: r for r in results}
    records = {
        s.hostname: record_of(s, by_host.get(s.hostname), ctx.platform_url, prior.get(s.hostname)) for s in specs
    }
    for spec, rec in leaving:  # a failed release stays recorded, so the next up retries it
        r = by_host.get(spec.hostname)
        if r is not None and r.outcome.failed:
            base = rec or MachineRecord(hostname=spec.hostname)
            ident = spec if isinstance(spec, MachineIdentity) else spec.identity()
            records[spec.hostname] = base.model_copy(update={**dict(ident), "leaving": True, "outcome": r.outcome})
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
    fingerprint = view.owner_data.get(OWNER_FINGERPRINT)
    what: list[str] = []
    if view.status.label != DEPLOYED:
        what.append(f"status is {view.status.label} in MAAS")
    if fingerprint is not None and fingerprint != rec.deploy_fingerprint:
        what.append("deployed from other inputs (owner-data fingerprint)")
    if spec is not None:
        what += identity_drift(spec, view)
    update: dict[str, Any] = {"status": view.status.label, "drift": tuple(what)}
    if what:
        update["outcome"] = MachineOutcome.DRIFTED
    elif rec.outcome is MachineOutcome.DRIFTED and rec.drift:
        update["outcome"] = MachineOutcome.READY  # the drift was undone by hand before any up
    return rec.model_copy(update=update)


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
    """A reason cut to `limit` characters in its middle: its head names the machine and what failed, its
    end says what to do (a node's output tail in between is what gives)."""
    if len(reason) <= limit:
        return reason
    head = (limit - 5) * 3 // 5
    return f"{reason[:head]} ... {reason[-(limit - 5 - head):]}"


def raise_failures(what: str, results: Sequence[MachineResult]) -> None:
    summary = failure_summary(what, results)
    if summary is not None:
        raise MachinesFailed(summary)
