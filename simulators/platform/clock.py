"""Scaled simulated time: `time_scale` real seconds pass per simulated second.

time_scale=0.01 makes a 3-second member join take 30 ms. Tests can also jump the clock
(`advance`) to expire enrollment tokens without waiting for them.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


class SimClock:
    def __init__(self, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0 (real seconds per simulated second), got {time_scale}")
        self.time_scale = time_scale
        self._start_real = time.monotonic()
        self._epoch = datetime.now(UTC)
        self._offset = 0.0
        self._lock = threading.Lock()

    def seconds(self) -> float:
        """Simulated seconds since the simulator started."""
        with self._lock:
            return (time.monotonic() - self._start_real) / self.time_scale + self._offset

    def at(self, sim_seconds: float) -> datetime:
        return self._epoch + timedelta(seconds=sim_seconds)

    def now(self) -> datetime:
        return self.at(self.seconds())

    def set_time_scale(self, time_scale: float) -> None:
        """From now on `time_scale` real seconds pass per simulated second; the simulated time so far is kept (the
        engine's steps are due in simulated seconds, so a step under way just runs at the new pace)."""
        if time_scale <= 0:
            raise ValueError(f"time_scale must be > 0 (real seconds per simulated second), got {time_scale}")
        with self._lock:
            now = time.monotonic()
            self._offset += (now - self._start_real) / self.time_scale
            self._start_real, self.time_scale = now, time_scale

    def advance(self, sim_seconds: float) -> float:
        if sim_seconds < 0:
            raise ValueError("the simulated clock only moves forward")
        with self._lock:
            self._offset += sim_seconds
        return self.seconds()
