# size: the whole environment document's schema, one class per section, read top to bottom
"""The environment model: one pydantic schema for a whole environment.

An environment document (`environments/<name>.yaml`) declares inventory and config only; the
shared shape (SKUs, storage layouts, host-role layout, apps, profile defaults) comes from its
blueprint (`environments/blueprints/<blueprint>.yaml`), per seed 003's environment creation rule.
All models are frozen: the compiled `Environment` is read by everything downstream, never mutated.
"""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from .model_base import Endpoint, Name, VaultRef, _Model  # noqa: F401 - VaultRef, Endpoint: re-exported
from .model_node import AptSource, LoginUser
from .model_runtime import (  # noqa: F401 - CapacityShape ... LabStandIn, MountPurpose: mirrored by providers.wire
    Allocation,
    AppInputValue,
    CapacityShape,
    CookiePolicy,
    Filesystem,
    FramePolicy,
    LabStandIn,
    MountPurpose,
    StorageMount,
    UiRoute,
)
from .vocabulary import EraseMode, FabricMode, Tier  # noqa: F401 - re-exported: the model's words

# ---------------------------------------------------------------------------------------------
# Enums (values are the seeds' own words; Tier, FabricMode and EraseMode: environments/vocabulary.py)


class LogicalRole(StrEnum):
    PLATFORM_CONTROL = "platform_control"
    APP_CONTROL = "app_control"
    WORKER_COMPUTE = "worker_compute"


class HostRole(StrEnum):
    """Ansible roles; values are the role directory names under ansible/roles/."""

    COMMON = "common"
    PLATFORM_CONTROL = "platform_control"
    CONTROL_PLANE_K3S = "control_plane_k3s"
    GITLAB = "gitlab"
    RUNNER = "runner"
    APP_CONTROL = "app_control"
    WORKER_COMPUTE = "worker_compute"
    OBSERVABILITY_AGENT = "observability_agent"


# Roles that must never land on a worker_compute host (seed 003: no control-plane or CI services
# on GPU workers).
CONTROL_PLANE_AND_CI_ROLES = frozenset(
    {HostRole.PLATFORM_CONTROL, HostRole.APP_CONTROL, HostRole.CONTROL_PLANE_K3S, HostRole.GITLAB, HostRole.RUNNER}
)


class RunnerTag(StrEnum):
    PLATFORM_CONTROL = "platform-control"
    SIM = "sim"
    APP_CONTROL = "app-control"
    WORKER_COMPUTE = "worker-compute"


class TeardownMode(StrEnum):
    REIMAGE = "reimage"
    FULL_DECOMMISSION = "full_decommission"
    DETACH = "detach"


class MaasLayout(StrEnum):
    FLAT = "flat"
    LVM = "lvm"
    BCACHE = "bcache"
    BLANK = "blank"


class PowerType(StrEnum):
    IPMI = "ipmi"
    REDFISH = "redfish"
    MANUAL = "manual"


class OperatingMode(StrEnum):
    PLATFORM_MANAGED = "platform_managed"
    TENANT_DEDICATED = "tenant_dedicated"


class ControlPlaneScope(StrEnum):
    PROJECT = "project"
    TENANT = "tenant"


class RuntimeBackend(StrEnum):
    SLURM = "slurm"
    RAY = "ray"
    KUBERNETES = "kubernetes"
    ALLOCATION = "allocation"  # a single-allocation app (vLLM, OpenClaw: seed 000 §6) runs on its allocation


class TenantBoundaryMode(StrEnum):
    DEDICATED_NODES = "dedicated_nodes"
    SHARED_NODES = "shared_nodes"


# ---------------------------------------------------------------------------------------------
# Scalar types

_MAC = r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$"

MacAddress = Annotated[str, Field(pattern=_MAC)]


# ---------------------------------------------------------------------------------------------
# Blueprint: the shape shared by every environment


class BootDiskHint(_Model):
    """How to pick the boot disk among a machine's block devices (e.g. the BOSS device)."""

    model_contains: str | None = None
    name: str | None = None
    smallest: bool = False


class Sku(_Model):
    description: str
    gpu_model: str | None = None
    gpu_count: int = Field(0, ge=0, le=16)
    boot_disk_hint: BootDiskHint
    pxe_interface: str
    fabric_interfaces: tuple[str, ...] = ()
    """RoCE/IB NICs in rail order: fabric_interfaces[r] is the interface on rail r."""
    block_devices: tuple[str, ...] = ()
    """The block devices every machine of the SKU has (kernel names: `sda`, `nvme0n1`); empty: not declared."""


