"""The NSPAWN machine backend: a real node behind each deployed machine (lab/node.py).

On deploy the simulator boots a systemd-nspawn node whose NoCloud seed is exactly the user_data MAAS
holds. As a MAAS-deployed image does, the node also carries a cloud.cfg.d drop-in (never part of the
user's user_data) that points cloud-init's `reporting` webhook at the simulator's metadata status
endpoint, `/MAAS/metadata/status/<system_id>`, signed with a per-deploy node key (OAuth PLAINTEXT, as
MAAS's NodeKey). cloud-init's events then drive the machine (metadata.py, `Lifecycle.node_status`):
the top-level `modules-final` finishing SUCCESS makes it Deployed, any top-level stage finishing FAIL
makes it Failed deployment. No timer says Deployed; a node that never reports fails the deploy after
`deploy_timeout_s` of wall-clock time, in MAAS's words.

Release, abort and redeploy halt the machine's node; a redeploy boots a fresh root disk (a new overlay).
The node also has the machine's data disks: one loop device per non-boot block device MAAS lists for the
machine (its hardware: an H200's nvme0n1..nvme7n1), seen in the node under the same names, which are
the storage layouts' `data_devices`. They belong to the machine, not the boot: a redeploy keeps them
(the storage step never reformats a labelled disk, so /shareN keeps its data); a release with disk
erase (any mode) wipes them (`erase`), a release without erase keeps them.
The servers a node talks to (this simulator, the platform, the artifact store) must listen on the
lab's gateway address: the node's only route.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import yaml
from pydantic import BaseModel, ConfigDict

from lab.node import DATA_DISK_MB, BootedNode, NodeLab

from .auth import ApiKey, KeyRing

log = logging.getLogger("simulators.maas")
REPORTING_DROP_IN = "90_maas_reporting.cfg"  # the name is ours; MAAS's curtin writes its own 90_dpkg_* files
DEPLOY_TIMEOUT_S = 300.0  # wall-clock seconds a node may take from deploy to its final event
COMMISSION_TIMEOUT_S = 300.0  # wall-clock seconds a node may take for commissioning, then again for testing
DATASOURCE_DROP_IN = "90_maas_datasource.cfg"  # the commissioning runner's MAAS credentials (its --config)


class NodeBoot(BaseModel):
    """One node booted for one deploy of a machine (for tests and the demo)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    system_id: str
    hostname: str
    node: BootedNode


