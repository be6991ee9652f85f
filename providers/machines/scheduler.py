"""Drives many machines through the lifecycle table at once, inside one provider call.

One loop, no thread per machine: machines that wait are polled together with one bulk read per
tick (a request whose cost grows with the machines in this run, not with the machines in MAAS);
at most `batch_max_parallel` machines occupy the expensive stages (commissioning, deploying) at
once; every waiting stage has a deadline and polling backs off. One machine failing never stops the
others: each ends with its own outcome and reason.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from environments.model import TeardownMode

from .lifecycle import (
    HANDLERS,
    OWNER_NODE_ID,
    PLATFORM_WAITS,
    SLOT_STAGES,
    WAIT_DEADLINE,
    Context,
    Goal,
    StepKind,
    Tracked,
    stage_for,
)
from .ports import MachineView, PortError
from .resolve import resolve_machines
from .spec import MachineSpec
from .status import MachineOutcome, Stage

MAX_TRANSIENT_ERRORS = 30
MAX_STEPS_PER_TICK = 12
CREATE_ATTEMPTS = 4
MAX_WORKERS = 32  # threads per run for concurrent MAAS/platform calls  # a machine never loops forever inside one tick


class MachineResult(BaseModel):
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


@dataclass
class Scheduler:
    ctx: Context
    sleep: Callable[[float], None] = time.sleep
    _tracked: list[Tracked] = field(default_factory=list)
    _pool: ThreadPoolExecutor | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ---------------------------------------------------------------------------------------
    def onboard(self, specs: Iterable[MachineSpec], known: dict[str, str] | None = None) -> list[MachineResult]:
        """Bring every machine to Deployed + enrolled. `known`: hostname -> system_id from prior state."""
        tracked = [Tracked(spec=s, goal=Goal.DEPLOYED) for s in specs]
        adopted = self._resolve(tracked, known or {}, create_missing=True)
        return self._run(tracked, adopted)

    def teardown(
        self, items: Iterable[tuple[MachineSpec, str | None, TeardownMode]], node_ids: dict[str, str] | None = None
    ) -> list[MachineResult]:
        """Release machines per their teardown mode and remove their platform node records.
        Never deletes a machine from MAAS; `detach` does not touch MAAS at all."""
        node_ids = node_ids or {}
        tracked: list[Tracked] = []
        detached: list[Tracked] = []
        for spec, system_id, mode in items:
            m = Tracked(
                spec=spec, goal=Goal.RELEASED, teardown=mode, system_id=system_id, node_id=node_ids.get(spec.hostname)
            )
            if mode is TeardownMode.DETACH:
                m.stage = Stage.FORGET_NODE
                m.notes.append("detached: MAAS was not touched")
                detached.append(m)
            else:
                tracked.append(m)
        self._resolve(tracked, {t.spec.hostname: t.system_id for t in tracked if t.system_id}, create_missing=False)
        for t in tracked:
            if t.view is not None and t.node_id is None:
                t.node_id = t.view.owner_data.get(OWNER_NODE_ID)  # MAAS clears owner data on release
            if t.outcome is MachineOutcome.RELEASED:  # not in MAAS any more: only the node record is left
                t.outcome, t.stage = None, Stage.FORGET_NODE
        return self._run(detached + tracked, set())

    # ---------------------------------------------------------------------------------------
    def _resolve(self, tracked: list[Tracked], known: dict[str, str], create_missing: bool) -> set[str]:
        found = resolve_machines(self.ctx.ops, [t.spec for t in tracked], known)
        adopted: set[str] = set()
        for t in tracked:
            view = found.get(t.spec.hostname)
            if view is None and not create_missing:
                t.outcome, t.stage = MachineOutcome.RELEASED, Stage.RELEASED
                t.notes.append("not in MAAS any more: nothing to release")
                continue
            if view is None:
                continue
            if t.spec.hostname not in known:
                adopted.add(t.spec.hostname)
            t.view, t.system_id = view, view.system_id
        missing = [t for t in tracked if t.view is None and t.outcome is None]
        if missing:
            workers = min(max(4, self.ctx.policy.batch_max_parallel), MAX_WORKERS, len(missing))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="create") as pool:
                for t, view in zip(missing, pool.map(self._create, missing), strict=True):
                    if view is not None:
                        t.view, t.system_id = view, view.system_id
        return adopted

    def _create(self, t: Tracked) -> MachineView | None:
        """Create a machine MAAS doesn't know. A create is retried only after checking it did not
        happen: a 5xx or dropped connection may still have created the machine."""
        last: PortError | None = None
        power_user = power_pass = None
        if t.spec.power_user_path and self.ctx.bmc_credentials is not None:
            try:
                power_user, power_pass = self.ctx.bmc_credentials(t.spec.power_user_path)
            except Exception as e:  # noqa: BLE001 - e.g. VaultError: names the path, never a value
                t.outcome, t.stage = MachineOutcome.FAILED, Stage.FAILED
                t.reason = f"{t.spec.hostname}: BMC credentials unavailable: {e}"
                return None
        for attempt in range(CREATE_ATTEMPTS):
            if attempt:
                again = resolve_machines(self.ctx.ops, [t.spec], {})
                if t.spec.hostname in again:
                    return again[t.spec.hostname]
                self.sleep(self.ctx.deadlines.poll_initial_s * attempt)
            try:
                view = self.ctx.ops.create(
                    hostname=t.spec.hostname,
                    pxe_mac=t.spec.pxe_mac,
                    power_type=t.spec.power_type.value,
                    power_address=t.spec.ipmi_address,
                    power_user=power_user,
                    power_pass=power_pass,
                    commission=False,
                )
                self.ctx.log(f"{t.spec.hostname}: created in MAAS as {view.system_id}")
                return view
            except PortError as e:
                last = e
                if e.status is not None and e.status < 500:
                    break
        t.outcome, t.stage = MachineOutcome.FAILED, Stage.FAILED
        t.reason = f"{t.spec.hostname}: create failed: {last}; fix the machine's record and run up again"
        return None

    # ---------------------------------------------------------------------------------------
    def _run(self, tracked: list[Tracked], adopted: set[str]) -> list[MachineResult]:
        workers = min(max(4, self.ctx.policy.batch_max_parallel), MAX_WORKERS)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="machines") as pool:
            self._pool = pool
            try:
                return self._loop(tracked, adopted)
            finally:
                self._pool = None

    def _loop(self, tracked: list[Tracked], adopted: set[str]) -> list[MachineResult]:
        ctx = self.ctx
        self._tracked = tracked
        active = [t for t in tracked if t.outcome is None]
        for t in active:
            if t.view is not None and t.stage is not Stage.FORGET_NODE:
                t.stage = stage_for(t)
            t.stage_times[t.stage.value] = ctx.clock()
        while active:
            now = ctx.clock()
            # One bulk read refreshes every waiting machine: polls are shared, not per machine.
            if any(t.waiting and t.next_poll <= now for t in active):
                for t in active:
                    if t.waiting and t.stage in PLATFORM_WAITS and t.next_poll <= now:
                        t.waiting = False  # the handler asks the platform, not MAAS
                maas_waits = [t for t in active if t.waiting and t.stage not in PLATFORM_WAITS]
                if maas_waits:
                    self._poll(maas_waits)
            ready = [t for t in active if not t.waiting]
            while ready:
                self._advance_all(ready)
                # Machines delayed for a slot that another machine just freed go now, not a tick later.
                ready = (
                    [
                        t
                        for t in active
                        if t.outcome is None and not t.waiting and t.stage in SLOT_STAGES and not t.holds_slot
                    ]
                    if self._free_slots()
                    else []
                )
            for t in active:
                if t.outcome is None and t.waiting and ctx.clock() > t.deadline:
                    t.reason = (
                        f"{t.spec.hostname} (system_id {t.system_id}, MAAS status "
                        f"{t.view.status.label if t.view else '?'}) did not leave {t.stage.value} before its "
                        f"deadline ({WAIT_DEADLINE.get(t.stage, '?')}); the next up resumes from here"
                    )
                    t.outcome, t.stage = MachineOutcome.TIMED_OUT, Stage.FAILED
            for t in active:
                if t.outcome is not None and t.holds_slot:
                    t.holds_slot = False
            active = [t for t in active if t.outcome is None]
            waits = [t.next_poll for t in active if t.waiting]
            if waits:
                # Delayed machines (no free slot) can only move after a poll frees one.
                self.sleep(max(0.0, min(waits) - ctx.clock()))
        return [self._result(t, t.spec.hostname in adopted) for t in tracked]

    def _advance_all(self, ready: list[Tracked]) -> None:
        """Run ready machines' steps concurrently: one machine's HTTP calls never wait for another's."""
        if len(ready) <= 1 or self._pool is None:
            for t in ready:
                self._advance(t)
            return
        list(self._pool.map(self._advance, ready))

    def _poll(self, due: list[Tracked]) -> None:
        try:
            views = {v.system_id: v for v in self.ctx.ops.read_many([t.system_id for t in due if t.system_id])}
        except PortError as e:
            for t in due:
                self._transient(t, e)
            return
        for t in due:
            view = views.get(t.system_id or "")
            if view is None:
                t.outcome, t.stage = MachineOutcome.FAILED, Stage.FAILED
                t.reason = f"{t.spec.hostname}: system_id {t.system_id} vanished from MAAS (deleted out of band?)"
                continue
            t.view = view
            stage = stage_for(t)
            if stage is t.stage and t.stage in WAIT_DEADLINE:
                t.waiting = False  # same stage: its handler looks again (e.g. the platform's node status)
            else:
                self._enter(t, stage)

    def _enter(self, t: Tracked, stage: Stage) -> None:
        if stage is not t.stage:
            t.stage_times[stage.value] = self.ctx.clock()
            t.detail = None if stage is Stage.PXE_PREFLIGHT else t.detail
            t.wait_stage = None
        t.stage = stage
        t.waiting = False

    def _advance(self, t: Tracked) -> None:
        for _ in range(MAX_STEPS_PER_TICK):
            if t.stage in SLOT_STAGES and not t.holds_slot:
                if not self._take_slot(t):
                    return  # delayed: no capacity (Metal3's provisioning limit); retried next tick
            elif t.stage not in SLOT_STAGES:
                t.holds_slot = False
            try:
                step = HANDLERS[t.stage](self.ctx, t)
            except PortError as e:
                self._transient(t, e)
                return
            except Exception as e:  # a bug must fail one machine, not the whole pool
                t.reason = f"{t.spec.hostname}: internal error in {t.stage.value}: {type(e).__name__}: {e}"
                t.outcome, t.stage = MachineOutcome.FAILED, Stage.FAILED
                t.holds_slot = False
                return
            if step.kind is StepKind.DONE:
                t.outcome, t.stage, t.reason = step.outcome, step.stage, step.reason
                t.holds_slot = False
                self.ctx.log(f"{t.spec.hostname}: {step.stage.value}" + (f" — {step.reason}" if step.reason else ""))
                return
            if step.kind is StepKind.WAIT:
                if step.stage is t.wait_stage:
                    t.waiting = True
                    self._backoff(t)  # still waiting in the same stage: keep its deadline
                else:
                    self._start_wait(t, step.stage)
                return
            self._enter(t, step.stage)

    def _free_slots(self) -> int:
        with self._lock:
            return self.ctx.policy.batch_max_parallel - sum(1 for x in self._tracked if x.holds_slot)

    def _take_slot(self, t: Tracked) -> bool:
        with self._lock:  # count and take atomically: machines advance on several threads
            if sum(1 for x in self._tracked if x.holds_slot) >= self.ctx.policy.batch_max_parallel:
                return False
            t.holds_slot = True
            return True

    def _start_wait(self, t: Tracked, stage: Stage) -> None:
        now = self.ctx.clock()
        if stage is not t.stage:
            t.stage_times[stage.value] = now
        t.stage, t.waiting, t.wait_stage = stage, True, stage
        t.poll_interval = self.ctx.deadlines.poll_initial_s
        t.next_poll = now + t.poll_interval
        limit = WAIT_DEADLINE.get(stage)
        t.deadline = now + getattr(self.ctx.deadlines, limit) if limit else float("inf")
        self.ctx.log(f"{t.spec.hostname}: {stage.value}")

    def _backoff(self, t: Tracked) -> None:
        t.poll_interval = min(self.ctx.deadlines.poll_max_s, max(t.poll_interval, 1e-3) * 2)
        t.next_poll = self.ctx.clock() + t.poll_interval

    def _transient(self, t: Tracked, e: PortError) -> None:
        """A failed call: re-read and let the table decide again (every step is idempotent)."""
        t.transient_errors += 1
        self.ctx.log(f"{t.spec.hostname}: {t.stage.value}: {e} (will re-read and retry)")
        if t.transient_errors > MAX_TRANSIENT_ERRORS or (
            e.status is not None and 400 <= e.status < 500 and e.status not in (409,)
        ):
            t.outcome, t.stage = MachineOutcome.FAILED, Stage.FAILED
            t.reason = f"{t.spec.hostname} (system_id {t.system_id}): MAAS error: {e}"
            return
        t.waiting = True
        t.poll_interval = self.ctx.deadlines.poll_initial_s
        t.next_poll = self.ctx.clock() + t.poll_interval
        if t.stage not in WAIT_DEADLINE:
            t.deadline = min(t.deadline, self.ctx.clock() + self.ctx.deadlines.deploy_s)

    def _result(self, t: Tracked, adopted: bool) -> MachineResult:
        times = sorted(t.stage_times.items(), key=lambda kv: kv[1])
        seconds = {a: round(b_t - a_t, 3) for (a, a_t), (_, b_t) in zip(times, times[1:], strict=False)}
        return MachineResult(
            hostname=t.spec.hostname,
            system_id=t.system_id,
            outcome=t.outcome or MachineOutcome.FAILED,
            stage=t.stage,
            maas_status=t.view.status.label if t.view else "unknown",
            reason=t.reason,
            notes=tuple(t.notes),
            node_id=t.node_id,
            deploy_attempts=t.deploy_attempts,
            adopted=adopted,
            stage_seconds=seconds,
        )
