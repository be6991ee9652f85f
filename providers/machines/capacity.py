"""The profile's `batch_max_parallel`, exactly: across pools, standalone machines and runs.

A slot is counted from two places:
- this process: every machine any scheduler here holds a slot for (all dynamic resources of one
  `up` run in one provider process, so two pools of a profile see each other at once, no race);
- MAAS itself: machines carrying the profile's busy tag (`gpuaas-busy-<site>-<profile>`, on a machine
  from the first slot a run takes for it until the run is done with it) that are Commissioning,
  Testing, Deploying, Releasing or Disk erasing, which covers other processes (a concurrent `up`, a
  killed run's machines still busy). A tagged machine between its heavy stages (Ready, preflight) is
  not busy and not counted; keeping the tag there saves two writes per machine.

Cost (issue 18: nothing grows with the machines in MAAS): at most one `Machines.read?tags=<busy tag>`
per scheduling tick, and only while this process holds fewer than the limit; it returns the busy
machines in flight only (not the profile's machines in MAAS), plus what a killed run left tagged. Tag
writes are batched: one `Tag.update_nodes` per tick adds the tag to every machine that took its first
slot and removes it from every machine the run finished (`Tags.read` once per process, `Tags.create`
the first time). The tag is written at the end of the tick in which the machine took its first slot,
right after its heavy call, so two processes asking in the same instant can each see a free slot:
the bound is exact within a process and best-effort across processes.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from clients.maas import MaasStatus

BUSY = frozenset(
    {MaasStatus.COMMISSIONING, MaasStatus.TESTING, MaasStatus.DEPLOYING, MaasStatus.RELEASING, MaasStatus.DISK_ERASING}
)

_lock = threading.Lock()
_held: dict[str, set[str]] = {}  # region + profile tag -> system_ids holding a slot in this process


def busy_tag(site: str, profile: str) -> str:
    """The MAAS tag on a machine while a run holds one of its profile's slots (tag names: [a-zA-Z0-9_-])."""
    return re.sub(r"[^a-zA-Z0-9_-]", "-", f"gpuaas-busy-{site}-{profile}")


def try_take(key: str, system_id: str, limit: int, busy_in_maas: Callable[[], set[str]]) -> bool:
    """Take a slot for `system_id` if the profile has one free (held here + busy in MAAS elsewhere).
    MAAS is read outside the lock (a read is a request; the scheduler reads at most once per tick), and
    the count and the take are atomic here under it."""
    with _lock:
        held = _held.setdefault(key, set())
        if system_id in held:
            return True
        if len(held) >= limit:
            return False
    busy = busy_in_maas() - {system_id}  # itself busy (a resumed run) is no rival
    with _lock:
        held = _held.setdefault(key, set())
        if system_id in held:
            return True
        if len(held | busy) >= limit:
            return False
        held.add(system_id)
        return True


def give_back(key: str, system_id: str) -> None:
    with _lock:
        _held.get(key, set()).discard(system_id)


def held(key: str) -> int:
    with _lock:
        return len(_held.get(key, ()))
