"""A pool's new machines beyond its first batch are created while the first batch already runs
(issue 18): the loop never waits for every create, each machine is created once, and a machine
whose create fails ends with its own error while the others deploy."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from clients.maas import MaasClient
from providers.machines.scheduler import Scheduler
from providers.machines.status import MachineOutcome
from simulators.maas import ApiErrorBurst, ApiFaults

from .conftest import World


class Recording(MaasClient):
    """The real client, recording creates (when done) and commissions; a create after the first batch
    first waits (up to 10 s) for a commission, so a loop that waited for every create shows."""

    def __init__(self, url: str, key: str, first_batch: int, before_create: Callable[[str], None]) -> None:
        super().__init__(url, key)
        self.calls: list[str] = []
        self.first_batch = first_batch
        self.before_create = before_create
        self.commissioned = threading.Event()
        self._lock = threading.Lock()
        self._started = 0

    def create(self, **kw: Any) -> Any:
        with self._lock:
            n, self._started = self._started, self._started + 1
        if n >= self.first_batch:
            self.commissioned.wait(timeout=10)
        self.before_create(kw["hostname"])
        view = super().create(**kw)
        with self._lock:
            self.calls.append(f"create {kw['hostname']}")
        return view

    def commission(self, system_id: str, *args: Any) -> None:
        with self._lock:
            self.calls.append(f"commission {system_id}")
        self.commissioned.set()
        super().commission(system_id, *args)


def test_machines_beyond_the_first_batch_are_created_while_it_runs(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    ops = Recording(w.maas.url, w.maas.api_key, first_batch=2, before_create=lambda _h: None)
    results = Scheduler(w.context(maas=ops, batch_max_parallel=2)).onboard(list(w.specs.values()))
    assert [r.outcome for r in results] == [MachineOutcome.READY] * len(w.specs), [r.reason for r in results]
    creates = [i for i, c in enumerate(ops.calls) if c.startswith("create")]
    first_commission = next(i for i, c in enumerate(ops.calls) if c.startswith("commission"))
    assert len(creates) == len(w.specs) == 4, ops.calls  # each machine created once
    assert creates[1] < first_commission < creates[-1], ops.calls  # the loop did not wait for them all
    assert w.maas.admin.request_counts()["MachinesHandler"]["create"] == 4


def test_a_failed_create_after_the_first_batch_fails_only_its_machine(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    last = sorted(w.specs)[-1]

    def outage_for(hostname: str) -> None:  # MAAS answers 503 to this machine's creates (4 attempts)
        if hostname == last:
            burst = ApiErrorBurst(status=503, count=4, handler="MachinesHandler", op="create")
            w.maas.admin.set_api_faults(ApiFaults(errors=[burst]))

    ops = Recording(w.maas.url, w.maas.api_key, first_batch=2, before_create=outage_for)
    run = Scheduler(w.context(maas=ops, batch_max_parallel=2)).onboard(list(w.specs.values()))
    results = {r.hostname: r for r in run}
    assert results[last].outcome is MachineOutcome.FAILED and results[last].system_id is None, results[last]
    assert "503" in results[last].reason, results[last].reason
    assert all(r.outcome is MachineOutcome.READY for h, r in results.items() if h != last), results
    assert last not in {m["hostname"] for m in w.maas.admin.machines()}, "never created"
