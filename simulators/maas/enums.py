"""MAAS vocabularies the simulator speaks: node statuses (0..22 with MAAS's labels),
power states, link modes, and the legal status transitions.

Values and labels follow canonical/maas (`maascommon/node.py`, `maasserver/node_status.py`);
python-libmaas decodes `status` with the same integers.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class NodeStatus(IntEnum):
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
        return STATUS_LABELS[self]

    @classmethod
    def from_label(cls, text: str) -> NodeStatus:
        """Accept a MAAS label ("Failed deployment") or an enum name ("FAILED_DEPLOYMENT")."""
        for status, label in STATUS_LABELS.items():
            if text.strip().lower() in (label.lower(), status.name.lower()):
                return status
        raise ValueError(f"unknown MAAS status {text!r}; use one of: {', '.join(STATUS_LABELS.values())}")


S = NodeStatus

STATUS_LABELS: dict[NodeStatus, str] = {
    S.NEW: "New",
    S.COMMISSIONING: "Commissioning",
    S.FAILED_COMMISSIONING: "Failed commissioning",
    S.MISSING: "Missing",
    S.READY: "Ready",
    S.RESERVED: "Reserved",
    S.DEPLOYED: "Deployed",
    S.RETIRED: "Retired",
    S.BROKEN: "Broken",
    S.DEPLOYING: "Deploying",
    S.ALLOCATED: "Allocated",
    S.FAILED_DEPLOYMENT: "Failed deployment",
    S.RELEASING: "Releasing",
    S.FAILED_RELEASING: "Releasing failed",
    S.DISK_ERASING: "Disk erasing",
    S.FAILED_DISK_ERASING: "Failed disk erasing",
    S.RESCUE_MODE: "Rescue mode",
    S.ENTERING_RESCUE_MODE: "Entering rescue mode",
    S.FAILED_ENTERING_RESCUE_MODE: "Failed to enter rescue mode",
    S.EXITING_RESCUE_MODE: "Exiting rescue mode",
    S.FAILED_EXITING_RESCUE_MODE: "Failed to exit rescue mode",
    S.TESTING: "Testing",
    S.FAILED_TESTING: "Failed testing",
}

# Statuses an in-progress phase fails into (MAAS's NODE_FAILURE_STATUS_TRANSITION_MAP).
FAILED_STATUS: dict[NodeStatus, NodeStatus] = {
    S.COMMISSIONING: S.FAILED_COMMISSIONING,
    S.DEPLOYING: S.FAILED_DEPLOYMENT,
    S.RELEASING: S.FAILED_RELEASING,
    S.DISK_ERASING: S.FAILED_DISK_ERASING,
    S.TESTING: S.FAILED_TESTING,
}

FAILED_STATUSES = frozenset(FAILED_STATUS.values()) | {
    S.FAILED_ENTERING_RESCUE_MODE,
    S.FAILED_EXITING_RESCUE_MODE,
}

# The actionable statuses of MAAS's node actions (maasserver/node_action.py): the API refuses an
# op whose machine is not in one of these, with the status/body recorded in `errors.py`.
COMMISSION_FROM = frozenset({S.NEW, S.FAILED_COMMISSIONING, S.READY, S.BROKEN, S.FAILED_TESTING})
DEPLOY_FROM = frozenset({S.READY, S.ALLOCATED})
RELEASABLE = frozenset(  # models/node.py RELEASABLE_STATUSES
    {S.ALLOCATED, S.RESERVED, S.BROKEN, S.DEPLOYING, S.DEPLOYED, S.FAILED_DEPLOYMENT,
     S.FAILED_DISK_ERASING, S.FAILED_RELEASING}
)
ABORTABLE = frozenset({S.COMMISSIONING, S.DISK_ERASING, S.DEPLOYING, S.TESTING})
POWER_ON_OWNED = frozenset({S.ALLOCATED, S.DEPLOYING, S.DEPLOYED, S.BROKEN, S.FAILED_DEPLOYMENT})
# Interface link/unlink (maasserver/api/interfaces.py ALLOWED_STATES).
NETWORK_EDITABLE = frozenset({S.NEW, S.READY, S.FAILED_TESTING, S.ALLOCATED, S.BROKEN})
# Statuses that own the machine to a user (MAAS keeps the owner through these).
OWNED = frozenset({S.ALLOCATED, S.DEPLOYING, S.DEPLOYED, S.FAILED_DEPLOYMENT, S.RELEASING,
                   S.DISK_ERASING, S.FAILED_RELEASING, S.FAILED_DISK_ERASING})


_TESTING_RESETS = {S.NEW, S.COMMISSIONING, S.FAILED_DEPLOYMENT, S.MISSING, S.RETIRED, S.BROKEN,
                   S.FAILED_RELEASING, S.FAILED_DISK_ERASING, S.FAILED_ENTERING_RESCUE_MODE,
                   S.FAILED_EXITING_RESCUE_MODE, S.FAILED_TESTING}

# Every status change MAAS allows (maasserver/node_status.py NODE_TRANSITIONS, for the statuses
# the simulator reaches). `Lifecycle.transition` refuses anything else: a simulator bug.
TRANSITIONS: dict[NodeStatus, frozenset[NodeStatus]] = {k: frozenset(v) for k, v in {
    S.NEW: {S.COMMISSIONING, S.TESTING, S.MISSING, S.READY, S.RETIRED, S.BROKEN, S.ENTERING_RESCUE_MODE},
    S.COMMISSIONING: {S.FAILED_COMMISSIONING, S.READY, S.RETIRED, S.MISSING, S.NEW, S.BROKEN, S.TESTING},
    S.FAILED_COMMISSIONING: {S.COMMISSIONING, S.MISSING, S.RETIRED, S.BROKEN, S.ENTERING_RESCUE_MODE,
                             S.TESTING},
    S.READY: {S.ENTERING_RESCUE_MODE, S.COMMISSIONING, S.ALLOCATED, S.RESERVED, S.RETIRED, S.MISSING,
              S.BROKEN, S.TESTING},
    S.RESERVED: {S.READY, S.ALLOCATED, S.RETIRED, S.MISSING, S.BROKEN, S.DISK_ERASING, S.RELEASING,
                 S.ENTERING_RESCUE_MODE, S.TESTING},
    S.ALLOCATED: {S.READY, S.RETIRED, S.MISSING, S.BROKEN, S.DEPLOYING, S.DISK_ERASING, S.RELEASING,
                  S.ENTERING_RESCUE_MODE, S.TESTING},
    S.RELEASING: {S.NEW, S.ALLOCATED, S.RESERVED, S.DEPLOYED, S.READY, S.BROKEN, S.MISSING,
                  S.FAILED_DEPLOYMENT, S.FAILED_DISK_ERASING, S.FAILED_RELEASING},
    S.DEPLOYING: {S.ALLOCATED, S.MISSING, S.BROKEN, S.FAILED_DEPLOYMENT, S.DEPLOYED, S.READY,
                  S.DISK_ERASING, S.RELEASING},
    S.FAILED_DEPLOYMENT: {S.ALLOCATED, S.MISSING, S.BROKEN, S.READY, S.DISK_ERASING, S.RELEASING,
                          S.ENTERING_RESCUE_MODE, S.TESTING},
    S.DEPLOYED: {S.ALLOCATED, S.MISSING, S.BROKEN, S.READY, S.DISK_ERASING, S.RELEASING,
                 S.ENTERING_RESCUE_MODE, S.TESTING},
    S.BROKEN: {S.COMMISSIONING, S.READY, S.DISK_ERASING, S.RELEASING, S.ENTERING_RESCUE_MODE, S.TESTING,
               S.DEPLOYED},
    S.FAILED_RELEASING: {S.RELEASING, S.DISK_ERASING, S.READY, S.BROKEN, S.TESTING},
    S.DISK_ERASING: {S.BROKEN, S.DISK_ERASING, S.FAILED_DISK_ERASING, S.READY, S.RELEASING},
    S.FAILED_DISK_ERASING: {S.DISK_ERASING, S.RELEASING, S.BROKEN, S.ALLOCATED, S.READY,
                            S.ENTERING_RESCUE_MODE, S.TESTING},
    S.TESTING: {S.BROKEN, S.NEW, S.READY, S.RESERVED, S.ALLOCATED, S.DEPLOYED} | _TESTING_RESETS,
    S.FAILED_TESTING: {S.COMMISSIONING, S.BROKEN, S.MISSING, S.ENTERING_RESCUE_MODE, S.TESTING, S.READY,
                       S.DEPLOYED},
}.items()}


class IllegalTransition(AssertionError):
    """The simulator tried a status change MAAS never makes."""


class PowerState(StrEnum):
    ON = "on"
    OFF = "off"
    UNKNOWN = "unknown"
    ERROR = "error"


class LinkMode(StrEnum):
    AUTO = "auto"
    DHCP = "dhcp"
    STATIC = "static"
    LINK_UP = "link_up"


class StorageLayout(StrEnum):
    FLAT = "flat"
    LVM = "lvm"
    BCACHE = "bcache"
    BLANK = "blank"
