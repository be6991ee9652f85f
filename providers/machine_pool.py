"""MachinePool: many machines of one site/profile in one resource, driven concurrently.

The dynamic provider server runs at most 4 provider calls at once (DESIGN.md §3.1), so a fleet can't
be one blocking call per machine. A pool runs the machines reconciler over all its machines with
its own bound, the profile's `batch_max_parallel`: adding machines onboards only the new ones; a
changed deploy input redeploys the affected machines in rolling batches; machines that leave are
released per their teardown mode; untouched machines keep their records exactly; one failing
machine never stops the others. The pool itself is never replaced (descriptor `MACHINE_POOL`):
per machine, the machines plan decides (providers/machines/plan.py: join, reidentify, redeploy, repair,
in place, stay, leave).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, Resource, UpdateResult
from pydantic import ValidationError

from providers.common import has_unknown, plain
from providers.kind import KindDescriptor, register
from providers.machines import reconciler as rc
from providers.machines.plan import SHARED_INPUT_RULES, MachineRecord, plan, rekey, renames
from providers.machines.provider import MachinesProvider
from providers.machines.resource_io import (
    PoolInputs,
    canonical,
    expand_specs,
    pool_records,
)
from providers.machines.spec import Connection, LifecyclePolicy, MachineSpec

MACHINE_POOL = register(
    KindDescriptor(
        name="MachinePool",
        identity=(),
        in_place=("machines", "template", *SHARED_INPUT_RULES),
        summary_outputs=("counts",),
        doc="Many machines of one site/profile; never replaced: each machine is planned on its own.",
        notes={
            "machines": "per machine, the machines plan (providers/machines/plan.py): join, reidentify, "
                        "redeploy, repair, in place, stay or leave",
            "template": "what the machines' specs are written against (one of them, whole): planned with them, "
                        "per machine",
            **{k: f"{rule.change.value}: {rule.why}" for k, rule in SHARED_INPUT_RULES.items()},
        },
    )
)
INPUTS = tuple(PoolInputs.model_fields)
# What the pool's outputs keep of its inputs: everything but the machine specs (and the template they are
# written against), which state holds once, in the inputs (issue 18). Per machine the outputs keep the record
# (identity, fingerprints, MAAS facts).
KEPT_INPUTS = tuple(k for k in INPUTS if k not in ("machines", "template"))


class MachinePoolProvider(MachinesProvider[PoolInputs]):
    descriptor = MACHINE_POOL
    spec_model = PoolInputs
    inputs = kept_inputs = KEPT_INPUTS  # the machine specs: planned per machine (`machines_changed`)

    def check_spec(self, olds: dict[str, Any], news: dict[str, Any], spec: PoolInputs) -> CheckResult:
        if (key := _specs_key(news)) is not None:
            with _CHECKED_LOCK:
                _CHECKED[key] = spec.specs
                while len(_CHECKED) > _CHECKED_KEPT:
                    del _CHECKED[next(iter(_CHECKED))]
        return super().check_spec(olds, news, spec)

    def comparable(self, props: Mapping[str, Any]) -> dict[str, Any]:
        return canonical(PoolInputs, props, KEPT_INPUTS)

    def drifted(self, olds: dict[str, Any], news: dict[str, Any]) -> bool:
        records = pool_records(olds)
        attention = any(r.needs_attention for r in records.values())  # drift, or a release to retry
        key = _specs_key(news)
        with _CHECKED_LOCK:
            checked = _CHECKED.get(key) if key is not None else None
        return attention or machines_changed(records, news, checked)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = self.spec_of(props)
        with self.session(inputs.connection, inputs.policy, f"pool {inputs.pool}", inputs.owner) as ctx:
            done = rc.converge(ctx, inputs.specs, {})
        rc.raise_failures(f"pool {inputs.pool}", done.results)
        return CreateResult(f"pool-{inputs.connection.maas.site}-{inputs.pool}",
                            self.outputs(props, _result(done.records)))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        inputs = self.spec_of(news)
        records = pool_records(olds)
        old_specs = {h: ident for h, r in records.items() if (ident := r.identity()) is not None}
        moved = renames(old_specs, inputs.specs)  # renamed in place, not released and redeployed
        prior = rekey(records, moved)
        old_specs = {moved.get(h, h): s for h, s in old_specs.items()}
        wanted = set(inputs.machines)
        leaving = [(s, prior.get(h)) for h, s in old_specs.items() if h not in wanted]
        with self.session(inputs.connection, inputs.policy, f"pool {inputs.pool}", inputs.owner) as ctx:
            done = self.update_sequence(
                ctx, f"pool {inputs.pool}", inputs.specs, prior, old_specs, leaving=leaving,
                claim=plain(olds).get("owner") != inputs.owner)  # a pool's first update since it records its name
        return UpdateResult(self.outputs(news, _result(done.records)))

    def observe(self, id_: str, props: dict[str, Any]) -> dict[str, Any]:
        state = plain(props)
        records = pool_records(state)
        idents = {h: ident for h, r in records.items() if (ident := r.identity()) is not None}
        return _result(rc.observe(self.maas(Connection.model_validate(state["connection"])), records, idents))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        state = plain(props)
        records = pool_records(state)
        items = [(ident, r) for r in records.values() if (ident := r.identity()) is not None]
        connection, policy = (
            Connection.model_validate(state["connection"]),
            LifecyclePolicy.model_validate(state["policy"]),
        )
        owner = state.get("owner")
        owner = owner if isinstance(owner, str) else None
        with self.session(connection, policy, f"pool {state.get('pool')}", owner) as ctx:
            results = rc.release(ctx, items)
        rc.raise_failures(f"pool {state.get('pool')}", results)


# The specs this process's checks read, by what they were read from: the engine diffs the inputs a check
# returned, and at 1,024 machines reading them again was ~0.1 s of every pass (issue 29). Module state, not the
# provider's: the provider is pickled into state as constructed. A few pools' worth (calls run four at a time).
_CHECKED: dict[tuple[Any, ...], tuple[MachineSpec, ...]] = {}
_CHECKED_KEPT = 8
_CHECKED_LOCK = threading.Lock()


def _specs_key(news: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What a pool's specs are read from, as a key (None: not plain strings). In hostname order: the CLI hands the
    check and the diff the same entries in different orders."""
    machines, template = news.get("machines"), news.get("template")
    if not isinstance(machines, Mapping) or not isinstance(template, str | None):
        return None
    items = tuple(sorted(machines.items()))
    return (template, items) if all(isinstance(v, str) for _, v in items) else None


