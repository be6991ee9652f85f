"""Pytest fixtures other areas import: `from simulators.platform.testing import platform_sim`.

`platform_sim` is a running `PlatformSimulator` (time_scale=0.01: one simulated second is 10 ms)
with `platform_sim.creds` set to a bootstrapped world (see `SimCredentials`). Faults are cleared
when the test ends. `platform_sim_factory` starts extra simulators with other settings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .server import PlatformSimulator, SimCredentials

TEST_TIME_SCALE = 0.01


class RunningSim(PlatformSimulator):
    creds: SimCredentials


@pytest.fixture
def platform_sim() -> Iterator[RunningSim]:
    sim = RunningSim(time_scale=TEST_TIME_SCALE)
    with sim:
        sim.creds = sim.bootstrap()
        yield sim


@pytest.fixture
def platform_sim_factory() -> Iterator[Callable[..., RunningSim]]:
    started: list[RunningSim] = []

    def make(**kwargs: Any) -> RunningSim:
        kwargs.setdefault("time_scale", TEST_TIME_SCALE)
        sim = RunningSim(**kwargs).start()
        started.append(sim)
        sim.creds = sim.bootstrap()
        return sim

    yield make
    for sim in started:
        sim.stop()
