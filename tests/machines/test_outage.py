"""MAAS outages (issue 14, machines item 4): 5xx bursts and dropped connections from the very first
request (python-libmaas's describe) are ridden out with backoff; an outage longer than the retry
budget ends with an error naming the site, the endpoint, the status seen and what to do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clients.maas import MaasSiteClient, MaasUnavailable, RetryBudget
from providers.machines.scheduler import Scheduler
from providers.machines.status import MachineOutcome
from simulators.maas import ApiErrorBurst, ApiFaults

from .conftest import World

SMALL = RetryBudget(attempts=5, total_s=5.0, initial_s=0.01, max_wait_s=0.05)


def _client(w: World, budget: RetryBudget = SMALL) -> MaasSiteClient:
    return MaasSiteClient(w.maas.url, w.maas.api_key, site="local", retry=budget)


def test_503s_and_a_dropped_connection_on_the_first_request_are_ridden_out(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    w.maas.admin.set_api_faults(
        ApiFaults(drop_connections=1, errors=[ApiErrorBurst(status=503, count=2, handler="DescribeHandler")])
    )
    r = Scheduler(w.context(maas=_client(w))).onboard([w.specs["local-gpu-1"]])[0]
    assert r.outcome is MachineOutcome.READY, r.reason
    assert w.maas.admin.request_counts()["DescribeHandler"]["read"] >= 3, "describe was retried"
    assert sum(b.count for b in w.maas.admin.faults().api.errors) == 0


def test_an_outage_at_connect_longer_than_the_budget_names_site_endpoint_status_and_fix(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    w.maas.admin.set_api_faults(ApiFaults(errors=[ApiErrorBurst(status=503, count=100, handler="DescribeHandler")]))
    with pytest.raises(MaasUnavailable) as err:
        _client(w).read_many(["abc123"])
    text = str(err.value)
    assert "site local" in text and "describe" in text and "HTTP 503" in text
    assert "5 time(s)" in text and "Check the MAAS region" in text and "run `pulumi up` again" in text
    assert w.maas.admin.request_counts()["DescribeHandler"]["read"] == 5, "bounded by the budget's attempts"


class _OutageAfterDeploy:
    """The MAAS client, with MAAS going down (every request 503) right after the deploy call."""

    def __init__(self, inner: MaasSiteClient, w: World) -> None:
        self._inner, self._w = inner, w

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def deploy(self, system_id: str, **kw: Any) -> None:
        self._inner.deploy(system_id, **kw)
        self._w.maas.admin.set_api_faults(ApiFaults(errors=[ApiErrorBurst(status=503, count=10_000)]))


def test_a_long_outage_mid_deploy_is_reported_as_an_outage_not_a_deadline(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    ops = _OutageAfterDeploy(_client(w), w)
    r = Scheduler(w.context(maas=ops)).onboard([w.specs["local-gpu-1"]])[0]  # type: ignore[arg-type]
    w.maas.admin.set_api_faults(ApiFaults())
    assert r.outcome is MachineOutcome.FAILED
    assert r.reason.startswith("MCH019"), r.reason
    assert "site local" in r.reason and "HTTP 503" in r.reason and "Check the MAAS region" in r.reason
    assert f"{w.maas.url.rstrip('/')}" in r.reason and "/MAAS/ (Machine" in r.reason, "the endpoint"
    assert "deadline" not in r.reason
    # MAAS is back: the next run finishes the same machine.
    again = Scheduler(w.context(maas=_client(w))).onboard([w.specs["local-gpu-1"]], {r.hostname: r.system_id})[0]
    assert again.outcome is MachineOutcome.READY and again.system_id == r.system_id


def test_a_region_that_accepts_and_never_answers_is_an_outage_not_a_hang() -> None:
    """python-libmaas leaves aiohttp's 5-minute default timeout; every request here has the budget's
    per-request timeout, and a timeout is retried and reported like any outage."""
    import socket
    import threading
    import time

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # accepted, never answered
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    budget = RetryBudget(attempts=2, total_s=5.0, initial_s=0.01, max_wait_s=0.05, request_timeout_s=0.5)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/MAAS/"
    started = time.monotonic()
    try:
        with pytest.raises(MaasUnavailable) as err:
            MaasSiteClient(url, "a:b:c", site="local", retry=budget).read_many(["abc123"])
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        listener.close()
    assert time.monotonic() - started < 10, "bounded by the per-request timeout, not aiohttp's 5 minutes"
    text = str(err.value)
    assert "site local" in text and "2 time(s)" in text, text
