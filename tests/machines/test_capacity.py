"""batch_max_parallel per profile, exactly (issue 14 item 7, issue 25 item 1): bounded across pools (two
schedulers at once, as two MachinePools of one `up`) and across processes (the slot lease, here on an
in-memory check-and-set store; tests/machines/test_lease_openbao.py runs it on OpenBao), and who gets a freed
slot first. Peaks and busy changes are the MAAS simulator's own statistics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from providers.machines import capacity
from providers.machines.capacity import BUSY
from providers.machines.lease import LeaseTimes, SlotLease, lease_path
from providers.machines.records import Context
from providers.machines.scheduler import MachineResult, Scheduler
from providers.machines.status import MachineOutcome
from simulators.maas.faults import MachineFaults

from .conftest import World
from .lease_fakes import FakeCas


def _peak_busy(w: World) -> int:
    return max(site["busy"] for site in w.maas.admin.peak_concurrency().values())


def _with_lease(ctx: Context, store: FakeCas, holder: str, times: LeaseTimes | None = None) -> Context:
    maas = ctx.ops

    def still_busy(ids: set[str]) -> set[str]:
        return {v.system_id for v in maas.read_many(sorted(ids)) if v.status in BUSY}

    ctx.lease = lambda site, profile: SlotLease(store, lease_path(site, profile), holder, times, still_busy=still_busy)
    return ctx


def test_two_pools_of_one_profile_at_limit_1_never_run_two_machines_at_once(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    store = FakeCas()
    pools = [
        [w.specs["local-gpu-1"], w.specs["local-gpu-2"]],
        [w.specs["local-gpu-3"], w.specs["local-gpu-4"]],
    ]
    results: list[MachineResult] = []
    errors: list[BaseException] = []

    def run(specs: list) -> None:
        try:
            ctx = _with_lease(w.context(batch_max_parallel=1), store, "this-process")
            results.extend(Scheduler(ctx).onboard(specs))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(p,)) for p in pools]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert {r.outcome for r in results} == {MachineOutcome.READY} and len(results) == 4, [r.reason for r in results]
    assert _peak_busy(w) == 1, w.maas.admin.peak_concurrency()
    spec = w.specs["local-gpu-1"]
    assert store.holders(lease_path(spec.site, spec.profile)) == {}, "every slot was given back"
    assert store.rejected == 0, "one process never races itself (its pools see each other without a request)"


def test_a_machine_another_process_holds_counts_until_maas_is_done_with_it(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    other, mine = w.specs["local-gpu-1"], w.specs["local-gpu-2"]
    maas = w.client()
    # Another process (a concurrent `up`, since killed) took the only slot and commissions a machine.
    theirs = maas.create(
        hostname=other.hostname, pxe_mac=other.pxe_mac, power_type="ipmi", power_address=other.ipmi_address,
        power_user=None, power_pass=None, commission=False,
    )
    maas.commission(theirs.system_id, [], [])
    store = FakeCas()
    path = lease_path(other.site, other.profile)
    expired = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    store.docs[path] = ({"holders": {theirs.system_id: {"holder": "killed", "expires_at": expired}}}, 1)
    r = Scheduler(_with_lease(w.context(batch_max_parallel=1), store, "this-process")).onboard([mine])[0]
    assert r.outcome is MachineOutcome.READY, r.reason
    assert _peak_busy(w) == 1, "the expired holder's machine kept its slot while MAAS commissioned it"
    assert store.holders(path) == {}, "reclaimed once MAAS was done, and ours given back"


def test_vault_unavailable_fails_the_machine_with_a_code_and_touches_nothing(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    store = FakeCas()
    store.fail = ConnectionError("Vault unreachable at https://vault.example:8200")
    r = Scheduler(_with_lease(w.context(batch_max_parallel=1), store, "p")).onboard([w.specs["local-gpu-1"]])[0]
    assert r.outcome is MachineOutcome.FAILED
    assert r.reason.startswith("MCH028 ") and "cannot read the slot lease" in r.reason, r.reason
    assert "(6 attempts)" in r.reason, "retried (a Vault restart is ridden out), then failed"
    assert "Vault unreachable" in r.reason and "commission did not start" in r.reason, r.reason
    assert w.maas.admin.status(r.system_id).label == "New", "no heavy stage began without a slot"


def test_the_process_renewer_keeps_held_slots_alive_and_stops_when_nothing_is_held() -> None:
    store = FakeCas()
    times = LeaseTimes(ttl_s=0.6, renew_s=0.1)
    lease = SlotLease(store, "leases/renew/p", "proc", times)
    logs: list[str] = []
    assert capacity.try_take("renew-test", "m1", 2, lease, logs.append)
    time.sleep(1.5)  # well past the TTL: alive only if renewed
    other = SlotLease(store, "leases/renew/p", "other", times)
    assert not other.take("m2", 1), "m1's entry was renewed, so the only slot is still held"
    assert lease.stats.renewals >= 5, lease.stats
    capacity.give_back("renew-test", ["m1"])
    assert store.holders("leases/renew/p") == {}
    deadline = time.monotonic() + 2
    while capacity._renewer is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert capacity._renewer is None, "the renewer ends when the process holds nothing"
    assert not logs, logs


def test_each_write_is_counted_by_a_call_that_has_not_reported_yet() -> None:
    """Two provider calls of one process (a standalone machine and a pool, each with its own SlotLease) share
    the key. The first takes, then the second, then the first again; the first gives back and reports; the
    renewal and the second's give-back must land in the second's counts, not the first's (whose report is
    already written): the sum of the reports is every write to Vault. Before, the renewal went through the
    latest call to ask (CI of stop 34: a renewal mid-flight when its call reported, 16 writes of 17)."""
    store = FakeCas()
    times = LeaseTimes(ttl_s=0.6, renew_s=0.1)
    first, second = (SlotLease(store, "leases/attr/p", "proc", times) for _ in range(2))
    assert capacity.try_take("attr-test", "m1", 3, first, print)
    assert capacity.try_take("attr-test", "m2", 3, second, print)
    assert capacity.try_take("attr-test", "m3", 3, first, print)
    capacity.give_back("attr-test", ["m1", "m3"])
    reported = first.stats.writes
    before = second.stats.renewals
    deadline = time.monotonic() + 3
    while second.stats.renewals == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert second.stats.renewals > before, "m2's renewal is the second call's"
    capacity.give_back("attr-test", ["m2"])
    assert first.stats.writes == reported, "nothing is counted by a call after it reported"
    assert first.stats.writes + second.stats.writes == store.writes
    assert store.holders("leases/attr/p") == {}


def test_a_vault_restart_is_ridden_out(world_factory: Callable[..., World]) -> None:
    w = world_factory()

    class Restarting(FakeCas):
        down_for = 2  # the first two takes find Vault away

        def read_doc(self, path: str):  # type: ignore[no-untyped-def]
            if self.down_for:
                self.down_for -= 1
                raise ConnectionError("Vault restarting")
            return super().read_doc(path)

    logs: list[str] = []
    store = Restarting()
    r = Scheduler(_with_lease(w.context(batch_max_parallel=1, logs=logs), store, "p")).onboard(
        [w.specs["local-gpu-1"]])[0]
    assert r.outcome is MachineOutcome.READY, r.reason
    assert sum("will retry" in line and "Vault restarting" in line for line in logs) == 2, logs


def test_in_the_last_wave_new_machines_take_freed_slots_before_deploys(world_factory: Callable[..., World]) -> None:
    """Machines further along deploy first while new machines keep coming; once no more are left to start
    than there are slots, a freed slot starts the last commissionings first (issue 29: deploy-first to the end
    left the last machines a whole lifecycle behind)."""
    w = world_factory()
    w.maas.admin.set_time_scale(1e-3)  # a deploy takes 0.9 s: the order asserted is by phases, not by threads
    w.maas.admin.reset_stats()
    specs = [w.specs[h] for h in ("local-gpu-1", "local-gpu-2", "local-gpu-3")]
    # One slot: the first machine's deploy and the third machine's commissioning both want the one the second
    # machine's commissioning frees (the first is configured meanwhile, outside a slot).
    results = w.scheduler(batch_max_parallel=1).onboard(specs)
    assert {r.outcome for r in results} == {MachineOutcome.READY}, [r.reason for r in results]
    (rows,) = w.maas.admin.busy_changes().values()
    steps = list(zip([(0.0, 0, 0), *rows], rows, strict=False))
    commissioning_starts = [t for (_, _, c0), (t, _, c) in steps if c > c0]
    deploy_ends = [t for (_, n0, c0), (t, n, c) in steps if n < n0 and c == c0]
    assert len(commissioning_starts) == 3 and len(deploy_ends) == 3, rows
    assert commissioning_starts[2] < deploy_ends[0], rows  # the third machine did not wait for a deploy
    assert _peak_busy(w) == 1


class _CountChecked(Scheduler):
    """After every round of steps, the process's slot count is what its machines hold: a slot a step dropped
    is given back before the loop hands slots on or sleeps."""

    def _advance_all(self, ready: list) -> None:
        super()._advance_all(ready)
        for key in {self._key(m) for m in self._machines}:
            holding = sum(1 for m in self._machines if m.sched.holds_slot and self._key(m) == key)
            assert capacity.held(key) == holding, (key, capacity.held(key), holding)


def test_a_slot_a_step_drops_is_handed_on_before_the_loop_goes_on(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    # local-gpu-1's deploy fails with no retry: its own step fails it at the deploy stage, holding the one slot.
    w.maas.admin.set_machine_faults("local-gpu-1", MachineFaults(deploy_failures=1))
    ctx = w.context(batch_max_parallel=1, enable_deploy_retry_on_datasource_failure=False)
    results = _CountChecked(ctx).onboard([w.specs["local-gpu-1"], w.specs["local-gpu-2"]])
    by_host = {r.hostname: r.outcome for r in results}
    assert by_host == {"local-gpu-1": MachineOutcome.FAILED, "local-gpu-2": MachineOutcome.READY}, \
        [r.reason for r in results]
    assert _peak_busy(w) == 1
