"""Live progress of a many-machine run: one line at least every `Deadlines.progress_s` of provider
time (10 s unscaled), on provider stdout, which the Pulumi CLI shows while the step runs.

    progress pool dal1-h200: done 12/48 failed 1 | await_commission=3 await_deploy=30 await_enroll=2 \
        | elapsed 1210s | eta 1860s          (one line; wrapped here)

`Progress.parse(line)` reads a line back (tests assert on it; a dashboard may too). The estimate is
linear: the time the finished machines took, per machine, times the machines left; `eta ?` until
the first machine finishes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

from pydantic import BaseModel, ConfigDict

from .status import MachineOutcome, Stage

__all__ = ["Progress", "ProgressMeter", "report_line", "stage_times"]

MIN_EVERY_S = 0.5

_LINE = re.compile(
    r"^progress (?P<label>.+?): done (?P<done>\d+)/(?P<total>\d+) failed (?P<failed>\d+) \| (?P<stages>[^|]*) \| "
    r"elapsed (?P<elapsed>\d+)s \| eta (?P<eta>\d+s|\?)$"
)


class Progress(BaseModel):
    model_config = ConfigDict(frozen=True)

    label: str
    total: int
    done: int
    failed: int
    stages: dict[Stage, int]
    """Machines still running, per lifecycle stage."""
    elapsed_s: int
    eta_s: int | None = None

    def render(self) -> str:
        stages = " ".join(f"{s.value}={n}" for s, n in self.stages.items()) or "-"
        eta = "?" if self.eta_s is None else f"{self.eta_s}s"
        return (f"progress {self.label}: done {self.done}/{self.total} failed {self.failed} | {stages} | "
                f"elapsed {self.elapsed_s}s | eta {eta}")

    @classmethod
    def parse(cls, line: str) -> Progress | None:
        m = _LINE.match(line.strip())
        if m is None:
            return None
        stages = {Stage(k): int(v) for k, v in (kv.split("=") for kv in m["stages"].split() if kv != "-")}
        eta = None if m["eta"] == "?" else int(m["eta"].rstrip("s"))
        return cls(label=m["label"], total=int(m["total"]), done=int(m["done"]), failed=int(m["failed"]),
                   stages=stages, elapsed_s=int(m["elapsed"]), eta_s=eta)


class ProgressMeter:
    """Emits a `Progress` line when one is due (`every_s` of the `clock`), and on demand."""

    def __init__(self, label: str, clock: Callable[[], float], emit: Callable[[str], None], every_s: float) -> None:
        # Scaled runs (tests, the demo) would print a line every few milliseconds: at most two a second.
        self.label, self.clock, self.emit, self.every_s = label, clock, emit, max(every_s, MIN_EVERY_S)
        self.started = clock()
        self.next_at = self.started

    def due_in(self) -> float:
        """Seconds until the next line is due (the scheduler never sleeps past it)."""
        return max(0.0, self.next_at - self.clock())

    def tick(self, machines: Iterable[tuple[Stage, MachineOutcome | None]], force: bool = False) -> None:
        now = self.clock()
        if not force and now < self.next_at:
            return
        self.next_at = now + self.every_s
        states = list(machines)
        done = sum(1 for _, o in states if o is not None and not o.failed)
        failed = sum(1 for _, o in states if o is not None and o.failed)
        running = Counter(s for s, o in states if o is None)
        finished, elapsed = done + failed, now - self.started
        left = len(states) - finished
        eta = round(elapsed / finished * left) if finished and elapsed > 0 else (0 if not left else None)
        stages = {s: running[s] for s in Stage if running[s]}
        self.emit(Progress(label=self.label, total=len(states), done=done, failed=failed, stages=stages,
                           elapsed_s=round(elapsed), eta_s=eta).render())


# --- the per-machine report line (reconciler.report) and reading its stage times back -------------
_REPORT = re.compile(r"^(?P<host>[a-z0-9-]+): \S+ at \S+ \(MAAS: [^)]*\)(?: stages\[s\] (?P<stages>.*))?$")


def report_line(hostname: str, outcome: MachineOutcome, stage: Stage, maas_status: str,
                stage_seconds: dict[str, float]) -> str:
    line = f"{hostname}: {outcome.value} at {stage.value} (MAAS: {maas_status})"
    if stage_seconds:
        line += " stages[s] " + ", ".join(f"{k}={v}" for k, v in stage_seconds.items())
    return line


def stage_times(lines: Iterable[str]) -> dict[str, dict[str, float]]:
    """hostname -> {stage: seconds} from a run's report lines (the last report of a machine wins);
    a `[provider] ` prefix (the CLI-free engine's) is allowed."""
    out: dict[str, dict[str, float]] = {}
    for raw in lines:
        m = _REPORT.match(raw.strip().removeprefix("[provider] "))
        if m is not None:
            pairs = (kv.split("=", 1) for kv in (m["stages"] or "").split(", ") if "=" in kv)
            out[m["host"]] = {k: float(v) for k, v in pairs}
    return out