class StorageLayout(_Model):
    maas_layout: MaasLayout
    root_size_gb: int | None = Field(None, ge=16, le=16384)
    description: str = ""
    data_devices: tuple[str, ...] = ()
    """The data devices the bundle's storage step makes /share0..N (in order); each SKU whose machines use
    the layout must have them (`block_devices`), else STO001 at validate/check."""


class ComponentKeySpec(_Model):
    control_plane: bool
    min: int = Field(0, ge=0)
    max: int = Field(1024, ge=1)
    counts: tuple[int, ...] | None = None
    """Exact counts allowed (RKE2 servers: 1 or 3); none: any count in min..max."""
    requires: tuple[str, ...] = ()
    """Component keys this one joins after (an RKE2 agent needs a server)."""
    drainable: bool = True
    """False: the app replaces or removes such members, never drains them (Slurm's controller)."""


class AppSpec(_Model):
    component_keys: dict[str, ComponentKeySpec]
    publishes: tuple[str, ...] = ()
    """Endpoints the app publishes once it runs (vLLM: `openai`), which other instances consume as inputs."""


class RuntimeMetadata(_Model):
    operating_mode: OperatingMode
    control_plane_scope: ControlPlaneScope
    runtime_backend: RuntimeBackend
    tenant_boundary_mode: TenantBoundaryMode


class Blueprint(_Model):
    name: Name
    description: str = ""
    skus: dict[str, Sku]
    storage_layouts: dict[str, StorageLayout]
    role_layout: dict[LogicalRole, tuple[HostRole, ...]]
    apps: dict[str, AppSpec]
    runtime_combinations: tuple[RuntimeMetadata, ...]
    """The valid runtime metadata combinations of app instances (seed 004 + seed 003's production direction)."""


# ---------------------------------------------------------------------------------------------
# Environment documents


class SiteProfile(_Model):
    """A site profile: the 11 policy fields of seed 002, its proposed additions, and the erase mode."""

    name: Name
    # The 11 current policy fields (seed 002 §2)
    site_bootstrap_bundle_ref: str
    strict_pxe_preflight: bool = True
    enable_phase2_roce: bool = False
    require_hw_sync: bool = True
    hardware_sync_interval: int = Field(900, ge=60, le=86400, description="seconds between MAAS hardware syncs")
    release_fallback_no_erase: bool = False
    enable_deploy_retry_on_datasource_failure: bool = True
    max_deploy_retry_attempts: int = Field(3, ge=1, le=10)
    auto_claim_single_new_machine: bool = False
    batch_max_parallel: int = Field(8, ge=1, le=64)
    enrollment_token_ttl_seconds: int = Field(3600, ge=300, le=86400)
    # Seed 002 §7 additions
    fabric_mode: FabricMode = FabricMode.ETHERNET
    commissioning_bundle_ref: str | None = None
    post_deploy_validation_bundle_ref: str | None = None
    storage_layout_profile: str = "flat"
    # Needed by teardown (issue 6): how a release wipes disks
    release_erase_mode: EraseMode = EraseMode.QUICK
    # The node's personality beyond the bundle (seed 001; environments/model_node.py)
    apt_sources: tuple[Name, ...] = ()
    """Names of the environment's `apt_sources` its nodes add before installing the bundle's vendor packages."""
    login_user: LoginUser | None = None
    """The post-deploy login user (seed 001's `hpcadmin`), created on each node by cloud-init."""


class Site(_Model):
    name: Name
    maas_url: Endpoint
    maas_api_key_path: VaultRef
    tls_verify: bool = True
    customer_handoff: bool = False
    """Restricted-release site (seed 002): machines are handed to a customer; never erase."""
    bmc_network: ipaddress.IPv4Network
    profiles: tuple[SiteProfile, ...] = Field(min_length=1)


class Host(_Model):
    hostname: Name
    address: ipaddress.IPv4Address
    logical_role: LogicalRole
    extra_roles: tuple[HostRole, ...] = ()
    runner_tags: tuple[RunnerTag, ...] = ()
    ssh_user: str = "gpuaas"
    ssh_key_path: VaultRef
    machine: str | None = None
    """Hostname of the MAAS machine this host is (a worker deployed by MAAS), if any."""
    roles: tuple[HostRole, ...] = ()
    """Compiled: the blueprint's roles for the logical role, then extra_roles. Not written in documents."""


