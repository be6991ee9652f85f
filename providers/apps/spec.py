"""AppInstance spec: what the component hands the provider, validated with the environment's own rules.

Inputs are the provider's own copy of an `app_instances` entry (`InstanceInputs`: name, project, app,
runtime metadata, Vault path of the project's service-account token, members per component key; the
same fields as the environment's, owned here because they are recorded in state), plus what the provider
needs to check it without the whole environment: the blueprint's component keys and valid runtime
combinations, the logical role of every node the members name (ROLE002: no app control plane on a
worker_compute node), and the platform node id of each named node that is a MAAS machine managed in
this stack (None for hosts that are not, e.g. the app_control host: the platform places those).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from clients.platform.models import AppType
from environments.coded import line
from environments.findings import Code, Level
from environments.rules_apps import ComponentBounds, app_instance, runtime_of
from providers.common import VaultInputs
from providers.wire import (
    CapacityShape,
    ControlPlaneScope,
    CookiePolicy,
    FramePolicy,
    LogicalRole,
    Name,
    OperatingMode,
    RuntimeBackend,
    TenantBoundaryMode,
    VaultRef,
    Wire,
)

SOURCE = "app_instances"


class NodeRole(StrEnum):
    """What a member node is: a declared host's logical role, or a MAAS machine that is not a host."""

    PLATFORM_CONTROL = LogicalRole.PLATFORM_CONTROL.value
    APP_CONTROL = LogicalRole.APP_CONTROL.value
    WORKER_COMPUTE = LogicalRole.WORKER_COMPUTE.value
    GPU_NODE = "gpu_node"  # a GPU node: worker_compute by definition


GPU_NODE = NodeRole.GPU_NODE.value
_M = Wire


class RuntimeMetadata(Wire):
    operating_mode: OperatingMode
    control_plane_scope: ControlPlaneScope
    runtime_backend: RuntimeBackend
    tenant_boundary_mode: TenantBoundaryMode


class ComponentKeySpec(Wire):
    control_plane: bool
    min: int = Field(0, ge=0)
    max: int = Field(1024, ge=1)
    counts: tuple[int, ...] | None = None
    requires: tuple[str, ...] = ()
    drainable: bool = True


class AppSpec(Wire):
    component_keys: dict[str, ComponentKeySpec]
    publishes: tuple[str, ...] = ()


class AllocationSpec(Wire):
    capacity_shape: CapacityShape = CapacityShape.GPU_SLICE
    gpu_count: int = Field(1, ge=0, le=8)
    cpu_only: bool = False


class MemberSpec(Wire):
    count: int = Field(ge=0, le=1024)
    nodes: tuple[str, ...] = ()
    allocation: AllocationSpec | None = None


class EndpointRef(Wire):
    instance: Name
    endpoint: Name


class LinkOutFallback(Wire):
    reason: str = Field(min_length=1, max_length=512)


class UiRouteSpec(Wire):
    name: Name
    component: str
    port: int = Field(ge=1, le=65535)
    websocket: bool = False
    frame_policy: FramePolicy = FramePolicy.EMBED
    cookies: CookiePolicy = CookiePolicy.PLATFORM
    link_out_fallback: LinkOutFallback | None = None


class AppRef(Wire):
    slug: Name
    version: str = Field(min_length=1, max_length=64)


class InstanceInputs(Wire):
    """An app instance as this provider records it (same fields as the environment's `app_instances` entry)."""

    name: Name
    project_id: str = Field(pattern=r"^[a-z]+-[0-9a-f]{16}$")
    app: AppRef
    runtime: RuntimeMetadata
    service_account_token_path: VaultRef
    members: dict[str, MemberSpec]
    inputs: dict[str, EndpointRef | bool | int | str] = {}
    ui_routes: tuple[UiRouteSpec, ...] = ()


class BlueprintInputs(Wire):
    """The part of the blueprint this instance is checked against."""

    name: str
    app: AppSpec
    runtime_combinations: tuple[RuntimeMetadata, ...]


class Slot(_M):
    """One desired member: its component key, position, the declared host (if bound) and its platform node."""

    component_key: str
    index: int
    host: str | None = None
    node_id: str | None = None

    @property
    def pinned(self) -> bool:
        return self.node_id is not None

    def label(self) -> str:
        where = self.node_id or (f"host {self.host}" if self.host else "any node")
        return f"{self.component_key}[{self.index}] on {where}"


