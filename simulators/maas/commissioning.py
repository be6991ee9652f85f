"""Commissioning and testing on real nodes (the NSPAWN backend), as MAAS runs them.

A commission opens the machine's commissioning script set (MAAS's built-ins plus the requested scripts,
tag selectors expanded to the registered scripts carrying the tag) and, unless `testing_scripts=none`,
its testing set, every result Pending; then it boots an ephemeral node (lab/node.py: a fresh overlay, the
machine's data disks attached) whose user_data is the commissioning environment's: MAAS's script runner
(simulators/maas/node/maas_run_scripts.py), started by cloud-init, with the node key in a 0600 drop-in.
The runner downloads the scripts still to run (`GET /MAAS/metadata/latest/maas-scripts`, `scripts_tar`),
runs each, and signals what each did (`POST /MAAS/metadata/latest/` op=signal, `signal`): MAAS records
the real exit status and output (`nodes/{system_id}/results/`), and the runner's overall signals move the
machine, after canonical/maas `metadataserver/api.py` (`VersionIndexHandler._process_commissioning`,
`_process_testing`): TESTING -> Testing, OK -> Ready, FAILED -> Failed commissioning / Failed testing with
the runner's error ("1 test scripts failed to run"); a commissioning script that failed fails the
commissioning even if the runner says OK. A node that never finishes fails the phase after
`NspawnNodes.commission_timeout_s` of wall-clock time. The node is powered off (halted) when the phase
ends, as MAAS powers a machine off after commissioning.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clients.maas import ScriptStatus
from clients.maas.vocabulary import SCRIPT_FAILED

from . import script_results as sr
from .enums import NodeStatus, PowerState
from .nspawn import DATASOURCE_DROP_IN

if TYPE_CHECKING:
    from .lifecycle import Lifecycle
    from .metadata import StatusMessage
    from .state import Machine

S = NodeStatus
log = logging.getLogger("simulators.maas")
RUNNER = Path(__file__).resolve().parent / "node" / "maas_run_scripts.py"
RUNNER_ON_NODE = "/usr/local/sbin/maas-run-scripts"
SIGNAL_STATUSES = frozenset({"OK", "FAILED", "WORKING", "TESTING", "TIMEDOUT", "COMMISSIONING", "INSTALLING",
                             "APPLYING_NETCONF", "DEPLOYING", "RELEASING"})
# The states a node may signal in without effect (MAAS's signalable_states minus those it acts on here).
QUIET_STATES = frozenset({S.BROKEN, S.FAILED_COMMISSIONING, S.FAILED_DEPLOYMENT, S.READY, S.FAILED_TESTING,
                          S.NEW, S.DEPLOYING, S.DEPLOYED, S.DISK_ERASING, S.RELEASING})
CLOUD_INIT_FAILED = ("Commissioning failed, cloud-init reported a failure (refer to the event log for more "
                     "information)")  # canonical/maas api_twisted.py StatusWorkerService._processMessage
_FILE_KEYS = {".out": "stdout", ".err": "stderr", ".yaml": "result"}
# The signal's form fields (maas_api_helper.signal); every other part is a file of a script's output.
PARAMS = frozenset({"op", "status", "error", "script_result_id", "exit_status", "script_result", "result", "runtime",
                    "name", "script_version_id", "power_type", "power_parameters"})


def commissioning_user_data() -> bytes:
    """The commissioning environment's user_data: the runner and the command that starts it (no secret:
    the node key is in the datasource drop-in)."""
    runner = base64.b64encode(RUNNER.read_bytes()).decode()
    return (
        "#cloud-config\n"
        "# MAAS simulator: the commissioning environment (MAAS's generated commissioning user_data)\n"
        "write_files:\n"
        f"  - {{path: {RUNNER_ON_NODE}, permissions: '0755', encoding: b64, content: {runner}}}\n"
        "runcmd:\n"
        f"  - [{RUNNER_ON_NODE}, --config, /etc/cloud/cloud.cfg.d/{DATASOURCE_DROP_IN}]\n"
    ).encode()


def expand(lifecycle: Lifecycle, names: list[str], script_type: int) -> list[tuple[str, int | None]]:
    """(name, script id) of each script a request selects: a script by name, else every script of the type
    carrying that tag (MAAS expands tag selectors); a name MAAS does not know stays, without an id."""
    scripts = [s for s in lifecycle.store.scripts.values() if s.script_type == script_type]
    out: list[tuple[str, int | None]] = []
    for name in names:
        by_name = [s for s in scripts if s.name == name] or [s for s in scripts if name in s.tags]
        picked: list[tuple[str, int | None]] = [(s.name, s.id) for s in by_name] or [(name, None)]
        out += [p for p in picked if p[0] not in {o[0] for o in out}]
    return out


class NodeCommissioning:
    """The commissioning and testing phases of the NSPAWN backend; every method expects store.lock held
    (the timeout callback takes it through the lifecycle's scheduler)."""

    def __init__(self, lifecycle: Lifecycle) -> None:
        self.life = lifecycle
        assert lifecycle.nodes is not None
        self.nodes = lifecycle.nodes

    # --- the phases -----------------------------------------------------------------------------
    def start(self, m: Machine) -> None:
        """Open the script sets (Pending), boot the ephemeral node, arm the wall-clock timeout."""
        commissioning = expand(self.life, sr.run_names(sr.ResultType.COMMISSIONING, m.commissioning_scripts), 0)
        sr.open_run(self.life.store, m, sr.ResultType.COMMISSIONING, commissioning)
        testing: list[tuple[str, int | None]] = []
        if m.testing_scripts != ["none"]:
            testing = expand(self.life, sr.run_names(sr.ResultType.TESTING, m.testing_scripts), 2)
            sr.open_run(self.life.store, m, sr.ResultType.TESTING, testing)
        data = [d.name for d in m.block_devices if d.id != m.boot_disk_id]
        self.nodes.boot(m.system_id, m.hostname, commissioning_user_data(),
                        f"{self.life.metadata_url}status/{m.system_id}", data_disks=data,
                        metadata_url=self.life.metadata_url)
        m.event("NODE", f"booting an ephemeral nspawn node to run {len(commissioning)} commissioning and "
                f"{len(testing)} testing scripts")
        self._arm_timeout(m)

    def _arm_timeout(self, m: Machine) -> None:
        timeout_s, token, sid, phase = self.nodes.commission_timeout_s, m.phase_token, m.system_id, m.status.label
        self.life.scheduler.call_at(time.monotonic() + timeout_s, lambda: self.life._fire(
            sid, token, lambda mm: self._end(mm, FAILED[mm.status],
                                             f"Node operation '{phase}' timed out after {timeout_s:.0f} seconds.")))

    def _end(self, m: Machine, status: NodeStatus, note: str) -> None:
        """The phase is over: results still open are Aborted on a failure, the node is powered off."""
        if status in FAILED.values():
            sr.abort_open(m)
            m.error_description = note
        m.power_state = PowerState.OFF
        self.life.transition(m, status, note)
        self.nodes.halt(m.system_id, m.hostname)

    def abort(self, m: Machine) -> None:
        """A user's abort: open results Aborted, the node halted (the lifecycle moves the status)."""
        sr.abort_open(m)
        self.nodes.halt(m.system_id, m.hostname)

    # --- what the node sends --------------------------------------------------------------------
    def scripts_tar(self, m: Machine) -> bytes | None:
        """The scripts still to run as MAAS's MAASScriptsHandler.read serves them; None: nothing (204)."""
        sets: list[tuple[str, str, sr.ScriptSet | None]] = []
        if m.status is S.COMMISSIONING:
            sets.append(("commissioning", "commissioning_scripts", sr.current(m, sr.ResultType.COMMISSIONING)))
        if m.status in (S.COMMISSIONING, S.TESTING):
            sets.append(("testing", "testing_scripts", sr.current(m, sr.ResultType.TESTING)))
        index: dict[str, list[dict[str, Any]]] = {}
        buf = io.BytesIO()
        with tarfile.open(mode="w", fileobj=buf) as tar:
            for prefix, key, run in sets:
                for r in run.results if run is not None else []:
                    script = self.life.store.scripts.get(r.name)
                    if script is None or r.status not in (ScriptStatus.PENDING, ScriptStatus.RUNNING):
                        continue  # finished, or no such script (MAAS drops its result)
                    _add(tar, f"{prefix}/{r.name}", script.script, 0o755)
                    index.setdefault(key, []).append({
                        "name": r.name, "path": f"{prefix}/{r.name}", "script_result_id": r.id,
                        "script_version_id": script.id, "timeout_seconds": script.timeout,
                        "parallel": script.parallel, "hardware_type": script.hardware_type, "parameters": {},
                        "packages": {}, "for_hardware": [], "apply_configured_networking": False,
                        "has_started": r.status is not ScriptStatus.PENDING, "has_finished": False,
                        "default": script.default, "tags": list(script.tags)})
            if not index:
                return None
            _add(tar, "index.json", json.dumps({"1.0": index}).encode(), 0o644)
        return buf.getvalue()

    def signal(self, m: Machine, form: dict[str, list[bytes]]) -> tuple[int, bytes]:
        """One `op=signal` from the node's runner: (HTTP status, body) as MAAS answers it."""
        fields = {k: v[0].decode(errors="replace") for k, v in form.items() if v and k in PARAMS}
        status = fields.get("status", "")
        if not status:
            return 400, b"Bad Request: status is required"
        if status not in SIGNAL_STATUSES:
            return 400, f"Unknown status: '{status}'".encode()
        if m.status not in (S.COMMISSIONING, S.TESTING):
            if m.status in QUIET_STATES:
                return 200, b"OK"
            return 409, f"Machine status isn't valid (status is {m.status.label})".encode()
        kind = sr.ResultType.COMMISSIONING if m.status is S.COMMISSIONING else sr.ResultType.TESTING
        run = sr.current(m, kind)
        if run is not None:
            self._store(run, form, fields, status)
            run.last_ping = time.time()
        target = self._target(m, status)
        if target is not None and target is not m.status:
            self._move(m, target, fields.get("error", ""))
        return 200, b"OK"

    def _store(self, run: sr.ScriptSet, form: dict[str, list[bytes]], fields: dict[str, str], status: str) -> None:
        """The files of one script (combined `<name>`, `<name>.out`, `<name>.err`) and its exit status."""
        rid = int(fields["script_result_id"]) if fields.get("script_result_id", "").isdigit() else None
        files: dict[str, bytes] = {}
        name = fields.get("name")
        for key, values in form.items():
            if key in PARAMS or not values:
                continue
            base, dot, ext = key.rpartition(".")
            kind = _FILE_KEYS.get(f".{ext}") if dot else None
            files[kind or "output"] = values[0]
            name = name or (base if kind else key)
        result = sr.find(run, rid, name)
        if result is None:
            return
        if not files:
            if status == "WORKING":
                sr.mark_running(result)
            return
        code = fields.get("exit_status", "0")
        sr.store_result(result, int(code) if code.lstrip("-").isdigit() else 1, files,
                        float(fields["runtime"]) if _number(fields.get("runtime")) else None,
                        timedout=status == "TIMEDOUT")

    def _target(self, m: Machine, status: str) -> NodeStatus | None:
        if m.status is S.COMMISSIONING:
            target = {"OK": S.READY, "FAILED": S.FAILED_COMMISSIONING, "TESTING": S.TESTING}.get(status)
            run = sr.current(m, sr.ResultType.COMMISSIONING)
            if target in (S.READY, S.TESTING) and run is not None and any(
                    r.status is ScriptStatus.FAILED for r in run.results):
                return S.FAILED_COMMISSIONING  # a commissioning script failed: commissioning failed
            return target
        return {"OK": S.READY, "FAILED": S.FAILED_TESTING}.get(status)

    def _move(self, m: Machine, target: NodeStatus, error: str) -> None:
        if target is S.TESTING:
            self.life.store.commissioned_links(m)
            self.life.transition(m, S.TESTING, "commissioning scripts passed on the node; running tests "
                                 + (",".join(m.testing_scripts) or "(default)"))
            self._arm_timeout(m)  # a new phase: the commissioning timer is stale now
        elif target is S.READY:
            if m.status is S.COMMISSIONING:
                self.life.store.commissioned_links(m)
            self._end(m, S.READY, "tests passed on the node" if m.status is S.TESTING
                      else "commissioning finished on the node, no tests requested")
        else:
            self._end(m, target, error or _failed_note(m, target))

    def cloud_init_event(self, m: Machine, msg: StatusMessage) -> None:
        """A cloud-init reporting event while the node commissions or tests: logged as MAAS logs them; the
        final stage failing while commissioning (the runner could not finish) fails the commissioning."""
        what = f"'{msg.origin}' {msg.description}".strip()
        if msg.failed:
            kind = "Node commissioning failure" if m.status is S.COMMISSIONING else "Node status event"
            m.event(kind, f"{what} [{msg.name}: {msg.result}]", "ERROR")
        elif msg.event_type == "start":
            m.event("Node commissioning" if m.status is S.COMMISSIONING else "Node status event",
                    f"{what} [{msg.name}]", "DEBUG")
        if m.status is S.COMMISSIONING and msg.top_level and msg.event_type == "finish" and msg.failed:
            self._end(m, S.FAILED_COMMISSIONING, CLOUD_INIT_FAILED)


FAILED = {S.COMMISSIONING: S.FAILED_COMMISSIONING, S.TESTING: S.FAILED_TESTING}


def _failed_note(m: Machine, target: NodeStatus) -> str:
    """The error when the runner gave none: the failed scripts of the phase's run, by name and exit status."""
    kind = sr.ResultType.TESTING if target is S.FAILED_TESTING else sr.ResultType.COMMISSIONING
    run = sr.current(m, kind)
    failed = [f"{r.name} (exit {r.exit_status})" for r in (run.results if run else []) if r.status in SCRIPT_FAILED]
    return f"{target.label}: " + (", ".join(failed) + " failed" if failed else "the node's script runner said so")


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _number(text: str | None) -> bool:
    try:
        float(text or "")
    except ValueError:
        return False
    return True
