"""AppInstance reconciler: figures with ratios against baselines measured in the same run.

1. Member-operation parallelism: wall time to scale a Slurm instance from 1 to 1+N workers (N adds,
   each awaited) with `max_parallel` 1 (baseline: one operation at a time), 4 and 8, against the
   platform simulator at the test time scale (0.01 real s per simulated s: an add takes ~45 ms).
2. Converge overhead: an `apply` that finds nothing to do (token from OpenBao, instance, in-flight
   operations, members, operations: the cost of a no-op `up` per instance) vs one bare
   `get_instance` through the same client (baseline).
3. Planning cost: `plan_members` over 512 workers with 8 rebinds vs over 8 workers (baseline).

    .venv/bin/python benchmarks/bench_apps.py [--workers 16] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clients.platform import PlatformClient  # noqa: E402
from clients.platform import models as m  # noqa: E402
from clients.vault import VaultCredentials  # noqa: E402
from environments import load_environment  # noqa: E402
from providers.apps.plan import Observed, plan_members  # noqa: E402
from providers.apps.reconciler import AppInstanceReconciler  # noqa: E402
from providers.apps.spec import AppInstanceSpec, Slot  # noqa: E402
from simulators.openbao import OpenBaoDevServer  # noqa: E402
from simulators.platform import PlatformSimulator  # noqa: E402

KV, REF = "gpuaas", "bench/platform/sa#token"


def spec(sim: PlatformSimulator, pid: str, vault: OpenBaoDevServer, name: str, workers: int,
         parallel: int) -> AppInstanceSpec:
    bp = load_environment("local").blueprint_model
    return AppInstanceSpec.model_validate({
        "stack": "bench",
        "instance": {"name": name, "project_id": pid, "app": {"slug": "slurm", "version": "24.05.1"},
                     "runtime": {"operating_mode": "tenant_dedicated", "control_plane_scope": "project",
                                 "runtime_backend": "slurm", "tenant_boundary_mode": "dedicated_nodes"},
                     "service_account_token_path": REF,
                     "members": {"controller": {"count": 1}, "worker": {"count": workers}}},
        "blueprint": {"name": bp.name, "app": bp.apps["slurm"].model_dump(mode="json"),
                      "runtime_combinations": [c.model_dump(mode="json") for c in bp.runtime_combinations]},
        "platform_url": sim.url, "vault": {"address": vault.address, "kv_mount": KV}, "max_parallel": parallel,
    })


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with OpenBaoDevServer() as vault, PlatformSimulator(time_scale=0.01) as sim:
        vault.ensure_kv_mount(KV)
        creds = sim.bootstrap()
        pid = creds.project_id
        vault.put_secret(KV, REF.split("#")[0], {"token": creds.service_account})
        cred = VaultCredentials(token=vault.root_token)

        print(f"1. scale 1 -> {1 + args.workers} workers ({args.workers} adds, each awaited), median of "
              f"{args.repeats}")
        base = 0.0
        for parallel in (1, 4, 8):
            runs = []
            for r in range(args.repeats):
                name = f"bench-p{parallel}-{r}"
                out = AppInstanceReconciler(spec(sim, pid, vault, name, 1, parallel), cred).apply()
                rec = AppInstanceReconciler(spec(sim, pid, vault, name, 1 + args.workers, parallel), cred)
                started = time.perf_counter()
                rec.apply(out.instance_id, {x.member_id: x.host for x in out.members})
                runs.append(time.perf_counter() - started)
            took = statistics.median(runs)
            base = base or took
            label = "baseline" if parallel == 1 else f"{base / took:.2f}x faster"
            print(f"   max_parallel={parallel}: {took * 1000:7.0f} ms  ({label})")

        s = spec(sim, pid, vault, "bench-noop", 4, 4)
        out = AppInstanceReconciler(s, cred).apply()
        hosts = {x.member_id: x.host for x in out.members}
        noop, get = [], []
        with PlatformClient(sim.url, creds.service_account) as api:
            for _ in range(30):
                t = time.perf_counter()
                AppInstanceReconciler(s, cred).apply(out.instance_id, hosts)
                noop.append(time.perf_counter() - t)
                t = time.perf_counter()
                api.get_instance(pid, out.instance_id)
                get.append(time.perf_counter() - t)
        a, b = statistics.median(noop), statistics.median(get)
        print(f"2. no-op apply: {a * 1000:.1f} ms vs one get_instance {b * 1000:.2f} ms (baseline): {a / b:.1f}x")

    def plan_time(n: int) -> float:
        slots = [Slot(component_key="worker", index=i, host=f"gpu-{i}", node_id=f"node-{i + (i < 8)}")
                 for i in range(n)]
        members = [Observed(member_id=f"m{i:04d}", component_key="worker", status=m.MemberStatus.ACTIVE,
                            node_id=f"node-{i}") for i in range(n)]
        hosts = {f"m{i:04d}": f"gpu-{i}" for i in range(n)}
        runs = []
        for _ in range(5):
            t = time.perf_counter()
            plan_members(slots, members, hosts)
            runs.append(time.perf_counter() - t)
        return statistics.median(runs)

    small, large = plan_time(8), plan_time(512)
    print(f"3. plan 512 workers: {large * 1000:.1f} ms vs 8 workers {small * 1000:.2f} ms (baseline): "
          f"{large / small:.0f}x for 64x the members")


if __name__ == "__main__":
    main()
