"""The demo's output after `up` of the local stack (the real Pulumi CLI, the SDK's provider server): the
pool's progress lines arrive on provider output in the stable form, and the tables match the stack's
deployment (`pulumi stack export`) row for row (machines, app members, bootstrap bundles)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.machines.progress import Progress, stage_times
from simulators.localstack import LocalStack
from tests.stack.test_machines_engine import pool_records_of
from tools.tables import bundle_rows, machine_rows, member_rows, render_outputs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def world() -> Iterator[LocalStack]:
    with LocalStack("local") as w:
        yield w


def _state(resources: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in resources if r["type"].endswith(f"gpuaas:{kind}")]


def test_progress_and_tables_match_the_state(engine_factory: Any, world: LocalStack, tmp_path: Path) -> None:
    engine = engine_factory(REPO, "local", config=world.stack_config(), backend=tmp_path / "backend")
    result = engine.up()
    assert result.ok, result.errors()
    log = result.log.splitlines()
    state = list(engine.resources().values())

    progress = [p for line in log if (p := Progress.parse(line.removeprefix("[provider] ")))]
    pool = [p for p in progress if p.label == "pool local-h200"]
    assert len(pool) >= 2 and pool[0].done == 0 and pool[-1].done == pool[-1].total == 3, progress

    (pool_res,) = _state(state, "MachinePool")
    (machine_res,) = _state(state, "MaasMachine")
    records = pool_records_of(pool_res)
    expected = {h: (r["system_id"], r["status"], r["node_id"]) for h, r in records.items()}
    expected[machine_res["outputs"]["machine"]["hostname"]] = (
        machine_res["outputs"]["system_id"], machine_res["outputs"]["status"], machine_res["outputs"]["node_id"])
    rows = machine_rows(result.outputs, stage_times(log))
    assert {r[0]: (r[2], r[3], r[5]) for r in rows} == expected
    assert all(r[3] == "Deployed" and r[5].startswith("node") and "await_deploy " in r[6] for r in rows), rows

    members = {(m["member_id"], m["status"], m["hostname"]) for res in _state(state, "AppInstance")
               for m in res["outputs"]["members"]}
    assert members and {(r[2], r[3], r[4]) for r in member_rows(result.outputs)} == members

    bundles = {(r["outputs"]["name"], r["outputs"]["url"]) for r in _state(state, "BootstrapBundle")}
    assert {(r[1], r[3]) for r in bundle_rows(result.outputs)} == bundles

    text = render_outputs(result.outputs, log)
    assert "machines (4)" in text and "{" not in text, text  # tables, not JSON
