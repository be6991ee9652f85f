"""Fleet scale (issue 18): one MachinePool of N machines through the real program path (the fleet
project, the CLI-free engine, the SDK's dynamic-provider server) against the MAAS and platform
simulators at MAAS time scale 4e-3. For each N (default 64, 256, 1024; P = batch_max_parallel) it
prints, measured in this run: first `up` (skip-preview, as the benchmark times the update itself),
the ideal (ceil(N/P) x one machine's lifecycle time, measured here), efficiency = ideal / wall, MAAS
requests per machine, peak concurrent machines, state bytes per machine, no-op `up` (as operators run
it: the CLI previews first; "(update)" is the same with --skip-preview), preview and refresh (and
refresh's MAAS requests), each with its ratio to the issue's target.

    python benchmarks/bench_scale.py [--sizes 64,256,1024]      (make bench-scale)

Run it on a quiet machine: on 2 cores, any other load halves the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_machines import (  # noqa: E402
    MAAS_SCALE,
    PROJECT,
    bench_environment,
    connection,
    per_machine_time,
    register,
)
from components.machines import policy_input  # noqa: E402
from engine.api import Engine  # noqa: E402
from environments import load_environment  # noqa: E402
from simulators.localstack import LocalStack, machine_specs  # noqa: E402

PARALLEL = {64: 16, 256: 32, 1024: 64}
TARGETS = {"efficiency": 0.9, "requests": 15.0, "state_kb": 2.0, "noop_s": 5.0, "preview_s": 5.0}


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _timed(fn: Any) -> tuple[float, Any]:
    started = time.monotonic()
    out = fn()
    return time.monotonic() - started, out


def measure(n: int, keep_state: Path | None = None) -> dict[str, Any]:
    # size: one size end to end (world, first up, no-op up, preview, refresh), read top to bottom
    p = PARALLEL.get(n, max(1, n // 16))
    with tempfile.TemporaryDirectory() as tmp:
        env_path = bench_environment(Path(tmp), n, p)
        env = load_environment(env_path)
        with LocalStack(str(env_path), maas_time_scale=MAAS_SCALE) as world:
            assert world.maas is not None
            ids = register(world, env)
            by_host = machine_specs(env, bundle_digest="a" * 64)
            specs = [by_host[m.hostname] for m in env.machines]
            t_machine = per_machine_time(world, env, ids, specs[0])
            config = {
                "fleet:mode": "pool",
                "fleet:specs": json.dumps(specs[1:]),
                "fleet:connection": json.dumps(connection(world, env, ids)),
                "fleet:policy": json.dumps(policy_input(env, "local", "h200-lab", [])),
                "gpuaas-infra:vault_token": world.vault.root_token if world.vault else "",
                "gpuaas-infra:machine_time_scale": repr(MAAS_SCALE),
            }
            state = Path(tmp) / "state.json"
            engine = Engine(PROJECT, "bench", state, config_overrides=config, env={"PYTHONPATH": str(REPO)})
            world.maas.admin.reset_stats()
            # CPU seconds of the simulators (this process's threads) and of the engine, program and
            # provider processes (waited children) during the first up: on 2 cores, sim + rest > wall
            # means the run was CPU-bound and says how much of it the simulators took.
            sim_before, rest_before = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
            wall, first = _timed(lambda: engine.up(timeout=3600, flags=["--skip-preview"]))
            sim_cpu = _cpu(resource.RUSAGE_SELF) - sim_before
            rest_cpu = _cpu(resource.RUSAGE_CHILDREN) - rest_before
            if not first.ok:
                raise SystemExit(f"N={n}: up failed: {first.errors()[:3]}")
            counts = world.maas.admin.request_counts()
            requests = sum(v for actions in counts.values() for v in actions.values())
            peak = max((x.get("busy", 0) for x in world.maas.admin.peak_concurrency().values()), default=0)
            state_bytes = state.stat().st_size
            if keep_state:
                keep_state.mkdir(parents=True, exist_ok=True)
                (keep_state / f"state-{n}.json").write_bytes(state.read_bytes())
            top = sorted(((v, f"{h}.{a}") for h, acts in counts.items() for a, v in acts.items()), reverse=True)[:14]
            noop, _ = _timed(lambda: engine.up(timeout=3600))  # as operators run it: the CLI previews first
            noop_update, _ = _timed(lambda: engine.up(timeout=3600, flags=["--skip-preview"]))
            preview, _ = _timed(lambda: engine.preview(timeout=3600))
            world.maas.admin.reset_stats()
            refresh, _ = _timed(lambda: engine.refresh(timeout=3600))
            refresh_requests = sum(v for a in world.maas.admin.request_counts().values() for v in a.values())
    machines = n - 1  # one machine was measured alone, outside the pool
    ideal = math.ceil(machines / p) * t_machine
    return {
        "n": machines,
        "p": p,
        "t_machine": t_machine,
        "wall": wall,
        "ideal": ideal,
        "efficiency": ideal / wall,
        "requests": requests / machines,
        "peak": peak,
        "state_kb": state_bytes / machines / 1024,
        "noop_s": noop,
        "noop_update_s": noop_update,
        "preview_s": preview,
        "refresh_s": refresh,
        "refresh_requests": refresh_requests,
        "sim_cpu": sim_cpu,
        "rest_cpu": rest_cpu,
        "top_requests": ", ".join(f"{name} {v / machines:.1f}" for v, name in top),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--keep-state", type=Path, default=None, help="copy each size's state file here")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = [measure(n, args.keep_state) for n in sizes]
    print(f"\nFleet scale, one MachinePool, MAAS time scale {MAAS_SCALE} (targets: {TARGETS})")
    head = ("N:P", "first up", "ideal", "eff", "req/m", "peak", "state/m", "no-op up", "(update)", "preview",
            "refresh")
    print("  " + " ".join(f"{h:>10}" for h in head))
    for r in rows:
        cells = (
            f"{r['n']:.0f}:{r['p']:.0f}",
            f"{r['wall']:.1f}s",
            f"{r['ideal']:.1f}s",
            f"{r['efficiency']:.2f}",
            f"{r['requests']:.1f}",
            f"{r['peak']:.0f}",
            f"{r['state_kb']:.1f}KB",
            f"{r['noop_s']:.1f}s",
            f"{r['noop_update_s']:.1f}s",
            f"{r['preview_s']:.1f}s",
            f"{r['refresh_s']:.1f}s/{r['refresh_requests']:.0f}rq",
        )
        print("  " + " ".join(f"{c:>10}" for c in cells))
        ratios = {
            "efficiency": r["efficiency"] / TARGETS["efficiency"],
            "requests": TARGETS["requests"] / max(r["requests"], 1e-9),
            "state": TARGETS["state_kb"] / max(r["state_kb"], 1e-9),
            "no-op up": TARGETS["noop_s"] / max(r["noop_s"], 1e-9),
            "preview": TARGETS["preview_s"] / max(r["preview_s"], 1e-9),
        }
        print(f"    MAAS requests per machine, largest: {r['top_requests']}")
        print(f"    first up CPU: simulators {r['sim_cpu']:.0f} s, engine+program+provider {r['rest_cpu']:.0f} s, "
              f"on 2 cores over {r['wall']:.0f} s wall ({(r['sim_cpu'] + r['rest_cpu']) / (2 * r['wall']):.0%} busy; "
              f"simulators {r['sim_cpu'] / max(r['sim_cpu'] + r['rest_cpu'], 1e-9):.0%} of the CPU)")
        print("    ratio to target (>= 1 meets it): " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
