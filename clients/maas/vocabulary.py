"""MAAS's own vocabulary: node statuses (codes 0..22 with MAAS's labels), the views a read returns,
and the error a failed call raises. Everything that talks about MAAS objects imports it from here
(`clients.maas`); the machine lifecycle's ports only name the calls it needs.
"""

from __future__ import annotations

import re
from enum import IntEnum

from pydantic import BaseModel, ConfigDict


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


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)  # built on first use: a check reads no machine


class InterfaceView(_View):
    id: int
    name: str
    mac_address: str
    links: tuple[dict, ...] = ()


class BlockDeviceView(_View):
    id: int
    name: str
    model: str = ""
    size: int = 0


class MachineView(_View):
    """One machine as MAAS reports it (a bulk read returns many)."""

    system_id: str
    hostname: str
    status: MaasStatus
    status_message: str = ""
    power_state: str = "unknown"
    pxe_mac: str | None = None
    owner_data: dict[str, str] = {}
    enable_hw_sync: bool = False
    tags: tuple[str, ...] = ()


class MachineDetail(_View):
    """What the preflight and storage stages read (one request per machine, only when needed)."""

    machine: MachineView
    boot_interface_mac: str | None
    interfaces: tuple[InterfaceView, ...]
    block_devices: tuple[BlockDeviceView, ...]
    boot_disk_id: int | None = None


class PortError(Exception):
    """A call to an external system failed; carries what an operator needs."""

    def __init__(self, message: str, *, status: int | None = None, system_id: str | None = None):
        super().__init__(message)
        self.status = status
        self.system_id = system_id


class MaasError(PortError):
    """A MAAS call failed (message: MAAS's response body, never the request)."""


class PowerSettings(_View):
    """A machine's power driver as MAAS reports it (the password is never read back)."""

    power_type: str
    power_address: str | None = None
    power_user: str | None = None


class ScriptStatus(IntEnum):
    """A script result's status (canonical/maas `metadataserver/enum.py` SCRIPT_STATUS)."""

    PENDING = 0
    RUNNING = 1
    PASSED = 2
    FAILED = 3
    TIMEDOUT = 4
    ABORTED = 5
    DEGRADED = 6
    INSTALLING = 7
    FAILED_INSTALLING = 8
    SKIPPED = 9
    APPLYING_NETCONF = 10
    FAILED_APPLYING_NETCONF = 11


SCRIPT_FAILED = frozenset({ScriptStatus.FAILED, ScriptStatus.TIMEDOUT, ScriptStatus.ABORTED,
                           ScriptStatus.DEGRADED, ScriptStatus.FAILED_INSTALLING,
                           ScriptStatus.FAILED_APPLYING_NETCONF})


class ScriptResultView(_View):
    """One script's result in a machine's current commissioning or testing run
    (`GET nodes/{system_id}/results/current-<kind>/`, MAAS >= 2.2)."""

    name: str
    status: int
    status_name: str
    exit_status: int | None = None
    output: str = ""
    """The script's combined output (stdout and stderr as they came), as MAAS stored it; may hold anything
    the script printed: redact before showing it (providers/machines/script_failures.py)."""

    @property
    def failed(self) -> bool:
        return self.status in {s.value for s in SCRIPT_FAILED}

    def text(self) -> str:
        """e.g. `smartctl-validate: failed, exit 1`."""
        exit_text = f", exit {self.exit_status}" if self.exit_status is not None else ""
        return f"{self.name}: {self.status_name.lower()}{exit_text}"


class EventView(_View):
    """One entry of a machine's MAAS event log (`Events.query`)."""

    type: str
    description: str

    def text(self) -> str:
        return f"{self.type}: {self.description}".strip(": ")


# How real MAAS words a failed deployment (canonical/maas; this is the one place that cites it):
# - src/metadataserver/api_twisted.py, StatusWorkerService._processMessage: a top-level `finish` event
#   with result FAILURE while Deploying marks the node Failed deployment with the comment
#   "Installation failed (refer to the installation log for more information)." (curtin and
#   cloud-init failures alike: the status message alone does not say which).
# - src/metadataserver/api.py, add_event_to_node_event_log: that event is logged as type
#   NODE_INSTALL_EVENT_FAILED ("Node installation failure") with description "'<origin>' <description>".
# - cloud-init reports its datasource search as the top-level stages init-local / init-network with
#   origin "cloudinit" and description "searching for local datasources" / "searching for network
#   datasources" (cloudinit/cmd/main.py); a failed search is that stage finishing with FAILURE.
INSTALLATION_FAILED = "Installation failed (refer to the installation log for more information)."
INSTALL_FAILURE_TYPE = "Node installation failure"
DATASOURCE_DESCRIPTION = re.compile(r"^'cloudinit' searching for (local|network) datasources")
DEPLOY_START_TYPE = "Deploying"  # the event that starts a deployment attempt (scan no further back)


def datasource_failure(events: list[EventView]) -> EventView | None:
    """The cloud-init datasource failure of the latest deployment attempt, if that is what failed
    (`events` newest first, as `Events.query` returns them)."""
    for e in events:
        if e.type == DEPLOY_START_TYPE:
            return None
        if e.type == INSTALL_FAILURE_TYPE and DATASOURCE_DESCRIPTION.match(e.description):
            return e
    return None


# MAAS settings such as hardware_sync_interval are systemd time spans (MAAS: systemd_interval_to_seconds).
_SPAN = re.compile(r"\s*(\d+)\s*(h|m|s)")
_SPAN_UNITS = (("h", 3600), ("m", 60), ("s", 1))


def timespan(seconds: int) -> str:
    """Seconds as MAAS writes a systemd time span: 900 -> '15m', 5400 -> '1h30m', 90 -> '1m30s'."""
    out, rest = "", seconds
    for unit, size in _SPAN_UNITS:
        if rest >= size:
            out, rest = out + f"{rest // size}{unit}", rest % size
    return out or "0s"


def timespan_seconds(text: str) -> int | None:
    """A systemd time span as MAAS accepts it ('15m', '1h 30m', '900s') in seconds; None when unreadable."""
    pieces = _SPAN.findall(text)
    if not pieces or _SPAN.sub("", text).strip():
        return None
    return sum(int(n) * dict(_SPAN_UNITS)[u] for n, u in pieces)
