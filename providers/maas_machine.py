"""MaasMachine: one MAAS machine, one resource (the dev lab's way; prod uses MachinePool).

Thin adapter: Pulumi dicts -> `MachineInputs` -> the lifecycle scheduler -> outputs. `diff` says
which changes redeploy (replace, delete-before-replace: a machine can't be held twice) and which are
in place (tags, hostname, power parameters, hardware sync interval, teardown mode); `read` reports
MAAS's real state so `refresh` finds drift (a machine released or redeployed by hand).
Destroy releases per the teardown mode and never deletes the machine from MAAS.
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

from clients.vault import credentials_from_config
from providers.common import plain
from providers.machines.resource_io import (
    MachineInputs,
    any_failed,
    check_inputs,
    failure_report,
    machine_state,
)
from providers.machines.runtime import build_context, maas_client, time_scale_from
from providers.machines.scheduler import Scheduler
from providers.machines.status import MachineOutcome

# Machine fields whose change is an in-place update; every other machine field redeploys.
IN_PLACE = frozenset({"tags", "hostname", "power_type", "power_user_path", "ipmi_address", "teardown_mode"})
IN_PLACE_POLICY = frozenset(
    {
        "hardware_sync_interval",
        "release_fallback_no_erase",
        "release_erase_mode",
        "batch_max_parallel",
        "enrollment_token_ttl_seconds",
        "max_deploy_retry_attempts",
        "enable_deploy_retry_on_datasource_failure",
        "auto_claim_single_new_machine",
        "strict_pxe_preflight",
        "require_hw_sync",
        "commissioning_scripts",
        "testing_scripts",
    }
)


def redeploy_reasons(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Top-level machine fields whose change means release + deploy again."""
    old_m, new_m = old.get("machine", {}), new.get("machine", {})
    return sorted(f"machine.{k}" for k in set(old_m) | set(new_m) if k not in IN_PLACE and old_m.get(k) != new_m.get(k))


def in_place_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    changed = [f"machine.{k}" for k in IN_PLACE if old.get("machine", {}).get(k) != new.get("machine", {}).get(k)]
    changed += [
        f"policy.{k}"
        for k in set(old.get("policy", {})) | set(new.get("policy", {}))
        if old.get("policy", {}).get(k) != new.get("policy", {}).get(k)
    ]
    if old.get("connection") != new.get("connection"):
        changed.append("connection")
    return sorted(changed)


class MaasMachineProvider(ResourceProvider):
    serialize_as_secret_always = False  # pickled by reference; holds no secret

    def configure(self, req: ConfigureRequest) -> None:
        self._credentials = credentials_from_config(req.config)
        self._time_scale = time_scale_from(req.config)

    def _run(
        self, inputs: MachineInputs, *, goal: str, system_id: str | None = None, node_id: str | None = None
    ) -> tuple[dict[str, Any], Any]:
        ctx, maas, platform = build_context(
            inputs.connection, inputs.policy, getattr(self, "_credentials", None), getattr(self, "_time_scale", 1.0)
        )
        try:
            sched = Scheduler(ctx)
            if goal == "deployed":
                known = {inputs.machine.hostname: system_id} if system_id else {}
                results = sched.onboard([inputs.machine], known)
            else:
                results = sched.teardown(
                    [(inputs.machine, system_id, inputs.machine.teardown_mode)],
                    {inputs.machine.hostname: node_id} if node_id else None,
                )
        finally:
            platform.close()
        return machine_state(inputs.machine, results[0], inputs.connection), results

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = check_inputs(MachineInputs, news, "MaasMachine")
        return CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        old, new = plain(olds), plain(news)
        replaces = redeploy_reasons(old, new)
        changes = in_place_changes(old, new)
        drift = old.get("status") not in (None, "Deployed") or old.get("outcome") not in (
            None,
            MachineOutcome.READY.value,
        )
        if drift:
            changes.append("status")  # refresh found the machine not Deployed: up fixes it in place
        return DiffResult(changes=bool(replaces or changes), replaces=replaces, delete_before_replace=True)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = MachineInputs.model_validate(plain(props))
        outs, results = self._run(inputs, goal="deployed")
        if any_failed(results):
            raise Exception(failure_report(results))
        return CreateResult(outs["system_id"], {**plain(props), **outs})

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = MachineInputs.model_validate(plain({k: news[k] for k in ("machine", "connection", "policy")}))
        outs, results = self._run(inputs, goal="deployed", system_id=_id)
        if any_failed(results):
            raise Exception(failure_report(results))
        self._apply_in_place(inputs, plain(olds).get("machine", {}), _id)
        return UpdateResult({**plain(news), **outs})

    def _apply_in_place(self, inputs: MachineInputs, old_machine: dict[str, Any], system_id: str) -> None:
        """Hostname and tags change on the machine as it is (no redeploy)."""
        m = inputs.machine
        if old_machine.get("hostname") == m.hostname and sorted(old_machine.get("tags", [])) == sorted(m.tags):
            return
        maas = maas_client(inputs.connection, getattr(self, "_credentials", None))
        if old_machine.get("hostname") != m.hostname:
            maas.set_hostname(system_id, m.hostname)
        if sorted(old_machine.get("tags", [])) != sorted(m.tags):
            maas.set_tags(system_id, list(m.tags), remove=list(old_machine.get("tags", [])))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        state = plain(props)
        inputs = MachineInputs.model_validate({k: state[k] for k in ("machine", "connection", "policy")})
        maas = maas_client(inputs.connection, getattr(self, "_credentials", None))
        views = maas.read_many([id_])
        if not views:
            return ReadResult(
                id_,
                {
                    **state,
                    "status": "Missing",
                    "outcome": MachineOutcome.FAILED.value,
                    "notes": ["the machine is gone from MAAS"],
                },
            )
        view = views[0]
        fingerprint = view.owner_data.get("gpuaas_deploy_fingerprint")
        fresh = {**state, "status": view.status.label, "hostname_in_maas": view.hostname}
        if view.status.label != "Deployed" or (fingerprint and fingerprint != state.get("deploy_fingerprint")):
            fresh["outcome"] = "drifted"
        return ReadResult(id_, fresh)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        state = plain(props)
        inputs = MachineInputs.model_validate({k: state[k] for k in ("machine", "connection", "policy")})
        _, results = self._run(inputs, goal="released", system_id=id_, node_id=state.get("node_id"))
        if any_failed(results):
            raise Exception(failure_report(results))


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
