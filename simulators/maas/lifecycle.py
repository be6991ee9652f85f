"""The machine lifecycle: which op may start from which status, how long each phase takes, and
what a phase ends in. One table (`PHASE_END`) maps each in-progress status to the small function
that finishes it; `Scheduler` fires those functions when a phase's (scaled) duration is over.

All methods expect the caller to hold `store.lock`, except the scheduler callback, which takes it.
"""
# size: MAAS's lifecycle state table and the phase ends it names, kept side by side

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from . import errors, script_results
from .config import hw_sync_interval
from .enroll import find_enrollment, post_enrollment
from .enums import (
    ABORTABLE,
    COMMISSION_FROM,
    DEPLOY_FROM,
    FAILED_STATUS,
    RELEASABLE,
    TRANSITIONS,
    IllegalTransition,
    NodeStatus,
    PowerState,
)
from .faults import DATASOURCE_ERROR, DATASOURCE_EVENT, DATASOURCE_EVENT_TYPE, FaultBook
from .node_deploys import NodeDeploys
from .observe import Stats
from .state import Machine, Store

if TYPE_CHECKING:
    from .commissioning import NodeCommissioning
    from .nspawn import NspawnNodes

S = NodeStatus
log = logging.getLogger("simulators.maas")


class PhaseDurations(BaseModel):
    """Seconds each phase takes on real hardware; multiplied by `time_scale`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    commissioning: float = Field(default=600.0, ge=0)
    testing: float = Field(default=300.0, ge=0)
    deploying: float = Field(default=900.0, ge=0)
    disk_erasing: float = Field(default=1200.0, ge=0, description="full erase; quick/secure erase take 1/10")
    releasing: float = Field(default=30.0, ge=0)
    power_failure: float = Field(default=5.0, ge=0, description="until a failed power action fails the phase")


class Scheduler:
    """A single timer thread: callbacks run in due order, outside the heap's lock."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="maas-sim-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=5)

    def call_at(self, due: float, fn: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._heap, (due, next(self._seq), fn))
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:  # a bug in one phase end must not stop every other machine's clock
                log.exception("MAAS simulator: phase callback failed")


