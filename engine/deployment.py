"""One deployment's shared bookkeeping: old and live state, pending operations, steps, diagnostics.

``register`` (registrations) and ``teardown`` (deletes, destroy, refresh) do the steps; both mutate
this object under ``lock`` and call ``save`` after each change, so the state file always reflects every
completed step.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.aliases import AliasSpec, generate_aliases
from engine.model import (
    ROOT_STACK_TYPE,
    Diagnostic,
    Operation,
    PendingOperation,
    PendingOpType,
    ResourceState,
    Severity,
    Step,
    StepOp,
)
from engine.provider_host import PREFIX as PROVIDER_PREFIX
from engine.provider_host import ProviderHost
from engine.stackrefs import StackReferences
from engine.state import StateStore
from engine.values import (
    UNKNOWN,
    Props,
    Redactor,
    mask_secrets,
    strip_secrets,
)

STACK_TYPE = ROOT_STACK_TYPE
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


class ProtectedDelete(StepFailed):
    """A delete refused because the resource is protected (deleteProtectedError)."""


class NotStarted(Exception):
    """The run is cancelled (a step failed, or a signal): like the real step executor after ``cancel()``,
    no new step starts and nothing is reported for the resources never reached."""


class Skipped(Exception):
    """``--continue-on-error``: a dependency failed, so this step is skipped (deployment_executor.go
    ``handleSingleEvent``: ``step.Skip()`` for steps that depend on errored ones)."""


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
    aliases: list[AliasSpec] = field(default_factory=list)


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
        continue_on_error: bool = False,
        stack_refs: StackReferences | None = None,
    ) -> None:
        self.operation = operation
        self.stack_refs = stack_refs  # other stacks' outputs, for pulumi:pulumi:StackReference
        self.continue_on_error = continue_on_error
        self.dry_run = operation is Operation.PREVIEW
        self.store = store
        self.host = host
        self.project = project
        self.stack = stack
        self.targets = set(targets or [])
        # Everything bound for the user goes through the redactor: known secret plaintexts become [secret].
        self.redact = Redactor()
        raw_emit = emit or (lambda line: None)
        self.emit: Callable[[str], None] = lambda line: raw_emit(self.redact(line))
        self.lock = threading.RLock()
        # Serialises check and diff, as the real step generator does (one registration event at a time).
        self.stepgen_lock = threading.Lock()
        initial = store.initial
        self.old: dict[str, ResourceState] = {r.urn: r for r in initial.resources if not r.delete}
        self.live: dict[str, ResourceState] = dict(self.old)
        # Replaced (create-before-delete) or left over from an earlier run: deleted at the end.
        self.condemned_replaced: list[ResourceState] = [r for r in initial.resources if r.delete]
        self.pending: dict[int, PendingOperation] = {}
        # snapshot.go: pending CREATE operations of the base snapshot are carried into every new snapshot
        # until an operator resolves them (refresh --clear-pending-creates / --import-pending-creates).
        self.pending_creates: list[PendingOperation] = [
            op for op in initial.pending_operations if op.type is PendingOpType.CREATING
        ]
        self.registered: set[str] = set()
        self.failed: set[str] = set()
        self.skipped: set[str] = set()
        # Set by SIGINT/SIGTERM (see cli), or by the first failed step unless --continue-on-error
        # (step_executor.go cancelDueToError): steps already running finish and are recorded; no new step starts.
        self.cancelled = threading.Event()
        self.errored = threading.Event()
        # The stack's outputs as the program registered them; applied at the end (finalize_outputs).
        self.program_outputs: Props | None = None
        self.steps: list[Step] = []
        self.diagnostics: list[Diagnostic] = []
        self.stack_outputs: Props = dict(initial.outputs)
        for res in initial.resources:
            self.redact.add(res.inputs)
            self.redact.add(res.outputs)
        self._pending_seq = 0
        # Aliases (step_generator.go getOldResource): old URN -> the new URN that took it over, and back.
        self.aliased: dict[str, str] = {}
        self.alias_of: dict[str, str] = {}
        self._rewritten: dict[int, tuple[ResourceState, ResourceState]] = {}
        self._report_interrupted(initial.pending_operations)

    # -- bookkeeping ---------------------------------------------------------------------------
    @property
    def provider_ref(self) -> str:
        return f"urn:pulumi:{self.stack}::{self.project}::pulumi:providers:pulumi-python::default::{UNKNOWN}"

    @property
    def builtin_provider_ref(self) -> str:
        """The CLI's builtin provider (stack references): `pulumi:providers:pulumi`, never a plugin."""
        return f"urn:pulumi:{self.stack}::{self.project}::pulumi:providers:pulumi::default::{UNKNOWN}"

    def diag(self, message: str, severity: Severity = Severity.ERROR, urn: str | None = None) -> None:
        message = self.redact(message)
        with self.lock:
            self.diagnostics.append(Diagnostic(urn=urn, message=message, severity=severity))
        self.emit(f"{severity.value}: {urn + ': ' if urn else ''}{message}\n")

    def provider_output(self, line: str, from_stderr: bool) -> None:
        """A line the provider server printed: shown live, and kept as an ``info`` (stdout) or ``info#err``
        (stderr) diagnostic without a URN, the way the CLI's plugin host reports it."""
        line = self.redact(line)
        severity = Severity.INFO_ERR if from_stderr else Severity.INFO
        with self.lock:
            self.diagnostics.append(Diagnostic(message=line, severity=severity))
        self.emit(PROVIDER_PREFIX + line)

    def _report_interrupted(self, pending: list[PendingOperation]) -> None:
        """deployment_executor.go ``printPendingOperationsWarning`` (update and destroy, not preview or
        refresh): one warning naming every interrupted operation and how to resolve it."""
        if not pending or self.operation not in (Operation.UP, Operation.DESTROY):
            return
        listed = "".join(f"  * {op.resource.urn}, interrupted while {op.type.value}\n" for op in pending)
        self.diag(
            "Attempting to deploy or update resources "
            f"with {len(pending)} pending operations from previous deployment.\n{listed}"
            "These resources are in an unknown state because the Pulumi CLI was interrupted while waiting for "
            "changes to these resources to complete. You should confirm whether or not the operations listed "
            "completed successfully by checking the state of the appropriate provider.\n\n"
            "Once you have confirmed the status of the interrupted operations, you can repair your stack using "
            "`pulumi refresh` which will refresh the state from the provider you are using and clear the pending "
            "operations if there are any.\n\n"
            "Note that `pulumi refresh` will need to be run interactively to clear pending CREATE operations.",
            Severity.WARNING,
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
        current = [*self.live.values(), *self.condemned_replaced]
        resources = [self._renamed(r) for r in current]
        if self._rewritten:
            self._rewritten = {id(r): self._rewritten[id(r)] for r in current if id(r) in self._rewritten}
        self.store.save(resources, [*self.pending.values(), *self.pending_creates], self.stack_outputs)

    # -- aliases ---------------------------------------------------------------------------------
    def find_old(self, goal: Goal) -> ResourceState | None:
        """The old state this registration takes over: by its URN first, then by each alias in order
        (step_generator.go ``getOldResource``). A match by alias moves the old entry to the new URN."""
        with self.lock:
            if goal.urn in self.old or not (goal.aliases or goal.parent in self.alias_of):
                return self.old.get(goal.urn)
            if goal.urn in self.aliased:
                raise StepFailed(
                    f"duplicate resource URN {goal.urn}: {self.aliased[goal.urn]} already took it over as an alias"
                )
            for alias in generate_aliases(
                goal.aliases, goal.name, goal.type, goal.parent, self.stack, self.project, self.alias_of
            ):
                old = self.old.get(alias)
                if old is None:
                    continue
                if alias in self.registered or alias in self.aliased:
                    taken = self.aliased.get(alias, alias)
                    raise StepFailed(
                        f"{goal.urn} is an alias of {alias}, which {taken} already uses: "
                        "two resources cannot take over the same old resource; fix the aliases"
                    )
                self.aliased[alias] = goal.urn
                self.alias_of[goal.urn] = alias
                if self.live.get(alias) is old:
                    self.live[goal.urn] = self.live.pop(alias)
                return old
            return None

    def _renamed(self, res: ResourceState) -> ResourceState:
        """``res`` with every reference to an aliased old URN replaced by its new URN (the snapshot
        rewrite the real engine does), memoised per object so the state writer's cache keeps working."""
        if not self.aliased:
            return res
        hit = self._rewritten.get(id(res))
        if hit is not None and hit[0] is res:
            return hit[1]
        ren = self.aliased
        new = res
        refs = res.all_dependencies() | {res.urn}
        if refs & ren.keys():
            new = res.model_copy(
                update={
                    "urn": res.urn if res.delete else ren.get(res.urn, res.urn),
                    "parent": ren.get(res.parent, res.parent),
                    "dependencies": [ren.get(d, d) for d in res.dependencies],
                    "propertyDependencies": {
                        k: [ren.get(d, d) for d in v] for k, v in res.propertyDependencies.items()
                    },
                }
            )
        self._rewritten[id(res)] = (res, new)
        return new

    def begin(self, res: ResourceState, kind: PendingOpType) -> int:
        with self.lock:
            self._pending_seq += 1
            self.pending[self._pending_seq] = PendingOperation(resource=res, type=kind)
            self.save()
            return self._pending_seq

    def end(self, token: int) -> None:
        with self.lock:
            self.pending.pop(token, None)

    def check_cancelled(self) -> None:
        if self.cancelled.is_set():
            raise NotStarted()

    def step_failed(self, urn: str, message: str) -> None:
        """Record a failed step; without --continue-on-error the run is cancelled (cancelDueToError)."""
        with self.lock:
            self.failed.add(urn)
        self.diag(message, urn=urn)
        self.errored.set()
        if not self.continue_on_error:
            self.cancelled.set()

    def bail(self, urn: str, messages: list[str]) -> None:
        """The step generator refused a registration: report it and stop the run even with
        --continue-on-error (an error from handleSingleEvent cancels the deployment)."""
        with self.lock:
            self.failed.add(urn)
        for message in messages:
            self.diag(message, urn=urn)
        self.errored.set()
        self.cancelled.set()

    def finalize_outputs(self) -> None:
        """step_executor.go executeRegisterResourceOutputs(finalizing): on success the program's outputs
        replace the old ones; after an error the old outputs are kept and only overwritten key by key."""
        if self.program_outputs is None:
            return
        with self.lock:
            if self.errored.is_set() or self.cancelled.is_set():
                self.stack_outputs = {**self.stack_outputs, **self.program_outputs}
            else:
                self.stack_outputs = dict(self.program_outputs)
            root = next((r for r in self.live.values() if r.type == STACK_TYPE), None)
            if root is not None:
                self.live[root.urn] = root.model_copy(update={"outputs": self.stack_outputs})

    def targeted(self, urn: str) -> bool:
        return not self.targets or urn in self.targets

    # -- registration --------------------------------------------------------------------------
    def delete_one(self, res: ResourceState, op: StepOp = StepOp.DELETE, pending_replace: bool = False) -> None:
        """Delete one resource (provider Delete unless retained, or already gone because it is pending
        replacement) and drop it from state; with ``pending_replace`` it stays in state marked
        ``pendingReplacement`` until its replacement is created (a delete-before-replace)."""
        if res.protect and op is StepOp.DELETE:
            raise ProtectedDelete(
                f"unable to delete resource \"{res.urn}\"\nas it is currently marked for protection. To unprotect "
                "the resource, remove the `protect` flag from the resource in your Pulumi program and run `pulumi up`"
            )
        provider = self.provider_ref if res.custom else None
        if self.dry_run:
            if pending_replace:  # so its own registration plans the replacement without a second delete
                with self.lock:
                    self.live[res.urn] = res.model_copy(update={"pendingReplacement": True})
            self.record(Step(op=op, urn=res.urn, provider=provider, oldState=display_state(res)))
            return
        if res.custom and res.id and not res.retainOnDelete and not res.external and not res.pendingReplacement:
            assert self.host is not None, "custom resources need the provider server"
            token = self.begin(res, PendingOpType.DELETING)
            try:
                self.host.delete(res.urn, res.id, strip_secrets(res.outputs), strip_secrets(res.inputs))
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
            elif pending_replace:
                self.live[res.urn] = res.model_copy(update={"pendingReplacement": True})
            elif self.live.get(res.urn) is res or op is StepOp.DELETE:
                self.live.pop(res.urn, None)
            self.save()
        self.record(Step(op=op, urn=res.urn, provider=provider, oldState=display_state(res)))