def machines_changed(records: dict[str, MachineRecord], news: dict[str, Any],
                     checked: tuple[MachineSpec, ...] | None = None) -> bool:
    """Whether the plan has anything to do for the declared machines (join, leave, or any change but
    `stay`); unknown or unreadable specs count as changed. `checked`: the specs already read from exactly
    these inputs (by the pool's check)."""
    raw, template = news.get("machines"), news.get("template")
    if not isinstance(raw, dict) or has_unknown(raw) or has_unknown(template):
        return True
    if checked is not None:
        specs = list(checked)
    else:
        try:
            whole = expand_specs(plain(raw), template)
            specs = [MachineSpec.model_validate(v) if isinstance(v, dict) else MachineSpec.model_validate_json(v)
                     for v in whole.values()]
        except (ValidationError, TypeError):
            return True
    moved = renames({h: i for h, r in records.items() if (i := r.identity()) is not None}, specs)
    p = plan(rekey(records, moved), specs)
    return bool(moved or p.join or p.reidentify or p.redeploy or p.in_place or p.leave or p.repair)


def _result(records: dict[str, MachineRecord]) -> dict[str, Any]:
    """What a pool's outputs record besides its kept inputs: each machine's record and the counts by outcome."""
    counts: dict[str, int] = {}
    for r in records.values():
        key = r.outcome.value if r.outcome else "unknown"
        counts[key] = counts.get(key, 0) + 1
    return {"machines_state": {h: r.wire() for h, r in records.items()}, "counts": counts}


class MachinePool(Resource, module="gpuaas", name="MachinePool"):
    machines_state: pulumi.Output[dict]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(MachinePoolProvider(), name, {"machines_state": None, "counts": None, **props}, opts)
