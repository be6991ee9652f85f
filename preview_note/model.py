"""The `pulumi preview --json` document as pydantic models.

The shape is the CLI's `PreviewDigest` (pkg/display/json.go: config, steps, diagnostics, duration,
changeSummary, maybeCorrupt). Unknown extra fields are kept (`extra="allow"`) because newer CLIs add
fields (a step's `provider`, a state's `created`, `sourcePosition`, `stackTrace`, ...) and a note must
not break on them. What the real CLI (3.274) sends for this project's dynamic providers, as the golden
inputs (tests/preview_note/golden, captured by tests/preview_note/capture.py) show: `detailedDiff` is
always null and `diffReasons` absent (the Python dynamic provider reports neither), `replaceReasons`
may name nested paths (`machine.deploy.hwe_kernel`) or a whole input that is unknown; an input known
only after apply is the unknown sentinel, possibly a whole object; secrets are "[secret]" (config too);
diagnostics carry their prefix inside `message` ("error: ..."); `same` steps only with `--show-sames`
(the root stack always), replacement halves only with `--show-replacement-steps`; `preview --refresh`
adds `refresh` steps whose old and new states are equal (the drift shows in the next step's old
outputs); no policy events (they come from `--event-log`).
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class PreviewInputError(ValueError):
    """A preview file that cannot be read; the message names the file, the path in it and the fix."""


class Op(StrEnum):
    """Step operations the engine reports (`display.StepOp`)."""

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
    DIFF = "diff"  # `pulumi import`'s comparison with the imported resource
    EXTEND_PARAMETERIZE = "extend-parameterize"  # a parameterized provider's extension


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    INFOERR = "info#err"
    DEBUG = "debug"


class EnforcementLevel(StrEnum):
    MANDATORY = "mandatory"
    ADVISORY = "advisory"
    REMEDIATE = "remediate"
    DISABLED = "disabled"


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class ResourceState(_Loose):
    """`apitype.ResourceV3`, the fields the note reads."""

    urn: str = ""
    type: str = ""
    custom: bool = False
    id: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)
    parent: str | None = None
    protect: bool = False


class PropertyDiff(_Loose):
    kind: str
    input_diff: bool = Field(default=False, alias="inputDiff")


class Step(_Loose):
    op: Op
    urn: str
    provider: str | None = None
    old_state: ResourceState | None = Field(default=None, alias="oldState")
    new_state: ResourceState | None = Field(default=None, alias="newState")
    diff_reasons: list[str] | None = Field(default=None, alias="diffReasons")
    replace_reasons: list[str] | None = Field(default=None, alias="replaceReasons")
    detailed_diff: dict[str, PropertyDiff] | None = Field(default=None, alias="detailedDiff")


class Diagnostic(_Loose):
    urn: str | None = None
    prefix: str | None = None
    message: str = ""
    severity: Severity = Severity.INFO


class PolicyViolation(_Loose):
    """`apitype.PolicyEvent` (from `--event-log` files; the CLI's JSON digest drops these)."""

    resource_urn: str | None = Field(default=None, alias="resourceUrn")
    message: str = ""
    policy_name: str = Field(default="", alias="policyName")
    policy_pack_name: str = Field(default="", alias="policyPackName")
    policy_pack_version: str | None = Field(default=None, alias="policyPackVersion")
    enforcement_level: EnforcementLevel = Field(default=EnforcementLevel.ADVISORY, alias="enforcementLevel")


class PreviewDigest(_Loose):
    config: dict[str, Any] = Field(default_factory=dict)
    steps: list[Step] = Field(default_factory=list)
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    change_summary: dict[str, int] = Field(default_factory=dict, alias="changeSummary")
    maybe_corrupt: bool = Field(default=False, alias="maybeCorrupt")
    # Not in the CLI's digest; the CLI-free engine may add them, and `--event-log` files fill them.
    policy_violations: list[PolicyViolation] = Field(default_factory=list, alias="policyViolations")


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_preview(text: str, source: str) -> PreviewDigest:
    """Parse one preview document; `source` (usually a file path) is named in every error."""
    if not text.strip():
        raise PreviewInputError(
            f"{source}: empty preview output; did `pulumi preview --json` fail before printing? "
            "Check the job log above the preview step."
        )
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PreviewInputError(
            f"{source}: line {exc.lineno} column {exc.colno}: not JSON ({exc.msg}); pass the output of "
            "`pulumi preview --json` (stdout only, not the progress display)"
        ) from None
    if not isinstance(raw, dict):
        raise PreviewInputError(f"{source}: top level is {type(raw).__name__}, expected the preview object")
    try:
        return PreviewDigest.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise PreviewInputError(
            f"{source}: {_loc(first['loc'])}: {first['msg']} "
            f"({exc.error_count()} problem(s)); expected the `pulumi preview --json` shape"
        ) from None


def load_preview(path: Path) -> PreviewDigest:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PreviewInputError(f"{path}: cannot read ({exc.strerror})") from None
    return parse_preview(text, str(path))


def load_event_log(path: Path) -> list[PolicyViolation]:
    """Policy violations from a `pulumi preview --event-log` file (one engine event per line)."""
    out: list[PolicyViolation] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise PreviewInputError(f"{path}: cannot read ({exc.strerror})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PreviewInputError(f"{path}: line {n}: not a JSON engine event ({exc.msg})") from None
        policy = event.get("policyEvent") if isinstance(event, dict) else None
        if policy is None:
            continue
        try:
            out.append(PolicyViolation.model_validate(policy))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise PreviewInputError(f"{path}: line {n}: policyEvent.{_loc(first['loc'])}: {first['msg']}") from None
    return out
