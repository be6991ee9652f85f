"""Identity drift through the real Pulumi CLI (issue 14, machines item 1): a machine renamed in MAAS
by hand and a declared tag removed by hand are found by refresh, shown by preview, and repaired in
place by up (read back); a refresh right after a clean up finds nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clients.maas import MaasClient
from simulators.localstack import LocalStack
from tests.stack.test_machines_engine import (  # noqa: F401
    engine_for,
    env_file,
    maas_machines,
    machine_ops,
    pool_records_of,
    state_resources,
    world,
)


def _state(engine: Any) -> dict[str, dict[str, Any]]:
    """hostname -> record, for the MaasMachine and every pool machine (the stack's deployment)."""
    out: dict[str, dict[str, Any]] = {}
    for res in state_resources(engine, "MaasMachine"):
        out[res["outputs"]["machine"]["hostname"]] = res["outputs"]
    for res in state_resources(engine, "MachinePool"):
        out.update(pool_records_of(res))
    assert len(out) == 4, sorted(out)
    return out


def test_rename_and_removed_tag_are_drift_and_up_repairs_them(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path  # noqa: F811
) -> None:
    engine = engine_for(engine_factory, world, tmp_path, env_file)
    assert engine.up().ok
    assert world.maas is not None
    # A refresh right after a clean up reports no drift, and the next preview is clean.
    assert engine.refresh().ok
    clean = _state(engine)
    assert not any(r.get("drift") for r in clean.values()), {h: r.get("drift") for h, r in clean.items()}
    assert {r["outcome"] for r in clean.values()} == {"ready"}
    assert set(machine_ops(engine.preview()).values()) == {"same"}

    by_name = maas_machines(world)
    sid1, sid2 = by_name["local-gpu-1"]["system_id"], by_name["local-gpu-2"]["system_id"]
    maas = MaasClient(world.maas.url, world.maas.api_key)
    assert {"lab", "gpu"} <= set(maas.read_many([sid1])[0].tags)
    maas.set_hostname(sid2, "renamed-by-hand")
    maas.set_tags(sid1, [], remove=["gpu"])

    assert engine.refresh().ok
    drifted = _state(engine)
    assert drifted["local-gpu-2"]["outcome"] == "drifted"
    assert any("renamed-by-hand" in d for d in drifted["local-gpu-2"]["drift"])
    assert drifted["local-gpu-1"]["outcome"] == "drifted"
    assert any("gpu" in d and "tag" in d for d in drifted["local-gpu-1"]["drift"])
    assert machine_ops(engine.preview()) == {"machine-local-gpu-1": "update", "pool-local-h200": "update"}

    fixed = engine.up()
    assert fixed.ok, [d.message for d in fixed.diagnostics]
    now = {v.system_id: v for v in maas.read_many([sid1, sid2])}
    assert now[sid2].hostname == "local-gpu-2", "renamed back"
    assert {"lab", "gpu"} <= set(now[sid1].tags), "declared tag re-added"
    assert {m["status_name"] for m in maas_machines(world).values()} == {"Deployed"}, "repaired, not redeployed"

    assert engine.refresh().ok
    after = _state(engine)
    assert not any(r.get("drift") for r in after.values())
    assert set(machine_ops(engine.preview()).values()) == {"same"}
