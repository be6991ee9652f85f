"""What a change does to machines, for the note: a MaasMachine step's and a MachinePool step's effect per
machine, read from the machines plan (providers/machines/plan.py) and the same state the providers' diffs
read, so the note says what `up` will do."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from preview_note.changes import Action, Change
from preview_note.values import changed_paths, is_unknown, natural, normalize
from providers.machines.plan import Change as MachineChange
from providers.machines.plan import changed_fields, rekey, renames, worst
from providers.machines.resource_io import machine_record, machine_spec_of, pool_machines, pool_records
from providers.machines.spec import LifecyclePolicy, MachineSpec

_DEFAULTS = LifecyclePolicy.model_validate({})  # the lifecycle's own defaults, where a policy does not say


class PoolView(BaseModel):
    model_config = ConfigDict(frozen=True)

    joins: tuple[str, ...] = ()
    reidentifies: tuple[tuple[str, str], ...] = ()  # (hostname, why): other hardware under that name
    redeploys: tuple[tuple[str, str], ...] = ()  # (hostname, why)
    leaves: tuple[tuple[str, str], ...] = ()  # (hostname, system_id or "")
    updates: tuple[tuple[str, str], ...] = ()  # (hostname, fields changed in place)
    unchanged: int = 0
    unknown: bool = False  # the new machine list is only known after apply
    pending: tuple[str, ...] = ()  # staying machines whose new spec is only known after apply
    drifted: tuple[tuple[str, str], ...] = ()  # (hostname, what drifted): the refreshed state's records


def _specs(inputs: dict[str, Any]) -> dict[str, MachineSpec]:
    """hostname -> typed spec of a pool's `machines` input, read against its `template` (entries unknown or
    unreadable left out)."""
    out = {}
    for host, raw in pool_machines(inputs.get("machines"), inputs.get("template")).items():
        try:
            out[host] = MachineSpec.model_validate(raw)
        except ValidationError:
            continue
    return out


def why(fields: dict[str, MachineChange], what: MachineChange, old: MachineSpec | None = None,
         new: MachineSpec | None = None) -> str:
    """The fields whose change does `what`, each down to its changed leaves when both specs are known
    (`deploy.hwe_kernel`, not `deploy`)."""
    names = [f for f, c in fields.items() if c is what]
    if old is not None and new is not None:
        before, after = old.model_dump(mode="json"), new.model_dump(mode="json")
        leaves = [p for f in names for p, _, _ in changed_paths({f: before[f]}, {f: after[f]})]
        names = [p for p in dict.fromkeys(p.split("[")[0] for p in leaves)] or names
    return ", ".join(names) + " changed"


def machine_specs_of(change: Change) -> tuple[MachineSpec | None, MachineSpec | None]:
    """A MaasMachine step's (old, new) specs (None where unknown or unreadable)."""
    old_state = {**change.inputs("old"), **(change.old.outputs if change.old else {})}
    return machine_spec_of(old_state), machine_spec_of(change.inputs("new"))


def machine_change(change: Change) -> tuple[MachineChange | None, dict[str, MachineChange]]:
    """A MaasMachine step's effect on its machine, by the machines plan (providers/machines/plan.py) from the
    same state the provider's diff reads: (the change, each changed field's change); (None, {}) when the
    new spec is only known after apply or the state is unreadable."""
    new = machine_spec_of(change.inputs("new"))
    old_state = {**change.inputs("old"), **(change.old.outputs if change.old else {})}
    record = machine_record(old_state, old_state.get("system_id"))
    if new is None or record is None:
        return None, {}
    fields = changed_fields(record, new, machine_spec_of(old_state))
    return worst(fields.values()), fields


def pool_view(change: Change) -> PoolView:
    """A MachinePool step per machine, by the machines plan from the pool's records (what its provider's
    diff reads) and, to name the fields, its old inputs' specs."""
    old_in, new_in = change.inputs("old"), change.inputs("new")
    old_out = change.old.outputs if change.old else {}
    records = pool_records({**old_in, **old_out})
    old_specs = _specs(old_in)
    system_ids = {h: r.system_id or "" for h, r in records.items()}
    known = records.keys() | old_specs.keys()
    if change.action is Action.DELETE:
        return PoolView(leaves=tuple((h, system_ids.get(h, "")) for h in sorted(known, key=natural)))
    new_raw = new_in.get("machines")
    if is_unknown(new_raw) or is_unknown(new_in.get("template")):
        return PoolView(unknown=True)
    new = _specs(new_in)
    # One spec per hostname: a spec known only after apply still says which machine it is (its key).
    unknown = {h for h, v in new_raw.items() if is_unknown(v)} if isinstance(new_raw, dict) else set()
    if change.action is Action.CREATE:
        return PoolView(joins=tuple(sorted(new.keys() | unknown, key=natural)))
    moved = renames({h: i for h, r in records.items() if (i := r.identity()) is not None}, new.values())
    prior = rekey(records, moved)
    back = {v: k for k, v in moved.items()}
    wanted = new.keys() | unknown
    drifted = tuple((h, "; ".join(r.drift) or "drifted")
                    for h, r in sorted(prior.items(), key=lambda kv: natural(kv[0]))
                    if r.outcome is not None and r.outcome.value == "drifted" and h in wanted)
    joins, reidentifies, redeploys, updates, unchanged = [], [], [], [], 0
    for host, spec in sorted(new.items(), key=lambda kv: natural(kv[0])):
        rec = prior.get(host)
        if rec is None or not rec.system_id:
            joins.append(host)
            continue
        old_spec = old_specs.get(back.get(host, host))
        fields = changed_fields(rec, spec, old_spec)
        if host in back:
            fields = {"hostname": MachineChange.IN_PLACE, **fields}
        what = worst(fields.values())
        if what is MachineChange.REIDENTIFY:
            reidentifies.append((host, why(fields, what, old_spec, spec)))
        elif what is MachineChange.REDEPLOY:
            redeploys.append((host, why(fields, what, old_spec, spec)))
        elif what is MachineChange.IN_PLACE:
            updates.append((host, ", ".join(fields)))
        elif host not in dict(drifted):
            unchanged += 1
    return PoolView(
        joins=tuple(joins),
        reidentifies=tuple(reidentifies),
        redeploys=tuple(redeploys),
        updates=tuple(updates),
        leaves=tuple((h, system_ids.get(back.get(h, h), "")) for h in sorted(prior.keys() - wanted, key=natural)),
        unchanged=unchanged,
        pending=tuple(sorted(unknown & prior.keys(), key=natural)),
        drifted=drifted,
    )


def redeploy_terms(change: Change) -> str:
    """What a redeploy does to data disks and how fast it rolls: the new policy's release erase mode and
    batch_max_parallel (the lifecycle's own defaults when the policy does not say)."""
    policy = change.inputs("new").get("policy")
    policy = policy if isinstance(policy, dict) else {}
    erase = policy.get("release_erase_mode") or _DEFAULTS.release_erase_mode.value
    batch = normalize(policy.get("batch_max_parallel") or _DEFAULTS.batch_max_parallel)
    disks = "data disks kept" if erase == "none" else f"data disks erased ({erase} erase)"
    return f"{disks}; rolling, at most {batch} at once"
