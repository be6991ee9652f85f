"""``python -m benchmarks.bench_engine``: what an engine run costs, and how far provider calls overlap.

Figures are measured against a baseline from the same run (an ``up`` of an empty program = the fixed
cost of one engine process), so the ratios hold on a loaded machine too.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from engine.api import Engine
from engine.crypto import TEST_PASSPHRASE

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "engine" / "fixture_project"
WIDGETS = 8
DELAY = 0.5  # seconds each fixture Create sleeps
PROVIDER_WORKERS = 4  # the SDK provider server's ThreadPoolExecutor


def _engine(tmp: Path, spec: list[dict[str, object]], tag: str) -> Engine:
    config = {"spec": json.dumps(spec), "backend": str(tmp / f"backend-{tag}.json")}
    return Engine(FIXTURE, "test", tmp / f"state-{tag}.json", config_overrides=config, passphrase=TEST_PASSPHRASE)


def _timed(engine: Engine, operation: str) -> float:
    start = time.perf_counter()
    result = engine.run(operation)
    elapsed = time.perf_counter() - start
    if not result.ok:
        raise SystemExit(f"{operation} failed: {result.errors()}\n{result.log}")
    return elapsed


def _overlap(backend: Path) -> float:
    """Provider-side span of the creates: first Create start to last Create done (fixture event log)."""
    events = json.loads(backend.read_text())["events"]
    starts = [t for op, _, phase, t in events if op == "create" and phase == "start"]
    dones = [t for op, _, phase, t in events if op == "create" and phase == "done"]
    return max(dones) - min(starts)


def _save_cost(tmp: Path, count: int = 200, rounds: int = 10) -> tuple[float, float]:
    """Seconds per state save with ``count`` resources and one changed: cached vs a cold writer."""
    from engine.model import ResourceState
    from engine.state import StateStore
    from engine.values import make_secret

    provider = make_secret("p" * 400)  # the size of a by-reference pickled provider, base64
    res = [
        ResourceState(
            urn=f"urn:pulumi:s::p::t::r{i}",
            custom=True,
            type="t",
            id=f"id{i}",
            inputs={"__provider": provider, "n": i, "pw": make_secret(f"pw{i}")},
            outputs={"__provider": provider, "n": i, "blob": "x" * 200},
        )
        for i in range(count)
    ]
    warm = StateStore(tmp / "warm.json", TEST_PASSPHRASE, "p", "s")
    warm.save(res, [], {})
    start = time.perf_counter()
    for k in range(rounds):
        res[k] = res[k].model_copy(update={"id": f"changed{k}"})
        warm.save(res, [], {})
    cached = (time.perf_counter() - start) / rounds
    colds = [StateStore(tmp / f"cold{i}.json", TEST_PASSPHRASE, "p", "s") for i in range(rounds)]
    start = time.perf_counter()  # key derivations above are left out: only the save is compared
    for cold in colds:
        cold.save(res, [], {})
    return cached, (time.perf_counter() - start) / rounds


def main() -> None:
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        baseline = statistics.median(_timed(_engine(tmp, [], f"empty{i}"), "up") for i in range(3))
        spec: list[dict[str, object]] = [
            {"name": f"w{i}", "props": {"size": i, "delay": DELAY}} for i in range(WIDGETS)
        ]
        up = _timed(_engine(tmp, spec, "fleet"), "up")
        same = _timed(_engine(tmp, spec, "fleet"), "up")
        preview = _timed(_engine(tmp, spec, "fleet"), "preview")
        span = _overlap(tmp / "backend-fleet.json")
        destroy = _timed(_engine(tmp, spec, "fleet"), "destroy")
        cached_save, cold_save = _save_cost(tmp)
    serial = WIDGETS * DELAY
    bound = serial / PROVIDER_WORKERS
    rows = [
        ("engine run, empty program (baseline)", baseline, ""),
        (f"up, {WIDGETS} widgets x {DELAY}s create", up, f"{up / baseline:4.1f}x baseline"),
        (
            f"  provider span of the {WIDGETS} creates",
            span,
            f"serial {serial:.2f} s, {PROVIDER_WORKERS}-worker bound {bound:.2f} s",
        ),
        ("second up (all same)", same, f"{same / baseline:4.1f}x baseline"),
        ("preview (all same)", preview, f"{preview / baseline:4.1f}x baseline"),
        (f"destroy ({WIDGETS} widgets)", destroy, f"{destroy / baseline:4.1f}x baseline"),
    ]
    for label, seconds, note in rows:
        print(f"{label:<40} {seconds:6.2f} s   {note}")
    print(f"{'provider overlap (serial / span)':<40} {serial / span:6.2f}x   (at most {PROVIDER_WORKERS}x)")
    print(
        f"{'state save, 200 resources, 1 changed':<40} {cached_save * 1000:6.1f} ms  "
        f"(cold writer {cold_save * 1000:.1f} ms, {cold_save / cached_save:.1f}x)"
    )


if __name__ == "__main__":
    main()
