"""Pydantic models at the engine's boundaries: state records, steps, diagnostics, results.

Field names follow Pulumi's JSON (``apitype.ResourceV3``, ``display.PreviewStep``), so a step can be
dumped straight into the ``pulumi preview --json`` shape.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


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
    REFRESH = "refresh"


# Ops that count in changeSummary; the halves of a replacement are reported as steps only.
SUMMARY_OPS = {StepOp.SAME, StepOp.CREATE, StepOp.UPDATE, StepOp.DELETE, StepOp.REPLACE, StepOp.READ}


class PendingOpType(StrEnum):
    CREATING = "creating"
    UPDATING = "updating"
    DELETING = "deleting"
    READING = "reading"
    IMPORTING = "importing"


class Severity(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    INFO_ERR = "info#err"  # a provider's stderr (plugin.go runtrace: Diag.Infoerrf)
    WARNING = "warning"
    ERROR = "error"


class DiffKind(StrEnum):
    ADD = "add"
    ADD_REPLACE = "add-replace"
    DELETE = "delete"
    DELETE_REPLACE = "delete-replace"
    UPDATE = "update"
    UPDATE_REPLACE = "update-replace"


class ResourceState(BaseModel):
    """One resource as recorded in the state file (values keep their secret wrappers). Frozen: a change
    is a new object (``model_copy``), which is what lets the state writer cache each one's encoding."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    urn: str
    custom: bool
    delete: bool = False
    id: str = ""
    type: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)
    parent: str = ""
    protect: bool = False
    external: bool = False
    # Deleted by a delete-before-replace whose replacement is not created yet (apitype.ResourceV3).
    pendingReplacement: bool = False
    dependencies: list[str] = Field(default_factory=list)
    propertyDependencies: dict[str, list[str]] = Field(default_factory=dict)
    additionalSecretOutputs: list[str] = Field(default_factory=list)
    retainOnDelete: bool = False
    ignoreChanges: list[str] = Field(default_factory=list)
    created: str | None = None
    modified: str | None = None

    def all_dependencies(self) -> set[str]:
        deps = set(self.dependencies)
        for urns in self.propertyDependencies.values():
            deps.update(urns)
        if self.parent:
            deps.add(self.parent)
        return deps


class PendingOperation(BaseModel):
    resource: ResourceState
    type: PendingOpType


class PropertyDiff(BaseModel):
    kind: DiffKind
    inputDiff: bool


class Step(BaseModel):
    """A step in the ``pulumi preview --json`` shape (``display.PreviewStep``)."""

    op: StepOp
    urn: str
    provider: str | None = None
    oldState: dict[str, Any] | None = None
    newState: dict[str, Any] | None = None
    diffReasons: list[str] | None = None
    replaceReasons: list[str] | None = None
    detailedDiff: dict[str, PropertyDiff] | None = None
    # A refresh step's result (step.go RefreshStep.ResultOp: same, update = drifted, delete = gone).
    # Not part of the CLI's preview JSON; kept for summaries and --expect-no-changes.
    drifted: bool | None = None

    def digest(self) -> dict[str, Any]:
        out = self.model_dump(mode="json", exclude_none=True, exclude={"drifted"})
        out["detailedDiff"] = out.get("detailedDiff")  # never omitted by the CLI (no omitempty)
        return out


class Diagnostic(BaseModel):
    urn: str | None = None
    prefix: str | None = None
    message: str
    severity: Severity

    def digest(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


class EngineResult(BaseModel):
    """What every operation returns (CLI ``--json`` for up/refresh/destroy, Python API for all)."""

    operation: Operation
    ok: bool
    steps: list[Step] = Field(default_factory=list)
    changeSummary: dict[str, int] = Field(default_factory=dict)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(default_factory=dict)  # stack outputs, secrets masked
    failed: list[str] = Field(default_factory=list)  # URNs whose step failed
    exitCode: int = 0
    durationNs: int = 0  # wall time of the operation (the CLI's digest has `duration` in nanoseconds)
    log: str = ""  # captured stdout/stderr of the engine process (Python API only)

    def preview_digest(self, show_sames: bool = False, show_replacement_steps: bool = False) -> dict[str, Any]:
        """Exactly the ``pulumi preview --json`` document. Like the CLI, ``same``/``read`` steps (except the
        root stack's) appear only with ``--show-sames``, and the ``create-replacement``/``delete-replaced``
        halves of a replacement only with ``--show-replacement-steps``; ``changeSummary`` counts all."""

        def shown(step: Step) -> bool:
            if step.op in (StepOp.SAME, StepOp.READ):
                return show_sames or step.urn.split("::")[2] == ROOT_STACK_TYPE
            if step.op in (StepOp.CREATE_REPLACEMENT, StepOp.DELETE_REPLACED):
                return show_replacement_steps
            return True

        digest: dict[str, Any] = {"steps": [s.digest() for s in self.steps if shown(s)]}
        if self.diagnostics:
            digest["diagnostics"] = [d.digest() for d in self.diagnostics]
        if self.durationNs:
            digest["duration"] = self.durationNs
        digest["changeSummary"] = self.changeSummary
        return digest

    def ops(self) -> dict[str, StepOp]:
        """URN -> its main op (the ``replace`` op wins over its halves)."""
        out: dict[str, StepOp] = {}
        for step in self.steps:
            if step.urn not in out or step.op in SUMMARY_OPS:
                out[step.urn] = step.op
        return out

    def errors(self) -> list[str]:
        return [d.message for d in self.diagnostics if d.severity is Severity.ERROR]

    def warnings(self) -> list[str]:
        return [d.message for d in self.diagnostics if d.severity is Severity.WARNING]
