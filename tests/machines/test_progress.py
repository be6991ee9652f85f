"""Live progress of a pool: a line at least every 10 s of provider time, in the stable form
`Progress.parse` reads, with per-stage counts, done/failed, elapsed and an estimate; the last line
matches how the machines ended."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from providers.machines.progress import Progress, ProgressMeter
from providers.machines.scheduler import Scheduler
from providers.machines.spec import Deadlines
from providers.machines.status import MachineOutcome, Stage
from tests.fixtures.maas_sim import TEST_TIME_SCALE

from .conftest import World

# The MAAS simulator's pace in this test: 3x the suite's, so the real time spent inside requests
# (provider time does not move then) stays small next to the MAAS phases even on a loaded host.
SCALE = 3 * TEST_TIME_SCALE


class ProviderClock:
    """Provider time that moves only when the scheduler sleeps (so a gap between two lines is time
    the scheduler chose to wait); each provider second is SCALE real seconds, the pace of the MAAS
    simulator."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        time.sleep(seconds * SCALE)


def test_a_pool_prints_progress_at_least_every_10s(world_factory: Callable[..., World]) -> None:
    w = world_factory("local")
    w.maas.admin.set_time_scale(SCALE)
    clock, lines = ProviderClock(), []
    ctx = replace(w.context(batch_max_parallel=2), deadlines=Deadlines(), clock=clock, label="pool gpu",
                  progress=lambda line: lines.append((clock(), line)))
    results = Scheduler(ctx, sleep=clock.sleep).onboard(list(w.specs.values()))
    parsed = [(t, Progress.parse(line)) for t, line in lines]
    assert all(p is not None for _, p in parsed), lines
    times = [t for t, _ in parsed]
    assert times[0] == 0.0 and clock.now > 60, "the pool took minutes of provider time"
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) <= 10.0
    for _, p in parsed:
        assert p is not None and p.label == "pool gpu" and p.total == len(w.specs)
        assert p.done + p.failed + sum(p.stages.values()) == p.total
    seen = {s for _, p in parsed if p for s in p.stages}
    assert {Stage.AWAIT_COMMISSION, Stage.AWAIT_DEPLOY} <= seen, "stage counts show where machines are"
    last = parsed[-1][1]
    assert last is not None
    assert last.done == sum(r.outcome is MachineOutcome.READY for r in results) == len(w.specs)
    assert last.failed == 0 and last.stages == {} and last.eta_s == 0
    assert any(p is not None and p.eta_s and 0 < p.done < p.total for _, p in parsed), "an estimate mid-run"


def test_the_line_is_stable_and_reads_back() -> None:
    out: list[str] = []
    t = [0.0]
    meter = ProgressMeter("pool dal1-h200", lambda: t[0], out.append, 10.0)
    states = [(Stage.AWAIT_DEPLOY, None), (Stage.READY, MachineOutcome.READY), (Stage.FAILED, MachineOutcome.TIMED_OUT),
              (Stage.AWAIT_COMMISSION, None)]
    meter.tick(states)
    t[0] = 5.0
    meter.tick(states)  # not due yet
    t[0] = 120.0
    meter.tick(states)
    assert out == [
        "progress pool dal1-h200: done 1/4 failed 1 | await_commission=1 await_deploy=1 | elapsed 0s | eta ?",
        "progress pool dal1-h200: done 1/4 failed 1 | await_commission=1 await_deploy=1 | elapsed 120s | eta 120s",
    ]
    back = Progress.parse(out[1])
    assert back is not None and back.render() == out[1] and back.stages[Stage.AWAIT_DEPLOY] == 1


def test_durations_read_like_durations() -> None:
    from tools.tables import duration

    assert [duration(s) for s in (0.42, 12.4, 723, 3720)] == ["0.4s", "12s", "12m03s", "1h02m"]
