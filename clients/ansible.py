"""The one module that runs Ansible (ansible-runner), and nothing else.

    result = run_playbook(PlaybookRun(playbook=..., inventory={...}, extravars={...},
                                      ssh_private_key=SecretStr(pem), check=True, diff=True),
                          on_event=print_progress)
    result.hosts["dev-gpu-1"].changed, result.changes, result.failures

Ansible runs in a separate Python process, `python -m clients.ansible`, never in the caller's. The
caller is usually the dynamic-provider server, a gRPC server: ansible-runner forks (pexpect) before it
execs ansible-playbook, and a fork inside a gRPC process can restart gRPC's poller threads in the child
and kill the run on every host at once. `subprocess.Popen` only forks to exec (no Python runs in the
child), so nothing needs `GRPC_ENABLE_FORK_SUPPORT` set. The request (a `PlaybookRun`, secrets included)
goes to the worker as one JSON line on its stdin, never in argv; the worker streams each task result
back as a JSON line on stdout, then the run's result. Its stdin stays open for the whole run: when it
closes (the caller is done, or died) the worker cancels a run still going, cleans up and exits.

Every run gets its own private data directory (mode 0700, under a fresh temp dir) holding the
inventory, the extra vars (which may carry secrets) and the SSH key; it is removed when the run
ends, whatever happened. Secrets never come back in the result: tasks that carry them use
`no_log`, whose events ansible censors (no result, no diff), and failure messages of such tasks
are censored the same way.
"""

from __future__ import annotations

import collections
import difflib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

ROOT = Path(__file__).resolve().parents[1]  # holds the `clients` package: the worker's import path
ANSIBLE_DIR = ROOT / "ansible"
SITE_PLAYBOOK = ANSIBLE_DIR / "playbooks" / "site.yml"
_MAX_DIFF_CHARS = 4000


class RunStatus(StrEnum):
    SUCCESSFUL = "successful"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELED = "canceled"


class TaskStatus(StrEnum):
    OK = "ok"
    CHANGED = "changed"
    FAILED = "failed"
    UNREACHABLE = "unreachable"
    SKIPPED = "skipped"


class PlaybookRun(BaseModel):
    """One ansible-playbook invocation."""

    model_config = ConfigDict(frozen=True)
    playbook: Path = SITE_PLAYBOOK
    inventory: dict[str, Any]
    extravars: dict[str, Any] = {}
    ssh_private_key: SecretStr
    known_hosts: str | None = None
    """Pinned host keys; None = accept-new into a per-run file (trust on first use, see docs)."""
    check: bool = False
    diff: bool = False
    limit: str | None = None
    forks: int = 10
    timeout_s: int = 3600


class HostStats(BaseModel):
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    rescued: int = 0
    ignored: int = 0


class TaskEvent(BaseModel):
    """One per-host task result: what the progress stream and previews show."""

    model_config = ConfigDict(frozen=True)
    host: str
    task: str
    role: str | None = None
    action: str | None = None
    status: TaskStatus
    diff: str | None = None
    message: str | None = None
    duration_s: float | None = None


class RunResult(BaseModel):
    status: RunStatus
    rc: int
    hosts: dict[str, HostStats]
    changes: list[TaskEvent] = Field(default_factory=list)
    failures: list[TaskEvent] = Field(default_factory=list)
    duration_s: float
    check: bool
    error: str | None = None
    """The tail of ansible's output when the run failed before any host reported (bad inventory...)."""


_STATUS_OF_EVENT = {
    "runner_on_ok": TaskStatus.OK,
    "runner_on_failed": TaskStatus.FAILED,
    "runner_on_unreachable": TaskStatus.UNREACHABLE,
    "runner_on_skipped": TaskStatus.SKIPPED,
    "runner_item_on_failed": None,  # the task-level event follows; items only add noise
}
_STATS_KEYS = {"ok": "ok", "changed": "changed", "failures": "failed", "dark": "unreachable",
               "skipped": "skipped", "rescued": "rescued", "ignored": "ignored"}


def _render_diff(diff: Any) -> str | None:
    """ansible's diff payloads (before/after or 'prepared') as unified-diff text."""
    parts = diff if isinstance(diff, list) else [diff]
    out: list[str] = []
    for d in parts:
        if not isinstance(d, Mapping):
            continue
        if d.get("prepared"):
            out.append(str(d["prepared"]))
            continue
        before, after = d.get("before", ""), d.get("after", "")
        if isinstance(before, Mapping) or isinstance(after, Mapping):
            before, after = json.dumps(before, indent=1, sort_keys=True), json.dumps(after, indent=1, sort_keys=True)
        if before == after:
            continue
        out.extend(difflib.unified_diff(str(before).splitlines(), str(after).splitlines(),
                                        str(d.get("before_header", "before")), str(d.get("after_header", "after")),
                                        lineterm=""))
    text = "\n".join(out).strip()
    return text[:_MAX_DIFF_CHARS] or None