class Lifecycle(NodeDeploys):
    def __init__(self, store: Store, faults: FaultBook, stats: Stats, durations: PhaseDurations,
                 time_scale: float, platform_url: str | None = None, nodes: NspawnNodes | None = None) -> None:
        self.store = store
        self.nodes = nodes  # NSPAWN backend: real nodes, Deployed from their cloud-init (nspawn.py)
        self.metadata_url = ""  # http://<host:port>/MAAS/metadata/, set when the HTTP server starts
        self._node_failures: dict[str, str] = {}  # system_id -> the first failed cloud-init event of this deploy
        self.faults = faults
        self.stats = stats
        self.durations = durations
        self.time_scale = time_scale
        self.platform_url = platform_url
        self.scheduler = Scheduler()
        self._enroller = ThreadPoolExecutor(max_workers=2, thread_name_prefix="maas-sim-enroll")
        self.commissioning: NodeCommissioning | None = None  # NSPAWN: commissioning and testing run on a node
        if nodes is not None:
            from .commissioning import NodeCommissioning  # the lab's node machinery, for the NSPAWN backend only

            self.commissioning = NodeCommissioning(self)
        self.PHASE_END: dict[NodeStatus, Callable[[Machine], None]] = {
            S.COMMISSIONING: self._end_commissioning,
            S.TESTING: self._end_testing,
            S.DEPLOYING: self._end_deploying,
            S.DISK_ERASING: self._end_erasing,
            S.RELEASING: self._end_releasing,
        }

    def start(self) -> None:
        self.scheduler.start()

    def stop(self) -> None:
        self.scheduler.stop()
        self._enroller.shutdown(wait=False, cancel_futures=True)
        if self.nodes is not None:
            self.nodes.stop()

    # --- transitions ----------------------------------------------------------------------
    def transition(self, m: Machine, new: NodeStatus, note: str) -> None:
        old = m.status
        if new not in TRANSITIONS.get(old, frozenset()):
            raise IllegalTransition(f"{m.system_id}: {old.label} -> {new.label} is not a MAAS transition")
        m.previous_status, m.status = old, new
        m.phase_token += 1  # any timer armed for the previous phase is now stale
        m.phase_due = None
        self.stats.status_changed(m.zone, old, new)
        level = "ERROR" if new in FAILED_STATUS.values() or new == S.BROKEN else "INFO"
        m.event("STATUS", f"{old.label} -> {new.label}: {note}", level)
        log.log(logging.WARNING if level == "ERROR" else logging.INFO, "%s (%s) [%s]: %s -> %s: %s",
                m.hostname, m.system_id, m.zone, old.label, new.label, note)

    def _arm(self, m: Machine, seconds: float, end: Callable[[Machine], None] | None = None) -> None:
        token = m.phase_token
        due = time.monotonic() + seconds * self.time_scale
        m.phase_due = due
        sid = m.system_id
        finish = end or self.PHASE_END[m.status]
        self.scheduler.call_at(due, lambda: self._fire(sid, token, finish))

    def _fire(self, sid: str, token: int, finish: Callable[[Machine], None]) -> None:
        enrollment_job = None
        with self.store.lock:
            m = self.store.machines.get(sid)
            if m is None or m.phase_token != token:
                return  # deleted, aborted or moved on since the timer was armed
            before = m.status
            finish(m)
            if before != S.DEPLOYED and m.status == S.DEPLOYED and self.platform_url:
                enrollment_job = (m.user_data, m.hostname, m.system_id)
        if enrollment_job is not None:
            self._enroller.submit(self._enroll, *enrollment_job)

    def _power_fails(self, m: Machine, status: NodeStatus, action: str) -> bool:
        """A power driver fault makes the phase fail shortly after it started, as in MAAS."""
        err = self.faults.power_error(m.system_id, m.hostname)
        if err is None:
            return False
        m.power_state = PowerState.ERROR

        def fail(mm: Machine) -> None:
            mm.error_description = f"Power {action} for the node failed: {err}"
            self.transition(mm, FAILED_STATUS[status], mm.error_description)

        self._arm(m, self.durations.power_failure, fail)
        return True

    # --- ops (API side) -------------------------------------------------------------------
    def commission(self, m: Machine, commissioning_scripts: list[str], testing_scripts: list[str]) -> None:
        if m.status not in COMMISSION_FROM:
            raise errors.commission_refused()
        m.commissioning_scripts, m.testing_scripts = commissioning_scripts, testing_scripts
        m.attempts["commissioning"] = m.attempts.get("commissioning", 0) + 1
        m.error_description = ""
        self.transition(m, S.COMMISSIONING, "commissioning scripts: "
                        + (",".join(commissioning_scripts) or "(built-in)")
                        + "; testing scripts: " + (",".join(testing_scripts) or "(default)"))
        if self._power_fails(m, S.COMMISSIONING, "on"):
            return
        m.power_state = PowerState.ON
        if self.commissioning is not None:
            self.commissioning.start(m)  # a real node runs the scripts; its signals end the phase
            return
        self._arm(m, self.durations.commissioning)

    def deploy(self, m: Machine, user_data: bytes | None, distro_series: str, hwe_kernel: str | None,
               enable_hw_sync: bool, user: str) -> None:
        if m.status == S.READY:
            m.owner = user
            self.transition(m, S.ALLOCATED, f"allocated to {user}")
        if m.status not in DEPLOY_FROM:
            raise errors.deploy_refused(m.status)
        m.user_data, m.distro_series, m.osystem = user_data, distro_series, "ubuntu"
        m.hwe_kernel, m.enable_hw_sync = hwe_kernel, enable_hw_sync
        m.attempts["deploy"] = m.attempts.get("deploy", 0) + 1
        m.error_description = ""
        self.transition(m, S.DEPLOYING, f"deploying {distro_series}"
                        + (f" ({hwe_kernel})" if hwe_kernel else "")
                        + (", hardware sync enabled" if enable_hw_sync else ""))
        self.store.assign_auto_ips(m)
        if self._power_fails(m, S.DEPLOYING, "on"):
            return
        m.power_state = PowerState.ON
        if self.nodes is not None:
            self._boot_node(m)
            return
        if self.faults.take("deploy_stalls", m.system_id, m.hostname):
            m.event("NODE", "deploy stalled (injected fault): no phase end until the deploy is aborted")
            return
        self._arm(m, self.durations.deploying)

    def release(self, m: Machine, erase: bool, secure_erase: bool, quick_erase: bool, force: bool) -> None:
        if m.status in (S.RELEASING, S.READY):
            return  # MAAS treats a repeated release as already done
        if m.status not in RELEASABLE:
            raise errors.release_refused(m.status)
        erase = erase or secure_erase or quick_erase
        self._halt_node(m)
        m.erase = {"secure_erase": secure_erase, "quick_erase": quick_erase} if erase else None
        if erase:
            m.attempts["erase"] = m.attempts.get("erase", 0) + 1
            kind = "quick" if quick_erase else "secure" if secure_erase else "full"
            self.transition(m, S.DISK_ERASING, f"release with {kind} disk erase" + (" (forced)" if force else ""))
            scale = 0.1 if (quick_erase or secure_erase) else 1.0
            if self._power_fails(m, S.DISK_ERASING, "on"):
                return
            m.power_state = PowerState.ON
            self._arm(m, self.durations.disk_erasing * scale)
        else:
            self.transition(m, S.RELEASING, "release" + (" (forced)" if force else ""))
            if self._power_fails(m, S.RELEASING, "off"):
                return
            self._arm(m, self.durations.releasing)

    def abort(self, m: Machine) -> None:
        if m.status not in ABORTABLE:
            raise errors.abort_refused(m.system_id, m.status)
        # MAAS: aborted commissioning -> New; testing after commissioning -> Ready (otherwise the
        # status testing started from); deploying -> Allocated; erasing -> Failed disk erasing.
        back: NodeStatus
        if m.status == S.TESTING:
            prev = m.previous_status
            back = S.READY if prev in (None, S.COMMISSIONING) else prev
        else:
            back = {S.COMMISSIONING: S.NEW, S.DEPLOYING: S.ALLOCATED,
                    S.DISK_ERASING: S.FAILED_DISK_ERASING}[m.status]
        m.power_state = PowerState.OFF
        if m.status == S.DEPLOYING:
            self._halt_node(m)
        elif m.status in (S.COMMISSIONING, S.TESTING) and self.commissioning is not None:
            self.commissioning.abort(m)
        self.transition(m, back, "aborted by user")

    def accept(self, m: Machine) -> bool:
        """True if accepted now; False if it already was (Ready/Commissioning)."""
        if m.status in (S.READY, S.COMMISSIONING):
            return False
        if m.status != S.NEW:
            raise errors.accept_refused(m.system_id, m.status)
        self.commission(m, [], [])
        return True

    def mark_broken(self, m: Machine, comment: str) -> None:
        if m.status == S.BROKEN:
            return
        if S.BROKEN not in TRANSITIONS.get(m.status, frozenset()):
            raise errors.mark_broken_refused(m.status)
        if m.status in RELEASABLE:
            m.owner = None
        m.error_description = comment
        self.transition(m, S.BROKEN, f"marked broken: {comment}" if comment else "marked broken")

    def mark_fixed(self, m: Machine, comment: str) -> None:
        if m.status != S.BROKEN:
            raise errors.mark_fixed_refused()
        target = S.DEPLOYED if m.previous_status == S.DEPLOYED else S.READY
        m.error_description = ""
        self.transition(m, target, f"marked fixed: {comment}" if comment else "marked fixed")

    # --- phase ends (the state table's right-hand side) -----------------------------------
    def _end_commissioning(self, m: Machine) -> None:
        names = script_results.run_names(script_results.ResultType.COMMISSIONING, m.commissioning_scripts)
        if self.faults.take("commissioning_failures", m.system_id, m.hostname):
            failed = "20-maas-03-machine-resources"
            script_results.record_run(self.store, m, script_results.ResultType.COMMISSIONING, names, failed,
                                      self.durations.commissioning)
            m.error_description = f"Commissioning script {failed} failed (injected fault)"
            m.power_state = PowerState.OFF
            self.transition(m, S.FAILED_COMMISSIONING, m.error_description)
            return
        script_results.record_run(self.store, m, script_results.ResultType.COMMISSIONING, names, None,
                                  self.durations.commissioning)
        self.store.commissioned_links(m)
        if m.testing_scripts == ["none"]:
            m.power_state = PowerState.OFF
            self.transition(m, S.READY, "commissioning finished, no tests requested")
            return
        self.transition(m, S.TESTING, "commissioning finished; running tests "
                        + (",".join(m.testing_scripts) or "(default)"))
        self._arm(m, self.durations.testing)

    def _end_testing(self, m: Machine) -> None:
        m.power_state = PowerState.OFF
        names = script_results.run_names(script_results.ResultType.TESTING, m.testing_scripts)
        if self.faults.take("testing_failures", m.system_id, m.hostname):
            # the first requested testing script fails (MAAS's default smartctl-validate when none was named)
            failed = names[0]
            script_results.record_run(self.store, m, script_results.ResultType.TESTING, names, failed,
                                      self.durations.testing)
            m.error_description = f"Testing script {failed} failed (injected fault)"
            self.transition(m, S.FAILED_TESTING, m.error_description)
            return
        script_results.record_run(self.store, m, script_results.ResultType.TESTING, names, None, self.durations.testing)
        self.transition(m, S.READY, "tests passed")

    def _end_deploying(self, m: Machine) -> None:
        if self.faults.take("deploy_failures", m.system_id, m.hostname):
            # As MAAS logs it: cloud-init's failed stage, then the node marked failed.
            m.event(DATASOURCE_EVENT_TYPE.upper().replace(" ", "_"), DATASOURCE_EVENT, "ERROR")
            m.error_description = DATASOURCE_ERROR
            self.transition(m, S.FAILED_DEPLOYMENT, DATASOURCE_ERROR)
            return
        self.transition(m, S.DEPLOYED, "deployed")
        if m.enable_hw_sync:
            self._hw_sync(m)

    def _hw_sync(self, m: Machine) -> None:
        """The deployed machine's hardware-sync agent reports in every sync interval."""
        m.last_sync = time.time()
        self._arm(m, hw_sync_interval(self.store), self._hw_sync)

    def _end_erasing(self, m: Machine) -> None:
        if self.faults.take("erase_failures", m.system_id, m.hostname):
            m.error_description = "Failed to erase disks: wipe-disks script failed (injected fault)"
            m.power_state = PowerState.OFF
            self.transition(m, S.FAILED_DISK_ERASING, m.error_description)
            return
        if self.nodes is not None:
            self.nodes.erase(m.hostname)  # the real node's data disks (after its halt: the same ordered worker)
        self._to_ready(m, "disks erased, released")

    def _end_releasing(self, m: Machine) -> None:
        self._to_ready(m, "released")

    def _to_ready(self, m: Machine, note: str) -> None:
        m.owner, m.owner_data = None, {}
        m.osystem, m.distro_series, m.hwe_kernel = "", "", None
        m.enable_hw_sync, m.last_sync = False, None
        m.power_state = PowerState.OFF
        self.store.release_auto_ips(m)
        self.transition(m, S.READY, note)

    # --- enrollment -----------------------------------------------------------------------
    def _enroll(self, user_data: bytes | None, hostname: str, system_id: str) -> None:
        assert self.platform_url is not None
        enrollment = find_enrollment(user_data)
        if enrollment is None:
            note = f"no enrollment file in user_data; nothing posted to {self.platform_url}"
            result = None
        else:
            result = post_enrollment(self.platform_url, enrollment, hostname, system_id)
            note = (f"node_id={enrollment.node_id} -> status={result.status_code} "
                    f"error_code={result.error_code or '-'}")
        with self.store.lock:
            m = self.store.machines.get(system_id)
            if m is not None:
                m.event("ENROLL" if result and result.ok else "ENROLL_FAILED" if result else "ENROLL_SKIPPED", note)
