"""MachinePool: many machines of one site/profile in one resource, driven concurrently.

The dynamic provider server runs at most 4 provider calls at once (DESIGN.md §3.1), so a fleet can't
be one blocking call per machine. A pool runs the machines reconciler over all its machines with
its own bound, the profile's `batch_max_parallel`: adding machines onboards only the new ones; a
changed deploy input redeploys the affected machines in rolling batches; machines that leave are
released per their teardown mode; untouched machines keep their records exactly; one failing
machine never stops the others. The pool itself is never replaced (descriptor `MACHINE_POOL`):
per machine, the plan decides (join, redeploy, repair, stay, leave).
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)
from pydantic import ValidationError

from clients.vault import credentials_from_config
from providers.common import plain
from providers.kind import KindDescriptor, register
from providers.machines import reconciler as rc
from providers.machines.drift import repair_identity
from providers.machines.resource_io import PoolInputs, canonical, check_inputs, typed_inputs
from providers.machines.runtime import maas_client, session, time_scale_from
from providers.machines.spec import MachineSpec

MACHINE_POOL = register(
    KindDescriptor(
        name="MachinePool",
        identity=(),
        in_place=("pool", "machines", "connection", "policy"),
        summary_outputs=("counts",),
        doc="Many machines of one site/profile; never replaced: each machine is planned on its own.",
        notes={
            "machines": "per machine: join, redeploy (MaasMachine's replace rules), repair, stay or leave",
            "pool": "a label: renaming the pool keeps its machines",
        },
    )
)
INPUTS = tuple(PoolInputs.model_fields)


def pool_plan(old_machines: dict[str, dict[str, Any]], new: PoolInputs) -> dict[str, list[str]]:
    """Which machines join, redeploy, repair, stay, or leave (from old state and new inputs)."""
    return rc.plan(rc.parse_records(old_machines), new.machines).as_dict()


class MachinePoolProvider(ResourceProvider):
    serialize_as_secret_always = False

    def configure(self, req: ConfigureRequest) -> None:
        self._credentials = credentials_from_config(req.config)
        self._time_scale = time_scale_from(req.config)

    def _session(self, inputs: PoolInputs) -> Any:
        creds, scale = getattr(self, "_credentials", None), getattr(self, "_time_scale", 1.0)
        return session(inputs.connection, inputs.policy, creds, scale, label=f"pool {inputs.pool}")

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = check_inputs(PoolInputs, news, "MachinePool")
        return CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        d = MACHINE_POOL.diff(canonical(PoolInputs, olds), canonical(PoolInputs, news), inputs=INPUTS)
        records = rc.parse_records(plain(olds).get("machines_state"))
        attention = any(r.needs_attention for r in records.values())  # drift, or a release to retry
        return DiffResult(changes=d.changed or attention, replaces=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = typed_inputs(PoolInputs, props)
        with self._session(inputs) as ctx:
            done = rc.converge(ctx, inputs.machines, {})
        rc.raise_failures(f"pool {inputs.pool}", done.results)
        return CreateResult(f"pool-{inputs.connection.maas.site}-{inputs.pool}", _outputs(props, done.records))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = typed_inputs(PoolInputs, news)
        old_specs = _old_specs(olds)
        moved = rc.renames(old_specs, inputs.machines)  # renamed in place, not released and redeployed
        prior = rc.rekey(rc.parse_records(plain(olds).get("machines_state")), moved)
        old_specs = {moved.get(h, h): s for h, s in old_specs.items()}
        wanted = {m.hostname for m in inputs.machines}
        leaving = [(s, prior.get(h)) for h, s in old_specs.items() if h not in wanted]
        with self._session(inputs) as ctx:
            done = rc.converge(ctx, inputs.machines, prior, leaving)
            rc.raise_failures(f"pool {inputs.pool}", done.results)
            for spec in inputs.machines:
                record = done.records[spec.hostname]
                if record.system_id and spec.hostname in old_specs:
                    rc.apply_in_place(ctx, old_specs[spec.hostname], spec, record.system_id)
            # Renamed / a declared tag removed by hand: one bulk read, repaired and read back.
            ids = {s.hostname: done.records[s.hostname].system_id for s in inputs.machines}
            repair_identity(ctx.ops, [(s, sid) for s in inputs.machines if (sid := ids[s.hostname])])
        return UpdateResult(_outputs(news, done.records))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        state = plain(props)
        inputs = typed_inputs(PoolInputs, state)
        records = rc.parse_records(state.get("machines_state"))
        maas = maas_client(
            inputs.connection, getattr(self, "_credentials", None), time_scale=getattr(self, "_time_scale", 1.0)
        )
        specs = {m.hostname: m for m in inputs.machines}
        return ReadResult(id_, _outputs(state, rc.observe(maas, records, specs)))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        inputs = typed_inputs(PoolInputs, props)
        records = rc.parse_records(plain(props).get("machines_state"))
        with self._session(inputs) as ctx:
            results = rc.release(ctx, [(m, records.get(m.hostname)) for m in inputs.machines])
        rc.raise_failures(f"pool {inputs.pool}", results)


def _old_specs(olds: dict[str, Any]) -> dict[str, MachineSpec]:
    out: dict[str, MachineSpec] = {}
    for raw in plain(olds).get("machines") or ():
        try:
            spec = MachineSpec.model_validate(raw)
        except ValidationError:
            continue  # a spec this version can't read: it can't be released by spec either
        out[spec.hostname] = spec
    return out


def _outputs(props: dict[str, Any], records: dict[str, rc.MachineRecord]) -> dict[str, Any]:
    raw = plain(props)
    counts: dict[str, int] = {}
    for r in records.values():
        key = r.outcome.value if r.outcome else "unknown"
        counts[key] = counts.get(key, 0) + 1
    return {
        **{k: raw[k] for k in INPUTS if k in raw},
        "machines_state": {h: r.state() for h, r in records.items()},
        "counts": counts,
    }


class MachinePool(Resource, module="gpuaas", name="MachinePool"):
    machines_state: pulumi.Output[dict]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(MachinePoolProvider(), name, {"machines_state": None, "counts": None, **props}, opts)
