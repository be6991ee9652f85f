"""The stack's run lock, as a self-hosted (DIY) Pulumi backend keeps it: a lock file created when an
update, refresh or destroy starts and removed when it ends. A SIGKILL leaves it behind, and every later
run is refused until an operator runs ``cancel`` (``pulumi cancel``), exactly as with the real backend
(pkg/backend/diy/lock.go: "the stack is currently locked by N lock(s)")."""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
import socket
from pathlib import Path

from engine.state import StateError


def lock_path(state_path: Path) -> Path:
    return state_path.with_name(state_path.name + ".lock")


class StackLock:
    def __init__(self, state_path: Path) -> None:
        self.path = lock_path(state_path)
        self.held = False

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        info = {
            "pid": os.getpid(),
            "username": getpass.getuser(),
            "hostname": socket.gethostname(),
            "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            raise StateError(self.describe()) from None
        with os.fdopen(fd, "w") as fh:
            json.dump(info, fh)
        self.held = True

    def describe(self) -> str:
        try:
            info = json.loads(self.path.read_text())
            who = f"created by {info['username']}@{info['hostname']} (pid {info['pid']}) at {info['timestamp']}"
        except (OSError, ValueError, KeyError, TypeError):
            who = "unreadable lock file"
        return (
            "the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete "
            f"the lock file with `pulumi cancel` (here: `python -m engine cancel`).\n  {self.path}: {who}"
        )

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def cancel(state_path: Path) -> str:
    """``pulumi cancel`` for this backend: remove the lock a killed run left. Returns what was done."""
    path = lock_path(state_path)
    if not path.exists():
        return f"{state_path}: no lock to remove"
    text = StackLock(state_path).describe().split("\n", 1)[1].strip()
    path.unlink()
    return f"removed the lock: {text}"
