"""The machines kind's plan: the record state keeps per machine, the one rule that says what a change of
a machine's spec does (`change`), and the plan of a run (`plan`). Pure: no Pulumi, no MAAS, no clients.

Every place that answers "does this change redeploy a machine?" reads this module and restates nothing:
the MaasMachine adapter's diff and descriptor, the pool's plan and diff, the lifecycle's redeploy trigger
(`redeploy_due`, from the fingerprints we keep in MAAS owner data) and the merge-request note.

What each `Change` does (MaasMachine | MachinePool):
- `stay`: nothing (same | same; the pool may change for other machines).
- `in_place`: hostname, tags, power settings set in MAAS and read back; teardown mode and retry
  generation only recorded (update | update).
- `redeploy`: released per the profile's erase mode, then deployed again, rolling at most
  `batch_max_parallel` at once (update | update).
- `reidentify`: the spec names other hardware: the machine it had is released per its teardown mode,
  then the hardware the spec names now is found (or created) and deployed (replace, delete before
  replace | the old hardware leaves, the new joins, in one update).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from .spec import MachineIdentity, MachineSpec, PowerType, TeardownMode
from .status import MachineOutcome, Stage

DEPLOYED = "Deployed"


class Change(StrEnum):
    """What a changed spec does to its machine, from least to most (`worst` picks the strongest)."""

    STAY = "stay"
    IN_PLACE = "in_place"
    REDEPLOY = "redeploy"
    REIDENTIFY = "reidentify"

    @property
    def rank(self) -> int:
        return list(Change).index(self)


def worst(changes: Iterable[Change]) -> Change:
    return max(changes, key=lambda c: c.rank, default=Change.STAY)


@dataclass(frozen=True)
class FieldRule:
    change: Change
    why: str


# Every MachineSpec field and what its change does (tests/machines/test_plan.py walks them all).
FIELD_RULES: dict[str, FieldRule] = {
    "hostname": FieldRule(Change.IN_PLACE, "renamed in MAAS (the same hardware: a pool finds it by its PXE MAC)"),
    "tags": FieldRule(Change.IN_PLACE, "tags set in MAAS (declared tags removed, new ones added)"),
    "power_type": FieldRule(Change.IN_PLACE, "MAAS power type set and read back"),
    "power_user_path": FieldRule(Change.IN_PLACE, "BMC credentials re-read from Vault and set in MAAS"),
    "teardown_mode": FieldRule(Change.IN_PLACE, "recorded: only what a later release does changes"),
    "retry_generation": FieldRule(Change.IN_PLACE, "recorded: a fresh deploy retry budget for the next run"),
    "ipmi_address": FieldRule(Change.IN_PLACE, "the BMC re-addressed: MAAS power address set and read back (the "
                                               "PXE MAC names the hardware; a BMC address is how to reach its power)"),
    "pxe_mac": FieldRule(Change.REIDENTIFY, "another PXE MAC names other hardware"),
    "site": FieldRule(Change.REIDENTIFY, "another site is another MAAS region"),
    "sku": FieldRule(Change.REDEPLOY, "the hardware is checked against another SKU (preflight, validation)"),
    "profile": FieldRule(Change.REDEPLOY, "another site profile: its policy and bundle"),
    "pxe_interface": FieldRule(Change.REDEPLOY, "another boot interface: checked and configured at deploy"),
    "storage": FieldRule(Change.REDEPLOY, "the storage layout is applied only by a deploy"),
    "roce_links": FieldRule(Change.REDEPLOY, "RoCE addresses are configured only by a deploy"),
    "deploy": FieldRule(Change.REDEPLOY, "OS, kernel and bootstrap bundle are installed only by a deploy"),
}

# A pool's or a MaasMachine's inputs besides the machine specs: none of them touches a machine.
SHARED_INPUT_RULES: dict[str, FieldRule] = {
    "pool": FieldRule(Change.IN_PLACE, "a label, recorded: renaming the pool keeps its machines"),
    "connection": FieldRule(Change.IN_PLACE, "endpoints and Vault paths: read by the next call"),
    "policy": FieldRule(Change.IN_PLACE, "the profile's lifecycle policy: read by the next run"),
    "owner": FieldRule(Change.IN_PLACE, "the managing resource's name, written on each machine it manages"),
}

# The spec fields each fingerprint covers (what a deploy installs; what a deploy checks the machine against).
_DEPLOY_FIELDS = ("deploy", "storage", "roce_links")
_CHECK_FIELDS = ("sku", "profile", "pxe_interface")


def fields_of(change: Change) -> tuple[str, ...]:
    return tuple(f for f, rule in FIELD_RULES.items() if rule.change is change)


def checks_fingerprint(spec: MachineSpec) -> str:
    """Digest of what a deploy checks the machine against (SKU, profile, boot interface)."""
    material = {f: getattr(spec, f) for f in _CHECK_FIELDS}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]


def fingerprints(spec: MachineSpec) -> dict[str, str]:
    """The fingerprints a deploy records (in MAAS owner data and in state): a redeploy is due when one
    recorded differs from the spec's. `deploy` is the long-standing one (deploy, storage, RoCE)."""
    return {"deploy": spec.deploy_fingerprint(), "checks": checks_fingerprint(spec)}


