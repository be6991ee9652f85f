"""MaasMachine: one MAAS machine, one resource (the dev lab's way; prod uses MachinePool).

Thin adapter: Pulumi dicts -> `MachineInputs` -> the machines reconciler (a pool of one) -> outputs.
What a changed input means is the machines plan's rule (providers/machines/plan.py; `MAAS_MACHINE` is its
Pulumi view: replace only for other hardware); `read` records MAAS's real state so
refresh finds drift; destroy releases per the teardown mode and never deletes the machine from MAAS.
State per machine is its `MachineRecord` at the top level of the outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, UpdateResult

from providers.common import plain
from providers.kind import KindDescriptor, register
from providers.machines import reconciler as rc
from providers.machines.plan import FIELD_RULES, SHARED_INPUT_RULES, Change, changed_fields, fields_of
from providers.machines.provider import MachinesProvider
from providers.machines.resource_io import (
    DROPPED_OUTPUTS,
    MachineInputs,
    canonical,
    machine_record,
    machine_spec_of,
)

MAAS_MACHINE = register(
    KindDescriptor(
        name="MaasMachine",
        # The plan's rule (providers/machines/plan.py), as Pulumi sees it: a spec naming other hardware is
        # a new MAAS machine (replace); everything else, redeploys included, updates this one.
        identity=("connection.maas.site", *(f"machine.{f}" for f in fields_of(Change.REIDENTIFY))),
        in_place=(
            *(f"machine.{f}" for f, rule in FIELD_RULES.items() if rule.change is not Change.REIDENTIFY),
            *SHARED_INPUT_RULES,
        ),
        delete_before_replace=True,
        summary_outputs=("system_id", "status", "outcome", "node_id"),
        doc="One MAAS machine, found by its system_id; what a change does is the machines plan's rule.",
        notes={
            **{f"machine.{f}": f"{rule.change.value}: {rule.why}" for f, rule in FIELD_RULES.items()},
            **{k: f"{rule.change.value}: {rule.why}" for k, rule in SHARED_INPUT_RULES.items()},
        },
    )
)
INPUTS = tuple(MachineInputs.model_fields)


class MaasMachineProvider(MachinesProvider[MachineInputs]):
    descriptor = MAAS_MACHINE
    spec_model = MachineInputs
    inputs = tuple(SHARED_INPUT_RULES)  # the machine spec is compared by the plan's rule, below
    kept_inputs = INPUTS

    def _session(self, inputs: MachineInputs) -> Any:
        return self.session(inputs.connection, inputs.policy, f"machine {inputs.machine.hostname}", inputs.owner)

    def comparable(self, props: Mapping[str, Any]) -> dict[str, Any]:
        return canonical(MachineInputs, props, self.inputs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        d = self.input_diff(olds, news)
        record, new = machine_record(olds, _id), machine_spec_of(news)
        if new is None:  # only known after apply (a preview): an update that may redeploy, decided at up
            return DiffResult(changes=True, replaces=list(d.replaces), delete_before_replace=True)
        if record is None:  # state this version can't read: the safe reading, a new machine
            return DiffResult(changes=True, replaces=["machine"], delete_before_replace=True)
        fields = changed_fields(record, new, machine_spec_of(olds))
        replaces = [f"machine.{f}" for f, c in fields.items() if c is Change.REIDENTIFY]
        changed = bool(fields) or d.changed or record.needs_attention  # drift from refresh: up repairs it
        return DiffResult(changes=changed, replaces=[*d.replaces, *replaces], delete_before_replace=True)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = self.spec_of(props)
        with self._session(inputs) as ctx:
            done = rc.converge(ctx, [inputs.machine], {})
        rc.raise_failures(f"machine {inputs.machine.hostname}", done.results)
        record = done.records[inputs.machine.hostname]
        if not record.system_id:  # converged without a MAAS machine: a lifecycle bug, never an empty id
            raise rc.MachinesFailed(f"machine {inputs.machine.hostname}: converged without a system_id")
        return CreateResult(record.system_id, self.outputs(props, record.state(identity=False)))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = self.spec_of(news)
        spec, old = inputs.machine, machine_spec_of(olds)
        prior = machine_record(olds, _id)
        if prior is not None and prior.hostname != spec.hostname:
            prior = prior.model_copy(update={"hostname": spec.hostname})  # renamed in place: same machine
        with self._session(inputs) as ctx:
            done = self.update_sequence(
                ctx, f"machine {spec.hostname}", [spec], {spec.hostname: prior} if prior else {},
                {spec.hostname: old.identity() if old is not None else None}, system_ids={spec.hostname: _id},
                claim=plain(olds).get("owner") != inputs.owner)  # its first update since it records its name
        return UpdateResult(self.outputs(news, done.records[spec.hostname].state(identity=False)))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        state = {k: v for k, v in plain(props).items() if k not in DROPPED_OUTPUTS}
        inputs = self.spec_of(state)
        record = machine_record(state, id_)
        if record is None:
            return ReadResult(id_, state)
        fresh = rc.observe(self.maas(inputs.connection), {record.hostname: record},
                           {record.hostname: inputs.machine})[record.hostname]
        return ReadResult(id_, self.outputs(state, fresh.state(identity=False)))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        inputs = self.spec_of(props)
        record = machine_record(props, id_)
        with self._session(inputs) as ctx:
            results = rc.release(ctx, [(inputs.machine, record)])
        rc.raise_failures(f"machine {inputs.machine.hostname}", results)


class MaasMachine(Resource, module="gpuaas", name="MaasMachine"):
    system_id: pulumi.Output[str]
    status: pulumi.Output[str]
    node_id: pulumi.Output[str]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            MaasMachineProvider(),
            name,
            {"system_id": None, "status": None, "stage": None, "node_id": None, **props},
            opts,
        )
