"""The profile's `batch_max_parallel`, exactly: across pools, standalone machines and runs.

A slot is counted from two places:
- this process: every machine any scheduler here holds a slot for (all dynamic resources of one
  `up` run in one provider process, so two pools of a profile see each other at once, no race);
- MAAS itself: machines carrying the profile's tag (`gpuaas-profile-<site>-<profile>`, written on
  the machine before its first heavy stage) that are Commissioning, Testing, Deploying, Releasing or
  Disk erasing, which covers other processes (a concurrent `up`, a killed run's machines still busy).

Cost: one `Machines.read?tags=<profile tag>` (every machine of the profile, one request) each time
a machine asks for a slot while this process holds fewer than the limit, plus, once per machine,
the tag write (`Tags.read`, `Tag.update_nodes`, and `Tags.create` the first time). Two processes
asking in the same instant can each see a free slot (the MAAS read and the MAAS call are not one
transaction): the bound is exact within a process and best-effort across processes.
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


def profile_tag(site: str, profile: str) -> str:
    """The MAAS tag that marks a machine as one of this profile's (tag names: [a-zA-Z0-9_-])."""
    return re.sub(r"[^a-zA-Z0-9_-]", "-", f"gpuaas-profile-{site}-{profile}")


def try_take(key: str, system_id: str, limit: int, busy_in_maas: Callable[[], set[str]]) -> bool:
    """Take a slot for `system_id` if the profile has one free (held here + busy in MAAS elsewhere)."""
    with _lock:  # one asker at a time per process: the count and the take are atomic here
        held = _held.setdefault(key, set())
        if system_id in held:
            return True
        if len(held) >= limit:
            return False
        if len(held | (busy_in_maas() - {system_id})) >= limit:  # itself busy (a resumed run) is no rival
            return False
        held.add(system_id)
        return True


def give_back(key: str, system_id: str) -> None:
    with _lock:
        _held.get(key, set()).discard(system_id)


def held(key: str) -> int:
    with _lock:
        return len(_held.get(key, ()))
