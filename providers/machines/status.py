"""MAAS node statuses (codes 0..22, MAAS's own labels) and our lifecycle stages."""

from __future__ import annotations

from enum import IntEnum, StrEnum


class MaasStatus(IntEnum):
    NEW = 0
    COMMISSIONING = 1
    FAILED_COMMISSIONING = 2
    MISSING = 3
    READY = 4
    RESERVED = 5
    DEPLOYED = 6
    RETIRED = 7
    BROKEN = 8
    DEPLOYING = 9
    ALLOCATED = 10
    FAILED_DEPLOYMENT = 11
    RELEASING = 12
    FAILED_RELEASING = 13
    DISK_ERASING = 14
    FAILED_DISK_ERASING = 15
    RESCUE_MODE = 16
    ENTERING_RESCUE_MODE = 17
    FAILED_ENTERING_RESCUE_MODE = 18
    EXITING_RESCUE_MODE = 19
    FAILED_EXITING_RESCUE_MODE = 20
    TESTING = 21
    FAILED_TESTING = 22

    @property
    def label(self) -> str:
        return MAAS_LABELS[self]


MAAS_LABELS: dict[MaasStatus, str] = {
    MaasStatus.NEW: "New",
    MaasStatus.COMMISSIONING: "Commissioning",
    MaasStatus.FAILED_COMMISSIONING: "Failed commissioning",
    MaasStatus.MISSING: "Missing",
    MaasStatus.READY: "Ready",
    MaasStatus.RESERVED: "Reserved",
    MaasStatus.DEPLOYED: "Deployed",
    MaasStatus.RETIRED: "Retired",
    MaasStatus.BROKEN: "Broken",
    MaasStatus.DEPLOYING: "Deploying",
    MaasStatus.ALLOCATED: "Allocated",
    MaasStatus.FAILED_DEPLOYMENT: "Failed deployment",
    MaasStatus.RELEASING: "Releasing",
    MaasStatus.FAILED_RELEASING: "Releasing failed",
    MaasStatus.DISK_ERASING: "Disk erasing",
    MaasStatus.FAILED_DISK_ERASING: "Failed disk erasing",
    MaasStatus.RESCUE_MODE: "Rescue mode",
    MaasStatus.ENTERING_RESCUE_MODE: "Entering rescue mode",
    MaasStatus.FAILED_ENTERING_RESCUE_MODE: "Failed to enter rescue mode",
    MaasStatus.EXITING_RESCUE_MODE: "Exiting rescue mode",
    MaasStatus.FAILED_EXITING_RESCUE_MODE: "Failed to exit rescue mode",
    MaasStatus.TESTING: "Testing",
    MaasStatus.FAILED_TESTING: "Failed testing",
}


class Stage(StrEnum):
    """Where a machine is in our lifecycle (DESIGN.md §2). Persisted in outputs for resume/preview."""

    RESOLVE = "resolve"
    COMMISSION = "commission"
    AWAIT_COMMISSION = "await_commission"
    PXE_PREFLIGHT = "pxe_preflight"
    PREPARE_STORAGE = "prepare_storage"
    ROCE_LINKS = "roce_links"
    DEPLOY = "deploy"
    AWAIT_DEPLOY = "await_deploy"
    RECOVER_DEPLOY = "recover_deploy"
    AWAIT_RELEASE = "await_release"
    AWAIT_ENROLL = "await_enroll"
    READY = "ready"  # deployed, enrolled: the desired state
    # teardown
    RELEASE = "release"
    POWER_OFF = "power_off"
    FORGET_NODE = "forget_node"  # remove the platform's node record (GPUaaS-only cleanup, seed 001)
    AWAIT_FORGET = "await_forget"
    RELEASED = "released"
    DETACHED = "detached"
    FAILED = "failed"


class MachineOutcome(StrEnum):
    READY = "ready"
    RELEASED = "released"
    DETACHED = "detached"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
