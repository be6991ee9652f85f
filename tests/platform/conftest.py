"""Fixtures of the platform tests; `platform_sim` is shared with other areas via
`tests.fixtures.platform_sim`."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from clients.platform import PlatformClient, RetryPolicy
from tests.fixtures.platform_sim import RunningSim, platform_sim, platform_sim_factory  # noqa: F401

ClientFor = Callable[[str], PlatformClient]


@pytest.fixture
def client_for(platform_sim: RunningSim) -> Iterator[ClientFor]:  # noqa: F811
    """A client authenticated as one of the bootstrapped roles: client_for("service_account")."""
    made: list[PlatformClient] = []

    def make(role: str, retry: RetryPolicy | None = None) -> PlatformClient:
        token = getattr(platform_sim.creds, role)
        client = PlatformClient(
            platform_sim.url, token, retry=retry or RetryPolicy(initial_backoff_s=0.01, max_backoff_s=0.05)
        )
        made.append(client)
        return client

    yield make
    for c in made:
        c.close()


@pytest.fixture
def admin(client_for: ClientFor) -> PlatformClient:
    return client_for("platform_admin")


# One pooled raw HTTP client for tests that check wire details: building an httpx.Client per
# request costs ~50 ms (TLS context), which would dominate these tests.
HTTP = httpx.Client(timeout=10.0)
