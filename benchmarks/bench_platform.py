"""Platform API client and simulator: figures with ratios against baselines measured in the same run.

1. Typed client overhead: `PlatformClient.get_instance` (catalogue lookup, request id, pydantic
   validation of the response) vs a bare pooled httpx GET of the same URL (baseline).
2. Client construction: a new `PlatformClient` per call (what a provider that builds its client
   inside each call pays) vs one reused client (baseline).
3. Simulator scaling: p50 latency of a read with a large world (many instances/members/operations)
   vs a small one (baseline), i.e. whether the simulator's linear scans start to matter.
4. Operation turnaround: wall time of N member adds in parallel vs one add (baseline), at the
   test time scale, which is what fixtures pay per lifecycle.

    .venv/bin/python benchmarks/bench_platform.py [--reads 300] [--instances 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402

from clients.platform import PlatformClient  # noqa: E402
from clients.platform import models as m  # noqa: E402
from simulators.platform import PlatformSimulator  # noqa: E402

SLURM = m.AppInstanceCreate(
    name="hpc",
    app_type=m.AppType.SLURM,
    app_version="24.05.1",
    components=[m.ComponentSpec(component_key="controller", count=1), m.ComponentSpec(component_key="worker", count=4)],
)


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def line(name: str, value_ms: float, base_ms: float, base_name: str) -> None:
    print(
        f"  {name:<46} p50 {value_ms:8.3f} ms   baseline ({base_name}) {base_ms:8.3f} ms   "
        f"ratio {value_ms / base_ms:6.2f}x"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reads", type=int, default=300)
    ap.add_argument("--instances", type=int, default=200)
    ap.add_argument("--adds", type=int, default=16)
    args = ap.parse_args()
    with PlatformSimulator(time_scale=0.001) as sim:
        creds = sim.bootstrap()
        pid = creds.project_id
        api = PlatformClient(sim.url, creds.service_account)
        inst = api.wait_for_operation(pid, api.create_instance(pid, SLURM).operation_id, timeout_s=30).instance_id
        url = f"{sim.url}/api/v1/projects/{pid}/app-instances/{inst}"
        raw = httpx.Client(headers={"Authorization": f"Bearer {creds.service_account}"})
        raw.get(url).raise_for_status()

        print("1. typed client vs bare httpx (GET app instance)")
        base = p50_ms(timed(lambda: raw.get(url).raise_for_status(), args.reads))
        typed = p50_ms(timed(lambda: api.get_instance(pid, inst), args.reads))
        line("PlatformClient.get_instance", typed, base, "bare httpx")

        print("2. client construction per call vs reused client")
        fresh = p50_ms(timed(lambda: PlatformClient(sim.url, creds.service_account).get_instance(pid, inst), 50))
        line("new PlatformClient + get_instance", fresh, typed, "reused client")

        print(f"3. simulator read latency: small world vs {args.instances} instances")
        small = p50_ms(timed(lambda: api.list_members(pid, inst), args.reads))
        ops = [api.create_instance(pid, SLURM.model_copy(update={"name": f"hpc-{i}"})) for i in range(args.instances)]
        for op in ops:
            api.wait_for_operation(pid, op.operation_id, timeout_s=60)
        big = p50_ms(timed(lambda: api.list_members(pid, inst), args.reads))
        members = len(sim.store.members)
        line(f"list_members with {members} members in the sim", big, small, "1 instance")
        big_get = p50_ms(timed(lambda: api.get_operation(pid, ops[-1].operation_id), args.reads))
        line(f"get_operation with {len(sim.store.operations)} operations", big_get, base, "bare httpx, small")

        print(f"4. member adds: {args.adds} submitted together vs 1 alone (time_scale=0.001)")
        start = time.perf_counter()
        single = api.wait_for_operation(pid, api.add_member(pid, inst, "worker").operation_id, timeout_s=30)
        one_wall = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        many = [api.add_member(pid, inst, "worker") for _ in range(args.adds)]
        done = [api.wait_for_operation(pid, op.operation_id, timeout_s=60) for op in many]
        all_wall = (time.perf_counter() - start) * 1000
        one_sim = ((single.finished_at or single.created_at) - single.created_at).total_seconds()
        longest = max(((o.finished_at or o.created_at) - o.created_at).total_seconds() for o in done)
        print(
            f"  longest simulated duration of {args.adds} adds {longest:6.1f} s    baseline (1 add) {one_sim:6.1f} s"
            f"    ratio {longest / one_sim:6.2f}x (1.0: no queueing, adds run beside each other)"
        )
        print(
            f"  wall time incl. submit + polling {all_wall:8.1f} ms   baseline (1 add) {one_wall:8.1f} ms"
            f"   ratio {all_wall / one_wall:6.2f}x"
        )
        raw.close()
        api.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