class NspawnNodes:
    """Boots, tracks and halts the real nodes behind an NSPAWN simulator's machines.

    `lab` is a started NodeLab whose hostnames include every machine that may be deployed; the
    simulator's caller owns it (its gateway must exist before the servers bind to it). `knobs`:
    lab stand-in settings per hostname (lab/node.py), e.g. {"local-gpu-2": {"gpus": "7"}}. `disk_mb`:
    the size of each data disk's image. `boots`: the deploys' nodes; `commissionings`: the commissioning
    environments' (ephemeral) nodes.
    """

    def __init__(self, lab: NodeLab, knobs: dict[str, dict[str, str]] | None = None,
                 deploy_timeout_s: float = DEPLOY_TIMEOUT_S, disk_mb: int = DATA_DISK_MB,
                 commission_timeout_s: float = COMMISSION_TIMEOUT_S) -> None:
        self.lab = lab
        self.disk_mb = disk_mb  # each data disk's size (sparse): the lab's, not the hardware's 3.84 TB
        self.knobs = dict(knobs or {})
        self.deploy_timeout_s = deploy_timeout_s
        self.commission_timeout_s = commission_timeout_s
        self.boots: list[NodeBoot] = []
        self.commissionings: list[NodeBoot] = []
        self.errors: list[str] = []
        self._keys: dict[str, ApiKey] = {}  # system_id -> the current deploy's node key
        self._lock = threading.Lock()
        # one worker: a machine's halt and its next boot run in the order the API asked for them
        self._ops = ThreadPoolExecutor(max_workers=1, thread_name_prefix="maas-sim-nspawn")

    @property
    def gateway(self) -> str:
        return self.lab.gateway

    def new_key(self, system_id: str) -> ApiKey:
        """A fresh node key for this deploy; the previous node's key stops working."""
        key = ApiKey.generate(user=system_id)
        with self._lock:
            self._keys[system_id] = key
        return key

    def drop_key(self, system_id: str) -> None:
        with self._lock:
            self._keys.pop(system_id, None)

    def authenticate(self, authorization: str | None) -> str | None:
        """The system_id whose current node key signed the request; None if unsigned; raises 401/400."""
        with self._lock:
            ring = KeyRing(list(self._keys.values()))
        return ring.authenticate(authorization)

    def reporting_config(self, status_url: str, key: ApiKey) -> str:
        """cloud-init's reporting config, as MAAS gives a deployed machine (a webhook with its node key)."""
        webhook = {"type": "webhook", "endpoint": status_url, "consumer_key": key.consumer_key,
                   "token_key": key.token_key, "token_secret": key.token_secret}
        return "# written by the MAAS simulator: cloud-init reports to MAAS's metadata status endpoint\n" + \
            yaml.safe_dump({"reporting": {"maas": webhook}}, sort_keys=True)

    def datasource_config(self, metadata_url: str, key: ApiKey) -> str:
        """MAAS's datasource config with the node key, which the commissioning runner signs with."""
        maas = {"metadata_url": metadata_url, "consumer_key": key.consumer_key, "token_key": key.token_key,
                "token_secret": key.token_secret}
        return "# written by the MAAS simulator: the commissioning environment's MAAS credentials\n" + \
            yaml.safe_dump({"datasource": {"MAAS": maas}}, sort_keys=True)

    def boot(self, system_id: str, hostname: str, user_data: bytes, status_url: str,
             data_disks: Sequence[str] = (), metadata_url: str | None = None) -> Future[None]:
        """Boot a fresh node for this deploy (halting the machine's previous node first), in the background.
        `data_disks`: the machine's non-boot block devices (names), attached as its data disks.
        `metadata_url`: a commissioning environment's boot: the node also gets the datasource drop-in."""
        key = self.new_key(system_id)
        drop_in = {REPORTING_DROP_IN: self.reporting_config(status_url, key)}
        if metadata_url is not None:
            drop_in[DATASOURCE_DROP_IN] = self.datasource_config(metadata_url, key)
        disks = tuple(data_disks)
        booted = self.boots if metadata_url is None else self.commissionings

        def run() -> None:
            try:
                node = self.lab.boot(hostname, user_data, self.knobs.get(hostname), data_disks=disks,
                                     disk_mb=self.disk_mb, cloud_cfg=drop_in)
            except Exception as exc:  # reported through the deploy timeout and `errors`
                log.exception("MAAS simulator: booting the node of %s (%s) failed", hostname, system_id)
                self.errors.append(f"{hostname}: {type(exc).__name__}: {exc}")
                return
            booted.append(NodeBoot(system_id=system_id, hostname=hostname, node=node))
            log.info("%s (%s): nspawn node booted for %s (instance %s)", hostname, system_id,
                     "commissioning" if metadata_url else "deploy", node.instance_id)

        return self._ops.submit(run)

    def halt(self, system_id: str, hostname: str, *, keep_key: bool = False) -> Future[None]:
        """Stop the machine's node. Release and abort end the deploy: its key stops working at once;
        a power-off (`keep_key`) keeps it for the same disk's next boot."""
        if not keep_key:
            self.drop_key(system_id)
        return self._ops.submit(self.lab.halt, hostname)

    def erase(self, hostname: str) -> Future[list[str]]:
        """Wipe the machine's data disks (a release with disk erase): after its node's halt, in order."""
        def run() -> list[str]:
            erased = self.lab.erase_disks(hostname)
            log.info("%s: data disks erased (%s)", hostname, ", ".join(erased) or "none attached yet")
            return erased

        return self._ops.submit(run)

    def power_on(self, hostname: str) -> Future[BootedNode] | None:
        """Boot the machine's current disk again (a power-on after a power-off); None if it has none."""
        if self.latest(hostname) is None:
            return None
        return self._ops.submit(self.lab.restart, hostname)

    def latest(self, hostname: str) -> BootedNode | None:
        """The node booted last for this machine (its disk is readable from the host)."""
        found = [b.node for b in self.boots if b.hostname == hostname]
        return found[-1] if found else None

    def stop(self) -> None:
        """Halt every node (the lab itself stays up: its owner stops it)."""
        self._ops.shutdown(wait=True, cancel_futures=True)
        for hostname in {b.hostname for b in [*self.boots, *self.commissionings]}:
            self.lab.halt(hostname)
