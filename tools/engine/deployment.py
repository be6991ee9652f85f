"""One deployment: the engine side of every resource registration, plus the shared bookkeeping.

``register`` is called concurrently from the SDK's executor threads (one call per resource, blocking
until that resource's step is done, exactly like the real monitor). Provider calls run outside the
lock; every state mutation happens under it and is followed by an atomic state write (never in preview).
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tools.engine.model import (
    Diagnostic,
    Operation,
    PendingOperation,
    PendingOpType,
    ResourceState,
    Severity,
    Step,
    StepOp,
)
from tools.engine.planner import apply_ignore_changes, decide
from tools.engine.provider_host import ProviderError, ProviderHost
from tools.engine.state import StateStore
from tools.engine.values import (
    UNKNOWN,
    Props,
    contains_unknown,
    mask_secrets,
    remark_secrets,
    secret_keys,
    strip_secrets,
)

STACK_TYPE = "pulumi:pulumi:Stack"
DYNAMIC_PREFIX = "pulumi-python:dynamic"
_SYMBOL = {
    StepOp.SAME: " ",
    StepOp.CREATE: "+",
    StepOp.UPDATE: "~",
    StepOp.DELETE: "-",
    StepOp.REPLACE: "+-",
    StepOp.CREATE_REPLACEMENT: "++",
    StepOp.DELETE_REPLACED: "--",
    StepOp.READ: ">",
    StepOp.REFRESH: "~",
}


class StepFailed(Exception):
    """This resource's step failed; the message is what the user sees (no traceback)."""


