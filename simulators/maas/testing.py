"""pytest fixtures for the MAAS simulator; other areas import them into their conftest:

    from simulators.maas.testing import maas_sim, maas_sim_factory  # noqa: F401

`maas_sim` is a started simulator (demo inventory: one site, two H200 nodes and one
generic node, all Ready) whose phases take milliseconds; it stops after the test.
`maas_sim_factory(**kwargs)` starts one with other arguments (inventory, faults, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .simulator import MaasSimulator

# 1e-4: commissioning 60 ms, testing 30 ms, deploying 90 ms, erase 120 ms, release 3 ms.
TEST_TIME_SCALE = 1e-4


@pytest.fixture
def maas_sim_factory() -> Iterator[Callable[..., MaasSimulator]]:
    started: list[MaasSimulator] = []

    def make(**kwargs: Any) -> MaasSimulator:
        kwargs.setdefault("time_scale", TEST_TIME_SCALE)
        sim = MaasSimulator(**kwargs)
        sim.start()
        started.append(sim)
        return sim

    yield make
    for sim in started:
        sim.stop()


@pytest.fixture
def maas_sim(maas_sim_factory: Callable[..., MaasSimulator]) -> MaasSimulator:
    return maas_sim_factory()
