"""MAAS request count per machine lifecycle (create -> Deployed -> released), by handler/op.

The baseline the machine providers compare against: the requests a plain python-libmaas
client makes for one lifecycle, polling with `wait=True` at a fixed interval. Also printed: the
simulator's own throughput (machine reads/s, serial vs 4 workers, and the ratio) and the wall
time of N lifecycles serial vs in a 4-worker pool, so a regression in the simulator itself
shows up next to the figures that depend on it.

    .venv/bin/python benchmarks/bench_maas_sim.py [--machines 8]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import maas.client  # noqa: E402

from simulators.maas import MaasSimulator, NodeStatus, SimInventory  # noqa: E402
from simulators.maas.inventory import MachineSpec  # noqa: E402

# Phases at 1e-4 of real time (commissioning 60 ms, deploy 90 ms); clients poll every 20 ms,
# i.e. the ratio of a 15-minute deploy polled every ~3 minutes.
TIME_SCALE = 1e-4
POLL = 0.02


def _client(sim: MaasSimulator) -> Any:
    try:
        asyncio.get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())
    return maas.client.connect(sim.url, apikey=sim.api_key)


def _racked(n: int) -> SimInventory:
    """n H200 nodes racked but not known to MAAS: every lifecycle starts with `create`."""
    base = SimInventory.model_validate({
        "sites": [{"name": "bench"}], "fabrics": [{"name": "pxe"}],
        "subnets": [{"cidr": "10.50.0.0/20", "fabric": "pxe", "site": "bench", "role": "pxe"}]})
    machines = [MachineSpec(hostname=f"bench-{i:03d}", pxe_mac=f"52:54:01:00:{i >> 8:02x}:{i & 255:02x}",
                            ipmi_address=f"10.51.{i >> 8}.{i & 255}", sku="h200", site="bench", enlisted=False)
                for i in range(1, n + 1)]
    return base.model_copy(update={"machines": machines})


def lifecycle(sim: MaasSimulator, i: int) -> None:
    client = _client(sim)
    m = client.machines.create("amd64", [f"52:54:01:00:{i >> 8:02x}:{i & 255:02x}"], "ipmi",
                               {"power_address": f"10.51.{i >> 8}.{i & 255}", "power_user": "root",
                                "power_pass": "calvin"}, hostname=f"bench-{i:03d}")
    while m.status in (NodeStatus.NEW, NodeStatus.COMMISSIONING, NodeStatus.TESTING):
        time.sleep(POLL)
        m.refresh()
    assert m.status == NodeStatus.READY, m.status_name
    m.deploy(user_data=b"#cloud-config\n{}\n", distro_series="jammy", wait=True, wait_interval=POLL)
    assert m.status == NodeStatus.DEPLOYED, m.status_name
    m.release(erase=True, quick_erase=True, wait=True, wait_interval=POLL)
    assert m.status == NodeStatus.READY, m.status_name


def per_lifecycle_counts(n: int) -> tuple[dict[str, float], float]:
    with MaasSimulator(_racked(n), time_scale=TIME_SCALE) as sim:
        start = time.perf_counter()
        for i in range(1, n + 1):
            lifecycle(sim, i)
        elapsed = time.perf_counter() - start
        counts = sim.admin.request_counts()
    flat = {f"{h}.{a}": c / n for h, acts in counts.items() for a, c in acts.items()}
    return flat, elapsed


def parallel_wall(n: int, workers: int) -> tuple[float, dict[str, int]]:
    with MaasSimulator(_racked(n), time_scale=TIME_SCALE) as sim:
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda i: lifecycle(sim, i), range(1, n + 1)))
        elapsed = time.perf_counter() - start
        peaks = sim.admin.peak_concurrency()["bench"]
    return elapsed, peaks


def read_throughput(reads: int, workers: int) -> float:
    """Machine reads per second through python-libmaas, each worker with its own client."""
    with MaasSimulator(time_scale=TIME_SCALE) as sim:
        sid = sim.admin.machines()[0]["system_id"]

        def work(k: int) -> None:
            c = _client(sim)
            for _ in range(k):
                c.machines.get(system_id=sid)

        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(work, [reads // workers] * workers))
        return reads / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--machines", type=int, default=8)
    args = parser.parse_args()
    n = args.machines

    counts, serial_s = per_lifecycle_counts(n)
    total = sum(counts.values())
    reads = sum(v for k, v in counts.items() if k in ("MachineHandler.read", "MachinesHandler.read"))
    print(f"MAAS requests per lifecycle (create -> Deployed -> released), python-libmaas, poll {POLL * 1000:.0f} ms, "
          f"time_scale {TIME_SCALE}, mean of {n} H200 machines:")
    for key in sorted(counts, key=lambda k: (-counts[k], k)):
        print(f"  {key:40s} {counts[key]:7.2f}")
    print(f"  {'TOTAL':40s} {total:7.2f}")
    print(f"  {'  of which polling reads':40s} {reads:7.2f}")
    print(f"  {'  of which mutations + describe':40s} {total - reads:7.2f}")
    print(f"baseline_requests_per_lifecycle={total:.2f}")

    par_s, peaks = parallel_wall(n, 4)
    print(f"\n{n} lifecycles: serial {serial_s:.2f} s, 4 workers {par_s:.2f} s, speed-up x{serial_s / par_s:.2f} "
          f"(peak concurrently deploying {peaks['deploying']}, commissioning {peaks['commissioning']})")

    one = read_throughput(300, 1)
    four = read_throughput(600, 4)
    print(f"simulator machine reads/s: 1 client {one:.0f}, 4 clients {four:.0f}, ratio x{four / one:.2f}")
    print(f"mean per-lifecycle wall time (serial): {serial_s / n * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