def task_event(event: Mapping[str, Any]) -> TaskEvent | None:
    """A runner event as a TaskEvent, or None for events that are not per-host task results."""
    kind = event.get("event", "")
    status = _STATUS_OF_EVENT.get(kind)
    data = event.get("event_data") or {}
    if status is None or "host" not in data:
        return None
    res = data.get("res") or {}
    censored = "censored" in res  # no_log: ansible already dropped the result and the diff
    if status is TaskStatus.OK and res.get("changed"):
        status = TaskStatus.CHANGED
    message = None
    if status in (TaskStatus.FAILED, TaskStatus.UNREACHABLE):
        message = str(res.get("censored") if censored else res.get("msg") or res.get("stderr") or "")[:1000]
    return TaskEvent(host=data["host"], task=data.get("task", ""), role=data.get("role"),
                     action=data.get("task_action"), status=status, message=message,
                     diff=None if censored else _render_diff(res.get("diff")),
                     duration_s=round(float(data["duration"]), 2) if data.get("duration") is not None else None)


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _run_here(req: PlaybookRun, on_event: Callable[[TaskEvent], None] | None = None,
              cancelled: Callable[[], bool] = lambda: False) -> RunResult:
    # size: one private dir's whole life (key, known_hosts, event handler, run, cleanup) in one try/finally
    """Run the playbook in this process (the worker's side); per-host stats, the changes (with diffs) and
    the failures. `cancelled` is polled: when it turns true ansible-runner stops the run."""
    import ansible_runner  # only the worker process imports it

    top = Path(tempfile.mkdtemp(prefix="gpuaas-ansible-"))  # mkdtemp: mode 0700
    pdd = top / "pdd"
    t0 = time.monotonic()
    changes: list[TaskEvent] = []
    failures: list[TaskEvent] = []
    stats: dict[str, HostStats] = {}
    try:
        pdd.mkdir(mode=0o700)
        (pdd / "ssh").mkdir(mode=0o700)
        key = pdd / "ssh" / "id"
        _write_private(key, req.ssh_private_key.get_secret_value().rstrip("\n") + "\n")
        known_hosts = pdd / "ssh" / "known_hosts"
        _write_private(known_hosts, req.known_hosts or "")
        strict = "yes" if req.known_hosts else "accept-new"

        def handle(event: dict[str, Any]) -> bool:
            if event.get("event") == "playbook_on_stats":
                data = event.get("event_data") or {}
                for src, dst in _STATS_KEYS.items():
                    for host, n in (data.get(src) or {}).items():
                        setattr(stats.setdefault(host, HostStats()), dst, int(n))
            te = task_event(event)
            if te is not None:
                if te.status is TaskStatus.CHANGED:
                    changes.append(te)
                elif te.status in (TaskStatus.FAILED, TaskStatus.UNREACHABLE):
                    failures.append(te)
                if on_event is not None:
                    on_event(te)
            return False  # nothing kept on disk beyond what the run needs

        cmdline = [f"--private-key={key}", f"--forks={req.forks}"]
        if req.check:
            cmdline.append("--check")
        if req.diff:
            cmdline.append("--diff")
        if req.limit:
            cmdline.append(f"--limit={req.limit}")
        runner = ansible_runner.run(
            private_data_dir=str(pdd), playbook=str(req.playbook), inventory=req.inventory,
            extravars=req.extravars, cmdline=" ".join(cmdline), quiet=True, timeout=req.timeout_s,
            event_handler=handle, cancel_callback=cancelled,
            envvars={
                "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
                "ANSIBLE_SSH_ARGS": f"-o ControlMaster=auto -o ControlPersist=60s -o ControlPath={top}/cp-%C "
                                    f"-o UserKnownHostsFile={known_hosts} -o StrictHostKeyChecking={strict} "
                                    "-o ServerAliveInterval=5",
                "ANSIBLE_NOCOLOR": "1",
                # ansible-runner looks ansible-playbook up on PATH; the venv is not always on it.
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            },
        )
        status = RunStatus(runner.status) if runner.status in RunStatus.__members__.values() else RunStatus.FAILED
        error = None
        if status is not RunStatus.SUCCESSFUL and not stats:
            error = "\n".join(runner.stdout.read().splitlines()[-15:]) if runner.stdout else runner.status
        return RunResult(status=status, rc=int(runner.rc if runner.rc is not None else -1), hosts=stats,
                         changes=changes, failures=failures, duration_s=round(time.monotonic() - t0, 2),
                         check=req.check, error=error)
    finally:
        shutil.rmtree(top, ignore_errors=True)  # inventory, extra vars, key, artifacts: all of it