class AppInstanceArgs(_M):
    """What the component knows at declaration time (the members' node ids come from machines later)."""

    stack: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")
    instance: InstanceInputs
    blueprint: BlueprintInputs
    topology: dict[str, NodeRole] = {}
    """node (host or machine hostname) -> logical role, or `gpu_node` for a machine that is not a host."""
    platform_url: str
    platform_ca_bundle: str | None = None
    """PEM file of the CA that signs the platform's certificate (`ca_bundles.platform`; relative: to the repo)."""
    vault: VaultInputs
    max_parallel: int = Field(4, ge=1, le=32)
    operation_timeout_s: float = Field(900.0, gt=0, le=7200)
    cpu_only_offered: bool = False
    """Whether the platform offers CPU-only allocations (the environment's `platform.cpu_only_allocations`)."""


class AppInstanceSpec(AppInstanceArgs):
    placements: dict[str, list[str | None]] = {}
    """component key -> platform node id per entry of members[key].nodes (None: not a managed machine)."""
    input_endpoints: dict[str, str | None] = {}
    """input key -> the URL another instance publishes (`inputs[key]` is an EndpointRef), from that
    instance's outputs: unknown until it runs, so this instance is created after it."""

    @property
    def name(self) -> str:
        return self.instance.name

    @property
    def project_id(self) -> str:
        return self.instance.project_id

    def slots(self) -> list[Slot]:
        out = []
        for key in sorted(self.instance.members):
            spec = self.instance.members[key]
            ids = self.placements.get(key, [])
            for i in range(spec.count):
                host = spec.nodes[i] if i < len(spec.nodes) else None
                out.append(Slot(component_key=key, index=i, host=host, node_id=ids[i] if i < len(ids) else None))
        return out

    def control_plane_keys(self) -> frozenset[str]:
        return frozenset(k for k, c in self.blueprint.app.component_keys.items() if c.control_plane)

    def endpoint_inputs(self) -> dict[str, EndpointRef]:
        return {k: v for k, v in self.instance.inputs.items() if isinstance(v, EndpointRef)}

    def drainable_keys(self) -> frozenset[str]:
        return frozenset(k for k, c in self.blueprint.app.component_keys.items() if c.drainable)

    def config(self) -> dict[str, str | int | bool]:
        """Runtime metadata and the inputs (endpoint references resolved), handed to the platform as instance
        config: the app reads it; we never interpret it."""
        out: dict[str, str | int | bool] = {k: str(v) for k, v in self.instance.runtime.model_dump(mode="json").items()}
        for key, value in sorted(self.instance.inputs.items()):
            if isinstance(value, EndpointRef):
                url = self.input_endpoints.get(key)
                if url:
                    out[key] = url
            else:
                out[key] = value
        return out


def rule_failures(spec: AppInstanceSpec) -> list[tuple[str, str]]:
    """The environment's app-instance rules (APP00x, REF005, ROLE002) over this one instance.

    Returns (property, message) pairs; messages read like `make validate`'s: code, source, path, fix.
    """
    source, inst, app = f"{SOURCE}[{spec.name}]", spec.instance, spec.blueprint.app
    out = []
    if inst.app.slug not in {t.value for t in AppType}:
        out.append(("instance", f"{Code.INVALID_VALUE.value} {source}: app.slug: the platform has no app type "
                    f"{inst.app.slug!r}; fix: use one of {sorted(t.value for t in AppType)}"))
    for key, ids in spec.placements.items():  # the component's side of the contract
        nodes = inst.members[key].nodes if key in inst.members else None
        if nodes is None or len(ids) != len(nodes):
            out.append(("placements", f"{Code.INVALID_VALUE.value} {source}: placements.{key}: {len(ids)} node ids "
                        f"for {len(nodes or ())} members.{key}.nodes entries; fix: give one node id (or null) per "
                        "node entry (components/apps.py builds this)"))
    found = app_instance(
        slug=inst.app.slug, runtime=inst.runtime.model_dump(mode="json"),
        members={k: (m.count, m.nodes) for k, m in inst.members.items()},
        components={k: ComponentBounds.of(c) for k, c in app.component_keys.items()},
        known_apps=(inst.app.slug,), blueprint=spec.blueprint.name,
        runtime_combinations=[c.model_dump(mode="json") for c in spec.blueprint.runtime_combinations],
        node_roles={n: None if r is NodeRole.GPU_NODE else r.value for n, r in spec.topology.items()},
        file=source, base="instance",
        runtime_parts=runtime_of(inst.model_dump(mode="json"), spec.cpu_only_offered))
    for f in found:
        if f.level is Level.ERROR:
            path = f.path.removeprefix("instance").lstrip(".") or "instance"
            out.append(("instance", line(f.code.value, f"{source}: {path}", f.message, f.hint)))
    return out


def parse_spec(inputs: dict[str, Any]) -> AppInstanceSpec:
    return AppInstanceSpec.model_validate(inputs)
