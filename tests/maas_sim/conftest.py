"""Fixtures for the MAAS simulator tests: a started simulator and python-libmaas clients."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import maas.client
import pytest

from simulators.maas.simulator import MaasSimulator
from tests.fixtures.maas_sim import maas_sim, maas_sim_factory  # noqa: F401 - re-exported fixtures


def connect_url(url: str, apikey: str) -> Any:
    """python-libmaas's sync connect; the calling thread needs an event loop of its own."""
    try:
        asyncio.get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())
    return maas.client.connect(url, apikey=apikey)


def connect(sim: MaasSimulator, apikey: str | None = None) -> Any:
    return connect_url(sim.url, apikey if apikey is not None else sim.api_key)


@pytest.fixture
def client(maas_sim: MaasSimulator) -> Iterator[Any]:  # noqa: F811 - fixture parameter
    yield connect(maas_sim)


def session(client: Any) -> Any:
    """The bones session, for raw handler calls python-libmaas 0.6.8 has no wrapper for."""
    return client._origin.session
