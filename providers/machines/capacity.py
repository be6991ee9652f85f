"""The profile's `batch_max_parallel`, exactly: across pools, standalone machines, runs and stacks.

A slot is counted in two places, and a machine holds one only when both granted it:
- this process (`_held`): every machine any scheduler here holds a slot for (all dynamic resources of
  one `up` run in one provider process), so two pools of a profile see each other at once, with no
  request, and a process never asks Vault for more than `limit` slots;
- the site+profile's lease document in Vault (lease.py: KV v2 check-and-set), which every process of
  every stack writes before a machine enters a heavy stage: it cannot be over-granted. Entries carry
  an expiry that one renewer thread per process pushes for all its holders (one read + one write per
  profile and renewal period); a killed run's entries expire.
A machine gives its slot back as it leaves the heavy stages (lifecycle.SLOT_STAGES). The lease is None
only where no other process can exist (unit tests of one scheduler); every provider call has one.

Vault requests per machine: a take (read + write), a give-back (read + write), plus its share of the
renewals. The MAAS busy tag the bound was counted from before (best-effort across processes) is gone:
MAAS shows each machine's status; the lease document shows who holds which slot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from clients.maas import MaasStatus

from .lease import LeaseUnavailable, SlotLease

BUSY = frozenset(
    {MaasStatus.COMMISSIONING, MaasStatus.TESTING, MaasStatus.DEPLOYING, MaasStatus.RELEASING, MaasStatus.DISK_ERASING}
)
"""MAAS statuses of the heavy stages: an expired holder's machine still in one keeps its slot."""

_lock = threading.Lock()
_held: dict[str, set[str]] = {}  # key -> system_ids holding (or reserving) a slot in this process


@dataclass(frozen=True)
class _Taker:
    """The provider call that took a slot: its SlotLease counts the Vault requests made for the slot (the
    call reports them when it ends, after giving its slots back) and its log gets the renewal's news."""

    lease: SlotLease
    log: Callable[[str], None]


@dataclass
class _Lease:
    """One key's lease as this process holds it: the ids written to Vault, renewed together. Each id keeps
    the call that took it: several calls of one process (a pool and a standalone machine, each with its own
    SlotLease) share the key, and a write is counted by a call that has not reported yet."""

    granted: dict[str, _Taker] = field(default_factory=dict)
    limit: int = 0  # batch_max_parallel as the latest take saw it
    renew_s: float = 0.0  # the renewal period, as the latest take's lease times say
    lock: threading.Lock = field(default_factory=threading.Lock)  # this process's Vault ops on the key
    next_renewal: float = 0.0  # time.monotonic() of the next renewal (set when it first holds a slot)


_leases: dict[str, _Lease] = {}
_renewer: threading.Thread | None = None
_wake = threading.Event()  # a key began holding: the renewer recomputes when it is next due


def try_take(
    key: str, system_id: str, limit: int, lease: SlotLease | None, log: Callable[[str], None] = print
) -> bool:
    """Take a slot for `system_id` if the profile has one free here and in the lease document.
    Raises LeaseUnavailable when Vault cannot say (the caller fails the machine; no slot is assumed)."""
    return system_id in try_take_many(key, [system_id], limit, lease, log)


def try_take_many(
    key: str, system_ids: Sequence[str], limit: int, lease: SlotLease | None, log: Callable[[str], None] = print
) -> set[str]:
    """The ids that hold a slot now: those that held one already, then, in order, as many of the others as
    the profile has free here and in the lease document (one lease write for all of them).
    Raises LeaseUnavailable when Vault cannot say (no slot is assumed for the ids not already holding)."""
    with _lock:
        held = _held.setdefault(key, set())
        already = {s for s in system_ids if s in held}
        want = [s for s in dict.fromkeys(system_ids) if s not in held][: max(0, limit - len(held))]
        held.update(want)  # reserved: the other pools of this process count them from now
        entry = None
        if lease is not None and want:
            entry = _leases.setdefault(key, _Lease())
            entry.limit, entry.renew_s = limit, lease.times.renew_s
    if entry is None or lease is None:
        return already | set(want)
    ok: set[str] = set()
    try:
        with entry.lock:
            ok = lease.take_many(want, limit)
            if ok:
                if not entry.granted:
                    entry.next_renewal = time.monotonic() + entry.renew_s
                for s in ok:
                    entry.granted[s] = _Taker(lease, log)
    finally:
        with _lock:
            held.difference_update(set(want) - ok)
    if ok:
        _ensure_renewer()
        _wake.set()
    return already | ok


def give_back(key: str, system_ids: Iterable[str]) -> None:
    """Free the slots here and in the lease document. Raises LeaseUnavailable when Vault cannot be
    written: the entries then expire (the slots stay taken for others until then, never over-granted)."""
    ids = set(system_ids)
    with _lock:
        _held.get(key, set()).difference_update(ids)
        entry = _leases.get(key)
    if entry is None:
        return
    with entry.lock:
        by_lease: dict[int, tuple[SlotLease, set[str]]] = {}
        for s in ids & entry.granted.keys():
            taker = entry.granted.pop(s)
            by_lease.setdefault(id(taker.lease), (taker.lease, set()))[1].add(s)
        for lease, mine in by_lease.values():
            lease.give_back(mine)


def held(key: str) -> int:
    with _lock:
        return len(_held.get(key, ()))


def _ensure_renewer() -> None:
    global _renewer  # noqa: PLW0603 - one renewer per process
    with _lock:
        if _renewer is not None and _renewer.is_alive():
            return
        _renewer = threading.Thread(target=_renew_loop, name="slot-lease-renewer", daemon=True)
        _renewer.start()


def _renew_loop() -> None:
    """Each key's renewal when due: one CAS write for all of this process's holders of the key; ends
    when this process holds nothing (the next take starts it again)."""
    global _renewer  # noqa: PLW0603 - one renewer per process
    while True:
        with _lock:
            entries = [e for e in _leases.values() if e.granted]
            if not entries:
                _renewer = None
                return
        now = time.monotonic()
        due = [e for e in entries if e.next_renewal <= now]
        for e in due:
            renew_now(e)
            e.next_renewal = time.monotonic() + e.renew_s
        if not due:
            _wake.wait(min(e.next_renewal for e in entries) - now)
            _wake.clear()


def renew_now(e: _Lease) -> None:
    """One CAS write for every holder of the key in this process, made through (and counted by) the call
    that took the latest slot: it still holds one, so it has not reported its cost yet (a call gives its
    slots back, under this lock, before it reports)."""
    with e.lock:
        if not e.granted:
            return
        taker = next(reversed(e.granted.values()))
        try:
            lost = taker.lease.renew(set(e.granted), e.limit)
        except LeaseUnavailable as err:
            taker.log(f"slot lease not renewed ({len(e.granted)} holder(s); they expire after "
                      f"{taker.lease.times.ttl_s:.0f} s without a renewal): {err}")
            return
    if lost:
        taker.log(f"slot lease lost for {sorted(lost)} ({taker.lease.where}): the entries expired and the slots "
                  "were taken by another run; these machines' heavy stages go on, over the bound until they end")


def cost_line(lease: SlotLease) -> str | None:
    """What the lease cost one provider call, for its log (docs/machines.md quotes the figures)."""
    st = lease.stats
    if not st.reads:
        return None
    return (f"slot lease {lease.path}: {st.takes} takes ({st.granted} granted), {st.gives} give-backs, "
            f"{st.renewals} renewals; {st.reads} reads, {st.writes} writes, {st.conflicts} CAS conflicts")