def redeploy_due(recorded: Mapping[str, str | None], spec: MachineSpec) -> list[str]:
    """The recorded fingerprints that differ from the spec's (empty: no redeploy). A fingerprint not
    recorded (a machine deployed before it existed) decides nothing: the next deploy records it."""
    wanted = fingerprints(spec)
    return [k for k, v in recorded.items() if v is not None and k in wanted and v != wanted[k]]


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
    checks_fingerprint: str | None = None
    """`checks_fingerprint(spec)` of the last deploy (None: deployed before it was recorded)."""
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

    def recorded_fingerprints(self) -> dict[str, str | None]:
        return {"deploy": self.deploy_fingerprint, "checks": self.checks_fingerprint}

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

    def wire(self) -> str:
        """The record as a pool's `machines_state` keeps it: one canonical JSON string of `state()` per
        hostname, as the pool's `machines` input keeps each spec. As a mapping of ~15 values, the SDK and the CLI
        carried each at every hop: a no-op up of 1,024 machines was 0.7-0.9 s slower (issue 29, docs/scale.md)."""
        return json.dumps(self.state(), sort_keys=True, separators=(",", ":"))

    @staticmethod
    def parse(hostname: str, raw: Any) -> MachineRecord | None:
        """A record from state (a mapping, or the JSON string `wire` writes), or None if state holds nothing
        usable for it."""
        raw = record_fields(raw)
        if raw is None:
            return None
        try:
            return MachineRecord.model_validate({**raw, "hostname": raw.get("hostname") or hostname})
        except ValidationError:
            return None


