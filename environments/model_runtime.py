"""The app runtime's parts of an environment (seed 000): allocation shapes, app inputs, UI routes and
WEKA filesystems with their mounts. Referenced by `model.py`'s `AppInstance` and `EnvironmentDocument`."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from .model_base import Name, _Model

# ---------------------------------------------------------------------------------------------
# Allocation shapes (seed 000 §6: vLLM on a 4-GPU slice, OpenClaw on a 1-GPU slice or CPU-only)


class CapacityShape(StrEnum):
    GPU_SLICE = "gpu_slice"  # part of a GPU node: 1, 2 or 4 GPUs
    WHOLE_NODE = "whole_node"


class Allocation(_Model):
    capacity_shape: CapacityShape = CapacityShape.GPU_SLICE
    gpu_count: int = Field(1, ge=0, le=8)
    cpu_only: bool = False
    """Offered only where `platform.cpu_only_allocations` is true; the workaround is a 1-GPU slice."""


# ---------------------------------------------------------------------------------------------
# App inputs: a scalar, or another instance's published endpoint


class EndpointRef(_Model):
    """`{instance: vllm-chat, endpoint: openai}`: the URL that instance publishes, taken from its outputs."""

    instance: Name
    endpoint: Name


AppInputValue = EndpointRef | bool | int | str


# ---------------------------------------------------------------------------------------------
# UI routes through the platform-owned gateway (seed 000 §4)


class FramePolicy(StrEnum):
    EMBED = "embed"  # shown in the workload shell through the platform's reverse proxy, on its own subdomain
    LINK_OUT = "link_out"  # opened in its own tab, through the same proxy
    IFRAME = "iframe"  # the app's own origin in a frame: refused (rejected option of seed 000 §4)


class CookiePolicy(StrEnum):
    PLATFORM = "platform"  # the platform owns auth, session and cookies
    SHARED = "shared"  # the app shares the shell's cookies: refused (seed 000 §4)


class LinkOutFallback(_Model):
    reason: str = Field(min_length=1, max_length=512)
    """Why the app cannot be safely embedded (seed 000 §4: explicit link-out criteria)."""


class UiRoute(_Model):
    name: Name
    component: str
    """The member component serving the UI (OpenClaw: `gateway`)."""
    port: int = Field(ge=1, le=65535)
    websocket: bool = False
    frame_policy: FramePolicy = FramePolicy.EMBED
    cookies: CookiePolicy = CookiePolicy.PLATFORM
    link_out_fallback: LinkOutFallback | None = None


# ---------------------------------------------------------------------------------------------
# WEKA filesystems (seed 000 §2: WEKAFS/POSIX primary, S3 the object path)


class StoragePath(StrEnum):
    POSIX = "posix"  # WEKAFS: the training / data mount path
    S3 = "s3"  # WEKA S3: bundles and SDK clients; not a substitute for POSIX


class MountPurpose(StrEnum):
    TRAINING = "training"
    DATA = "data"
    NOTEBOOKS = "notebooks"
    SCRATCH = "scratch"


class LabStandIn(StrEnum):
    """What the lab mounts in place of WEKA (no WEKA cluster there); disclosed in the unit's drop-in."""

    TMPFS = "tmpfs"


class WekaClient(_Model):
    """The WEKA client a MAAS machine needs before it mounts the filesystem: a package of a vendor apt source
    (environments/model_node.py), installed by the bundle's mounts step; its unit `weka-agent.service` is what the
    mount units require."""

    package: str = Field("weka-agent", pattern=r"^[a-z0-9][a-z0-9+.-]{1,100}$")
    apt_source: Name
    """The `apt_sources` entry that provides the package; the profile of each machine mounting it must name it."""


class Filesystem(_Model):
    name: Name
    fs_name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    """The WEKA filesystem's own name."""
    backends: tuple[str, ...] = Field(min_length=1)
    """WEKA backend hosts the client joins (hostnames or addresses)."""
    paths: tuple[StoragePath, ...] = (StoragePath.POSIX, StoragePath.S3)
    lab_stand_in: LabStandIn | None = None
    client: WekaClient | None = None
    """How MAAS machines get the WEKA client (required when pools or machines mount it, unless a lab stand-in)."""


class StorageMount(_Model):
    filesystem: str
    mount_point: str = Field(pattern=r"^/[A-Za-z0-9_./-]{1,200}$")
    purpose: MountPurpose
    via: StoragePath = StoragePath.POSIX
    roles: tuple[str, ...] = ()
    """Logical roles whose hosts mount it (lab hosts, through the host roles)."""
    pools: tuple[str, ...] = ()
    """Machine pools whose machines mount it (MAAS machines, through the node bundle)."""
    machines: tuple[str, ...] = ()
    """Standalone MAAS machines that mount it (through the node bundle)."""
    options: tuple[str, ...] = ()
    read_only: bool = False
