"""Node bootstrap: enrollment tokens, node records and their lifecycle (seed 001)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field, FieldSerializationInfo, SecretStr, field_serializer
from pydantic.config import JsonDict

from .common import ID_PATTERN, Page, RequestModel, ResponseModel

HOSTNAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
SYSTEM_ID_PATTERN = r"^[a-z0-9]{4,16}$"
# Secrets travel as plain strings on the wire; SecretStr keeps them out of reprs and logs.
_SECRET_SCHEMA: JsonDict = {"type": "string", "minLength": 16, "maxLength": 256, "format": "password"}


def reveal_secret(value: SecretStr, info: FieldSerializationInfo) -> str:
    """Serialize a secret in clear only when the caller asks for the wire form explicitly."""
    if isinstance(info.context, dict) and info.context.get("reveal_secrets"):
        return value.get_secret_value()
    return str(value)


class NodeStatus(StrEnum):
    """The seeds' node statuses. Transitions: `simulators.platform.nodes.NODE_TRANSITIONS`."""

    BOOTSTRAP_ISSUED = "bootstrap_issued"
    ENROLLING = "enrolling"
    ACTIVE = "active"
    OFFLINE = "offline"
    QUARANTINED = "quarantined"
    DRAINING = "draining"
    RETIRED = "retired"
    REMOVING = "removing"
    DELETED = "deleted"


class NodeAction(StrEnum):
    """Operator actions on an enrolled node (removal is DELETE on the node)."""

    QUARANTINE = "quarantine"
    UNQUARANTINE = "unquarantine"
    DRAIN = "drain"
    RETIRE = "retire"


class EnrollmentTokenRequest(RequestModel):
    """Mint a token for one deploy attempt of one machine (node record created on first mint)."""

    profile_id: str = Field(pattern=ID_PATTERN)
    hostname: str = Field(pattern=HOSTNAME_PATTERN)
    system_id: str = Field(pattern=SYSTEM_ID_PATTERN, description="The MAAS system_id of the machine.")


class EnrollmentTokenGrant(ResponseModel):
    """Returned once, at mint. Minting again for the node revokes any unused earlier token."""

    token_id: str = Field(pattern=ID_PATTERN)
    node_id: str = Field(pattern=ID_PATTERN)
    site_id: str = Field(pattern=ID_PATTERN)
    profile_id: str = Field(pattern=ID_PATTERN)
    enrollment_token: SecretStr = Field(json_schema_extra=_SECRET_SCHEMA)
    _wire_token = field_serializer("enrollment_token", when_used="json")(reveal_secret)
    ttl_seconds: int = Field(ge=1)
    expires_at: datetime


class BootstrapOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ENROLLED = "enrolled"
    """Sent with the enrollment: the launcher's post-enrollment steps (node agent install) still run; its
    final report (succeeded or failed) follows on /api/v1/node-bootstrap/report with the same token."""


class BootstrapRunner(StrEnum):
    """Who ran the bundle: the node's own launcher, or the MAAS simulator's fast backend (nothing ran)."""

    LAUNCHER = "launcher"
    FAST_SIMULATOR = "fast-simulator"


class BootstrapStepResult(RequestModel):
    """One launcher step as the node recorded it (/var/lib/gpuaas/steps/<step>.json)."""

    step: str = Field(pattern=r"^[a-z0-9][a-z0-9._:-]{0,127}$")
    ok: bool
    duration_s: float = Field(ge=0)
    output_tail: str = Field(default="", max_length=4096)


class BootstrapReport(RequestModel):
    """What a node's launcher ran: the bundle digests it verified and each step's result, in order."""

    bundle_digest: str = Field(pattern=r"^[0-9a-f]{64}$", description="The digest pinned in the user_data.")
    validation_bundle_digest: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$",
        description="The digest of the bundle whose validation scripts ran (the profile's post-deploy validation "
                    "bundle, or the site bundle itself when the profile names none).",
    )
    validation_bundle_ref: str | None = Field(default=None, max_length=1024,
                                              description="The s3:// ref of that validation bundle.")
    outcome: BootstrapOutcome
    failed_step: str | None = Field(default=None, max_length=128)
    steps: list[BootstrapStepResult] = Field(default_factory=list, max_length=256)
    runner: BootstrapRunner = BootstrapRunner.LAUNCHER


