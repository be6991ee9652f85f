"""MachinePool updates are planned per machine from old state and new inputs (pure)."""

from __future__ import annotations

from environments import load_environment
from providers.machine_pool import pool_plan
from providers.machines.resource_io import PoolInputs, wire_machines
from providers.machines.spec import MachineSpec
from simulators.localstack import machine_specs


def _inputs(specs: list[dict]) -> PoolInputs:
    conn = {"maas": {"site": "local", "maas_url": "http://127.0.0.1:1/MAAS/", "api_key_path": "a/b#k"},
            "platform": {"url": "http://127.0.0.1:2", "token_path": "a/p#t"},
            "vault": {"address": "http://127.0.0.1:3"}, "platform_site_id": "site-1", "platform_profile_id": "p-1"}
    return PoolInputs.model_validate({"pool": "local-h200", "machines": wire_machines(specs), "connection": conn,
                                      "policy": {}})


def test_join_redeploy_repair_stay_leave() -> None:
    env = load_environment("local")
    specs = machine_specs(env)

    def state(h: str, **kw: str) -> dict:
        return {"system_id": f"sid-{h}", "status": "Deployed", "outcome": "ready",
                "deploy_fingerprint": MachineSpec.model_validate(specs[h]).deploy_fingerprint(), **kw}

    old = {"local-gpu-2": state("local-gpu-2"), "local-gpu-3": state("local-gpu-3"),
           "local-gpu-4": state("local-gpu-4", status="Ready", outcome="drifted"),
           "gone-1": state("local-gpu-2")}
    changed = {**specs["local-gpu-3"], "deploy": {**specs["local-gpu-3"]["deploy"], "bundle_digest": "f" * 64}}
    new = _inputs([specs["local-gpu-1"], specs["local-gpu-2"], changed, specs["local-gpu-4"]])
    plan = pool_plan(old, new)
    assert plan == {"join": ["local-gpu-1"], "redeploy": ["local-gpu-3"], "repair": ["local-gpu-4"],
                    "stay": ["local-gpu-2"], "leave": ["gone-1"]}