class MaasMachine(_Model):
    hostname: Name
    ipmi_address: ipaddress.IPv4Address
    pxe_mac: MacAddress
    sku: str
    site: str
    profile: str
    pool: str | None = None
    bundle: str | None = None
    """Bootstrap bundle; defaults to the profile's site_bootstrap_bundle_ref."""
    power_type: PowerType = PowerType.IPMI
    power_user_path: VaultRef | None = None
    teardown_mode: TeardownMode = TeardownMode.FULL_DECOMMISSION
    distro_series: str = "jammy"
    hwe_kernel: str | None = None
    tags: tuple[str, ...] = ()
    retry_generation: int = Field(default=0, ge=0)
    """Raise it to give a machine whose deploy retries are spent a fresh budget (docs/machines.md)."""


class MachinePool(_Model):
    name: Name
    site: str
    profile: str
    description: str = ""


class RoceRange(_Model):
    start: ipaddress.IPv4Address
    end: ipaddress.IPv4Address


class RocePool(_Model):
    site: str
    rail: int = Field(ge=0, le=15)
    subnet: ipaddress.IPv4Network
    range: RoceRange
    mtu: int = Field(9000, ge=1280, le=9216)
    vlan: int | None = Field(None, ge=1, le=4094)


class VendorPackages(_Model):
    """Vendor driver/runtime package lists (seed 001: Lambda stack, DOCA/OFED, rshim, ...)."""

    driver: tuple[str, ...] = ()
    runtime: tuple[str, ...] = ()
    fabric: tuple[str, ...] = ()


class BootstrapBundle(_Model):
    name: Name
    site: str
    template_set: str = "default"
    vendor_packages: VendorPackages = VendorPackages()
    values: dict[str, str | int | bool] = {}


class MemberSpec(_Model):
    count: int = Field(ge=0, le=1024)
    nodes: tuple[str, ...] = ()
    allocation: Allocation | None = None
    """Each member's allocation shape (capacity shape, GPU count, CPU-only); none: a whole node."""


class AppRef(_Model):
    slug: Name
    version: str = Field(min_length=1, max_length=64)


class AppInstance(_Model):
    name: Name
    project_id: str = Field(pattern=r"^[a-z]+-[0-9a-f]{16}$", description="the platform's project id")
    app: AppRef
    runtime: RuntimeMetadata
    service_account_token_path: VaultRef
    members: dict[str, MemberSpec]
    inputs: dict[str, AppInputValue] = {}
    """Handed to the app as config; a value may name another instance's published endpoint."""
    ui_routes: tuple[UiRoute, ...] = ()
    """UI routes registered with the platform-owned gateway (seed 000 §4)."""


class VaultAuthMethod(StrEnum):
    TOKEN = "token"
    APPROLE = "approle"


class EndpointKind(StrEnum):
    """The kinds of endpoint an environment names; each may be signed by its own private CA."""

    MAAS = "maas"
    VAULT = "vault"
    PLATFORM = "platform"
    S3 = "s3"


def _ca_path(value: str) -> str:
    if not value.endswith((".pem", ".crt")) or any(part in ("", "..") for part in value.removeprefix("/").split("/")):
        raise ValueError("a CA bundle is a PEM file ('.pem' or '.crt'): an absolute path or one relative to the repo, "
                         "without '..' or empty segments")
    return value


CaBundlePath = Annotated[str, AfterValidator(_ca_path)]
"""A PEM file of CA certificates: absolute, or relative to the repository root (where Pulumi runs)."""


class CaBundles(_Model):
    """The private CAs that sign each kind's endpoints (e.g. `*.gpuaas.internal`). A kind named here trusts
    exactly these certificates (not the system's); a kind left out trusts the system store."""

    maas: CaBundlePath | None = None
    vault: CaBundlePath | None = None
    platform: CaBundlePath | None = None
    s3: CaBundlePath | None = None

    def of(self, kind: EndpointKind) -> str | None:
        return getattr(self, kind.value)  # type: ignore[no-any-return]


class VaultSettings(_Model):
    address: Endpoint
    kv_mount: str = "gpuaas"
    auth_method: VaultAuthMethod = VaultAuthMethod.TOKEN


