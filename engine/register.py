"""The engine side of one resource registration: check, diff, then one step handler per op.

``Registrar.register`` is called concurrently from the SDK's executor threads, one call per resource,
blocking until that resource's step is done (like the real monitor), so dependents wait for their
dependencies. Provider calls run outside the deployment lock; every state change happens under it and is
followed by an atomic state write (never in preview). ``planner.decide`` picks the op; ``_HANDLERS``
maps it to the handler that carries it out.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from engine.dependents import dependents_to_replace
from engine.deployment import (
    DYNAMIC_PREFIX,
    STACK_TYPE,
    Deployment,
    Goal,
    Registered,
    StepFailed,
    display_state,
    now,
)
from engine.model import PendingOpType, ResourceState, Step, StepOp
from engine.planner import Decision, apply_ignore_changes, decide
from engine.provider_host import ProviderError, ProviderHost
from engine.values import Props, contains_unknown, remark_secrets, secret_keys, strip_secrets


@dataclass
class Planned:
    """Everything a step handler needs: the goal, the old state, the checked inputs and the decision."""

    goal: Goal
    old: ResourceState | None
    checked: Props
    secret_in: set[str]  # top-level input keys holding secrets: same-named outputs become secret
    decision: Decision

    def step(self, provider: str) -> Step:
        return Step(
            op=self.decision.op,
            urn=self.goal.urn,
            provider=provider,
            oldState=display_state(self.old),
            diffReasons=self.decision.diff_reasons or None,
            replaceReasons=self.decision.replace_reasons or None,
            detailedDiff=self.decision.detailed or None,
        )


def new_state(goal: Goal, id_: str, inputs: Props, outputs: Props, old: ResourceState | None) -> ResourceState:
    stamp = now()
    changed = old is None or old.inputs != inputs or old.outputs != outputs
    return ResourceState(
        urn=goal.urn,
        custom=goal.custom,
        id=id_,
        type=goal.type,
        inputs=inputs,
        outputs=outputs,
        parent=goal.parent,
        protect=goal.protect,
        dependencies=goal.dependencies,
        propertyDependencies=goal.property_dependencies,
        additionalSecretOutputs=goal.additional_secret_outputs,
        retainOnDelete=goal.retain_on_delete,
        ignoreChanges=goal.ignore_changes,
        created=old.created if old else stamp,
        modified=stamp if changed else (old.modified if old else stamp),
    )


class Registrar:
    def __init__(self, deployment: Deployment) -> None:
        self.dep = deployment

    @property
    def host(self) -> ProviderHost:
        assert self.dep.host is not None, "custom resources need the provider server"
        return self.dep.host

    def register(self, goal: Goal) -> Registered:
        dep = self.dep
        with dep.lock:
            if goal.urn in dep.registered:
                dep.failed.add(goal.urn)
                dep.diag(f"duplicate resource URN {goal.urn}: give the resources distinct names", urn=goal.urn)
                return Registered(ok=False)
            dep.registered.add(goal.urn)
        dep.redact.add(goal.inputs)
        try:
            dep.check_cancelled()
            return self._register_custom(goal) if goal.custom else self._register_component(goal)
        except StepFailed as exn:
            message, details = str(exn), ""
        except ProviderError as exn:
            message, details = exn.message, exn.details
        with dep.lock:
            dep.failed.add(goal.urn)
        dep.diag(message, urn=goal.urn)
        if details and os.environ.get("GPUAAS_ENGINE_DEBUG"):
            dep.emit(details + "\n")
        return Registered(ok=False)

    def _register_component(self, goal: Goal) -> Registered:
        dep = self.dep
        old = dep.find_old(goal)
        if old is None and not dep.targeted(goal.urn) and goal.type != STACK_TYPE:
            return Registered(unknown=True)
        outputs = dep.stack_outputs if goal.type == STACK_TYPE else (old.outputs if old else {})
        new = new_state(goal, "", {}, outputs, old)
        with dep.lock:
            dep.live[goal.urn] = new
            dep.save()
        op = StepOp.SAME if old else StepOp.CREATE
        dep.record(Step(op=op, urn=goal.urn, oldState=display_state(old), newState=display_state(new)))
        return Registered()

    def _register_custom(self, goal: Goal) -> Registered:
        dep = self.dep
        if not goal.type.startswith(DYNAMIC_PREFIX):
            raise StepFailed(
                f"type {goal.type} is not a dynamic provider resource; this test engine runs only "
                "pulumi-python:dynamic resources (use the Pulumi CLI for others)"
            )
        failed_deps = sorted((set(goal.dependencies) | {goal.parent}) & dep.failed)
        if failed_deps:
            raise StepFailed(f"skipped: it depends on {', '.join(failed_deps)}, which failed")
        old = dep.find_old(goal)
        if not dep.targeted(goal.urn):
            return self._untargeted(goal, old)
        news = goal.inputs
        if old is not None and goal.ignore_changes:
            news = apply_ignore_changes(old.inputs, news, goal.ignore_changes)
        if not dep.dry_run and contains_unknown(strip_secrets(news)):
            unknown = sorted(k for k, v in news.items() if contains_unknown(strip_secrets(v)))
            raise StepFailed(f"inputs {', '.join(unknown)} are still unknown at deployment time")
        secret_in = secret_keys(news)
        # The provider server declares acceptSecrets=False: it gets plaintext, we re-mark afterwards.
        old_inputs = strip_secrets(old.inputs) if old else {}
        checked_plain, failures = self.host.check(goal.urn, old_inputs, strip_secrets(news))
        if failures:
            raise StepFailed("check failed: " + "; ".join(f"property `{p}`: {r}" for p, r in failures))
        checked = remark_secrets(checked_plain, secret_in, [])
        if old is None:
            decision = Decision(StepOp.CREATE)
        elif goal.urn in dep.replaced_early:
            # Deleted earlier in this run because a resource it depends on was replaced delete-first.
            planned = Planned(goal, old, checked, secret_in, Decision(StepOp.REPLACE))
            result = self._create(planned, StepOp.CREATE_REPLACEMENT)
            dep.record(planned.step(dep.provider_ref))
            return result
        else:
            diff = self.host.diff(goal.urn, old.id, strip_secrets(old.outputs), checked_plain, old_inputs)
            decision = decide(
                old.inputs,
                checked,
                diff.changes,
                diff.replaces,
                diff.diffs,
                diff.delete_before_replace,
                goal.replace_on_changes,
                goal.delete_before_replace,
            )
        planned = Planned(goal, old, checked, secret_in, decision)
        return _HANDLERS[decision.op](self, planned)

    def _untargeted(self, goal: Goal, old: ResourceState | None) -> Registered:
        """``--target`` left this resource out: keep what state has, create nothing."""
        if old is None:
            return Registered(unknown=True)
        with self.dep.lock:
            self.dep.live[goal.urn] = old
        state = display_state(old)
        self.dep.record(
            Step(op=StepOp.SAME, urn=goal.urn, provider=self.dep.provider_ref, oldState=state, newState=state)
        )
        return Registered(id=old.id, outputs=old.outputs)

    # -- step handlers (one per op) --------------------------------------------------------------
    def _same(self, p: Planned) -> Registered:
        assert p.old is not None
        new = new_state(p.goal, p.old.id, p.checked, p.old.outputs, p.old)
        with self.dep.lock:
            self.dep.live[p.goal.urn] = new
            self.dep.save()
        step = p.step(self.dep.provider_ref)
        step.newState = display_state(new)
        self.dep.record(step)
        return Registered(id=p.old.id, outputs=p.old.outputs)

    def _outputs(self, p: Planned, outs: Props) -> Props:
        return remark_secrets(outs, p.secret_in, p.goal.additional_secret_outputs)

    def _create(self, p: Planned, op: StepOp = StepOp.CREATE) -> Registered:
        dep, goal = self.dep, p.goal
        old = p.old if op is StepOp.CREATE_REPLACEMENT else None
        if dep.dry_run:
            new = new_state(goal, "", p.checked, p.checked, old)
            dep.record(
                Step(
                    op=op,
                    urn=goal.urn,
                    provider=dep.provider_ref,
                    oldState=display_state(old),
                    newState=display_state(new),
                )
            )
            return Registered(outputs=p.checked)
        token = dep.begin(new_state(goal, "", p.checked, {}, old), PendingOpType.CREATING)
        try:
            id_, outs = self.host.create(goal.urn, strip_secrets(p.checked))
        finally:
            dep.end(token)
        new = new_state(goal, id_, p.checked, self._outputs(p, outs), old)
        dep.redact.add(new.outputs)
        with dep.lock:
            if old is not None and dep.live.get(goal.urn) is old:
                # create-before-delete: the old one waits (delete=true) for deletion at the end of the run.
                dep.condemned_replaced.append(old.model_copy(update={"delete": True}))
            dep.live[goal.urn] = new
            dep.save()
        dep.record(
            Step(
                op=op, urn=goal.urn, provider=dep.provider_ref, oldState=display_state(old), newState=display_state(new)
            )
        )
        return Registered(id=id_, outputs=new.outputs)

    def _update(self, p: Planned) -> Registered:
        dep, old = self.dep, p.old
        assert old is not None
        step = p.step(dep.provider_ref)
        if dep.dry_run:
            step.newState = display_state(new_state(p.goal, old.id, p.checked, p.checked, old))
            dep.record(step)
            return Registered(id=old.id, outputs=p.checked)
        token = dep.begin(old, PendingOpType.UPDATING)
        try:
            outs = self.host.update(
                p.goal.urn, old.id, strip_secrets(old.outputs), strip_secrets(p.checked), strip_secrets(old.inputs)
            )
        finally:
            dep.end(token)
        new = new_state(p.goal, old.id, p.checked, self._outputs(p, outs), old)
        dep.redact.add(new.outputs)
        with dep.lock:
            dep.live[p.goal.urn] = new
            dep.save()
        step.newState = display_state(new)
        dep.record(step)
        return Registered(id=old.id, outputs=new.outputs)

    def _replace(self, p: Planned) -> Registered:
        dep, old = self.dep, p.old
        assert old is not None
        if old.protect or p.goal.protect:
            raise StepFailed(
                f"cannot replace {p.goal.urn}: it is protected (changed: {', '.join(p.decision.replace_reasons)})."
                " Set protect=False in the program and run up, then make the change"
            )
        if p.decision.delete_before_replace:
            with dep.lock:
                live = list(dep.live.values())
            dependents = dependents_to_replace(self.host, old, live)
            protected = [d.urn for d in dependents if d.protect]
            if protected:
                raise StepFailed(
                    f"cannot replace {p.goal.urn} delete-before-replace: protected dependents would have to be "
                    f"replaced with it ({', '.join(protected)})"
                )
            for res in [*reversed(dependents), old]:  # dependents first, then the resource itself
                dep.delete_one(res, StepOp.DELETE_REPLACED)
                with dep.lock:
                    dep.live.pop(res.urn, None)
                    if res is not old:
                        dep.replaced_early.add(res.urn)
            dep.record(p.step(dep.provider_ref))
            return self._create(p, StepOp.CREATE_REPLACEMENT)
        result = self._create(p, StepOp.CREATE_REPLACEMENT)
        dep.record(p.step(dep.provider_ref))
        if dep.dry_run:  # in a real run the old one is deleted at the end (teardown.finish_up)
            dep.record(
                Step(op=StepOp.DELETE_REPLACED, urn=p.goal.urn, provider=dep.provider_ref, oldState=display_state(old))
            )
        return result


_HANDLERS: dict[StepOp, Callable[[Registrar, Planned], Registered]] = {
    StepOp.SAME: Registrar._same,
    StepOp.CREATE: Registrar._create,
    StepOp.UPDATE: Registrar._update,
    StepOp.REPLACE: Registrar._replace,
}
