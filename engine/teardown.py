"""The phases after (or instead of) the program: deletes in reverse dependency order, destroy, refresh.

Deletes run in waves: a resource is deleted once nothing left in the condemned set depends on it, and
each wave runs in parallel (the provider server's 4 workers bound it). A failed or protected delete keeps
everything it depends on alive, as the real engine does.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from engine.deployment import Deployment, NotStarted, ProtectedDelete, StepFailed, display_state
from engine.model import ResourceState, Severity, Step, StepOp
from engine.planner import DIFF_NONE, DIFF_UNKNOWN, changed_keys
from engine.provider_host import ProviderError
from engine.stackrefs import STACK_REFERENCE_TYPE, StackReferenceError
from engine.values import Props, remark_secrets, secret_keys, strip_secrets

_WORKERS = 16


def _try_delete(dep: Deployment, res: ResourceState, op: StepOp) -> bool:
    try:
        dep.check_cancelled()
        dep.delete_one(res, op)
        return True
    except NotStarted:
        return False
    except ProtectedDelete as exn:
        # step_executor.go cancelDueToError: a protected delete never cancels the run, so every one is
        # reported in a single run; the run still fails.
        with dep.lock:
            dep.failed.add(res.urn)
        dep.diag(str(exn), urn=res.urn)
        dep.errored.set()
        return False
    except StepFailed as exn:
        dep.step_failed(res.urn, str(exn))
    except ProviderError as exn:
        dep.step_failed(res.urn, exn.message)
        if os.environ.get("GPUAAS_ENGINE_DEBUG"):
            dep.emit(exn.details + "\n")
    return False


def _blocked(remaining: list[ResourceState]) -> set[int]:
    """Indexes of resources something else in ``remaining`` still depends on."""
    needed: set[str] = set()
    for res in remaining:
        needed |= res.all_dependencies() - {res.urn}
    return {i for i, res in enumerate(remaining) if res.urn in needed}


def delete_in_waves(dep: Deployment, condemned: list[ResourceState]) -> None:
    remaining = list(condemned)
    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        while remaining and not dep.cancelled.is_set():
            blocked = _blocked(remaining)
            wave = [r for i, r in enumerate(remaining) if i not in blocked]
            if not wave:  # a cycle cannot come from the SDK; never spin on a hand-edited file
                wave = remaining[:1]
            ops = [StepOp.DELETE_REPLACED if r.delete else StepOp.DELETE for r in wave]
            results = list(pool.map(lambda pair: _try_delete(dep, *pair), zip(wave, ops, strict=True)))
            in_wave = {id(r) for r in wave}
            remaining = [r for r in remaining if id(r) not in in_wave]
            failed = [r for r, ok in zip(wave, results, strict=True) if not ok]
            if failed:
                remaining = _keep_what_failed_deletes_need(dep, failed, remaining)


def _keep_what_failed_deletes_need(
    dep: Deployment, failed: list[ResourceState], remaining: list[ResourceState]
) -> list[ResourceState]:
    """Drop from ``remaining`` everything the failed resources (transitively) depend on: still in use."""
    by_urn = {r.urn: r for r in remaining if not r.delete}
    keep: dict[str, str] = {}  # kept urn -> the failed resource that needs it
    frontier = [(d, f.urn) for f in failed for d in f.all_dependencies() - {f.urn}]
    while frontier:
        urn, user = frontier.pop()
        if urn in by_urn and urn not in keep:
            keep[urn] = user
            frontier += [(d, user) for d in by_urn[urn].all_dependencies() - {urn}]
    for urn, user in sorted(keep.items()):
        dep.diag(f"not deleted: {user}, which could not be deleted, still depends on it", Severity.WARNING, urn)
    return [r for r in remaining if r.delete or r.urn not in keep]


def finish_up(dep: Deployment) -> None:
    """After the program: delete what it no longer declares, and replaced resources.

    deployment_executor.go: after a failed step the default run is cancelled, so no delete runs; with
    --continue-on-error deletes run, except of what a failed resource (transitively) depends on
    (``performDeletes``' erroredDeps)."""
    if dep.cancelled.is_set():
        return
    with dep.lock:
        gone = [
            r
            for urn, r in dep.old.items()
            if urn not in dep.registered and urn not in dep.aliased and dep.targeted(urn)
        ]
        condemned = gone + list(dep.condemned_replaced)
        needed = _needed_by(dep, dep.failed | dep.skipped)
    delete_in_waves(dep, [r for r in condemned if r.urn not in needed])


def _needed_by(dep: Deployment, urns: set[str]) -> set[str]:
    """Every URN the given resources' old or new states transitively depend on."""
    states = {**dep.old, **dep.live}
    needed: set[str] = set()
    frontier = [d for u in urns for s in (dep.old.get(u), dep.live.get(u)) if s for d in s.all_dependencies()]
    while frontier:
        urn = frontier.pop()
        if urn in needed:
            continue
        needed.add(urn)
        if urn in states:
            frontier += states[urn].all_dependencies()
    return needed


def destroy(dep: Deployment) -> None:
    with dep.lock:
        everything = list(dep.live.values()) + list(dep.condemned_replaced)
    if dep.targets:
        chosen = [r for r in everything if r.urn in dep.targets]
        for res in everything:
            users = [c.urn for c in chosen if c.urn in res.all_dependencies()]
            if res not in chosen and any(c.urn in res.all_dependencies() for c in chosen):
                dep.diag(f"{res.urn} depends on targeted {', '.join(users)}; target it too", urn=res.urn)
                dep.failed.add(res.urn)
        if dep.failed:
            return
        everything = chosen
    delete_in_waves(dep, everything)
    with dep.lock:
        if not dep.live:
            dep.stack_outputs = {}
            dep.save()


def _refresh_one(dep: Deployment, res: ResourceState) -> None:
    assert dep.host is not None
    if res.pendingReplacement:  # step.go RefreshStep.Apply: its object is already gone; nothing to read
        return
    if res.type == STACK_REFERENCE_TYPE:  # the builtin provider's Read: the referenced stack's outputs now
        if dep.stack_refs is None:
            raise ProviderError(f"unknown stack {res.inputs.get('name')!r}: no --stack-state is mapped")
        try:
            id_, outs = res.id, dep.stack_refs.state(str(res.inputs.get("name")))[0]
        except StackReferenceError as exn:
            raise ProviderError(f"reading stack reference: {exn}") from None
        new_inputs: Props | None = res.inputs
    else:
        id_, outs, new_inputs = dep.host.read(res.urn, res.id, strip_secrets(res.outputs), strip_secrets(res.inputs))
    if not id_:
        with dep.lock:
            if dep.live.get(res.urn) is res:
                dep.live.pop(res.urn)
            dep.save()
        dep.record(
            Step(op=StepOp.REFRESH, urn=res.urn, provider=dep.provider_ref, oldState=display_state(res), drifted=True)
        )
        dep.diag("refresh: the provider reports this resource gone; removed from state", Severity.WARNING, res.urn)
        return
    secret = secret_keys(res.outputs) | secret_keys(res.inputs)
    outputs = remark_secrets(outs, secret, res.additionalSecretOutputs)
    inputs = remark_secrets(new_inputs, secret_keys(res.inputs), []) if new_inputs is not None else res.inputs
    new = res.model_copy(update={"id": id_, "outputs": outputs, "inputs": inputs})
    dep.redact.add(outputs)
    drifted, reasons = _drift(dep, res, new)
    with dep.lock:
        if dep.live.get(res.urn) is res:
            dep.live[res.urn] = new
        dep.save()
    dep.record(
        Step(
            op=StepOp.REFRESH,
            urn=res.urn,
            provider=dep.provider_ref,
            oldState=display_state(res),
            newState=display_state(new),
            diffReasons=reasons or None,
            drifted=drifted,
        )
    )


def _drift(dep: Deployment, old: ResourceState, new: ResourceState) -> tuple[bool, list[str]]:
    """step.go RefreshStep.Apply: the provider's Diff of the refreshed state (as olds) against the old
    inputs (as news) decides drift, i.e. what an ``up`` of the unchanged program would change. External
    resources compare outputs only. DIFF_UNKNOWN falls back to comparing inputs (``diffResource``)."""
    if old.external:
        keys = changed_keys(old.outputs, new.outputs)
        return bool(keys), keys
    assert dep.host is not None
    diff = dep.host.diff(
        old.urn, new.id, strip_secrets(new.outputs), strip_secrets(old.inputs), strip_secrets(new.inputs)
    )
    if diff.changes == DIFF_UNKNOWN:
        keys = changed_keys(new.inputs, old.inputs)
        return bool(keys), keys
    return diff.changes != DIFF_NONE, list(diff.diffs)


def refresh(dep: Deployment) -> dict[str, int]:
    """Read every custom resource back from its provider; returns the change summary."""
    with dep.lock:
        chosen = [r for r in dep.live.values() if r.custom and dep.targeted(r.urn)]
    summary = {"same": 0, "update": 0, "delete": 0}

    def run(res: ResourceState) -> None:
        try:
            _refresh_one(dep, res)
        except ProviderError as exn:
            dep.diag(exn.message, urn=res.urn)
            with dep.lock:
                dep.failed.add(res.urn)

    with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
        list(pool.map(run, chosen))
    for step in dep.steps:
        if step.op is StepOp.REFRESH:
            if step.newState is None:
                summary["delete"] += 1
            elif step.drifted:
                summary["update"] += 1
            else:
                summary["same"] += 1
    return summary