@dataclass
class Goal:
    """What the program asked for (a RegisterResourceRequest, decoded)."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str = ""
    inputs: Props = field(default_factory=dict)
    protect: bool = False
    dependencies: list[str] = field(default_factory=list)
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)
    ignore_changes: list[str] = field(default_factory=list)
    additional_secret_outputs: list[str] = field(default_factory=list)
    retain_on_delete: bool = False
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool | None = None


@dataclass
class Registered:
    """What goes back to the SDK."""

    id: str = ""
    outputs: Props = field(default_factory=dict)
    ok: bool = True
    unknown: bool = False


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def display_state(res: ResourceState | None) -> dict[str, Any] | None:
    if res is None:
        return None
    data = res.model_dump(mode="json", exclude_defaults=True)
    data.update(urn=res.urn, custom=res.custom, type=res.type, id=res.id)
    data["inputs"] = mask_secrets(res.inputs)
    data["outputs"] = mask_secrets(res.outputs)
    return data


class Deployment:
    def __init__(
        self,
        operation: Operation,
        store: StateStore,
        host: ProviderHost | None,
        project: str,
        stack: str,
        targets: list[str] | None = None,
        emit: Callable[[str], None] | None = None,
    ) -> None:
        self.operation = operation
        self.dry_run = operation is Operation.PREVIEW
        self.store = store
        self.host = host
        self.project = project
        self.stack = stack
        self.targets = set(targets or [])
        self.emit = emit or (lambda line: None)
        self.lock = threading.RLock()
        initial = store.initial
        self.old: dict[str, ResourceState] = {r.urn: r for r in initial.resources if not r.delete}
        self.live: dict[str, ResourceState] = dict(self.old)
        # Replaced (create-before-delete) or left over from an earlier run: deleted at the end.
        self.condemned_replaced: list[ResourceState] = [r for r in initial.resources if r.delete]
        self.pending: dict[int, PendingOperation] = {}
        self.registered: set[str] = set()
        self.failed: set[str] = set()
        self.steps: list[Step] = []
        self.diagnostics: list[Diagnostic] = []
        self.stack_outputs: Props = dict(initial.outputs)
        self._pending_seq = 0
        self._report_interrupted(initial.pending_operations)

    # -- bookkeeping ---------------------------------------------------------------------------
    @property
    def provider_ref(self) -> str:
        return f"urn:pulumi:{self.stack}::{self.project}::pulumi:providers:pulumi-python::default::{UNKNOWN}"

    def diag(self, message: str, severity: Severity = Severity.ERROR, urn: str | None = None) -> None:
        with self.lock:
            self.diagnostics.append(Diagnostic(urn=urn, message=message, severity=severity))
        self.emit(f"{severity.value}: {urn + ': ' if urn else ''}{message}\n")

    def _report_interrupted(self, pending: list[PendingOperation]) -> None:
        hints = {
            PendingOpType.CREATING: "the provider may have created it; it is not in state, so this run "
            "creates it again (providers must adopt an existing object in create)",
            PendingOpType.UPDATING: "state still holds the values from before the update; this run diffs "
            "against them and updates again if needed",
            PendingOpType.DELETING: "the resource is still in state; it is deleted again if still condemned",
            PendingOpType.READING: "the read is repeated on the next refresh",
        }
        for op in pending:
            self.diag(
                f"the previous run was interrupted while {op.type.value} this resource: {hints[op.type]}",
                Severity.WARNING,
                op.resource.urn,
            )

    def record(self, step: Step) -> None:
        with self.lock:
            self.steps.append(step)
        if step.op is not StepOp.SAME or os.environ.get("GPUAAS_ENGINE_SHOW_SAME"):
            self.emit(f"  {_SYMBOL[step.op]:<2} {step.op.value:<18} {step.urn}\n")

    def save(self) -> None:
        """Write the current snapshot (caller holds the lock). Previews never write."""
        if self.dry_run:
            return
        resources = list(self.live.values()) + self.condemned_replaced
        self.store.save(resources, list(self.pending.values()), self.stack_outputs)

    def begin(self, res: ResourceState, kind: PendingOpType) -> int:
        with self.lock:
            self._pending_seq += 1
            self.pending[self._pending_seq] = PendingOperation(resource=res, type=kind)
            self.save()
            return self._pending_seq

    def end(self, token: int) -> None:
        with self.lock:
            self.pending.pop(token, None)

    def targeted(self, urn: str) -> bool:
        return not self.targets or urn in self.targets

    # -- registration --------------------------------------------------------------------------
    def register(self, goal: Goal) -> Registered:
        with self.lock:
            if goal.urn in self.registered:
                self.diag(f"duplicate resource URN {goal.urn}: give the resources distinct names", urn=goal.urn)
                self.failed.add(goal.urn)
                return Registered(ok=False)
            self.registered.add(goal.urn)
        try:
            if not goal.custom:
                return self._register_component(goal)
            return self._register_custom(goal)
        except StepFailed as exn:
            with self.lock:
                self.failed.add(goal.urn)
            self.diag(str(exn), urn=goal.urn)
            return Registered(ok=False)
        except ProviderError as exn:
            with self.lock:
                self.failed.add(goal.urn)
            self.diag(exn.message, urn=goal.urn)
            if os.environ.get("GPUAAS_ENGINE_DEBUG"):
                self.emit(exn.details + "\n")
            return Registered(ok=False)

    def _new_state(
        self, goal: Goal, id_: str, inputs: Props, outputs: Props, old: ResourceState | None
    ) -> ResourceState:
        stamp = now()
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
            modified=stamp if old is None or old.inputs != inputs or old.outputs != outputs else old.modified,
        )

    def _register_component(self, goal: Goal) -> Registered:
        old = self.old.get(goal.urn)
        outputs = old.outputs if old else {}
        if goal.type == STACK_TYPE:
            outputs = self.stack_outputs
        new = self._new_state(goal, "", {}, outputs, old)
        op = StepOp.SAME if old else StepOp.CREATE
        if not self.targeted(goal.urn) and old is None and goal.type != STACK_TYPE:
            return Registered(unknown=True)
        with self.lock:
            self.live[goal.urn] = new
            self.save()
        self.record(Step(op=op, urn=goal.urn, oldState=display_state(old), newState=display_state(new)))
        return Registered()

    def _register_custom(self, goal: Goal) -> Registered:
        if not goal.type.startswith(DYNAMIC_PREFIX):
            raise StepFailed(
                f"type {goal.type} is not a dynamic provider resource; this test engine runs "
                "only pulumi-python:dynamic resources (use the Pulumi CLI for others)"
            )
        assert self.host is not None
        failed_deps = sorted((set(goal.dependencies) | {goal.parent}) & self.failed)
        if failed_deps:
            raise StepFailed(f"skipped: it depends on {', '.join(failed_deps)}, which failed")
        old = self.old.get(goal.urn)
        if not self.targeted(goal.urn):
            if old is None:
                return Registered(unknown=True)
            with self.lock:
                self.live[goal.urn] = old
            self.record(
                Step(
                    op=StepOp.SAME,
                    urn=goal.urn,
                    provider=self.provider_ref,
                    oldState=display_state(old),
                    newState=display_state(old),
                )
            )
            return Registered(id=old.id, outputs=old.outputs)
        news = goal.inputs
        if old is not None and goal.ignore_changes:
            news = apply_ignore_changes(old.inputs, news, goal.ignore_changes)
        if not self.dry_run and contains_unknown(strip_secrets(news)):
            unknown = sorted(k for k, v in news.items() if contains_unknown(strip_secrets(v)))
            raise StepFailed(f"inputs {', '.join(unknown)} are still unknown at deployment time")
        secret_in = secret_keys(news)
        checked_plain, failures = self.host.check(
            goal.urn, strip_secrets(old.inputs) if old else {}, strip_secrets(news)
        )
        if failures:
            raise StepFailed("check failed: " + "; ".join(f"property `{p}`: {r}" for p, r in failures))
        checked = remark_secrets(checked_plain, secret_in, [])
        if old is None:
            return self._create(goal, checked, secret_in, None, StepOp.CREATE)
        diff = self.host.diff(goal.urn, old.id, strip_secrets(old.outputs), checked_plain, strip_secrets(old.inputs))
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
        if decision.op is StepOp.SAME:
            new = self._new_state(goal, old.id, checked, old.outputs, old)
            with self.lock:
                self.live[goal.urn] = new
                self.save()
            self.record(
                Step(
                    op=StepOp.SAME,
                    urn=goal.urn,
                    provider=self.provider_ref,
                    oldState=display_state(old),
                    newState=display_state(new),
                )
            )
            return Registered(id=old.id, outputs=old.outputs)
        step = Step(
            op=decision.op,
            urn=goal.urn,
            provider=self.provider_ref,
            oldState=display_state(old),
            diffReasons=decision.diff_reasons,
            detailedDiff=decision.detailed,
            replaceReasons=decision.replace_reasons or None,
        )
        if decision.op is StepOp.UPDATE:
            return self._update(goal, old, checked, secret_in, step)
        return self._replace(goal, old, checked, secret_in, step, decision.delete_before_replace)

    def _outputs(self, goal: Goal, outs: Props, secret_in: set[str]) -> Props:
        return remark_secrets(outs, secret_in, goal.additional_secret_outputs)

    def _create(
        self,
        goal: Goal,
        checked: Props,
        secret_in: set[str],
        old: ResourceState | None,
        op: StepOp,
        step: Step | None = None,
    ) -> Registered:
        if self.dry_run:
            new = self._new_state(goal, "", checked, checked, old)
            self.record(
                Step(
                    op=op,
                    urn=goal.urn,
                    provider=self.provider_ref,
                    newState=display_state(new),
                    oldState=display_state(old) if op is not StepOp.CREATE else None,
                )
            )
            return Registered(outputs=checked)
        placeholder = self._new_state(goal, "", checked, {}, old)
        token = self.begin(placeholder, PendingOpType.CREATING)
        try:
            id_, outs = self.host.create(goal.urn, strip_secrets(checked))  # type: ignore[union-attr]
        finally:
            self.end(token)
        new = self._new_state(goal, id_, checked, self._outputs(goal, outs, secret_in), old)
        with self.lock:
            if old is not None and self.live.get(goal.urn) is old:
                # create-before-delete: the old one waits for deletion at the end of the run.
                self.condemned_replaced.append(old.model_copy(update={"delete": True}))
            self.live[goal.urn] = new
            self.save()
        self.record(
            Step(
                op=op,
                urn=goal.urn,
                provider=self.provider_ref,
                oldState=display_state(old),
                newState=display_state(new),
            )
        )
        return Registered(id=id_, outputs=new.outputs)

    def _update(self, goal: Goal, old: ResourceState, checked: Props, secret_in: set[str], step: Step) -> Registered:
        if self.dry_run:
            step.newState = display_state(self._new_state(goal, old.id, checked, checked, old))
            self.record(step)
            return Registered(id=old.id, outputs=checked)
        token = self.begin(old, PendingOpType.UPDATING)
        try:
            outs = self.host.update(
                goal.urn,
                old.id,
                strip_secrets(old.outputs),  # type: ignore[union-attr]
                strip_secrets(checked),
                strip_secrets(old.inputs),
            )
        finally:
            self.end(token)
        new = self._new_state(goal, old.id, checked, self._outputs(goal, outs, secret_in), old)
        with self.lock:
            self.live[goal.urn] = new
            self.save()
        step.newState = display_state(new)
        self.record(step)
        return Registered(id=old.id, outputs=new.outputs)

    def _replace(
        self,
        goal: Goal,
        old: ResourceState,
        checked: Props,
        secret_in: set[str],
        step: Step,
        delete_first: bool,
    ) -> Registered:
        if old.protect or goal.protect:
            raise StepFailed(
                f"cannot replace {goal.urn}: it is protected "
                f"(changed: {', '.join(step.replaceReasons or [])}). "
                "Set protect=False in the program and run up, then make the change"
            )
        if delete_first:
            self.delete_one(old, StepOp.DELETE_REPLACED)
            with self.lock:
                self.live.pop(goal.urn, None)
            self.record(step)
            return self._create(goal, checked, secret_in, old, StepOp.CREATE_REPLACEMENT, step)
        result = self._create(goal, checked, secret_in, old, StepOp.CREATE_REPLACEMENT, step)
        self.record(step)
        if self.dry_run:
            self.record(
                Step(
                    op=StepOp.DELETE_REPLACED,
                    urn=goal.urn,
                    provider=self.provider_ref,
                    oldState=display_state(old),
                )
            )
        return result

    def delete_one(self, res: ResourceState, op: StepOp = StepOp.DELETE) -> None:
        """Delete one resource (provider Delete unless retained) and drop it from state."""
        if res.protect and op is StepOp.DELETE:
            raise StepFailed(
                f"cannot delete {res.urn}: it is protected. Set protect=False in the program and "
                "run up first (or keep the resource in the program)"
            )
        provider = self.provider_ref if res.custom else None
        if self.dry_run:
            self.record(Step(op=op, urn=res.urn, provider=provider, oldState=display_state(res)))
            return
        if res.custom and res.id and not res.retainOnDelete and not res.external:
            token = self.begin(res, PendingOpType.DELETING)
            try:
                self.host.delete(
                    res.urn,
                    res.id,
                    strip_secrets(res.outputs),  # type: ignore[union-attr]
                    strip_secrets(res.inputs),
                )
            finally:
                self.end(token)
        elif res.retainOnDelete:
            self.diag(
                "retained (retain_on_delete): removed from state, not deleted by the provider",
                Severity.INFO,
                res.urn,
            )
        with self.lock:
            if res.delete:
                self.condemned_replaced = [
                    r
                    for r in self.condemned_replaced
                    if r is not res and not (r.urn == res.urn and r.id == res.id and r.delete)
                ]
            elif self.live.get(res.urn) is res or op is StepOp.DELETE:
                self.live.pop(res.urn, None)
            self.save()
        self.record(Step(op=op, urn=res.urn, provider=provider, oldState=display_state(res)))
