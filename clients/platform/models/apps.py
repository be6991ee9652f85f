"""Project-scoped app instances, their members and member operations (seed 004).

The platform model is generic: `component_key`, `status`, node binding and `adapter_detail`.
What a component key means (Slurm: `controller` x1, `worker` xN) belongs to the app adapter.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from .common import ID_PATTERN, NAME_PATTERN, Page, RequestModel, ResponseModel

COMPONENT_KEY_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
VERSION_PATTERN = r"^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$"
ConfigValue = str | int | bool


class AppType(StrEnum):
    SLURM = "slurm"
    RKE2 = "rke2"  # self-managed Kubernetes (seed 000 §1): server x1|3, agent xN
    VLLM = "vllm"  # an inference server on its own allocation (seed 000 §6)
    OPENCLAW = "openclaw"  # an assistant app consuming a vLLM endpoint (seed 000 §6)


class InstanceStatus(StrEnum):
    PROVISIONING = "provisioning"
    READY = "ready"
    DEGRADED = "degraded"
    UPGRADING = "upgrading"
    DECOMMISSIONING = "decommissioning"
    DECOMMISSIONED = "decommissioned"
    FAILED = "failed"


class MemberStatus(StrEnum):
    PENDING = "pending"
    PROVISIONING = "provisioning"
    ACTIVE = "active"
    UPDATING = "updating"
    DRAINING = "draining"
    DRAINED = "drained"
    REMOVING = "removing"
    REMOVED = "removed"
    FAILED = "failed"


class OperationKind(StrEnum):
    INSTANCE_CREATE = "instance_create"
    INSTANCE_UPGRADE = "instance_upgrade"
    INSTANCE_DECOMMISSION = "instance_decommission"
    MEMBER_ADD = "member_add"
    MEMBER_DRAIN = "member_drain"
    MEMBER_REMOVE = "member_remove"
    MEMBER_REPLACE = "member_replace"


class OperationStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (OperationStatus.SUCCEEDED, OperationStatus.FAILED)


class CapacityShape(StrEnum):
    """What a member's allocation is carved from: a GPU slice of a node, or a whole node."""

    GPU_SLICE = "gpu_slice"
    WHOLE_NODE = "whole_node"


class Allocation(RequestModel):
    """A member's allocation shape. `cpu_only` allocations exist only where the platform offers them."""

    capacity_shape: CapacityShape = CapacityShape.GPU_SLICE
    gpu_count: int = Field(default=1, ge=0, le=8)
    cpu_only: bool = False


class ComponentSpec(RequestModel):
    component_key: str = Field(pattern=COMPONENT_KEY_PATTERN)
    count: int = Field(ge=0, le=512)
    node_ids: list[Annotated[str, Field(pattern=ID_PATTERN)]] = Field(
        default_factory=list,
        max_length=512,
        description="Optional placements: members bind to these nodes in order; the rest are allocated.",
    )
    allocation: Allocation | None = Field(
        default=None, description="Each member's allocation shape; none: the member takes a whole node."
    )


class AppInstanceCreate(RequestModel):
    name: str = Field(pattern=NAME_PATTERN, description="Unique among the project's live instances.")
    app_type: AppType
    app_version: str = Field(pattern=VERSION_PATTERN)
    components: list[ComponentSpec] = Field(min_length=1, max_length=16)
    config: dict[str, ConfigValue] = Field(default_factory=dict, max_length=64)


class AppInstanceUpgrade(RequestModel):
    app_version: str = Field(pattern=VERSION_PATTERN)
    config: dict[str, ConfigValue] | None = Field(default=None, max_length=64)


class AppInstanceDecommission(RequestModel):
    reason: str | None = Field(default=None, max_length=512)


class PublishedEndpoint(ResponseModel):
    """An endpoint the app publishes once it runs (e.g. vLLM's OpenAI-compatible API); other instances
    of the project consume it as an input."""

    name: str
    component_key: str
    url: str


class AppInstance(ResponseModel):
    instance_id: str = Field(pattern=ID_PATTERN)
    project_id: str = Field(pattern=ID_PATTERN)
    tenant_id: str = Field(pattern=ID_PATTERN)
    name: str
    app_type: AppType
    app_version: str
    status: InstanceStatus
    components: list[ComponentSpec]
    config: dict[str, ConfigValue]
    member_counts: dict[str, int] = Field(description="Live (not removed) members per component_key.")
    endpoints: list[PublishedEndpoint] = Field(
        default_factory=list, description="What the app publishes once ready (empty while provisioning)."
    )
    last_operation_id: str | None
    last_correlation_id: str | None
    created_at: datetime
    updated_at: datetime


class AppInstanceList(Page):
    items: list[AppInstance]


class NodeBinding(ResponseModel):
    node_id: str = Field(pattern=ID_PATTERN)
    hostname: str


class Member(ResponseModel):
    member_id: str = Field(pattern=ID_PATTERN)
    instance_id: str = Field(pattern=ID_PATTERN)
    component_key: str
    status: MemberStatus
    node: NodeBinding | None
    last_operation_id: str | None
    last_correlation_id: str | None
    adapter_detail: dict[str, Any] = Field(description="Adapter-owned debugging detail; opaque to the platform.")
    created_at: datetime
    updated_at: datetime


class MemberList(Page):
    items: list[Member]


def _tag_required(schema: dict[str, Any]) -> None:
    # The tag has a default for Python callers, but on the wire it selects the arm: always send it.
    schema["required"] = ["operation", *[r for r in schema.get("required", []) if r != "operation"]]


class MemberOperationModel(RequestModel):
    model_config = RequestModel.model_config | {"json_schema_extra": _tag_required}


class AddMember(MemberOperationModel):
    operation: Literal["add"] = "add"
    component_key: str = Field(pattern=COMPONENT_KEY_PATTERN)
    node_id: str | None = Field(default=None, pattern=ID_PATTERN)
    reason: str | None = Field(default=None, max_length=512)


class DrainMember(MemberOperationModel):
    operation: Literal["drain"] = "drain"
    member_id: str = Field(pattern=ID_PATTERN)
    reason: str | None = Field(default=None, max_length=512)


class RemoveMember(MemberOperationModel):
    operation: Literal["remove"] = "remove"
    member_id: str = Field(pattern=ID_PATTERN)
    reason: str | None = Field(default=None, max_length=512)


class ReplaceMember(MemberOperationModel):
    operation: Literal["replace"] = "replace"
    member_id: str = Field(pattern=ID_PATTERN)
    node_id: str | None = Field(default=None, pattern=ID_PATTERN, description="Node for the replacement.")
    reason: str | None = Field(default=None, max_length=512)


MemberOperationRequest = Annotated[
    AddMember | DrainMember | RemoveMember | ReplaceMember, Field(discriminator="operation")
]


class OperationError(ResponseModel):
    code: str
    message: str


class Operation(ResponseModel):
    """An asynchronous mutation; poll it until `status` is terminal."""

    operation_id: str = Field(pattern=ID_PATTERN)
    kind: OperationKind
    status: OperationStatus
    step: str | None = Field(description="The step in progress (or the last one reached).")
    project_id: str = Field(pattern=ID_PATTERN)
    instance_id: str = Field(pattern=ID_PATTERN)
    member_id: str | None = Field(description="The member acted on; for add, the new member.")
    replacement_member_id: str | None
    correlation_id: str
    idempotency_key: str | None
    requested_by: str
    error: OperationError | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None


class OperationList(Page):
    items: list[Operation]
