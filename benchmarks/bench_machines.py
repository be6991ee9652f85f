"""Fleet onboarding: 64 machines as one MachinePool (batch_max_parallel=16) vs 64 MaasMachine resources.

Both run through the real Pulumi CLI (tools/pulumi_cli) and the SDK's dynamic-provider plugin (at most 4
provider calls at once) against the MAAS and platform simulators, from a fresh MAAS each. The program is
benchmarks/fleet_project, a micro-benchmark of the two resource shapes: fleet figures come from the real
program (benchmarks/bench_scale.py). Printed, measured in
this run: wall time, the ideal (ceil(N/P) x the per-machine lifecycle time, itself measured here on
one machine), efficiency = ideal / wall (also with the CLI's fixed overhead, measured here with an
empty run, taken out), MAAS requests per machine, peak concurrent Commissioning/Deploying machines;
and the time to preview the prod stack.

Targets (issue 6): pool efficiency >= 0.85, <= 30 MAAS requests per machine, and no request whose
cost grows with the machines in MAAS (checked: the only unfiltered call, the power-address lookup,
runs once per run, for machines no other key found).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from clients.platform import PlatformClient, models  # noqa: E402
from components.machines import policy_input  # noqa: E402
from environments import load_environment  # noqa: E402
from providers.machines.records import Context  # noqa: E402
from providers.machines.runtime import PlatformEnrollment  # noqa: E402
from providers.machines.scheduler import Scheduler  # noqa: E402
from providers.machines.spec import Deadlines, LifecyclePolicy, MachineSpec  # noqa: E402
from simulators.localstack import LocalStack, machine_specs  # noqa: E402
from tools.pulumi_cli.api import Engine  # noqa: E402

N = 64
P = 16
MAAS_SCALE = 4e-3  # commissioning 2.4 s, deploying 3.6 s per machine (MAAS-scale durations x 0.004)
PROJECT = REPO / "benchmarks" / "fleet_project"


def bench_environment(tmp: Path, n: int = N, p: int = P) -> Path:
    """local.yaml with one pool of `n` machines (profile limit `p`) and no hosts or app instances."""
    doc = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    doc["name"] = "local"
    doc["sites"][0]["profiles"][0]["batch_max_parallel"] = p
    doc["machine_pools"] = [{"name": "bench", "site": "local", "profile": "h200-lab"}]
    doc["machines"] = [
        {
            "hostname": f"bench-{i:04d}",
            "ipmi_address": f"172.16.{20 + i // 250}.{1 + i % 250}",
            "pxe_mac": f"b0:7b:25:21:{i // 256:02x}:{i % 256:02x}",
            "sku": "h200",
            "site": "local",
            "profile": "h200-lab",
            "pool": "bench",
        }
        for i in range(n)
    ]
    if n > 200:  # local's RoCE pools (241 per rail) and BMC /24 are lab-sized: widen them for fleet sizes
        doc["sites"][0]["bmc_network"] = "172.16.0.0/16"
        for pool in doc["roce_pools"]:
            net = f"10.{224 + int(pool['rail'])}"
            pool.update(subnet=f"{net}.0.0/16", range={"start": f"{net}.0.10", "end": f"{net}.255.250"})
    doc["hosts"] = [h for h in doc["hosts"] if not h.get("machine")]
    doc["app_instances"] = []
    path = tmp / f"bench-{n}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def specs(env: Any) -> list[dict[str, Any]]:
    by_host = machine_specs(env, bundle_digest="a" * 64)
    return [by_host[m.hostname] for m in env.machines]


def register(world: LocalStack, env: Any) -> tuple[str, str]:
    assert world.platform is not None and world.maas is not None
    admin = PlatformClient(world.platform.url, world.platform_admin_token)
    site = admin.create_site(
        models.MaasSiteCreate(
            name="local",
            maas_url=world.maas.url,
            credential_ref=models.VaultCredentialRef(path="local/maas/local"),
        )
    )
    profile = admin.create_profile(
        site.site_id, models.SiteProfileCreate(name="h200-lab", policy=models.SiteProfilePolicy())
    )
    return site.site_id, profile.profile_id


def connection(world: LocalStack, env: Any, ids: tuple[str, str]) -> dict[str, Any]:
    assert world.maas and world.platform and world.vault
    return {
        "maas": {
            "site": "local",
            "maas_url": world.maas.url,
            "api_key_path": env.sites[0].maas_api_key_path,
            "tls_verify": False,
        },
        "platform": {"url": world.platform.url, "token_path": env.platform.admin_token_path},
        "vault": {"address": world.vault.address, "kv_mount": env.vault.kv_mount, "auth_method": "token"},
        "platform_site_id": ids[0],
        "platform_profile_id": ids[1],
    }


def per_machine_time(world: LocalStack, env: Any, ids: tuple[str, str], spec: dict[str, Any]) -> float:
    """The lifecycle time of one machine alone (create -> Deployed + enrolled), no Pulumi."""
    assert world.maas and world.platform
    from clients.maas import MaasClient

    platform = PlatformClient(world.platform.url, world.platform_admin_token)
    ctx = Context(
        ops=MaasClient(world.maas.url, world.maas.api_key),
        policy=LifecyclePolicy(batch_max_parallel=P),
        enrollment=PlatformEnrollment(platform, *ids),
        deadlines=Deadlines().scaled(MAAS_SCALE),
        platform_url=world.platform.url,
        log=lambda _m: None,
    )
    started = time.monotonic()
    result = Scheduler(ctx).onboard([MachineSpec.model_validate(spec)])[0]
    took = time.monotonic() - started
    assert result.outcome.value == "ready", result.reason
    return took


def run_mode(mode: str, env_path: Path, count: int | None = None) -> dict[str, Any]:
    env = load_environment(env_path)
    with LocalStack(str(env_path), maas_time_scale=MAAS_SCALE) as world:
        assert world.maas is not None
        ids = register(world, env)
        all_specs = specs(env)
        policy = policy_input(env, "local", "h200-lab", [])
        out: dict[str, Any] = {}
        if mode == "single":
            out["t_machine"] = per_machine_time(world, env, ids, all_specs[0])
            return out
        chosen = all_specs[: count or N]
        config = {
            "fleet:mode": mode if mode != "empty" else "pool",
            "fleet:specs": json.dumps(chosen if mode != "empty" else []),
            "fleet:connection": json.dumps(connection(world, env, ids)),
            "fleet:policy": json.dumps(policy),
            "gpuaas-infra:vault_token": world.vault.root_token if world.vault else "",
            "gpuaas-infra:machine_time_scale": repr(MAAS_SCALE),
        }
        with tempfile.TemporaryDirectory() as tmp:
            engine = Engine(
                PROJECT, "bench", Path(tmp) / "backend", config_overrides=config, env={"PYTHONPATH": str(REPO)}
            )
            world.maas.admin.reset_stats()
            started = time.monotonic()
            result = engine.up(timeout=1800)
            out["wall"] = time.monotonic() - started
        if not result.ok:
            raise SystemExit(f"{mode}: up failed: {[d.message for d in result.diagnostics][:3]}")
        counts = world.maas.admin.request_counts()
        out["requests"] = sum(n for actions in counts.values() for n in actions.values())
        out["unfiltered_power_lookups"] = counts.get("MachinesHandler", {}).get("power_parameters", 0)
        peaks = world.maas.admin.peak_concurrency()
        out["peak"] = max((p.get("busy", 0) for p in peaks.values()), default=0)
        out["deployed"] = sum(1 for m in world.maas.admin.machines() if m["status_name"] == "Deployed")
        return out


def preview_prod() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(REPO, "prod", Path(tmp) / "backend")
        started = time.monotonic()
        result = engine.preview(timeout=600)
        took = time.monotonic() - started
    print(f"  prod preview: {'ok' if result.ok else 'FAILED'}, {len(result.steps)} steps")
    return took


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        env_path = bench_environment(Path(tmp))
        t_machine = run_mode("single", env_path)["t_machine"]
        empty = run_mode("empty", env_path)["wall"]
        pool = run_mode("pool", env_path)
        machines = run_mode("machines", env_path)
    ideal = math.ceil(N / P) * t_machine
    print(f"\nFleet onboarding, N={N}, batch_max_parallel={P}, MAAS time scale {MAAS_SCALE}")
    print(f"  per-machine lifecycle time (one machine alone): {t_machine:.2f} s")
    print(f"  CLI fixed overhead (empty up):                   {empty:.2f} s")
    print(f"  ideal = ceil(N/P) x per-machine time:            {ideal:.2f} s")
    print(f"  {'':22} {'wall s':>8} {'eff':>6} {'eff-ovh':>8} {'req/machine':>12} {'peak':>5} {'deployed':>9}")
    for name, r in (("one MachinePool", pool), (f"{N} MaasMachine", machines)):
        eff = ideal / r["wall"]
        eff_net = ideal / max(r["wall"] - empty, 1e-9)
        print(
            f"  {name:22} {r['wall']:8.2f} {eff:6.2f} {eff_net:8.2f} {r['requests'] / N:12.1f} "
            f"{r['peak']:5d} {r['deployed']:9d}"
        )
    print(
        f"  pool vs machines: {machines['wall'] / pool['wall']:.1f}x faster, "
        f"{machines['requests'] / max(pool['requests'], 1):.1f}x fewer MAAS requests"
    )
    print(
        f"  unfiltered power-address lookups: pool {pool['unfiltered_power_lookups']}, "
        f"machines {machines['unfiltered_power_lookups']} (one per run/resource, only for new machines)"
    )
    prod = preview_prod()
    print(f"  preview of the prod stack: {prod:.2f} s")
    ok = ideal / pool["wall"] >= 0.85 and pool["requests"] / N <= 30 and pool["peak"] <= P
    print(f"\ntargets (pool efficiency >= 0.85, <= 30 requests/machine, peak <= {P}): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
