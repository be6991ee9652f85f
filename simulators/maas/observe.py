"""What tests and benchmarks read through the admin endpoint: request counts by handler and
action, and the peak number of machines concurrently commissioning or deploying per site."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from typing import Any

from .enums import NodeStatus

# Commissioning includes its testing step: both hold the machine in the commissioning pipeline.
BUSY_KIND: dict[NodeStatus, str] = {
    NodeStatus.COMMISSIONING: "commissioning",
    NodeStatus.TESTING: "commissioning",
    NodeStatus.DEPLOYING: "deploying",
}


BUSY_CHANGES_KEPT = 100_000  # a 10,000-machine onboarding changes each site's busy count ~40,000 times


class Stats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: Counter[tuple[str, str]] = Counter()
        self._current: Counter[tuple[str, str]] = Counter()
        self._peak: Counter[tuple[str, str]] = Counter()
        # Machine-seconds in heavy stages per site since start/reset (benchmarks: how full the profile's
        # batch_max_parallel slots were kept, against P x the run's wall).
        self._busy_s: dict[str, float] = {}
        self._busy_at: dict[str, float] = {}
        # (monotonic time, machines busy, of them commissioning) at each change per site since start/reset
        # (benchmarks: where the slots went idle: the first wave's ramp, the hand-overs, the drain); bounded.
        self._busy_changes: dict[str, deque[tuple[float, int, int]]] = {}

    def _accrue(self, site: str) -> None:
        now = time.monotonic()
        busy = self._current[(site, "busy")]
        self._busy_s[site] = self._busy_s.get(site, 0.0) + busy * (now - self._busy_at.get(site, now))
        self._busy_at[site] = now

    def count_request(self, handler: str, action: str) -> None:
        with self._lock:
            self._requests[(handler, action)] += 1

    def status_changed(self, site: str, old: NodeStatus | None, new: NodeStatus) -> None:
        old_kind = BUSY_KIND.get(old) if old is not None else None
        new_kind = BUSY_KIND.get(new)
        if old_kind == new_kind:
            return
        with self._lock:
            self._accrue(site)
            if old_kind:
                self._current[(site, old_kind)] -= 1
                self._current[(site, "busy")] -= 1
            if new_kind:
                for key in ((site, new_kind), (site, "busy")):
                    self._current[key] += 1
                    self._peak[key] = max(self._peak[key], self._current[key])
            if bool(old_kind) != bool(new_kind):
                changes = self._busy_changes.setdefault(site, deque(maxlen=BUSY_CHANGES_KEPT))
                changes.append((self._busy_at[site], self._current[(site, "busy")],
                                self._current[(site, "commissioning")]))

    def reset(self) -> None:
        """Forget counts and peaks; machines currently busy stay counted as current."""
        with self._lock:
            self._requests.clear()
            self._peak = Counter({k: v for k, v in self._current.items() if v > 0})
            self._busy_s.clear()
            self._busy_at = dict.fromkeys(self._busy_at, time.monotonic())
            self._busy_changes.clear()

    def requests(self) -> dict[str, dict[str, int]]:
        with self._lock:
            out: dict[str, dict[str, int]] = {}
            for (handler, action), n in sorted(self._requests.items()):
                out.setdefault(handler, {})[action] = n
            return out

    def concurrency(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            sites = {s for s, _ in self._peak} | {s for s, _ in self._current}
            for site in sites:
                self._accrue(site)
            return {
                site: {
                    "peak": {k: self._peak[(site, k)] for k in ("commissioning", "deploying", "busy")},
                    "current": {k: self._current[(site, k)] for k in ("commissioning", "deploying", "busy")},
                    "busy_seconds": round(self._busy_s.get(site, 0.0), 3),
                }
                for site in sorted(sites)
            }

    def busy_changes(self) -> dict[str, list[tuple[float, int, int]]]:
        with self._lock:
            return {site: list(changes) for site, changes in sorted(self._busy_changes.items())}

    def as_dict(self) -> dict[str, Any]:
        reqs = self.requests()
        return {"requests": reqs, "total_requests": sum(sum(v.values()) for v in reqs.values()),
                "concurrency": self.concurrency()}
