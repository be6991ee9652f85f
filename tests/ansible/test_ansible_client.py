"""clients.ansible runs Ansible in a worker process (`python -m clients.ansible`), never in its caller (the
dynamic-provider server is a gRPC server: a fork there is unsafe). A real ansible-playbook run against
localhost (local connection): task results stream back while the worker runs, the secrets travel on a
pipe (never argv) into a 0700 private dir that is gone afterwards, and closing the worker's stdin (its
caller is done or died) cancels a run still going."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from clients.ansible import ROOT, PlaybookRun, RunStatus, TaskEvent, TaskStatus, _request_line, run_playbook

SECRET = "s3cr3t-" + "x" * 24
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nbm90LWEtcmVhbC1rZXktYm9keQ==\n-----END OPENSSH PRIVATE KEY-----\n"
LOCAL = {"all": {"hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}


def _playbook(tmp_path: Path, *tasks: dict[str, Any]) -> Path:
    path = tmp_path / "play.yml"
    path.write_text(json.dumps([{"hosts": "all", "gather_facts": False, "tasks": list(tasks)}]))
    return path


def _processes() -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every process on the host (any text: other runs' too)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out.append((int(entry), int(stat.rsplit(")", 1)[1].split()[1]), cmdline))
    return out


def _children(pid: int) -> list[tuple[int, str]]:
    return [(child, cmdline) for child, ppid, cmdline in _processes() if ppid == pid]


def test_a_run_streams_task_results_from_a_worker_process_and_leaves_no_private_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    target = tmp_path / "out"
    play = _playbook(
        tmp_path,
        {"name": "Write the marker", "copy": {"content": "hello\n", "dest": str(target / "marker")}},
        {"name": "Write the secret", "copy": {"content": "{{ gpuaas_secret }}", "dest": str(target / "secret"),
                                              "mode": "0600"}, "no_log": True},
    )
    target.mkdir()
    seen: list[dict[str, Any]] = []

    def on_event(e: TaskEvent) -> None:
        workers = [(pid, cmd) for pid, cmd in _children(os.getpid()) if "-m clients.ansible" in cmd]
        private = [(p, p.stat().st_mode & 0o777) for p in temp.iterdir()]
        seen.append({"event": e, "workers": workers, "private": private})

    result = run_playbook(PlaybookRun(playbook=play, inventory=LOCAL, extravars={"gpuaas_secret": SECRET},
                                      ssh_private_key=SecretStr(KEY), timeout_s=120), on_event)
    assert result.status is RunStatus.SUCCESSFUL, result
    # a no_log task's event is censored down to "ok" (ansible drops `changed` with the rest); its stats count it
    assert [(s["event"].task, s["event"].status) for s in seen] == [
        ("Write the marker", TaskStatus.CHANGED), ("Write the secret", TaskStatus.OK)]
    for s in seen:  # each result arrived while the worker (a child of this process) was still running it
        [(_, cmd)] = s["workers"]
        assert SECRET not in cmd and "OPENSSH" not in cmd, "a secret in the worker's argv"
        assert [mode for _, mode in s["private"]] == [0o700], "the private data dir is 0700"
    assert (target / "secret").read_text() == SECRET and (target / "marker").read_text() == "hello\n"
    assert result.hosts["localhost"].changed == 2 and [c.task for c in result.changes] == ["Write the marker"]
    assert list(temp.iterdir()) == [], "the private data dir (key, extra vars) is removed"
    out = capfd.readouterr()
    assert SECRET not in result.model_dump_json() + out.out + out.err
    assert "bm90LWEtcmVhbC1rZXktYm9keQ" not in out.out + out.err


def test_closing_the_workers_stdin_cancels_a_running_playbook_and_cleans_up(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    marker = tmp_path / "started"
    play = _playbook(
        tmp_path,
        {"name": "Start", "copy": {"content": "x", "dest": str(marker)}},
        {"name": "Wait a long time", "command": "sleep 293"},
    )
    req = PlaybookRun(playbook=play, inventory=LOCAL, ssh_private_key=SecretStr(KEY), timeout_s=600)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temp)}
    worker = subprocess.Popen([sys.executable, "-m", "clients.ansible"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env, cwd=ROOT, text=True)
    assert worker.stdin is not None and worker.stdout is not None
    try:
        worker.stdin.write(_request_line(req))
        worker.stdin.flush()
        first = json.loads(worker.stdout.readline())
        assert first["event"]["task"] == "Start"
        deadline = time.monotonic() + 60
        while not any("sleep 293" in cmd for _, cmd in _all_processes()):
            assert time.monotonic() < deadline, "the long task never started"
            time.sleep(0.1)
        worker.stdin.close()  # as when the provider process ends or dies
        rest = [json.loads(line) for line in worker.stdout]
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert rest[-1]["result"]["status"] == RunStatus.CANCELED
    deadline = time.monotonic() + 30
    while any("sleep 293" in cmd for _, cmd in _all_processes()):
        assert time.monotonic() < deadline, "the cancelled task is still running"
        time.sleep(0.1)
    # (the killed module's own AnsiballZ payload dir may stay: with a local connection it is on this host)
    assert [p for p in temp.iterdir() if p.name.startswith("gpuaas-ansible-")] == [], \
        "the private data dir is removed after a cancel too"


def _all_processes() -> list[tuple[int, str]]:
    return [(pid, cmdline) for pid, _, cmdline in _processes()]
