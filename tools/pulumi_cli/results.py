"""What one CLI operation returns, read from the engine events the CLI logs (`--event-log`).

The events are the CLI's own (`apitype.EngineEvent`): a step per resource (`resourcePreEvent` when it
starts, `resOutputsEvent` when it is done, `resOpFailedEvent` when it failed; an `up`'s own preview
marks its steps `planning`, and those are not steps of the run), diagnostics (provider output and
errors included), policy packs' findings (`policyEvent`) and one `summaryEvent`. A preview also keeps
the CLI's `--json` document.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"
SECRET_SIG = "4dabf18193072939515e22adb298388d"
SECRET_VALUE = "1b47061264138c4ac30d75fd1eb44270"  # SECRET_SIG's value on a secret
SECRET = "[secret]"


class Operation(StrEnum):
    PREVIEW = "preview"
    UP = "up"
    REFRESH = "refresh"
    DESTROY = "destroy"


class StepOp(StrEnum):
    SAME = "same"
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    REPLACE = "replace"
    CREATE_REPLACEMENT = "create-replacement"
    DELETE_REPLACED = "delete-replaced"
    READ = "read"
    READ_REPLACEMENT = "read-replacement"
    REFRESH = "refresh"
    DISCARD = "discard"
    DISCARD_REPLACED = "discard-replaced"
    REMOVE_PENDING_REPLACE = "remove-pending-replace"
    IMPORT = "import"
    IMPORT_REPLACEMENT = "import-replacement"


# Ops counted in the CLI's change summary; the halves of a replacement are steps only.
SUMMARY_OPS = {StepOp.SAME, StepOp.CREATE, StepOp.UPDATE, StepOp.DELETE, StepOp.REPLACE, StepOp.READ}
CHANGE_OPS = {StepOp.CREATE, StepOp.UPDATE, StepOp.DELETE, StepOp.REPLACE, StepOp.CREATE_REPLACEMENT,
              StepOp.DELETE_REPLACED, StepOp.IMPORT, StepOp.IMPORT_REPLACEMENT}


class Severity(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    INFO_ERR = "info#err"  # a provider's stderr
    WARNING = "warning"
    ERROR = "error"


def _masked(obj: dict[str, Any]) -> Any:
    """A decoded JSON object as the CLI displays it: a secret is `[secret]`."""
    return SECRET if obj.get(SECRET_SIG) == SECRET_VALUE else obj


class StepState(BaseModel):
    type: str = ""
    urn: str = ""
    id: str = ""
    parent: str = ""
    custom: bool = False
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)


class Step(BaseModel):
    """One resource step of the run (`StepEventMetadata`): done, or failed (`failed`)."""

    op: StepOp
    urn: str
    type: str = ""
    old: StepState | None = None
    new: StepState | None = None
    keys: list[str] = Field(default_factory=list)  # the keys that make it a replacement
    diffs: list[str] = Field(default_factory=list)  # the keys that changed
    detailedDiff: dict[str, Any] | None = None
    failed: bool = False
    # Seconds since the CLI started when the step began and ended (as the runner saw the events arrive).
    started_s: float | None = None
    finished_s: float | None = None


class Diagnostic(BaseModel):
    urn: str | None = None
    prefix: str | None = None
    message: str
    severity: Severity


class PolicyViolation(BaseModel):
    """A policy pack's finding, as the CLI's engine event `policyEvent` (apitype.PolicyEvent) carries it."""

    resourceUrn: str = ""
    message: str = ""
    policyName: str = ""
    policyPackName: str = ""
    policyPackVersion: str = ""
    enforcementLevel: str = ""  # "mandatory", "advisory", "remediate", "disabled"
    severity: str = ""


class EngineResult(BaseModel):
    """One operation: `ok` is the CLI's exit status; steps, diagnostics and the summary come from its
    engine events; `log` is everything the CLI printed; `preview` the `pulumi preview --json` document."""

    operation: Operation
    ok: bool
    steps: list[Step] = Field(default_factory=list)
    changeSummary: dict[str, int] = Field(default_factory=dict)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(default_factory=dict)  # stack outputs, secrets as "[secret]"
    failed: list[str] = Field(default_factory=list)  # URNs whose step failed
    exitCode: int = 0
    durationNs: int = 0
    log: str = ""
    preview: dict[str, Any] | None = None
    summary: bool = False  # the CLI reached its summary event (a killed run never does)
    wall_s: float = 0.0  # the CLI's run, start to exit
    # what an operator waits for: from the runner's start (as a language host's Python starts) to the CLI's
    # exit, on the host's monotonic clock; the runner's reading of the event log afterwards is not in it
    until_cli_exit_s: float | None = None
    call_s: float | None = None  # the whole operation as its caller waited: the runner's start to its result
    program_runs: list[tuple[float, float]] = Field(default_factory=list)  # the program's (start, end)s
    policyViolations: list[PolicyViolation] = Field(default_factory=list)  # `policyEvent`s, in order
    policyPacks: dict[str, str] = Field(default_factory=dict)  # packs that ran: name -> version (summary)
    policiesRun: list[str] = Field(default_factory=list)  # policies the packs judged (passed or failed), sorted

    def preview_digest(self) -> dict[str, Any]:
        """The `pulumi preview --json` document of a preview."""
        if self.preview is None:
            raise ValueError(f"a {self.operation} has no preview document (only `preview` prints one)")
        return self.preview

    def ops(self) -> dict[str, StepOp]:
        """URN -> its main op (the `replace` op wins over its halves). Provider resources are left out."""
        out: dict[str, StepOp] = {}
        for step in self.steps:
            if step.type.startswith("pulumi:providers:"):
                continue
            if step.urn not in out or step.op in SUMMARY_OPS:
                out[step.urn] = step.op
        return out

    def changed(self) -> dict[str, StepOp]:
        return {urn: op for urn, op in self.ops().items() if op in CHANGE_OPS}

    def errors(self) -> list[str]:
        return [d.message for d in self.diagnostics if d.severity is Severity.ERROR]

    def warnings(self) -> list[str]:
        return [d.message for d in self.diagnostics if d.severity is Severity.WARNING]

    def messages(self, urn_part: str = "") -> list[str]:
        """Every non-debug diagnostic's text (provider output included), optionally of one resource."""
        return [d.message for d in self.diagnostics if urn_part in (d.urn or "")]