def record_fields(raw: Any) -> Mapping[str, Any] | None:
    """One machine's record as state holds it, as a mapping: pools wrote mappings before they wrote the JSON
    string of `MachineRecord.wire`; None for anything else."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):  # state edited by hand: not a record
            return None
    return raw if isinstance(raw, Mapping) else None


def parse_records(raw: Any) -> dict[str, MachineRecord]:
    """`machines_state` from (possibly old) state: hostname -> record."""
    if not isinstance(raw, Mapping):
        return {}
    out = {h: MachineRecord.parse(h, r) for h, r in raw.items()}
    return {h: r for h, r in out.items() if r is not None}


def written_for(rec: MachineRecord, spec: MachineSpec) -> MachineRecord:
    """`rec`, now recording `spec` (its identity and spec fingerprint); MAAS facts, and the fingerprints
    of the last deploy, unchanged."""
    return rec.model_copy(update={**dict(spec.identity()), "spec_fingerprint": spec.spec_fingerprint()})


# ------------------------------------------------------------------------------------------------
# The rule


_COVERED = {"deploy": _DEPLOY_FIELDS, "checks": _CHECK_FIELDS}


def changed_fields(record: MachineRecord, new: MachineSpec, old_spec: MachineSpec | None = None) -> dict[str, Change]:
    """The fields of `new` that differ from what the machine's record was written for, each with what its
    change does. Which fields: from `old_spec` when the caller has it (a MaasMachine's state, a pool's old
    inputs), else from the record (identity fields one by one; deploy and check fields through the
    fingerprints of the last deploy). What they do: the field's rule, and a redeploy whenever a fingerprint
    of the last deploy differs (`redeploy_due`, the lifecycle's trigger too); a check field (SKU, profile,
    boot interface) changed on a machine whose last deploy recorded no check fingerprint is only recorded,
    as the lifecycle could not see it."""
    due = set(redeploy_due(record.recorded_fingerprints(), new))
    if old_spec is not None:
        fields = [f for f in FIELD_RULES if getattr(old_spec, f) != getattr(new, f)]
    else:
        ident = record.identity()
        fields = [f for f in MachineIdentity.model_fields if ident is not None and getattr(ident, f) != getattr(new, f)]
        if not fields and not due and record.spec_fingerprint not in (None, new.spec_fingerprint()):
            fields.append("retry_generation")  # the one spec field a record keeps no trace of
    out: dict[str, Change] = {}
    for f in fields:
        rule = FIELD_RULES[f].change
        if rule is Change.REDEPLOY and f in _CHECK_FIELDS and record.checks_fingerprint is None:
            rule = Change.IN_PLACE  # deployed before checks were recorded: MAAS cannot tell; the next deploy does
        out[f] = rule
    for fp in due:  # the last deploy was from other inputs than the fields show (or no old spec to show them)
        if not any(f in out and out[f] is Change.REDEPLOY for f in _COVERED[fp]):
            out.update({f: Change.REDEPLOY for f in _COVERED[fp] if out.get(f) is not Change.REIDENTIFY})
    return out


def change(record: MachineRecord | None, new: MachineSpec, old_spec: MachineSpec | None = None) -> Change:
    """What `up` does to a machine recorded as `record` (and declared as `old_spec`, when known) whose
    spec is now `new`. No record: nothing known of it, found (or created) and deployed."""
    if record is None:
        return Change.REIDENTIFY
    return worst(changed_fields(record, new, old_spec).values())


# ------------------------------------------------------------------------------------------------
# A run's plan


@dataclass(frozen=True)
class Plan:
    join: tuple[str, ...] = ()
    reidentify: tuple[str, ...] = ()
    redeploy: tuple[str, ...] = ()
    repair: tuple[str, ...] = ()
    in_place: tuple[str, ...] = ()
    stay: tuple[str, ...] = ()
    leave: tuple[str, ...] = ()

    KINDS = ("join", "reidentify", "redeploy", "repair", "in_place", "stay", "leave")

    def as_dict(self) -> dict[str, list[str]]:
        return {k: list(getattr(self, k)) for k in self.KINDS}

    def summary(self) -> str:
        return ", ".join(f"{k.replace('_', ' ')} {len(v)}" for k, v in self.as_dict().items() if v) or "nothing to do"

    @property
    def untouched(self) -> tuple[str, ...]:
        """Machines the lifecycle leaves alone (in-place edits are the adapter's, after the run)."""
        return self.stay + self.in_place


def plan(prior: Mapping[str, MachineRecord], specs: Iterable[MachineSpec]) -> Plan:
    """Per machine: join (nothing in MAAS yet), reidentify, redeploy, repair (drift or an unfinished
    run), in place, stay; and which leave (recorded, no longer declared)."""
    wanted = {s.hostname: s for s in specs}
    out: dict[str, list[str]] = {k: [] for k in Plan.KINDS if k != "leave"}
    for hostname, spec in sorted(wanted.items()):
        rec = prior.get(hostname)
        if rec is None or not rec.system_id:
            out["join"].append(hostname)
            continue
        what = change(rec, spec)
        if what is Change.REIDENTIFY:
            out["reidentify"].append(hostname)
        elif what is Change.REDEPLOY:
            out["redeploy"].append(hostname)
        elif rec.needs_attention:
            out["repair"].append(hostname)
        elif what is Change.IN_PLACE:
            out["in_place"].append(hostname)
        else:
            out["stay"].append(hostname)
    return Plan(**{k: tuple(v) for k, v in out.items()}, leave=tuple(sorted(set(prior) - set(wanted))))


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
