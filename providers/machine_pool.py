"""MachinePool: many machines of one site/profile in one resource, driven concurrently.

The dynamic provider server runs at most 4 provider calls at once (DESIGN.md §3.1), so a fleet can't
be one blocking call per machine. A pool runs the shared lifecycle scheduler over all its machines
with its own bound, the profile's `batch_max_parallel`: adding machines onboards only the new ones;
a changed deploy input redeploys the affected machines in rolling batches; machines that leave are
released per their teardown mode; one failing machine never stops the others. The pool itself is
never replaced: every change is an in-place update computed per machine (which join, redeploy, leave).
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
from providers.machines.resource_io import PoolInputs, any_failed, check_inputs, failure_report, machine_state
from providers.machines.runtime import build_context, maas_client, time_scale_from
from providers.machines.scheduler import MachineResult, Scheduler
from providers.machines.spec import MachineSpec
from providers.machines.status import MachineOutcome


def pool_plan(old_machines: dict[str, dict[str, Any]], new: PoolInputs) -> dict[str, list[str]]:
    """Which machines join, redeploy, stay, or leave (from old state and new inputs)."""
    wanted = {m.hostname: m for m in new.machines}
    plan: dict[str, list[str]] = {"join": [], "redeploy": [], "repair": [], "stay": [], "leave": []}
    for hostname, spec in sorted(wanted.items()):
        old = old_machines.get(hostname)
        if old is None or not old.get("system_id"):
            plan["join"].append(hostname)
        elif old.get("deploy_fingerprint") != spec.deploy_fingerprint():
            plan["redeploy"].append(hostname)
        elif old.get("status") != "Deployed" or old.get("outcome") != MachineOutcome.READY.value:
            plan["repair"].append(hostname)
        else:
            plan["stay"].append(hostname)
    plan["leave"] = sorted(set(old_machines) - set(wanted))
    return plan


class MachinePoolProvider(ResourceProvider):
    serialize_as_secret_always = False

    def configure(self, req: ConfigureRequest) -> None:
        self._credentials = credentials_from_config(req.config)
        self._time_scale = time_scale_from(req.config)

    def _converge(
        self, inputs: PoolInputs, old_machines: dict[str, dict[str, Any]], leaving: list[MachineSpec]
    ) -> tuple[dict[str, Any], list[MachineResult]]:
        ctx, maas, platform = build_context(
            inputs.connection, inputs.policy, getattr(self, "_credentials", None), getattr(self, "_time_scale", 1.0)
        )
        try:
            sched = Scheduler(ctx)
            plan = pool_plan(old_machines, inputs)
            ctx.log(f"pool {inputs.pool}: " + ", ".join(f"{k} {len(v)}" for k, v in plan.items() if v))
            results: list[MachineResult] = []
            if leaving:
                results += sched.teardown(
                    [(s, old_machines.get(s.hostname, {}).get("system_id"), s.teardown_mode) for s in leaving],
                    _node_ids(old_machines),
                )
            todo = [m for m in inputs.machines if m.hostname not in plan["stay"]]
            known = {h: m["system_id"] for h, m in old_machines.items() if m.get("system_id")}
            results += sched.onboard(todo, known)
        finally:
            platform.close()
        by_host = {r.hostname: r for r in results}
        machines = {
            m.hostname: machine_state(m, by_host.get(m.hostname), inputs.connection, old_machines.get(m.hostname))
            for m in inputs.machines
        }
        # A leaving machine whose release failed stays recorded, so the next run retries it.
        for spec in leaving:
            r = by_host.get(spec.hostname)
            if r is not None and r.outcome in (MachineOutcome.FAILED, MachineOutcome.TIMED_OUT):
                machines[spec.hostname] = {
                    **old_machines.get(spec.hostname, {}),
                    "leaving": True,
                    "outcome": r.outcome.value,
                    "notes": [r.reason],
                }
        return {"machines_state": machines, "counts": _counts(machines)}, results

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        inputs, failures = check_inputs(PoolInputs, news, "MachinePool")
        return CheckResult(inputs, failures)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        old, new = plain(olds), plain(news)
        changed = [k for k in ("machines", "connection", "policy") if old.get(k) != new.get(k)]
        try:
            plan = pool_plan(
                _old_machines(old), PoolInputs.model_validate({k: new[k] for k in PoolInputs.model_fields})
            )
            if plan["repair"] or any(m.get("leaving") for m in _old_machines(old).values()):
                changed.append("machines")  # drift found by refresh, or a release to retry
        except Exception:  # unknowns during preview: fall back to the input comparison
            pass
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = PoolInputs.model_validate({k: plain(props)[k] for k in PoolInputs.model_fields})
        outs, results = self._converge(inputs, {}, [])
        if any_failed(results):
            raise Exception(f"pool {inputs.pool}: " + failure_report(results))
        return CreateResult(f"pool-{inputs.connection.maas.site}-{inputs.pool}", {**plain(props), **outs})

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        old = plain(olds)
        inputs = PoolInputs.model_validate({k: plain(news)[k] for k in PoolInputs.model_fields})
        old_specs = {m["hostname"]: m for m in old.get("machines", [])}
        wanted = {m.hostname for m in inputs.machines}
        leaving = [MachineSpec.model_validate(s) for h, s in old_specs.items() if h not in wanted]
        outs, results = self._converge(inputs, _old_machines(old), leaving)
        if any_failed(results):
            raise Exception(f"pool {inputs.pool}: " + failure_report(results))
        return UpdateResult({**plain(news), **outs})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        state = plain(props)
        inputs = PoolInputs.model_validate({k: state[k] for k in PoolInputs.model_fields})
        maas = maas_client(inputs.connection, getattr(self, "_credentials", None))
        machines = _old_machines(state)
        ids = {m["system_id"]: h for h, m in machines.items() if m.get("system_id")}
        seen = {v.system_id: v for v in maas.read_many(list(ids))}  # one bulk request for the pool
        fresh: dict[str, Any] = {}
        for sid, hostname in ids.items():
            view = seen.get(sid)
            entry = dict(machines[hostname])
            entry["status"] = view.status.label if view else "Missing"
            fingerprint = view.owner_data.get("gpuaas_deploy_fingerprint") if view else None
            if (
                view is None
                or view.status.label != "Deployed"
                or (fingerprint and fingerprint != entry.get("deploy_fingerprint"))
            ):
                entry["outcome"] = "drifted"
            fresh[hostname] = entry
        return ReadResult(id_, {**state, "machines_state": fresh, "counts": _counts(fresh)})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        state = plain(props)
        inputs = PoolInputs.model_validate({k: state[k] for k in PoolInputs.model_fields})
        ctx, _, platform = build_context(
            inputs.connection, inputs.policy, getattr(self, "_credentials", None), getattr(self, "_time_scale", 1.0)
        )
        try:
            machines = _old_machines(state)
            results = Scheduler(ctx).teardown(
                [(m, machines.get(m.hostname, {}).get("system_id"), m.teardown_mode) for m in inputs.machines],
                _node_ids(machines),
            )
        finally:
            platform.close()
        if any_failed(results):
            raise Exception(f"pool {inputs.pool}: " + failure_report(results))


def _old_machines(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    machines = state.get("machines_state")
    return dict(machines) if isinstance(machines, dict) else {}


def _node_ids(machines: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {h: m["node_id"] for h, m in machines.items() if m.get("node_id")}


def _counts(machines: dict[str, dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in machines.values():
        key = m.get("outcome", "unknown")
        counts[key] = counts.get(key, 0) + 1
    return counts


class MachinePool(Resource, module="gpuaas", name="MachinePool"):
    machines_state: pulumi.Output[dict]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(MachinePoolProvider(), name, {"machines_state": None, "counts": None, **props}, opts)
