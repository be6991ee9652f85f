"""The cross-process half of `batch_max_parallel`: one lease document per site and profile in Vault
KV v2 (`<kv mount>/leases/<site>/<profile>`), changed only with check-and-set, so two processes can
never both take the last slot.

The document: `{"holders": {<system_id>: {"holder": "<stack>@<host>:<pid>",
"expires_at": "<ISO-8601 UTC>"}}}`.
- take: read (version v) -> drop expired holders (a killed run's; kept while MAAS still shows the
  machine busy, `still_busy`) -> the machine already listed (a resumed run): take it over; else add it
  only if fewer than `limit` holders are left -> write with cas=v. A CAS mismatch (another writer came
  first) re-reads and decides again, at most `cas_attempts` times with jittered back-off; still
  contended: not granted this time (the scheduler asks again), never granted without a write.
- give back: the same loop, removing this holder's entries.
- renew: the same loop, pushing this holder's entries' expiry to now + TTL; an entry found gone
  (expired and reclaimed, or cleared by hand) is added back only if a slot is free, else it is lost
  and reported.
Every read and write is one Vault request. A Vault failure raises `LeaseUnavailable` (the caller
fails the machine with a coded error): there is no fallback to "no bound".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError


class CasStore(Protocol):
    """KV v2 check-and-set (clients.vault.VaultReader; tests use an in-memory one)."""

    def read_doc(self, path: str) -> tuple[dict[str, Any] | None, int]: ...
    def write_doc(self, path: str, doc: dict[str, Any], cas: int) -> bool: ...


class LeaseUnavailable(Exception):
    """The lease document could not be read or written (Vault down, sealed, denied, malformed)."""


class LeaseTimes(BaseModel):
    """TTL 300 s renewed every 60 s: a holder survives four failed renewals in a row (a Vault restart or
    leader election takes seconds), and a killed run's slots come back within 5 minutes of its last
    renewal (or when MAAS finishes the machine's heavy stage, whichever is later). 60 s costs one
    read + one write per process and profile a minute, whatever the number of machines."""

    model_config = ConfigDict(frozen=True)

    ttl_s: float = 300.0
    renew_s: float = 60.0
    cas_attempts: int = 12
    backoff_s: float = 0.02
    """First back-off after a CAS mismatch (doubles, x0.5..1.5 jitter, capped at 1 s)."""

    def scaled(self, factor: float) -> LeaseTimes:
        """With the machine time scale (tests run MAAS in milliseconds), floored so renewals stay cheap:
        TTL at least 10 s, renewed five times per TTL."""
        ttl = max(10.0, self.ttl_s * factor)
        return self.model_copy(update={"ttl_s": ttl, "renew_s": ttl / 5})


class Holder(BaseModel):
    model_config = ConfigDict(extra="forbid")

    holder: str
    expires_at: datetime


class LeaseDoc(BaseModel):
    model_config = ConfigDict(extra="forbid")

    holders: dict[str, Holder] = {}


class LeaseStats(BaseModel):
    """Requests made through one SlotLease (for the figures in docs/machines.md)."""

    reads: int = 0
    writes: int = 0
    conflicts: int = 0
    takes: int = 0
    granted: int = 0
    gives: int = 0
    renewals: int = 0


def lease_path(site: str, profile: str) -> str:
    return f"leases/{site}/{profile}"


class SlotLease:
    """The lease document of one site+profile, as one holder (one process) sees it."""

    def __init__(  # noqa: PLR0913 - the store, where, who, and the test seams
        self,
        store: CasStore,
        path: str,
        holder: str,
        times: LeaseTimes | None = None,
        *,
        where: str = "",
        still_busy: Callable[[set[str]], set[str]] | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store, self.path, self.holder = store, path, holder
        self.times = times or LeaseTimes()
        self.where = where or path
        self._still_busy, self._now, self._sleep = still_busy, now, sleep
        self.stats = LeaseStats()

    # ------------------------------------------------------------------------------------------
    def take(self, system_id: str, limit: int) -> bool:
        """True when `system_id` holds one of the `limit` slots (written to Vault)."""
        return system_id in self.take_many([system_id], limit)

    def take_many(self, system_ids: Sequence[str], limit: int) -> set[str]:
        """The ids (in order, while slots are free) that now hold one of the `limit` slots: one CAS write for
        all of them (a wave of 64 machines took 64 writes one after another: 2.1 s at its start)."""
        self.stats.takes += len(system_ids)
        granted: set[str] = set()

        def change(doc: LeaseDoc, now: datetime) -> LeaseDoc | None:
            granted.clear()
            for s in system_ids:
                if s not in doc.holders and len(doc.holders) >= limit:
                    continue  # full for this one (an id already holding only renews its entry)
                granted.add(s)
                doc.holders[s] = Holder(holder=self.holder, expires_at=now + timedelta(seconds=self.times.ttl_s))
            return doc if granted else None  # full: nothing to write

        out = set(granted) if self._update(change, reclaim=True) else set()
        self.stats.granted += len(out)
        return out

    def give_back(self, system_ids: Iterable[str]) -> None:
        ids = set(system_ids)
        if not ids:
            return
        self.stats.gives += 1

        def change(doc: LeaseDoc, _now: datetime) -> LeaseDoc | None:
            drop = {s for s in ids if (h := doc.holders.get(s)) is not None and h.holder == self.holder}
            for s in drop:
                del doc.holders[s]
            return doc if drop else None

        self._update(change, reclaim=False)

    def renew(self, system_ids: Iterable[str], limit: int) -> set[str]:
        """Push the expiry of this holder's entries; returns the ones lost (gone, and no free slot)."""
        ids = set(system_ids)
        lost: set[str] = set()
        if not ids:
            return lost
        self.stats.renewals += 1

        def change(doc: LeaseDoc, now: datetime) -> LeaseDoc:
            lost.clear()
            until = now + timedelta(seconds=self.times.ttl_s)
            for s in sorted(ids):
                h = doc.holders.get(s)
                if h is None and len(doc.holders) >= limit:
                    lost.add(s)
                    continue
                doc.holders[s] = Holder(holder=self.holder, expires_at=until)
            return doc

        if not self._update(change, reclaim=True):
            return set()  # contended for every attempt: the next period tries again (TTL covers 4 misses)
        return lost

    # ------------------------------------------------------------------------------------------
    def _update(self, change: Callable[[LeaseDoc, datetime], LeaseDoc | None], *, reclaim: bool) -> bool:
        """The CAS loop: True when `change` was written (or needed no write), False when contended."""
        delay = self.times.backoff_s
        for _ in range(self.times.cas_attempts):
            doc, version = self._read()
            now = self._now()
            if reclaim:
                self._reclaim(doc, now)
            new = change(doc, now)
            if new is None:
                return True
            if self._write(new, version):
                return True
            self.stats.conflicts += 1
            self._sleep(delay * (0.5 + random.random()))  # noqa: S311 - jitter, not a secret
            delay = min(1.0, delay * 2)
        return False

    def _reclaim(self, doc: LeaseDoc, now: datetime) -> None:
        """Drop expired holders, except machines MAAS still shows in a heavy stage (a killed run's
        machine keeps loading the site until MAAS finishes it)."""
        expired = {s for s, h in doc.holders.items() if h.expires_at <= now}
        if expired and self._still_busy is not None:
            expired -= self._still_busy(expired)
        for s in expired:
            del doc.holders[s]

    def _read(self) -> tuple[LeaseDoc, int]:
        self.stats.reads += 1
        try:
            raw, version = self.store.read_doc(self.path)
        except Exception as e:  # noqa: BLE001 - any failure: no bound can be proven, say so
            raise LeaseUnavailable(f"cannot read the slot lease {self.where}: {e}") from None
        try:
            return LeaseDoc.model_validate(raw or {}), version
        except ValidationError as e:
            raise LeaseUnavailable(
                f"the slot lease {self.where} is not a lease document ({e.error_count()} error(s), first: "
                f"{e.errors()[0]['msg']}); fix: delete it (vault kv metadata delete) when no run is active"
            ) from None

    def _write(self, doc: LeaseDoc, version: int) -> bool:
        self.stats.writes += 1
        try:
            return self.store.write_doc(self.path, doc.model_dump(mode="json"), version)
        except Exception as e:  # noqa: BLE001 - any failure: no bound can be proven, say so
            raise LeaseUnavailable(f"cannot write the slot lease {self.where}: {e}") from None
