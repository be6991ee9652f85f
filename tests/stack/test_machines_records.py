"""Machine state through the real Pulumi CLI: a pool update keeps the records of the machines it did
not touch (issue 14 bug 1), power inputs change in place for real (issue 14), and the next preview
after each is clean."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.maas import MaasClient
from simulators.localstack import LocalStack
from tests.stack.test_machines_engine import (
    edit,
    engine_for,
    maas_machines,
    machine_ops,
    pool_records_of,
    state_resources,
)

REPO = Path(__file__).resolve().parents[2]
POOL = ("local-gpu-2", "local-gpu-3", "local-gpu-4")
KEPT = ("system_id", "status", "outcome", "node_id", "stage", "deploy_fingerprint")


@pytest.fixture
def world() -> Iterator[LocalStack]:
    with LocalStack("local") as w:
        yield w


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    path = tmp_path / "local.yaml"
    path.write_text((REPO / "environments" / "local.yaml").read_text())
    return path


def _outputs(engine: Any, kind: str) -> dict[str, Any]:
    (res,) = state_resources(engine, kind)
    return dict(res["outputs"])


def _pool_records(engine: Any) -> dict[str, dict[str, Any]]:
    (res,) = state_resources(engine, "MachinePool")
    return {h: {k: r.get(k) for k in KEPT} for h, r in pool_records_of(res).items()}


def test_pool_update_keeps_untouched_records_and_the_next_preview_is_clean(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path
) -> None:
    engine = engine_for(engine_factory, world, tmp_path, env_file)
    assert engine.up().ok
    first = _pool_records(engine)
    assert {r["outcome"] for r in first.values()} == {"ready"} and all(r["node_id"] for r in first.values())
    state = _outputs(engine, "MachinePool")["machines_state"]
    assert all(isinstance(r, str) for r in state.values()), "each record is one JSON string (MachineRecord.wire)"
    records = {h: json.loads(r) for h, r in state.items()}
    assert not any({"notes", "stage_seconds"} & set(r) for r in records.values()), "notes and timings are not state"

    # State the version before wrote (each record a mapping): a no-op up hands the program those outputs as they
    # are (a `same` step), changes nothing, and the stack outputs read the same.
    outputs = engine.up().outputs
    exported = engine.export()
    for res in exported["deployment"]["resources"]:
        if res["type"].endswith("gpuaas:MachinePool"):
            res["outputs"]["machines_state"] = records
    engine.import_(exported)
    older = engine.up(expect_no_changes=True)
    assert older.ok and set(machine_ops(older).values()) == {"same"}, older.errors()
    assert older.outputs == outputs
    assert _outputs(engine, "MachinePool")["machines_state"] == records, "a same step keeps what state held"

    # Repair one: released by hand, found by refresh, redeployed by up.
    assert world.maas is not None
    MaasClient(world.maas.url, world.maas.api_key).release(
        first["local-gpu-2"]["system_id"], erase=False, secure_erase=False, quick_erase=False, force=False
    )
    assert engine.refresh().ok
    assert _pool_records(engine)["local-gpu-2"]["outcome"] == "drifted"
    assert machine_ops(engine.preview()).get("pool-local-h200") == "update"
    assert engine.up().ok
    repaired = _pool_records(engine)
    assert repaired["local-gpu-2"]["outcome"] == "ready" and repaired["local-gpu-2"]["status"] == "Deployed"
    for h in ("local-gpu-3", "local-gpu-4"):
        assert repaired[h] == first[h], f"{h} was not touched: its record must not change"
    assert set(machine_ops(engine.preview()).values()) == {"same"}

    # Redeploy one (a deploy input of local-gpu-3 only): the other two keep their records.
    def change(doc: dict[str, Any]) -> None:
        for m in doc["machines"]:
            if m["hostname"] == "local-gpu-3":
                m["hwe_kernel"] = "ga-22.04"

    edit(env_file, change)
    assert engine.up().ok
    after = _pool_records(engine)
    assert after["local-gpu-3"]["deploy_fingerprint"] != repaired["local-gpu-3"]["deploy_fingerprint"]
    for h in ("local-gpu-2", "local-gpu-4"):
        assert after[h] == repaired[h], f"{h} was not touched: its record must not change"
    assert set(machine_ops(engine.preview()).values()) == {"same"}
    assert {maas_machines(world)[h]["status_name"] for h in POOL} == {"Deployed"}


def test_power_inputs_change_in_place_for_real(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path
) -> None:
    engine = engine_for(engine_factory, world, tmp_path, env_file)
    assert engine.up().ok
    assert world.maas is not None
    sid = maas_machines(world)["local-gpu-1"]["system_id"]
    deploys = sum("-> Deploying" in e["description"] for e in world.maas.admin.events(sid))

    def change(doc: dict[str, Any]) -> None:
        for m in doc["machines"]:
            if m["hostname"] == "local-gpu-1":
                m["ipmi_address"] = "172.16.20.111"

    edit(env_file, change)
    assert machine_ops(engine.preview()) == {"machine-local-gpu-1": "update", "pool-local-h200": "same"}
    assert engine.up().ok
    params = MaasClient(world.maas.url, world.maas.api_key)._call("Machines", "power_parameters", read=True)
    assert params[sid]["power_address"] == "172.16.20.111", "up must change MAAS, not only state"
    assert sum("-> Deploying" in e["description"] for e in world.maas.admin.events(sid)) == deploys, "no redeploy"
    assert set(machine_ops(engine.preview()).values()) == {"same"}
