"""What finding N new machines costs when MAAS already holds M machines (issue 18's one open clause).

Resolving a run's machines is one bulk request per key kind. The hostname, MAC and system_id lookups
are filtered by MAAS, so their cost follows N. The power (IPMI) address lookup cannot be: MAAS has no
filter on it, so `Machines.power_parameters` returns every machine's power parameters, and it runs
once per run when some machine was found by no other key (a machine that may be new). This prints,
for N = 64 new machines and M machines already in MAAS, the wall time of the whole resolve through the
real client and the embedded MAAS simulator, and the size of the power-parameters answer (compact JSON), each with
its ratio to the smallest M measured in the same run.

    .venv/bin/python benchmarks/bench_resolve.py [--new 64] [--sizes 1024,4096,10240]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from clients.maas import MaasClient  # noqa: E402
from environments import load_environment  # noqa: E402
from providers.machines.resolve import resolve_machines  # noqa: E402
from providers.machines.spec import MachineSpec  # noqa: E402
from simulators.localstack import machine_specs  # noqa: E402
from simulators.maas import MaasSimulator, SimInventory  # noqa: E402
from simulators.maas.inventory import MachineSpec as SimMachine  # noqa: E402


def _addr(i: int) -> tuple[str, str]:
    """IPMI address and PXE MAC of rack slot i."""
    high, mid, low = i >> 16, (i >> 8) & 255, i & 255
    return f"10.{60 + high}.{mid}.{low}", f"52:54:02:{high:02x}:{mid:02x}:{low:02x}"


def _inventory(in_maas: int, new: int) -> SimInventory:
    """`in_maas` machines enlisted (hostnames old-*), `new` racked but unknown to MAAS."""
    machines = []
    for i in range(in_maas + new):
        ipmi, mac = _addr(i)
        machines.append(SimMachine(hostname=f"{'old' if i < in_maas else 'new'}-{i:05d}", pxe_mac=mac,
                                   ipmi_address=ipmi, sku="h200", site="bench", enlisted=i < in_maas))
    return SimInventory.model_validate({
        "sites": [{"name": "bench"}], "fabrics": [{"name": "pxe"}],
        "subnets": [{"cidr": "10.50.0.0/16", "fabric": "pxe", "site": "bench", "role": "pxe"}],
        "machines": [m.model_dump() for m in machines]})


def _specs(in_maas: int, new: int) -> list[MachineSpec]:
    base = machine_specs(load_environment("local"))["local-gpu-1"]
    out = []
    for i in range(in_maas, in_maas + new):
        ipmi, mac = _addr(i)
        out.append(MachineSpec.model_validate({**base, "hostname": f"new-{i:05d}", "ipmi_address": ipmi,
                                               "pxe_mac": mac}))
    return out


def measure(in_maas: int, new: int) -> dict[str, float]:
    with MaasSimulator(_inventory(in_maas, new)) as sim:
        client = MaasClient(sim.url, sim.api_key)
        specs = _specs(in_maas, new)
        resolve_machines(client, specs[:1], {})  # connection and API description, outside the timing
        before = sum(v for a in sim.admin.request_counts().values() for v in a.values())
        started = time.perf_counter()
        found = resolve_machines(client, specs, {})
        wall = time.perf_counter() - started
        requests = sum(v for a in sim.admin.request_counts().values() for v in a.values()) - before
        assert not found, f"{len(found)} new machines were resolved to machines already in MAAS"
        size = len(orjson.dumps(client._call("Machines", "power_parameters", read=True)))
    return {"wall_ms": wall * 1e3, "requests": requests, "power_bytes": size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--sizes", default="1024,4096,10240")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    measure(sizes[0], args.new)  # warm-up: imports and first-use costs stay out of the baseline
    rows = [(m, measure(m, args.new)) for m in sizes]
    base = rows[0][1]
    print(f"resolve {args.new} new machines; MAAS holding M others (ratios against M={sizes[0]:,}):")
    print(f"{'M':>8} {'resolve':>10} {'ratio':>6} {'requests':>9} {'power_parameters':>17} {'ratio':>6} {'per M':>7}")
    for m, r in rows:
        print(f"{m:>8,} {r['wall_ms']:>8.0f}ms {r['wall_ms'] / base['wall_ms']:>6.2f} {r['requests']:>9.0f} "
              f"{r['power_bytes'] / 1e3:>15.0f}KB {r['power_bytes'] / base['power_bytes']:>6.2f} "
              f"{r['power_bytes'] / m:>6.0f}B")


if __name__ == "__main__":
    main()
