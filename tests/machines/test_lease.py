"""The slot lease's logic (providers/machines/lease.py) against an in-memory check-and-set store whose
reads can be interleaved with other writers: never more holders than the limit, expiry reclaims a dead
holder (unless MAAS still shows its machine busy), give-back and renewal touch only their own entries,
and a store that fails is an error, never "no bound"."""

from __future__ import annotations

import random
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from providers.machines.lease import LeaseTimes, LeaseUnavailable, SlotLease

from .lease_fakes import FakeCas

PATH = "leases/local/h200-lab"
FAST = LeaseTimes(ttl_s=300, renew_s=60, backoff_s=0.0)


class Clock:
    def __init__(self) -> None:
        self.t = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)


def lease(store: FakeCas, holder: str, clock: Clock | None = None, **kw: object) -> SlotLease:
    return SlotLease(store, PATH, holder, FAST, now=clock or Clock(), sleep=lambda _s: None, **kw)  # type: ignore[arg-type]


def test_interleaved_writer_makes_the_loser_reread_and_refuse_at_the_limit() -> None:
    store = FakeCas()
    a, b = lease(store, "a"), lease(store, "b")
    assert a.take("m1", 2)
    # b reads (1 holder), then a takes the last slot before b writes: b's write is rejected, b re-reads.
    store.after_read = lambda: a.take("m2", 2) or None
    assert not b.take("m3", 2)
    assert sorted(store.holders(PATH)) == ["m1", "m2"]
    assert store.rejected == 1 and b.stats.conflicts == 1


def test_many_threads_racing_never_exceed_the_limit() -> None:
    store = FakeCas()
    slow_read = store.read_doc

    def jittery(path: str):  # type: ignore[no-untyped-def]
        out = slow_read(path)
        time.sleep(random.random() / 500)  # noqa: S311 - a window between read and write, for the others
        return out

    store.read_doc = jittery  # type: ignore[method-assign]
    leases = [SlotLease(store, PATH, f"p{i}", LeaseTimes(cas_attempts=200, backoff_s=0.0005)) for i in range(8)]
    granted: list[str] = []
    lock = threading.Lock()

    start = threading.Barrier(8)

    def run(i: int) -> None:
        start.wait()
        for j in range(4):
            sid = f"m{i}-{j}"
            if leases[i].take(sid, 3):
                with lock:
                    granted.append(sid)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 3, granted
    assert sorted(store.holders(PATH)) == sorted(granted)
    assert store.rejected > 0, "the race really happened (CAS mismatches were retried)"


def test_expired_holder_is_reclaimed_unless_maas_still_shows_it_busy() -> None:
    store, clock = FakeCas(), Clock()
    dead = lease(store, "killed-run", clock)
    assert dead.take("m1", 1)
    busy = {"m1"}
    alive = lease(store, "next-run", clock, still_busy=lambda ids: ids & busy)
    assert not alive.take("m2", 1), "m1's holder is alive (not expired)"
    clock.advance(301)
    assert not alive.take("m2", 1), "expired, but MAAS still shows m1 deploying: it keeps its slot"
    busy.clear()
    assert alive.take("m2", 1), "expired and idle in MAAS: reclaimed"
    assert list(store.holders(PATH)) == ["m2"]


def test_a_resumed_machine_takes_over_its_own_entry_without_a_second_slot() -> None:
    store = FakeCas()
    assert lease(store, "run-1").take("m1", 1)
    assert lease(store, "run-2").take("m1", 1), "the same machine, resumed by the next run"
    assert store.holders(PATH)["m1"]["holder"] == "run-2"


def test_give_back_removes_only_its_own_entries() -> None:
    store = FakeCas()
    a, b = lease(store, "a"), lease(store, "b")
    assert a.take("m1", 3) and b.take("m2", 3)
    a.give_back(["m1", "m2"])
    assert list(store.holders(PATH)) == ["m2"]
    writes = store.writes
    a.give_back(["m1"])
    assert store.writes == writes, "nothing of ours left: no write"


def test_renew_extends_and_reports_a_slot_lost_to_another_holder() -> None:
    store, clock = FakeCas(), Clock()
    a, b = lease(store, "a", clock), lease(store, "b", clock)
    assert a.take("m1", 1)
    clock.advance(200)
    assert a.renew(["m1"], 1) == set()
    clock.advance(200)
    assert not b.take("m2", 1), "renewed at t=200: alive until t=500"
    clock.advance(200)
    assert b.take("m2", 1), "not renewed since: expired, reclaimed"
    assert a.renew(["m1"], 1) == {"m1"}, "lost: the slot is someone else's now"
    assert list(store.holders(PATH)) == ["m2"]


def test_contended_past_the_attempts_is_not_granted() -> None:
    store = FakeCas()
    store.write_doc = lambda path, doc, cas: False  # type: ignore[method-assign,assignment]
    a = SlotLease(store, PATH, "a", LeaseTimes(cas_attempts=3, backoff_s=0.0), sleep=lambda _s: None)
    assert not a.take("m1", 5)
    assert a.stats.reads == 3 and a.stats.conflicts == 3


def test_an_unavailable_or_malformed_store_is_an_error_not_no_bound() -> None:
    store = FakeCas()
    store.fail = ConnectionError("Vault unreachable")
    with pytest.raises(LeaseUnavailable, match="cannot read the slot lease"):
        lease(store, "a").take("m1", 1)
    store.fail = None
    store.docs[PATH] = ({"holders": {"m1": "not a holder"}}, 1)
    with pytest.raises(LeaseUnavailable, match="not a lease document.*vault kv metadata delete"):
        lease(store, "a").take("m2", 1)


def test_scaled_times_keep_a_floor() -> None:
    t = LeaseTimes().scaled(1e-3)
    assert (t.ttl_s, t.renew_s) == (10.0, 2.0)
    assert LeaseTimes().scaled(1.0).ttl_s == 300 and LeaseTimes().scaled(1.0).renew_s == 60