def _state(raw: dict[str, Any] | None) -> StepState | None:
    if not raw:
        return None
    return StepState(
        type=raw.get("type", ""),
        urn=raw.get("urn", ""),
        id=raw.get("id", ""),
        parent=raw.get("parent", ""),
        custom=bool(raw.get("custom")),
        inputs=raw.get("inputs") or {},  # secrets masked as read (read_events)
        outputs=raw.get("outputs") or {},
    )


def _step(meta: dict[str, Any], failed: bool = False, at: float | None = None) -> Step:
    return Step(
        started_s=at,
        op=StepOp(meta["op"]),
        urn=meta["urn"],
        type=meta.get("type", ""),
        old=_state(meta.get("old")),
        new=_state(meta.get("new")),
        keys=list(meta.get("keys") or []),
        diffs=list(meta.get("diffs") or []),
        detailedDiff=meta.get("detailedDiff"),
        failed=failed,
    )


def read_events(path: Path) -> list[dict[str, Any]]:
    """The event log's events, each secret value as `[secret]` wherever it sits in an event; a torn last line
    (the run was killed mid-write) is dropped. Only a line that holds a secret is decoded object by object."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line, object_hook=_masked) if SECRET_VALUE in line else json.loads(line))
        except ValueError:
            continue
    return out


class _Events:
    """The events of one run, sorted into steps (started, done, failed), diagnostics and policy results."""

    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        self.pre: list[Step] = []
        self.done: list[Step] = []
        self.failed: list[Step] = []
        self.diagnostics: list[Diagnostic] = []
        self.violations: list[PolicyViolation] = []
        self.policies_run: set[str] = set()
        self.summary: dict[str, Any] | None = None
        self._began: dict[tuple[str, str], float] = {}  # (urn, op) -> when its pre event arrived

    def add(self, event: dict[str, Any], at: float | None) -> None:
        step_event = event.get("resourcePreEvent") or event.get("resOutputsEvent")
        if step_event and step_event.get("planning") and self.operation is not Operation.PREVIEW:
            return  # the preview an `up` (refresh, destroy) starts with: planned, not done
        if "resourcePreEvent" in event:
            step = _step(event["resourcePreEvent"]["metadata"], at=at)
            self.pre.append(step)
            if at is not None:
                self._began[(step.urn, step.op)] = at
        elif "resOutputsEvent" in event or "resOpFailedEvent" in event:
            failed = "resOpFailedEvent" in event
            step = _step(event["resOpFailedEvent" if failed else "resOutputsEvent"]["metadata"], failed=failed)
            step.started_s, step.finished_s = self._began.get((step.urn, step.op)), at
            (self.failed if failed else self.done).append(step)
        elif "diagnosticEvent" in event:
            d = event["diagnosticEvent"]
            if d.get("severity") != Severity.DEBUG:
                self.diagnostics.append(Diagnostic(urn=d.get("urn") or None, prefix=d.get("prefix"),
                                                   message=d.get("message", ""), severity=Severity(d["severity"])))
        elif "policyEvent" in event:
            fields = PolicyViolation.model_fields
            self.violations.append(PolicyViolation(**{k: v for k, v in event["policyEvent"].items() if k in fields}))
        elif "policyAnalyzeSummaryEvent" in event or "policyAnalyzeStackSummaryEvent" in event:
            judged = event.get("policyAnalyzeSummaryEvent") or event.get("policyAnalyzeStackSummaryEvent") or {}
            self.policies_run.update(judged.get("passed") or [], judged.get("failed") or [])
        elif "summaryEvent" in event:
            self.summary = event["summaryEvent"]

    def steps(self) -> list[Step]:
        """A preview's steps are planned (pre events); a run's are those that finished or failed. A
        component that never registers outputs has no outputs event: the engine counts its step done when
        it starts, so once the run reached its summary, a component's started step counts as done."""
        if self.operation is Operation.PREVIEW:
            return self.pre + self.failed
        done = list(self.done)
        if self.summary is not None:
            ended = {(s.urn, s.op) for s in self.done + self.failed}
            done += [s for s in self.pre if (s.urn, s.op) not in ended and s.new is not None
                     and not s.new.custom and s.type != ROOT_STACK_TYPE]
        return done + self.failed


def result_from_events(operation: Operation, events: list[dict[str, Any]], exit_code: int, log: str,
                       preview: dict[str, Any] | None = None, times: list[float] | None = None) -> EngineResult:
    seen = _Events(operation)
    for i, event in enumerate(events):
        seen.add(event, times[i] if times and i < len(times) else None)
    stack_outputs: dict[str, Any] = {}
    for step in seen.done:
        if step.type == ROOT_STACK_TYPE and step.new is not None:
            stack_outputs = step.new.outputs
    summary = seen.summary or {}
    return EngineResult(
        operation=operation,
        ok=exit_code == 0,
        steps=seen.steps(),
        changeSummary=dict(summary.get("resourceChanges") or {}),
        diagnostics=seen.diagnostics,
        outputs=stack_outputs,
        failed=list(dict.fromkeys(s.urn for s in seen.failed)),
        exitCode=exit_code,
        durationNs=int(summary.get("durationSeconds") or 0) * 1_000_000_000,
        log=log,
        preview=preview,
        summary=seen.summary is not None,
        policyViolations=seen.violations,
        policyPacks=dict(summary.get("PolicyPacks") or {}),
        policiesRun=sorted(seen.policies_run),
    )
