# size: the scheduling loop and the batch_max_parallel slot bookkeeping it runs every tick, read together
"""Drives many machines through the lifecycle table at once, inside one provider call.

The scheduler only schedules: which machine runs a step now (a free `batch_max_parallel` slot,
a due poll), on which thread, and when to look again. What a step means is the lifecycle's
(`lifecycle.run_step`: pre-checks, then the stage's handler); the scheduler applies the `Step`.
One loop, no thread per machine: waiting machines are polled together with one bulk read per tick
(its cost grows with the machines in this run, not with the machines in MAAS), and a poll also takes
every waiting machine that is due within half the longest poll interval, so machines fall into step
and a pool of P costs about one read per tick, not P; every waiting stage has a deadline and polling
backs off. One machine failing never stops the others.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from clients.maas import MaasStatus, MachineView, PortError
from providers.machines.records import OWNER_NODE_ID, Context, Goal, LifecycleRecord, Step, StepKind

from . import capacity
from .lease import LeaseUnavailable
from .lifecycle import PLATFORM_WAITS, SLOT_STAGES, WAIT_DEADLINE, failed_call, run_step, stage_for
from .progress import ProgressMeter
from .records import OWNER_RESOURCE
from .resolve import create_records, resolve_records
from .spec import MachineSpec, TeardownMode
from .status import MachineOutcome, Stage

MAX_STEPS_PER_TICK = 12  # a machine never loops forever inside one tick
MAX_WORKERS = 32  # threads per run for concurrent MAAS/platform calls
FULL_RETRY_S = 0.5  # at least this long between two reads of a full slot lease (tests scale polls to ms)
LEASE_ATTEMPTS = 6  # takes that found Vault unavailable, spaced like full-lease re-reads, before MCH028


class MachineResult(BaseModel):
    """How one machine ended this run (notes and stage timings go to the run's output, not state)."""

    model_config = ConfigDict(frozen=True)

    hostname: str
    system_id: str | None
    outcome: MachineOutcome
    stage: Stage
    maas_status: str
    reason: str = ""
    notes: tuple[str, ...] = ()
    node_id: str | None = None
    deploy_attempts: int = 0
    adopted: bool = False
    stage_seconds: dict[str, float] = {}


def _commissioned(view: MachineView) -> bool:
    return view.status is MaasStatus.READY


@dataclass
class Schedule:
    """When a machine runs next: scheduling state only (the facts are in its LifecycleRecord)."""

    waiting: bool = False
    next_poll: float = 0.0
    poll_interval: float = 0.0
    deadline: float = float("inf")
    holds_slot: bool = False
    lease_failures: int = 0  # takes that could not reach the slot lease (Vault) in this run
    wait_stage: Stage | None = None
    stage_times: dict[str, float] = field(default_factory=dict)


@dataclass
class _Machine:
    rec: LifecycleRecord
    sched: Schedule = field(default_factory=Schedule)


@dataclass
class Scheduler:
    ctx: Context
    sleep: Callable[[float], None] = time.sleep
    _machines: list[_Machine] = field(default_factory=list)
    _pool: ThreadPoolExecutor | None = None
    _created: Future[None] | None = None  # the background creates of new machines beyond the first batch
    _creating: set[int] = field(default_factory=set)  # id() of their records: no step until _created is done
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _full: dict[str, float] = field(default_factory=dict)
    """key -> when to ask again: a lease found full is re-read at most every FULL_RETRY_S (another process's
    slot frees), at once when this process frees one."""
    _freed: int = 0  # slots given back so far (a delayed machine retries in the same tick only after one was)
    _returns: dict[str, list[_Machine]] = field(default_factory=dict)
    """key -> machines whose slot was dropped since the last `_give_back` (one lease write per key)."""

    # ---------------------------------------------------------------------------------------
    def onboard(self, specs: Iterable[MachineSpec], known: dict[str, str] | None = None) -> list[MachineResult]:
        """Bring every machine to Deployed + enrolled. `known`: hostname -> system_id from prior state."""
        machines = [_Machine(LifecycleRecord(spec=s, goal=Goal.DEPLOYED)) for s in specs]
        # Only the first batch_max_parallel new machines are created before the loop starts; the rest are
        # created meanwhile (1,023 creates held a fleet's first wave back ~4 s on 2 cores, issue 18).
        later = resolve_records(self.ctx, [m.rec for m in machines], known or {}, create_missing=True,
                                sleep=self.sleep, create_now=self.ctx.policy.batch_max_parallel)
        return self._run(machines, later)

    def teardown(
        self, items: Iterable[tuple[MachineSpec, str | None, TeardownMode]], node_ids: dict[str, str] | None = None
    ) -> list[MachineResult]:
        """Release machines per their teardown mode and remove their platform node records.
        Never deletes a machine from MAAS; `detach` does not touch MAAS at all."""
        node_ids = node_ids or {}
        machines = [
            _Machine(
                LifecycleRecord(
                    spec=spec,
                    goal=Goal.RELEASED,
                    teardown=TeardownMode(mode),
                    handoff=self.ctx.policy.customer_handoff,
                    system_id=system_id,
                    node_id=node_ids.get(spec.hostname),
                )
            )
            for spec, system_id, mode in items
        ]
        in_maas = [m.rec for m in machines if m.rec.teardown is not TeardownMode.DETACH]
        known = {r.spec.hostname: r.system_id for r in in_maas if r.system_id}
        resolve_records(self.ctx, in_maas, known, create_missing=False, sleep=self.sleep)
        for r in in_maas:
            if r.view is not None and r.node_id is None:
                r.node_id = r.view.owner_data.get(OWNER_NODE_ID)  # MAAS clears owner data on release
        moved = [m for m in machines if self._managed_elsewhere(m.rec)]
        return [self._left_alone(m) for m in moved] + self._run([m for m in machines if m not in moved])

    def _managed_elsewhere(self, r: LifecycleRecord) -> str | None:
        """The resource that manages the machine now, when it is another one than this run's."""
        owner = r.view.owner_data.get(OWNER_RESOURCE) if r.view is not None else None
        return owner if owner and self.ctx.owner and owner != self.ctx.owner else None

    def _left_alone(self, m: _Machine) -> MachineResult:
        m.rec.notes.append(f"managed by {self._managed_elsewhere(m.rec)} now: left as it is (not released)")
        m.rec.outcome, m.rec.stage = MachineOutcome.DETACHED, Stage.DETACHED
        return self._result(m)

    # ---------------------------------------------------------------------------------------
    def _run(self, machines: list[_Machine], later: list[LifecycleRecord] | None = None) -> list[MachineResult]:
        workers = min(max(4, self.ctx.policy.batch_max_parallel), MAX_WORKERS)
        with (ThreadPoolExecutor(max_workers=1, thread_name_prefix="create-later") as creator,
              ThreadPoolExecutor(max_workers=workers, thread_name_prefix="machines") as pool):
            self._pool = pool
            if later:
                self._creating = {id(r) for r in later}
                self._created = creator.submit(create_records, self.ctx, later, self.sleep)
            try:
                return self._loop(machines)
            finally:
                self._pool = None
                for m in machines:  # whatever happened, this run's slots go back
                    self._drop_slot(m)
                self._give_back()
                self._log_lease_cost(machines)

    def _loop(self, machines: list[_Machine]) -> list[MachineResult]:  # size: the one scheduling loop
        ctx = self.ctx
        self._machines = machines
        meter = ProgressMeter(ctx.label, ctx.clock, ctx.progress, ctx.deadlines.progress_s)
        states = lambda: [(m.rec.stage, m.rec.outcome) for m in machines]  # noqa: E731
        for m in machines:
            if m.rec.view is not None:
                m.rec.stage = stage_for(m.rec)
            m.sched.stage_times[m.rec.stage.value] = ctx.clock()
        active = [m for m in machines if m.rec.outcome is None]
        while active:
            meter.tick(states())
            self._take_created(machines)
            now = ctx.clock()
            due = [m for m in active if m.sched.waiting and m.sched.next_poll <= now]
            for m in due:
                if m.rec.stage in PLATFORM_WAITS:
                    m.sched.waiting = False  # its handler asks the platform, never MAAS
            if any(m.rec.stage not in PLATFORM_WAITS for m in due):
                soon = now + ctx.deadlines.poll_max_s / 2  # falls into step with the others
                maas_due = [
                    m
                    for m in active
                    if m.sched.waiting and m.rec.stage not in PLATFORM_WAITS and m.sched.next_poll <= soon
                ]
                self._poll(maas_due)  # one bulk read refreshes every due machine
                self._give_back()  # what the poll saw end, in one write (others' takes see it now)
            ready = [m for m in active if not m.sched.waiting and id(m.rec) not in self._creating]
            while ready:
                freed = self._freed
                self._advance_all(ready)
                # Machines delayed for a slot that another machine of this process just freed go now,
                # not a tick later (a slot another process frees is seen at the next tick).
                ready = (
                    [
                        m
                        for m in active
                        if m.rec.outcome is None
                        and not m.sched.waiting
                        and m.rec.stage in SLOT_STAGES
                        and not m.sched.holds_slot
                        and id(m.rec) not in self._creating
                    ]
                    if self._freed != freed and self._free_slots()
                    else []
                )
            active = [m for m in active if m.rec.outcome is None]
            waits = [m.sched.next_poll for m in active if m.sched.waiting]
            if waits:
                # Delayed machines (no free slot) can only move after a poll frees one.
                self.sleep(min(max(0.0, min(waits) - ctx.clock()), meter.due_in()))
            elif self._created is not None:
                wait_futures([self._created])  # nothing waits on MAAS: only the machines still being created
            elif active:
                # Every machine left is delayed: another pool or run holds the profile's slots.
                self.sleep(min(self.ctx.deadlines.poll_initial_s, meter.due_in()))
        meter.tick(states(), force=True)
        return [self._result(m) for m in machines]

    def _take_created(self, machines: list[_Machine]) -> None:
        """Machines created in the background since the last tick start from the stage MAAS shows."""
        if self._created is None or not self._created.done():
            return
        self._created.result()  # a bug in the creates fails the run loudly
        for m in machines:
            if id(m.rec) in self._creating and m.rec.view is not None:
                m.rec.stage = stage_for(m.rec)
        self._created, self._creating = None, set()

    def _advance_all(self, ready: list[_Machine]) -> None:
        """Run ready machines' steps concurrently: one machine's HTTP calls never wait for another's. The
        slots their steps dropped are given back before this returns (the loop hands them on at once)."""
        ready = self._grant_slots(ready)
        if len(ready) <= 1 or self._pool is None:
            for m in ready:
                self._advance(m)
        else:
            list(self._pool.map(self._advance, ready))
        self._give_back()

    def _poll(self, due: list[_Machine]) -> None:
        try:
            ids = [m.rec.system_id for m in due if m.rec.system_id]
            # Interfaces and disks are parsed only for machines that just became Ready (the preflight's).
            polled = {v.system_id: (v, d) for v, d in self.ctx.ops.poll_many(ids, detail_when=_commissioned)}
        except PortError as e:
            for m in due:
                self._apply(m, failed_call(m.rec, e))
            return
        for m in due:
            m.rec.recent_error = ""  # MAAS answered: an earlier failure is not what holds it now
            view, detail = polled.get(m.rec.system_id or "", (None, None))
            if view is None:
                m.rec.vanished, m.sched.waiting = True, False  # the pre-check decides what that means
                continue
            m.rec.view = view
            stage = stage_for(m.rec)
            if stage is m.rec.stage and m.rec.stage in WAIT_DEADLINE:
                m.sched.waiting = False  # same stage: its handler looks again (e.g. the platform's node status)
            else:
                self._enter(m, stage)
                if stage is Stage.PXE_PREFLIGHT and detail is not None:
                    m.rec.detail = detail  # commissioning just ended: this read is the preflight's

    def _advance(self, m: _Machine) -> None:
        for _ in range(MAX_STEPS_PER_TICK):
            step = run_step(
                self.ctx,
                m.rec,
                deadline_passed=self.ctx.clock() > m.sched.deadline,
                take_slot=lambda: self._take_slot(m),
            )
            if not self._apply(m, step):
                return

    def _apply(self, m: _Machine, step: Step) -> bool:
        """Apply one step; True when the machine can take its next step right away."""
        rec, sched = m.rec, m.sched
        if step.kind is StepKind.COMPLETE and step.outcome is None:
            assert step.stage is not None
            self._enter(m, step.stage)
            return True
        if step.kind in (StepKind.COMPLETE, StepKind.FAILED):
            assert step.stage is not None and step.outcome is not None
            rec.outcome, rec.stage, rec.reason = step.outcome, step.stage, step.reason
            self._drop_slot(m)
            sched.waiting = False
            self.ctx.log(f"{rec.spec.hostname}: {step.stage.value}" + (f" — {step.reason}" if step.reason else ""))
            return False
        if step.kind is StepKind.CONTINUE:
            assert step.stage is not None
            if step.stage is sched.wait_stage:
                sched.waiting = True
                self._backoff(m)  # still waiting in the same stage: keep its deadline
            else:
                self._start_wait(m, step.stage)
            return False
        if step.kind is StepKind.ERROR:
            self.ctx.log(step.reason)
            now = self.ctx.clock()
            sched.waiting, sched.poll_interval = True, self.ctx.deadlines.poll_initial_s
            sched.next_poll = now + sched.poll_interval
            if rec.stage not in WAIT_DEADLINE:
                sched.deadline = min(sched.deadline, now + self.ctx.deadlines.deploy_s)
            return False
        # DELAYED: stays ready, runs when a slot frees. No deadline of its own: slots are held by
        # machines that progress (their stages have deadlines, MAAS times its own phases out).
        return False

    def _enter(self, m: _Machine, stage: Stage) -> None:
        if stage is not m.rec.stage:
            m.sched.stage_times[stage.value] = self.ctx.clock()
            m.rec.detail = None if stage is Stage.PXE_PREFLIGHT else m.rec.detail
            m.sched.wait_stage, m.sched.deadline = None, float("inf")
        if stage not in SLOT_STAGES:
            self._drop_slot(m)
        m.rec.stage = stage
        m.sched.waiting = False

    # -- batch_max_parallel: counted per profile in this process and in the lease (capacity.py) ----
    def _key(self, m: _Machine) -> str:
        return f"{getattr(self.ctx.ops, 'url', '')}|{m.rec.spec.site}|{m.rec.spec.profile}"

    def _free_slots(self) -> int:
        keys = {self._key(x) for x in self._machines}
        return max((self.ctx.policy.batch_max_parallel - capacity.held(k) for k in keys), default=0)

    def _grant_slots(self, ready: list[_Machine]) -> list[_Machine]:
        """The ready machines whose next step needs a slot ask for them together: one lease write per profile
        and tick (a wave's 64 takes, one after another, held its start back 2.1 s at 1,024 machines). Those
        left without one are not advanced this tick: their step would only find no slot (stepping hundreds
        of delayed machines every tick cost 37 ms a tick). When Vault or MAAS cannot say, each machine asks
        on its own, as its step does (the failure is counted and reported per machine)."""
        self._give_back()
        want: dict[str, list[_Machine]] = {}
        for m in ready:
            if (m.rec.stage in SLOT_STAGES and not m.sched.holds_slot and m.rec.system_id and m.rec.outcome is None
                    and m.sched.lease_failures + 1 < LEASE_ATTEMPTS):  # the last attempt is its step's own take
                want.setdefault(self._key(m), []).append(m)
        skip: set[int] = set()
        limit = self.ctx.policy.batch_max_parallel
        last_wave = self._not_started() <= limit
        for key, machines in want.items():
            if last_wave:
                machines.sort(key=lambda m: m.rec.stage is not Stage.COMMISSION)  # stable: the rest keep their order
            if self._full.get(key, 0.0) > self.ctx.clock():
                skip |= {id(m) for m in machines}
                continue
            spec = machines[0].rec.spec
            lease = self.ctx.lease(spec.site, spec.profile) if self.ctx.lease is not None else None
            ids = [m.rec.system_id for m in machines if m.rec.system_id]
            try:
                granted = capacity.try_take_many(key, ids, limit, lease, self.ctx.log)
            except PortError as e:  # MAAS, asked whether an expired holder's machine is still busy
                self.ctx.log(f"{len(machines)} machine(s) of {spec.site}/{spec.profile}: could not check an expired "
                             f"slot holder in MAAS: {e} (will retry)")
                skip |= {id(m) for m in machines}
                continue
            except LeaseUnavailable as e:  # counted per machine, as its own take would (MCH028 at the last)
                for m in machines:
                    self._lease_failed(m, e)
                    skip.add(id(m))
                self._full_for_now(key)
                continue
            for m in machines:
                m.sched.holds_slot = m.rec.system_id in granted
                if not m.sched.holds_slot:
                    skip.add(id(m))
            if len(granted) < len(ids) and lease is not None and capacity.held(key) < limit:
                self._full_for_now(key)  # the lease is full (another process holds the rest): re-read it later
        return [m for m in ready if id(m) not in skip]

    def _not_started(self) -> int:
        """Machines still to start their first heavy stage (commissioning), those being created included.
        A freed slot goes to machines further along first (list order: machines are delivered as the run
        goes), except in the last wave, when no more are left than there are slots: then the last
        commissionings start first and the deploys fill the slots they leave. Deploy-first to the end left
        the last machines a whole lifecycle behind (the drain of a 1,024-machine first up: 3.8 s of wall
        idle over its last 7.3 s)."""
        return len(self._creating) + sum(1 for m in self._machines
                                         if m.rec.stage is Stage.COMMISSION and m.rec.outcome is None)

    def _take_slot(self, m: _Machine) -> bool:
        """Raises LeaseUnavailable (the lifecycle fails the machine with MCH028) when Vault cannot say."""
        if m.sched.holds_slot:
            return True
        if not m.rec.system_id:
            return True  # nothing in MAAS yet (a heavy stage always has a machine): never reached
        key, spec = self._key(m), m.rec.spec
        self._give_back()
        if self._full.get(key, 0.0) > self.ctx.clock():
            return False  # one read finds the lease full for every delayed machine until the retry
        lease = self.ctx.lease(spec.site, spec.profile) if self.ctx.lease is not None else None
        try:
            ok = capacity.try_take(key, m.rec.system_id, self.ctx.policy.batch_max_parallel, lease, self.ctx.log)
        except PortError as e:  # MAAS, asked whether an expired holder's machine is still busy
            self.ctx.log(f"{m.rec.spec.hostname}: could not check an expired slot holder in MAAS: {e} (will retry)")
            return False
        except LeaseUnavailable as e:  # a Vault restart is ridden out; a Vault that stays away is MCH028
            self._lease_failed(m, e)
            ok = False
        m.sched.holds_slot = ok
        if not ok:
            self._full_for_now(key)
        return ok

    def _lease_failed(self, m: _Machine, e: LeaseUnavailable) -> None:
        """A take that could not reach the lease: counted against the machine's LEASE_ATTEMPTS and said; the
        last raises (its step fails the machine with MCH028; the batch in _grant_slots never asks for it)."""
        m.sched.lease_failures += 1
        if m.sched.lease_failures >= LEASE_ATTEMPTS:
            raise LeaseUnavailable(f"{e} ({m.sched.lease_failures} attempts)") from None
        self.ctx.log(f"{m.rec.spec.hostname}: {e} (attempt {m.sched.lease_failures}/{LEASE_ATTEMPTS}, will retry)")

    def _full_for_now(self, key: str) -> None:
        """Ask the lease of `key` again only after FULL_RETRY_S (at once if this process frees a slot)."""
        with self._lock:
            self._full[key] = self.ctx.clock() + max(FULL_RETRY_S, self.ctx.deadlines.poll_initial_s)

    def _log_lease_cost(self, machines: list[_Machine]) -> None:
        """The Vault requests the slot lease cost this call (docs/machines.md quotes the figures)."""
        if self.ctx.lease is not None:
            for site, profile in sorted({(m.rec.spec.site, m.rec.spec.profile) for m in machines}):
                if line := capacity.cost_line(self.ctx.lease(site, profile)):
                    self.ctx.log(line)

    def _drop_slot(self, m: _Machine) -> None:
        if m.sched.holds_slot and m.rec.system_id:
            m.sched.holds_slot = False
            with self._lock:
                self._returns.setdefault(self._key(m), []).append(m)
                self._freed += 1
                self._full.pop(self._key(m), None)
        m.sched.holds_slot = False

    def _give_back(self) -> None:
        """The slots dropped since the last call, given back in one lease write per profile, before any slot
        is taken again: a tick's machines that ended a heavy stage gave theirs back one write after another
        (~2,000 writes in the loop's own thread over a 1,024-machine first up)."""
        with self._lock:
            returns, self._returns = self._returns, {}
        for key, machines in returns.items():
            try:
                capacity.give_back(key, [m.rec.system_id for m in machines if m.rec.system_id])
            except LeaseUnavailable as e:
                for m in machines:
                    self.ctx.log(f"{m.rec.spec.hostname}: slot not given back in Vault (it expires): {e}")

    def _start_wait(self, m: _Machine, stage: Stage) -> None:
        now, sched = self.ctx.clock(), m.sched
        if stage is not m.rec.stage:
            sched.stage_times[stage.value] = now
        m.rec.stage, sched.waiting, sched.wait_stage = stage, True, stage
        sched.poll_interval = self.ctx.deadlines.poll_initial_s
        sched.next_poll = now + sched.poll_interval
        limit = WAIT_DEADLINE.get(stage)
        sched.deadline = now + getattr(self.ctx.deadlines, limit) if limit else float("inf")
        self.ctx.log(f"{m.rec.spec.hostname}: {stage.value}")

    def _backoff(self, m: _Machine) -> None:
        m.sched.poll_interval = min(self.ctx.deadlines.poll_max_s, max(m.sched.poll_interval, 1e-3) * 2)
        m.sched.next_poll = self.ctx.clock() + m.sched.poll_interval

    def _result(self, m: _Machine) -> MachineResult:
        rec = m.rec
        times = sorted(m.sched.stage_times.items(), key=lambda kv: kv[1])
        seconds = {a: round(b_t - a_t, 3) for (a, a_t), (_, b_t) in zip(times, times[1:], strict=False)}
        return MachineResult(
            hostname=rec.spec.hostname,
            system_id=rec.system_id,
            outcome=rec.outcome or MachineOutcome.FAILED,
            stage=rec.stage,
            maas_status=rec.view.status.label if rec.view else "unknown",
            reason=rec.reason,
            notes=tuple(rec.notes),
            node_id=rec.node_id,
            deploy_attempts=rec.deploy_attempts,
            adopted=rec.adopted,
            stage_seconds=seconds,
        )
