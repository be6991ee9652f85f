"""MaasMachine: one MAAS machine, one resource (the dev lab's way; prod uses MachinePool).

Thin adapter: Pulumi dicts -> `MachineInputs` -> the machines reconciler (a pool of one) -> outputs.
What a changed input means is the machines plan's rule (providers/machines/plan.py; `MAAS_MACHINE` is its
Pulumi view: replace only for other hardware); `read` records MAAS's real state so
refresh finds drift; destroy releases per the teardown mode and never deletes the machine from MAAS.
State per machine is its `MachineRecord` at the top level of the outputs.
"""

from __future__ import annotations

from types import ModuleType
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

from clients.vault import credentials_from_config
from providers.common import plain
from providers.kind import KindDescriptor, register
from providers.machines import reconciler as rc
from providers.machines.drift import repair_identity
from providers.machines.plan import FIELD_RULES, SHARED_INPUT_RULES, Change, changed_fields, fields_of
from providers.machines.resource_io import (
    DROPPED_OUTPUTS,
    MachineInputs,
    canonical,
    check_inputs,
    machine_record,
    machine_spec_of,
    time_scale_from,
    typed_inputs,
)


def _runtime() -> ModuleType:
    """The machines runtime (MAAS, platform, Vault and S3 clients): imported by the provider's
    `configure`, never by the program (importing the clients cost each program process ~0.5 s)."""
    from providers.machines import runtime

    return runtime


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


class MaasMachineProvider(ResourceProvider):
    serialize_as_secret_always = False  # pickled by reference; holds no secret

    def configure(self, req: ConfigureRequest) -> None:
        self._credentials = credentials_from_config(req.config)
        self._time_scale = time_scale_from(req.config)
        # The clients load here, not in the first call needing them: the SDK configures under its lock,
        # and calls run concurrently; a first import racing another provider's unpickling can meet a
        # half-initialised module ("partially initialized module ... circular import", seen in refresh).
        _runtime()

    def _session(self, inputs: MachineInputs) -> Any:
        creds, scale = getattr(self, "_credentials", None), getattr(self, "_time_scale", 1.0)
        label = f"machine {inputs.machine.hostname}"
        return _runtime().session(inputs.connection, inputs.policy, creds, scale, label=label, owner=inputs.owner)

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = check_inputs(MachineInputs, news, "MaasMachine")
        return CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        shared = tuple(SHARED_INPUT_RULES)
        d = MAAS_MACHINE.diff(canonical(MachineInputs, olds, shared), canonical(MachineInputs, news, shared),
                              inputs=shared)
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
        inputs = typed_inputs(MachineInputs, props)
        with self._session(inputs) as ctx:
            done = rc.converge(ctx, [inputs.machine], {})
        rc.raise_failures(f"machine {inputs.machine.hostname}", done.results)
        record = done.records[inputs.machine.hostname]
        if not record.system_id:  # converged without a MAAS machine: a lifecycle bug, never an empty id
            raise rc.MachinesFailed(f"machine {inputs.machine.hostname}: converged without a system_id")
        return CreateResult(record.system_id, {**_inputs(props), **record.state(identity=False)})

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = typed_inputs(MachineInputs, news)
        spec = inputs.machine
        prior = machine_record(olds, _id)
        if prior is not None and prior.hostname != spec.hostname:
            prior = prior.model_copy(update={"hostname": spec.hostname})  # renamed in place: same machine
        with self._session(inputs) as ctx:
            done = rc.converge(ctx, [spec], {spec.hostname: prior} if prior else {})
            rc.raise_failures(f"machine {spec.hostname}", done.results)
            old = machine_spec_of(olds)
            rc.apply_in_place(ctx, old.identity() if old is not None else None, spec, _id)
            repair_identity(ctx.ops, [(spec, _id)])  # renamed / a declared tag removed by hand
            if plain(olds).get("owner") != inputs.owner:  # its first update since it records its name
                rc.claim(ctx, [_id])
        return UpdateResult({**_inputs(news), **done.records[spec.hostname].state(identity=False)})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        state = {k: v for k, v in plain(props).items() if k not in DROPPED_OUTPUTS}
        inputs = typed_inputs(MachineInputs, state)
        record = machine_record(state, id_)
        if record is None:
            return ReadResult(id_, state)
        maas = _runtime().maas_client(
            inputs.connection, getattr(self, "_credentials", None), time_scale=getattr(self, "_time_scale", 1.0)
        )
        fresh = rc.observe(maas, {record.hostname: record}, {record.hostname: inputs.machine})[record.hostname]
        return ReadResult(id_, {**_inputs(state), **fresh.state(identity=False)})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        inputs = typed_inputs(MachineInputs, props)
        record = machine_record(props, id_)
        with self._session(inputs) as ctx:
            results = rc.release(ctx, [(inputs.machine, record)])
        rc.raise_failures(f"machine {inputs.machine.hostname}", results)


def _inputs(props: dict[str, Any]) -> dict[str, Any]:
    raw = plain(props)
    return {k: raw[k] for k in INPUTS if k in raw}


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
