"""AppInstance spec: what the component hands the provider, validated with the environment's own rules.

Inputs are the environment's `AppInstance` document (name, project, app, runtime metadata, Vault
path of the project's service-account token, members per component key), plus what the provider
needs to check it without the whole environment: the blueprint's component keys and valid runtime
combinations, the logical role of every node the members name (ROLE002: no app control plane on a
worker_compute node), and the platform node id of each named node that is a MAAS machine managed in
this stack (None for hosts that are not, e.g. the app_control host: the platform places those).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clients.platform.models import AppType
from environments import rules
from environments.findings import Code, Level
from environments.model import AppInstance as AppDoc
from environments.model import AppSpec, LogicalRole, RuntimeMetadata
from providers.common import VaultInputs

SOURCE = "app_instances"
# Not a logical role: a MAAS machine that is not also a declared host is a GPU node (worker_compute).
GPU_NODE = "gpu_node"


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BlueprintInputs(_M):
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


class AppInstanceSpec(_M):
    stack: str = Field(pattern=r"^[A-Za-z0-9._-]{1,64}$")
    instance: AppDoc
    blueprint: BlueprintInputs
    topology: dict[str, str] = {}
    """node (host or machine hostname) -> logical role, or `gpu_node` for a machine that is not a host."""
    placements: dict[str, list[str | None]] = {}
    """component key -> platform node id per entry of members[key].nodes (None: not a managed machine)."""
    platform_url: str
    vault: VaultInputs
    max_parallel: int = Field(4, ge=1, le=32)
    operation_timeout_s: float = Field(900.0, gt=0, le=7200)

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

    def config(self) -> dict[str, str | int | bool]:
        """Runtime metadata handed to the platform as instance config (the app reads it; we never interpret it)."""
        return {k: str(v) for k, v in self.instance.runtime.model_dump(mode="json").items()}


def rule_failures(spec: AppInstanceSpec) -> list[tuple[str, str]]:
    """The environment's app-instance rules (APP00x, REF005, ROLE002) over this one instance.

    Returns (property, message) pairs; messages read like `make validate`'s: code, source, path, fix.
    """
    topo = spec.topology.items()
    hosts = [SimpleNamespace(hostname=h, logical_role=LogicalRole(r)) for h, r in topo if r != GPU_NODE]
    machines = [SimpleNamespace(hostname=h) for h, r in spec.topology.items() if r == GPU_NODE]
    doc = SimpleNamespace(hosts=hosts, machines=machines, app_instances=[spec.instance])
    bp = SimpleNamespace(name=spec.blueprint.name, runtime_combinations=spec.blueprint.runtime_combinations,
                         apps={spec.instance.app.slug: spec.blueprint.app})
    source = f"{SOURCE}[{spec.name}]"
    out = []
    if spec.instance.app.slug not in {t.value for t in AppType}:
        out.append(("instance", f"{Code.INVALID_VALUE.value} {source}: app.slug: the platform has no app type "
                    f"{spec.instance.app.slug!r}; fix: use one of {sorted(t.value for t in AppType)}"))
    for key, ids in spec.placements.items():  # the component's side of the contract
        nodes = spec.instance.members[key].nodes if key in spec.instance.members else None
        if nodes is None or len(ids) != len(nodes):
            out.append(("placements", f"{Code.INVALID_VALUE.value} {source}: placements.{key}: {len(ids)} node ids "
                        f"for {len(nodes or ())} members.{key}.nodes entries; fix: give one node id (or null) per "
                        "node entry (components/apps.py builds this)"))
    for f in rules.app_instances(doc, bp, source):  # type: ignore[arg-type]
        if f.level is Level.ERROR:
            path = f.path.removeprefix("app_instances[0]").lstrip(".") or "instance"
            out.append(("instance", f"{f.code.value} {source}: {path}: {f.message}; fix: {f.hint}"))
    return out


def parse_spec(inputs: dict[str, Any]) -> AppInstanceSpec:
    return AppInstanceSpec.model_validate(inputs)