class EnrollmentRequest(RequestModel):
    """What a booted node sends (cloud-init reads it from /etc/gpuaas/enrollment.json)."""

    node_id: str = Field(pattern=ID_PATTERN)
    enrollment_token: SecretStr = Field(json_schema_extra=_SECRET_SCHEMA)
    _wire_token = field_serializer("enrollment_token", when_used="json")(reveal_secret)
    hostname: str = Field(pattern=HOSTNAME_PATTERN)
    system_id: str = Field(pattern=SYSTEM_ID_PATTERN)
    report: BootstrapReport | None = Field(default=None, description="The launcher's step results (kept on the node).")


class BootstrapReportRequest(RequestModel):
    """A node whose launcher stopped reports why, without enrolling (the token stays unused)."""

    node_id: str = Field(pattern=ID_PATTERN)
    enrollment_token: SecretStr = Field(json_schema_extra=_SECRET_SCHEMA)
    _wire_token = field_serializer("enrollment_token", when_used="json")(reveal_secret)
    hostname: str = Field(pattern=HOSTNAME_PATTERN)
    system_id: str = Field(pattern=SYSTEM_ID_PATTERN)
    report: BootstrapReport


class BootstrapReportAck(ResponseModel):
    node_id: str = Field(pattern=ID_PATTERN)
    status: NodeStatus


class NodeAgentPackage(ResponseModel):
    """The node agent the enrolled node installs: a gzipped tar of files under the node's root plus
    `gpuaas-agent.json` (`{name, version, unit}`); the launcher refuses it unless its sha256 matches."""

    url: str = Field(
        min_length=1, max_length=4096,
        description="Where the node downloads the package (may be a short-lived signed URL: never logged).",
    )
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    version: str = Field(min_length=1, max_length=64)


class EnrollmentResult(ResponseModel):
    node_id: str = Field(pattern=ID_PATTERN)
    status: NodeStatus
    enrolled_at: datetime
    agent_package: NodeAgentPackage | None = Field(
        default=None, description="The node agent package to install (none: the platform offers no agent)."
    )
    agent_credential: SecretStr | None = Field(
        default=None, json_schema_extra=_SECRET_SCHEMA,
        description="The node agent's own credential (node-bound, only for its heartbeats); returned once.",
    )
    _wire_agent_credential = field_serializer("agent_credential", when_used="json")(
        lambda v, info: None if v is None else reveal_secret(v, info))
    heartbeat_interval_seconds: int = Field(default=30, ge=1, le=3600,
                                            description="How often the node agent reports it is alive.")


class AgentLiveness(ResponseModel):
    """What the platform saw of the node's agent: a node is active only once its first heartbeat landed."""

    version: str = Field(min_length=1, max_length=64)
    first_heartbeat_at: datetime
    last_heartbeat_at: datetime
    heartbeats: int = Field(ge=1)


class AgentHeartbeatRequest(RequestModel):
    """The node agent says it is alive (its credential, from the enrollment answer, authenticates it)."""

    node_id: str = Field(pattern=ID_PATTERN)
    agent_credential: SecretStr = Field(json_schema_extra=_SECRET_SCHEMA)
    _wire_credential = field_serializer("agent_credential", when_used="json")(reveal_secret)
    agent_version: str = Field(min_length=1, max_length=64)


class AgentHeartbeatAck(ResponseModel):
    node_id: str = Field(pattern=ID_PATTERN)
    status: NodeStatus
    next_heartbeat_seconds: int = Field(ge=1)


class Node(ResponseModel):
    node_id: str = Field(pattern=ID_PATTERN)
    site_id: str = Field(pattern=ID_PATTERN)
    profile_id: str = Field(pattern=ID_PATTERN)
    hostname: str
    system_id: str
    status: NodeStatus
    status_reason: str | None
    enrolled_at: datetime | None
    last_token_id: str | None
    created_at: datetime
    updated_at: datetime
    bootstrap: BootstrapReport | None = Field(
        default=None, description="The last bootstrap report of the node's launcher (cleared by a new token)."
    )
    agent: AgentLiveness | None = Field(
        default=None, description="The node agent's heartbeats since this deploy (cleared by a new token)."
    )


class NodeList(Page):
    items: list[Node]


class NodeTransitionRequest(RequestModel):
    action: NodeAction
    reason: str | None = Field(default=None, max_length=512)