# --- the worker process and its caller ---------------------------------------------------------------

class AnsibleWorkerFailed(RuntimeError):
    """The worker process could not run the playbook (it crashed, or ansible-runner raised)."""


def _request_line(req: PlaybookRun) -> str:
    doc = req.model_dump(mode="json")
    doc["ssh_private_key"] = req.ssh_private_key.get_secret_value()
    return json.dumps(doc) + "\n"


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["TMPDIR"] = tempfile.gettempdir()  # the private data dir goes where the caller's temp files go
    return env


def run_playbook(req: PlaybookRun, on_event: Callable[[TaskEvent], None] | None = None) -> RunResult:
    """Run the playbook in a worker process (`python -m clients.ansible`); `on_event` gets each task result
    as it happens. Per-host stats, the changes (with diffs) and the failures."""
    proc = subprocess.Popen([sys.executable, "-m", "clients.ansible"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_worker_env(), cwd=ROOT,
                            text=True, errors="replace")
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    tail: collections.deque[str] = collections.deque(maxlen=15)

    def relay(stream: IO[str]) -> None:  # the worker's stderr: passed on (the CLI shows a provider's stderr)
        for line in stream:
            tail.append(line.rstrip("\n"))
            sys.stderr.write(line)
            sys.stderr.flush()

    relay_thread = threading.Thread(target=relay, args=(proc.stderr,), daemon=True)
    relay_thread.start()
    result: RunResult | None = None
    error: str | None = None
    try:
        proc.stdin.write(_request_line(req))
        proc.stdin.flush()  # stdin stays open: closing it is how the worker learns its caller is gone
        for line in proc.stdout:
            msg = json.loads(line)
            if "event" in msg:
                if on_event is not None:
                    on_event(TaskEvent.model_validate(msg["event"]))
            elif "result" in msg:
                result = RunResult.model_validate(msg["result"])
            elif "error" in msg:
                error = str(msg["error"])
    finally:
        try:
            proc.stdin.close()  # cancels the run if it is still going (an exception above)
        except BrokenPipeError:
            pass
        code = proc.wait()
        relay_thread.join(timeout=5)
    if result is not None:
        return result
    raise AnsibleWorkerFailed(error or f"the ansible worker exited {code} without a result"
                              + ("\n" + "\n".join(tail) if tail else ""))


def _worker(stdin: IO[str], out: IO[str]) -> int:
    """`python -m clients.ansible`: one PlaybookRun (a JSON line) from `stdin`, task events and the result as
    JSON lines on `out`. End of stdin before the run ends cancels it."""
    line = stdin.readline()
    if not line:
        return 2
    lock = threading.Lock()

    def send(msg: dict[str, Any]) -> None:
        with lock:
            try:
                out.write(json.dumps(msg) + "\n")
                out.flush()
            except BrokenPipeError:
                pass  # the caller is gone; the run is being cancelled

    try:
        req = PlaybookRun.model_validate_json(line)
    except ValidationError as e:  # never echo the input: it carries the key and secret extra vars
        send({"error": "bad request: " + "; ".join(f"{'.'.join(map(str, x['loc']))}: {x['msg']}"
                                                   for x in e.errors(include_input=False))})
        return 2
    gone = threading.Event()

    def watch() -> None:
        stdin.read()  # returns at end of file: the caller closed its end or died
        gone.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        result = _run_here(req, lambda e: send({"event": e.model_dump(mode="json")}), gone.is_set)
    except Exception as e:  # noqa: BLE001 - reported to the caller, which raises it
        send({"error": f"{type(e).__name__}: {e}"})
        return 1
    finally:
        _end_leftovers()
    send({"result": result.model_dump(mode="json")})
    return 0


_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    """Processes the run orphans (a cancelled task's command, ssh control masters) become this worker's
    children instead of init's, so `_end_leftovers` can find them (Linux; elsewhere nothing changes)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _end_leftovers() -> None:
    """After the run (done, failed, cancelled or timed out): no process of it outlives the worker."""
    if not os.path.isdir("/proc"):
        return
    for _ in range(5):
        left = _descendants(os.getpid())
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:  # reap them (they are this subreaper's children now)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        time.sleep(0.05)


def main() -> int:
    # The protocol owns the real stdout; anything else printing (ansible-runner, a warning) goes to stderr.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _become_subreaper()
    return _worker(sys.stdin, protocol)


if __name__ == "__main__":
    sys.exit(main())
