"""The deploy side of the NSPAWN machine backend, as a part of the lifecycle (`Lifecycle` inherits it): a
deploy boots the machine's node from the user_data MAAS holds and only the node's cloud-init says how it
ended (nspawn.py, metadata.py); power actions reach the node. Commissioning and testing on nodes:
commissioning.py. Callers hold store.lock."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from clients.maas import INSTALL_FAILURE_TYPE, INSTALLATION_FAILED

from .enums import NodeStatus
from .state import Machine

if TYPE_CHECKING:
    from .commissioning import NodeCommissioning
    from .lifecycle import Scheduler
    from .metadata import StatusMessage
    from .nspawn import NspawnNodes

S = NodeStatus
log = logging.getLogger("simulators.maas")


class NodeDeploys:
    """Mixed into `Lifecycle` (lifecycle.py), whose attributes and methods these use."""

    nodes: NspawnNodes | None
    commissioning: NodeCommissioning | None
    metadata_url: str
    scheduler: Scheduler
    _node_failures: dict[str, str]

    if TYPE_CHECKING:
        def transition(self, m: Machine, new: NodeStatus, note: str) -> None: ...
        def _fire(self, sid: str, token: int, finish: Callable[[Machine], None]) -> None: ...
        def _hw_sync(self, m: Machine) -> None: ...

    def _boot_node(self, m: Machine) -> None:
        """Boot the machine's node from the user_data MAAS holds; only its cloud-init says Deployed."""
        assert self.nodes is not None and self.metadata_url, "the NSPAWN backend needs the running HTTP server"
        self._node_failures.pop(m.system_id, None)
        data = [d.name for d in m.block_devices if d.id != m.boot_disk_id]  # the machine's disks besides the boot one
        self.nodes.boot(m.system_id, m.hostname, m.user_data or b"", f"{self.metadata_url}status/{m.system_id}",
                        data_disks=data)
        m.event("NODE", f"booting a fresh nspawn node from the deploy's user_data ({len(m.user_data or b'')} bytes)")
        timeout_s = self.nodes.deploy_timeout_s  # wall clock, not time_scale: a real boot takes what it takes
        token, sid = m.phase_token, m.system_id
        self.scheduler.call_at(time.monotonic() + timeout_s,
                               lambda: self._fire(sid, token, lambda mm: self._deploy_timed_out(mm, timeout_s)))

    def _deploy_timed_out(self, m: Machine, timeout_s: float) -> None:
        m.error_description = f"Node operation 'Deploying' timed out after {timeout_s:.0f} seconds."
        self.transition(m, S.FAILED_DEPLOYMENT, m.error_description)

    def _halt_node(self, m: Machine) -> None:
        if self.nodes is not None:
            self.nodes.halt(m.system_id, m.hostname)

    def power_node(self, m: Machine, on: bool) -> None:
        """A power action on a deployed machine reaches its node: off halts it (the disk stays), on boots
        the same disk again (cloud-init does not rerun the instance's once-only modules)."""
        if self.nodes is None or m.status != S.DEPLOYED:
            return
        if on:
            self.nodes.power_on(m.hostname)
        else:
            self.nodes.halt(m.system_id, m.hostname, keep_key=True)

    def node_status(self, m: Machine, msg: StatusMessage) -> None:
        """A cloud-init reporting event from the machine's node (metadata.py); caller holds store.lock.
        As MAAS: a start or a failure goes to the event log (sub-stage starts at DEBUG); a top-level
        stage finishing FAIL fails the deployment; `modules-final` finishing otherwise ends it Deployed.
        While commissioning or testing, the commissioning path reads them (commissioning.py)."""
        if self.commissioning is not None and m.status in (S.COMMISSIONING, S.TESTING):
            self.commissioning.cloud_init_event(m, msg)
            return
        what = f"'{msg.origin}' {msg.description}".strip()
        if msg.failed:
            m.event(INSTALL_FAILURE_TYPE, f"{what} [{msg.name}: {msg.result}]", "ERROR")
            self._node_failures.setdefault(m.system_id, f"{msg.name}: {msg.description}")
        elif msg.event_type == "start":
            m.event("Node installation", f"{what} [{msg.name}]", "INFO" if msg.top_level else "DEBUG")
        if m.status != S.DEPLOYING or not msg.top_level or msg.event_type != "finish":
            return
        if msg.failed:
            first = self._node_failures.get(m.system_id, f"{msg.name}: {msg.description}")
            m.error_description = f"{INSTALLATION_FAILED} cloud-init reported {first}"
            self.transition(m, S.FAILED_DEPLOYMENT, m.error_description)
        elif msg.name == "modules-final":
            self.transition(m, S.DEPLOYED, "deployed (cloud-init modules-final finished on the node)")
            if m.enable_hw_sync:
                self._hw_sync(m)
