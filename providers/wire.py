"""The providers' own enums and scalar types: part of the state contract, so owned here.

Provider inputs and outputs are recorded in Pulumi state and handed back to read/diff/update/delete
by every later run. They must not change when the user-facing environment YAML changes, so the
providers never embed `environments.model` classes; the values here are the same wire values (the
seeds' words), and `tests/sites/test_kinds_contract.py` checks they still agree with the model.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


class Wire(BaseModel):
    """A frozen provider input model that refuses unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


RETIRED_FIELDS = frozenset({"hardware_sync_interval"})
"""Fields state written by an earlier version may still carry in a model that no longer has them (the
hardware sync interval moved from the bundle and the machine policy to MAAS's setting, set by the site
profile): dropped when read back, so old state validates; new inputs never carry them."""


def drop_retired(data: Any) -> Any:
    """A model's `mode="before"` validator body: `data` without the retired fields."""
    return {k: v for k, v in data.items() if k not in RETIRED_FIELDS} if isinstance(data, dict) else data


class Tier(StrEnum):
    LOCAL = "local"
    DEV = "dev"
    STAGING = "staging"
    PROD = "prod"


class FabricMode(StrEnum):
    ETHERNET = "ethernet"
    ROCE = "roce"
    IB = "ib"


class EraseMode(StrEnum):
    NONE = "none"
    QUICK = "quick"
    SECURE = "secure"
    FULL = "full"


class LogicalRole(StrEnum):
    PLATFORM_CONTROL = "platform_control"
    APP_CONTROL = "app_control"
    WORKER_COMPUTE = "worker_compute"


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
    ALLOCATION = "allocation"


class TenantBoundaryMode(StrEnum):
    DEDICATED_NODES = "dedicated_nodes"
    SHARED_NODES = "shared_nodes"


class CapacityShape(StrEnum):
    GPU_SLICE = "gpu_slice"
    WHOLE_NODE = "whole_node"


class FramePolicy(StrEnum):
    EMBED = "embed"
    LINK_OUT = "link_out"
    IFRAME = "iframe"


class CookiePolicy(StrEnum):
    PLATFORM = "platform"
    SHARED = "shared"


class MountPurpose(StrEnum):
    TRAINING = "training"
    DATA = "data"
    NOTEBOOKS = "notebooks"
    SCRATCH = "scratch"


class LabStandIn(StrEnum):
    TMPFS = "tmpfs"


_VAULT_REF = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*#[A-Za-z0-9_.-]+$")


def _vault_ref(value: str) -> str:
    if not _VAULT_REF.match(value):
        raise ValueError("not a Vault reference; write '<path under the KV mount>#<key>'")
    return value


VaultRef = Annotated[str, AfterValidator(_vault_ref)]
Name = Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")]

# Enum classes whose values must match the environment model's enum of the same name.
MIRRORED = (Tier, FabricMode, EraseMode, LogicalRole, OperatingMode, ControlPlaneScope, RuntimeBackend,
            TenantBoundaryMode, CapacityShape, FramePolicy, CookiePolicy, MountPurpose, LabStandIn)
