"""The MAAS client (clients/maas/client.py): a provider's concurrent first calls share one connect (`_session`).

A refresh reads every resource at once, on the plugin's gRPC threads; each makes its own `MaasSiteClient`.
The first call of each used to connect by itself, each fetching the describe document. Now the first
caller connects and the others wait for its outcome: the session, or the same error. The connect is held
open by hand until every other caller is waiting, so the tests do not depend on how threads are scheduled.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from clients.maas import MaasClient, MaasSiteClient, MaasUnavailable, RetryBudget
from simulators.maas import ApiErrorBurst, ApiFaults, MaasSimulator
from tests.fixtures.maas_sim import maas_sim, maas_sim_factory  # noqa: F401 - fixtures

CALLERS = 6
SMALL = RetryBudget(attempts=5, total_s=5.0, initial_s=0.01, max_wait_s=0.05)


def _waiting_on_the_connect(threads: list[threading.Thread]) -> int:
    """How many of `threads` are blocked in the first caller's connect (its Future's `result`)."""
    frames = sys._current_frames()
    waiting = 0
    for t in threads:
        frame = frames.get(t.ident or -1)
        while frame is not None:
            if frame.f_code.co_name == "result" and frame.f_code.co_filename.endswith("_base.py"):
                waiting += 1
                break
            frame = frame.f_back
    return waiting


def _race(sim: MaasSimulator, monkeypatch: pytest.MonkeyPatch, call: Callable[[MaasSiteClient], Any]) -> list[Any]:
    """CALLERS threads, each with its own client, make their first call at once; the first connect is
    held until the other CALLERS - 1 wait on it. Each thread's result or exception, in thread order."""
    release, connecting = threading.Event(), threading.Event()
    real = MaasClient._connect

    def held(self: MaasClient) -> Any:
        connecting.set()
        assert release.wait(60), "the test never released the connect"
        return real(self)

    monkeypatch.setattr(MaasClient, "_connect", held)
    outcomes: list[Any] = [None] * CALLERS

    def run(i: int) -> None:
        try:
            outcomes[i] = call(MaasSiteClient(sim.url, sim.api_key, site="local", retry=SMALL))
        except Exception as e:  # noqa: BLE001 - the outcome under test
            outcomes[i] = e

    first = threading.Thread(target=run, args=(0,))
    first.start()
    assert connecting.wait(30), "the first caller never connected"
    others = [threading.Thread(target=run, args=(i,)) for i in range(1, CALLERS)]
    for t in others:
        t.start()
    deadline = time.monotonic() + 30
    while _waiting_on_the_connect(others) < len(others):
        assert time.monotonic() < deadline, f"only {_waiting_on_the_connect(others)} callers waited on the connect"
        time.sleep(0.01)
    release.set()
    for t in [first, *others]:
        t.join(60)
        assert not t.is_alive()
    return outcomes


def test_concurrent_first_calls_share_one_describe(maas_sim: MaasSimulator,  # noqa: F811 - fixture
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    sid = maas_sim.admin.machines()[0]["system_id"]
    outcomes = _race(maas_sim, monkeypatch, lambda c: c.read_many([sid]))
    assert all(isinstance(o, list) and [v.system_id for v in o] == [sid] for o in outcomes), outcomes
    assert maas_sim.admin.request_counts()["DescribeHandler"]["read"] == 1, "one describe for every caller"


def test_concurrent_first_calls_share_the_connect_error_and_the_next_call_connects_again(
    maas_sim: MaasSimulator, monkeypatch: pytest.MonkeyPatch,  # noqa: F811 - fixture
) -> None:
    maas_sim.admin.set_api_faults(ApiFaults(errors=[ApiErrorBurst(status=503, count=100, handler="DescribeHandler")]))
    outcomes = _race(maas_sim, monkeypatch, lambda c: c.read_many(["abc123"]))
    assert all(isinstance(o, MaasUnavailable) for o in outcomes), outcomes
    assert all("site local" in str(o) and "describe" in str(o) and "HTTP 503" in str(o) for o in outcomes)
    assert maas_sim.admin.request_counts()["DescribeHandler"]["read"] == 5, "one budget's attempts, not one per caller"
    # The region is back: a failed connect is not kept, the next call connects.
    maas_sim.admin.set_api_faults(ApiFaults())
    monkeypatch.undo()
    assert MaasSiteClient(maas_sim.url, maas_sim.api_key, site="local", retry=SMALL).read_many(["abc123"]) == []
    assert maas_sim.admin.request_counts()["DescribeHandler"]["read"] == 6