class PlatformSettings(_Model):
    url: Endpoint
    admin_token_path: VaultRef
    cpu_only_allocations: bool = False
    """Whether this platform offers CPU-only allocations (seed 000 §6: an open product question)."""


class ArtifactStore(_Model):
    """S3-compatible store for bootstrap bundles (WEKA S3 in production: path-style addressing)."""

    endpoint_url: Endpoint
    bucket: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
    region: str = "us-east-1"
    path_style: bool = True
    credentials_path: VaultRef


class EnvironmentDocument(_Model):
    """What `environments/<name>.yaml` holds."""

    name: Name
    tier: Tier
    blueprint: Name
    description: str = ""
    host_network: ipaddress.IPv4Network
    vault: VaultSettings
    platform: PlatformSettings
    artifact_store: ArtifactStore
    ca_bundles: CaBundles = CaBundles()
    """PEM CA bundle per endpoint kind (maas, vault, platform, s3), for endpoints behind a private CA."""
    sites: tuple[Site, ...] = ()
    hosts: tuple[Host, ...] = ()
    machines: tuple[MaasMachine, ...] = ()
    machine_pools: tuple[MachinePool, ...] = ()
    roce_pools: tuple[RocePool, ...] = ()
    bootstrap_bundles: tuple[BootstrapBundle, ...] = ()
    app_instances: tuple[AppInstance, ...] = ()
    filesystems: tuple[Filesystem, ...] = ()
    storage_mounts: tuple[StorageMount, ...] = ()
    apt_sources: tuple[AptSource, ...] = ()
    """Vendor apt repositories profiles name (`sites[].profiles[].apt_sources`)."""

    @field_validator("hosts")
    @classmethod
    def _roles_are_compiled(cls, hosts: tuple[Host, ...]) -> tuple[Host, ...]:
        for h in hosts:
            if h.roles:
                raise ValueError(f"host {h.hostname}: 'roles' is compiled from the blueprint; use extra_roles")
        return hosts


class Environment(EnvironmentDocument):
    """The compiled, validated environment: the document plus its blueprint, roles resolved."""

    source: str
    """The document's path relative to the repo (for messages)."""
    blueprint_model: Blueprint

    @field_validator("hosts")
    @classmethod
    def _roles_are_compiled(cls, hosts: tuple[Host, ...]) -> tuple[Host, ...]:
        return hosts  # compiled hosts carry their roles

    # Lookups used by components and providers ------------------------------------------------
    def site(self, name: str) -> Site:
        return next(s for s in self.sites if s.name == name)

    def profile(self, site: str, name: str) -> SiteProfile:
        return next(p for p in self.site(site).profiles if p.name == name)

    def apt_source(self, name: str) -> AptSource:
        return next(a for a in self.apt_sources if a.name == name)

    def bundle(self, name: str) -> BootstrapBundle:
        return next(b for b in self.bootstrap_bundles if b.name == name)

    def sku(self, name: str) -> Sku:
        return self.blueprint_model.skus[name]

    def host(self, hostname: str) -> Host:
        return next(h for h in self.hosts if h.hostname == hostname)

    def machine(self, hostname: str) -> MaasMachine:
        return next(m for m in self.machines if m.hostname == hostname)

    def machine_bundle(self, m: MaasMachine) -> BootstrapBundle:
        return self.bundle(m.bundle or self.profile(m.site, m.profile).site_bootstrap_bundle_ref)

    def machines_in_pool(self, pool: str) -> tuple[MaasMachine, ...]:
        return tuple(m for m in self.machines if m.pool == pool)

    def standalone_machines(self) -> tuple[MaasMachine, ...]:
        return tuple(m for m in self.machines if m.pool is None)

    def hosts_by_role(self) -> dict[LogicalRole, tuple[Host, ...]]:
        return {r: tuple(h for h in self.hosts if h.logical_role is r) for r in LogicalRole}

    def roce_pools_of(self, site: str) -> tuple[RocePool, ...]:
        return tuple(sorted((p for p in self.roce_pools if p.site == site), key=lambda p: p.rail))

    def roce_machines(self, site: str) -> tuple[MaasMachine, ...]:
        """Machines of a site whose profile turns phase-2 RoCE on."""
        return tuple(
            m
            for m in self.machines
            if m.site == site
            and self.profile(m.site, m.profile).enable_phase2_roce
            and self.profile(m.site, m.profile).fabric_mode is FabricMode.ROCE
        )
