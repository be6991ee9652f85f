"""Our lifecycle stages and machine outcomes. MAAS's statuses live with the MAAS client
(`clients.maas.MaasStatus`); they are re-exported here for modules that still import them from here."""

from __future__ import annotations

from enum import StrEnum


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
    HANDOFF_RELEASE = "handoff_release"  # customer handoff: release without erase, never power off
    POWER_OFF = "power_off"
    FORGET_NODE = "forget_node"  # remove the platform's node record (GPUaaS-only cleanup, seed 001)
    AWAIT_FORGET = "await_forget"
    RELEASED = "released"
    DETACHED = "detached"
    FAILED = "failed"


class MachineOutcome(StrEnum):
    """How a machine ended its last run (or what refresh found); stored in state as the value."""

    READY = "ready"
    RELEASED = "released"
    DETACHED = "detached"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    DRIFTED = "drifted"  # refresh found it not Deployed, or deployed from other inputs: up repairs it
    VALIDATION_FAILED = "validation_failed"  # a post-deploy validation script failed on the node

    @property
    def failed(self) -> bool:
        return self in (MachineOutcome.FAILED, MachineOutcome.TIMED_OUT, MachineOutcome.VALIDATION_FAILED)
