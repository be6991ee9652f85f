"""The engine side of one resource registration: check, diff, then one step handler per op.

``Registrar.register`` is called concurrently from the SDK's executor threads, one call per resource,
blocking until that resource's step is done (like the real monitor), so dependents wait for their
dependencies. Provider calls run outside the deployment lock; every state change happens under it and is
followed by an atomic state write (never in preview). ``planner.decide`` picks the op; ``_HANDLERS``
maps it to the handler that carries it out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass

from engine.dependents import dependents_to_replace
from engine.deployment import (
    DYNAMIC_PREFIX,
    STACK_TYPE,
    Deployment,
    Goal,
    NotStarted,
    Registered,
    Skipped,
    StepFailed,
    display_state,
    now,
)
from engine.model import PendingOpType, ResourceState, Severity, Step, StepOp
from engine.planner import Decision, apply_ignore_changes, decide
from engine.provider_host import ProviderError, ProviderHost
from engine.stackrefs import STACK_REFERENCE_TYPE
from engine.values import Props, contains_unknown, remark_secrets, secret_keys, strip_secrets


class Bail(StepFailed):
    """The step generator refuses this registration: every message is reported and the whole run stops,
    --continue-on-error or not (deployment_executor.go: an error from handleSingleEvent cancels)."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("\n".join(messages))
        self.messages = messages


class CheckFailed(Bail):
    """The provider's Check returned failures (step_generator.go ``issueCheckFailures``)."""


def check_failure_message(goal: Goal, inputs: Props, prop: str, reason: str) -> str:
    """diag.GetResourcePropertyInvalidValueError / GetResourceInvalidError, as the CLI prints them."""
    if prop:
        value = json.dumps(inputs.get(prop), sort_keys=True, default=str)
        return f"{goal.type} resource '{goal.name}': property {prop} value {{{value}}} has a problem: {reason}"
    return f"{goal.type} resource '{goal.name}' has a problem: {reason}"


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
        except NotStarted:
            return Registered(ok=False)
        except Skipped as exn:
            with dep.lock:
                dep.skipped.add(goal.urn)
            dep.diag(str(exn), Severity.INFO, goal.urn)
            return Registered(ok=False)
        except Bail as exn:
            dep.bail(goal.urn, exn.messages)
            return Registered(ok=False)
        except StepFailed as exn:
            message, details = str(exn), ""
        except ProviderError as exn:
            message, details = exn.message, exn.details
        dep.step_failed(goal.urn, message)
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
        if goal.type == STACK_REFERENCE_TYPE:
            raise StepFailed(
                f"{goal.type} registered as a new resource: builtins.go deprecates that path; declare it with "
                "pulumi.StackReference (the SDK reads it, and this engine resolves it with --stack-state)"
            )
        if not goal.type.startswith(DYNAMIC_PREFIX):
            raise StepFailed(
                f"type {goal.type} is not a dynamic provider resource; this test engine runs only "
                "pulumi-python:dynamic resources (use the Pulumi CLI for others)"
            )
        deps = set(goal.dependencies) | {goal.parent} | {u for v in goal.property_dependencies.values() for u in v}
        failed_deps = sorted(deps & (dep.failed | dep.skipped))
        if failed_deps:
            raise Skipped(f"skipped: it depends on {', '.join(failed_deps)}, which did not complete")
        with dep.stepgen_lock:
            # The real step generator handles one registration at a time (check, then diff), so a
            # check failure stops the run before any later registration is even checked.
            dep.check_cancelled()
            try:
                planned = self._plan(goal)
            except Bail:
                dep.cancelled.set()  # before the next registration can take the lock
                raise
        if isinstance(planned, Registered):
            return planned
        return _HANDLERS[planned.decision.op](self, planned)

    def _plan(self, goal: Goal) -> Planned | Registered:
        dep = self.dep
        old = dep.find_old(goal)
        with dep.lock:
            current = dep.live.get(goal.urn)
        if old is not None and current is not None and current.pendingReplacement:
            old = current  # deleted earlier in this run, ahead of a delete-before-replace it depends on
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
            raise CheckFailed([check_failure_message(goal, strip_secrets(news), p, r) for p, r in failures])
        checked = remark_secrets(checked_plain, secret_in, [])
        if old is None:
            return Planned(goal, old, checked, secret_in, Decision(StepOp.CREATE))
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
        if old.pendingReplacement:
            # Its object was already deleted by a delete-before-replace whose create never finished:
            # the next run replaces it whatever the diff says (step_generator.go ``old.PendingReplacement``).
            d = decision
            decision = Decision(StepOp.REPLACE, d.diff_reasons, d.replace_reasons, d.detailed, True)
        if decision.op is StepOp.REPLACE and old.protect and goal.protect:
            self._refuse_protected_replace(goal)
        return Planned(goal, old, checked, secret_in, decision)

    def _refuse_protected_replace(self, goal: Goal) -> None:
        """step_generator.go: replacing needs a delete, so old AND new protected is an error. A preview
        still shows the step; an update bails before anything else runs."""
        message = (
            f'unable to replace resource "{goal.urn}"\nas it is currently marked for protection. To unprotect the '
            "resource, remove the `protect` flag from the resource in your Pulumi program and run `pulumi up`"
        )
        if self.dep.dry_run:
            self.dep.diag(message, urn=goal.urn)
            self.dep.errored.set()
            return
        raise Bail([message])

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

    def _replace_step(self, p: Planned) -> Step:
        """The `replace` step carries the old state and the new goal (step.go ReplaceStep: Old and New),
        so a reader of `preview --json` sees what the replacement will be."""
        step = p.step(self.dep.provider_ref)
        new = self.dep.live.get(p.goal.urn) if not self.dep.dry_run else None
        if new is None or new.pendingReplacement or new is p.old:
            new = new_state(p.goal, "", p.checked, p.checked if self.dep.dry_run else {}, p.old)
        step.newState = display_state(new)
        return step

    def _replace(self, p: Planned) -> Registered:
        dep, old = self.dep, p.old
        assert old is not None
        if p.decision.delete_before_replace:
            if not old.pendingReplacement:
                with dep.lock:
                    live = list(dep.live.values())
                dependents = dependents_to_replace(self.host, old, live)
                protected = [d.urn for d in dependents if d.protect]
                if protected:
                    raise Bail(
                        [
                            f'unable to replace resource "{d}" as part of replacing "{p.goal.urn}" as it is '
                            "currently marked for protection. To unprotect the resource, remove the `protect` flag "
                            f"from the resource in your Pulumi program and run `pulumi up`, or use the command:\n"
                            f'`pulumi state unprotect "{d}"`'
                            for d in protected
                        ]
                    )
                # Dependents first, then the resource itself. Each stays in state marked pendingReplacement
                # (step.go DeleteStep with pendingReplace) until its replacement is created. Taken over by
                # an alias, the old state already lives under the new URN: mark it pending there (under its
                # old URN it would come back as a stale entry, and the replacement's create would take the
                # untouched old state for a create-before-delete and delete the new object at the end).
                here = old if old.urn == p.goal.urn else old.model_copy(update={"urn": p.goal.urn})
                for res in [*reversed(dependents), here]:
                    dep.delete_one(res, StepOp.DELETE_REPLACED, pending_replace=True)
            dep.record(self._replace_step(p))
            return self._create(p, StepOp.CREATE_REPLACEMENT)
        result = self._create(p, StepOp.CREATE_REPLACEMENT)
        dep.record(self._replace_step(p))
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
