"""The Slurm adapter behaviour the simulator plays: what `controller` and `worker` mean.

The platform model stays generic (seed 004); everything Slurm-specific is in this module:
component cardinality, which member operations a component supports, and `adapter_detail`
(registered in `adapters.ADAPTERS`).
"""

from __future__ import annotations

from typing import Any

from clients.platform.models import AppType, MemberStatus

from .adapters import AppAdapter, ComponentRule, register

SLURM_COMPONENTS: dict[str, ComponentRule] = {
    "controller": ComponentRule(minimum=1, maximum=1, drainable=False, control_plane=True, ports=frozenset({6820})),
    "worker": ComponentRule(minimum=0, maximum=512, drainable=True),
}

# What slurmctld/slurmd would report for each generic member status.
_CONTROLLER_STATE = {
    MemberStatus.ACTIVE: "up",
    MemberStatus.UPDATING: "restarting",
    MemberStatus.FAILED: "down",
}
_WORKER_STATE = {
    MemberStatus.ACTIVE: "IDLE",
    MemberStatus.UPDATING: "IDLE+COMPLETING",
    MemberStatus.DRAINING: "DRAINING",
    MemberStatus.DRAINED: "DRAINED",
    MemberStatus.REMOVING: "DOWN",
    MemberStatus.REMOVED: "FUTURE",
    MemberStatus.FAILED: "DOWN+NOT_RESPONDING",
}


def adapter_detail(key: str, status: MemberStatus, app_version: str) -> dict[str, Any]:
    if key == "controller":
        return {
            "daemon": "slurmctld",
            "state": _CONTROLLER_STATE.get(status, "starting"),
            "munge": "ok" if status is MemberStatus.ACTIVE else "pending",
            "slurm_version": app_version,
        }
    return {
        "daemon": "slurmd",
        "state": _WORKER_STATE.get(status, "FUTURE"),
        "partition": "gpu",
        "slurm_version": app_version,
    }


register(AppAdapter(AppType.SLURM, SLURM_COMPONENTS, adapter_detail))
