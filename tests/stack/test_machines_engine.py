"""The local stack's machines run by the real Pulumi CLI (tools/pulumi_cli) and the SDK's dynamic-provider
server, against the embedded MAAS + platform simulators, OpenBao and S3 (simulators/localstack.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clients.maas import MaasClient
from preview_note import StackPreview, parse_preview, render_note
from providers.machines.plan import record_fields
from simulators.localstack import LocalStack

REPO = Path(__file__).resolve().parents[2]
MACHINES = ("local-gpu-1", "local-gpu-2", "local-gpu-3", "local-gpu-4")


@pytest.fixture
def world() -> Iterator[LocalStack]:
    with LocalStack("local") as w:
        yield w


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    path = tmp_path / "local.yaml"
    path.write_text((REPO / "environments" / "local.yaml").read_text())
    return path


def edit(path: Path, fn: Any) -> None:
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def engine_for(engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path) -> Any:
    cfg = world.stack_config()
    cfg["gpuaas-infra:environment"] = str(env_file)
    return engine_factory(REPO, "local", config=cfg, backend=tmp_path / "backend")


def machine_ops(result: Any) -> dict[str, str]:
    return {
        urn.rsplit("::", 1)[-1]: op.value
        for urn, op in result.ops().items()
        if "MaasMachine" in urn or "MachinePool" in urn
    }


def state_resources(engine: Any, kind: str) -> list[dict[str, Any]]:
    """The stack's resources of one kind (`MachinePool`, `MaasMachine`, ...), from `pulumi stack export`."""
    return [r for r in engine.resources().values() if r["type"].endswith(f"gpuaas:{kind}")]


def pool_records_of(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A MachinePool resource's records, hostname -> fields (state keeps each as one JSON string)."""
    return {h: dict(record_fields(r) or {}) for h, r in res["outputs"]["machines_state"].items()}


def maas_machines(world: LocalStack) -> dict[str, dict[str, Any]]:
    assert world.maas is not None
    return {m["hostname"]: m for m in world.maas.admin.machines()}


def deploy_counts(world: LocalStack) -> dict[str, int]:
    assert world.maas is not None
    return {
        h: sum(1 for e in world.maas.admin.events(m["system_id"]) if "-> Deploying" in e["description"])
        for h, m in maas_machines(world).items()
    }


def _note_names_the_redeploy(preview: Any) -> None:
    """The merge-request note from the real CLI's JSON shape: no detailedDiff or diffReasons for a dynamic
    provider, so the per-machine redeploy must come from the steps' own inputs."""
    digest = preview.preview_digest()
    pool_step = next(s for s in digest["steps"] if s["urn"].endswith("::pool-local-h200"))
    assert pool_step["detailedDiff"] is None and "diffReasons" not in pool_step
    note = render_note([StackPreview(stack="local", digest=parse_preview(json.dumps(digest), "engine preview"))])
    assert "`local-gpu-3`" in note and "redeploy" in note.lower(), note
    assert "`hwe_kernel`" in note or "hwe_kernel" in note, note


def test_up_same_redeploy_one_destroy(engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path) -> None:
    engine = engine_for(engine_factory, world, tmp_path, env_file)
    up = engine.up()
    assert up.ok, [d.message for d in up.diagnostics]
    machines = maas_machines(world)
    assert set(machines) == set(MACHINES) and {m["status_name"] for m in machines.values()} == {"Deployed"}
    assert world.platform is not None
    nodes = {n.hostname: n.status.value for n in world.platform.store.nodes.values()}
    assert {nodes[h] for h in MACHINES} == {"active"}

    again = engine.up()
    assert again.ok and set(machine_ops(again).values()) == {"same"}

    # One deploy input of one pool machine and of the standalone machine: exactly those redeploy.
    before = deploy_counts(world)

    def change(doc: dict[str, Any]) -> None:
        for m in doc["machines"]:
            if m["hostname"] in ("local-gpu-1", "local-gpu-3"):
                m["hwe_kernel"] = "ga-22.04"

    edit(env_file, change)
    preview = engine.preview()
    assert machine_ops(preview) == {"machine-local-gpu-1": "update", "pool-local-h200": "update"}
    _note_names_the_redeploy(preview)
    changed = engine.up()
    assert changed.ok, [d.message for d in changed.diagnostics]
    after = deploy_counts(world)
    assert {h for h in MACHINES if after[h] > before[h]} == {"local-gpu-1", "local-gpu-3"}
    assert {m["status_name"] for m in maas_machines(world).values()} == {"Deployed"}

    deployed = json.dumps(engine.export())
    assert '"ciphertext"' in deployed, "the deployment holds secrets, encrypted"
    assert not [s for s in world.secret_values() if s in deployed], "a secret value is in the stack's deployment"

    down = engine.destroy()
    assert down.ok, [d.message for d in down.diagnostics]
    machines = maas_machines(world)
    assert set(machines) == set(MACHINES), "destroy never deletes machines from MAAS"
    assert {m["status_name"] for m in machines.values()} == {"Ready"}

    # Every checkpoint the backend kept (the stack, its backups, its update history) and the stack's config.
    leaked = backend_leaks(tmp_path / "backend", world.secret_values())
    assert not leaked, f"a secret value is in the backend: {leaked}"


def backend_leaks(backend: Path, secrets: list[str]) -> list[str]:
    """Files of a file backend (checkpoints, backups, history, the stack's config) holding a secret value."""
    files = [p for p in backend.rglob("*") if p.is_file()]
    assert any("history" in p.parts for p in files) and any(p.name.startswith("Pulumi.") for p in files), files
    return [str(p.relative_to(backend)) for p in files if any(s in p.read_text(errors="replace") for s in secrets)]


def test_machine_released_by_hand_refresh_then_up(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path
) -> None:
    engine = engine_for(engine_factory, world, tmp_path, env_file)
    assert engine.up().ok
    assert world.maas is not None
    sid = maas_machines(world)["local-gpu-2"]["system_id"]
    MaasClient(world.maas.url, world.maas.api_key).release(
        sid, erase=False, secure_erase=False, quick_erase=False, force=False
    )
    refreshed = engine.refresh()
    assert refreshed.ok
    preview = engine.preview()
    assert machine_ops(preview).get("pool-local-h200") == "update", "refresh found the drift"
    fixed = engine.up()
    assert fixed.ok
    assert maas_machines(world)["local-gpu-2"]["status_name"] == "Deployed"


def test_provider_killed_mid_deploy_then_rerun(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path
) -> None:
    engine = engine_for(engine_factory, world, tmp_path, env_file)
    handle = engine.start_up()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(m["status_name"] == "Deploying" for m in maas_machines(world).values()):
            break
        time.sleep(0.02)
    else:
        pytest.fail("no machine reached Deploying")
    handle.kill()
    handle.wait(timeout=30)
    # What the operator runs (docs/recovery.md, "A run was killed"): the lock a killed run leaves
    # stays until `pulumi cancel`; pending creates stay until `refresh --clear-pending-creates`.
    # The CLI refuses before its engine starts, so the refusal is in its output, not an engine event.
    refused = engine.up()
    assert not refused.ok and "the stack is currently locked" in refused.log and "`pulumi cancel`" in refused.log
    assert "has been canceled" in engine.cancel()
    locks = tmp_path / "backend" / ".pulumi" / "locks"
    assert not [p for p in locks.rglob("*") if p.is_file()], "cancel removed the killed run's lock"
    cleared = engine.refresh(flags=["--clear-pending-creates"])
    assert cleared.ok, cleared.errors()
    rerun = engine.up()
    assert rerun.ok, [d.message for d in rerun.diagnostics]
    machines = maas_machines(world)
    assert sorted(machines) == sorted(MACHINES), "no duplicate machines after the killed run"
    assert {m["status_name"] for m in machines.values()} == {"Deployed"}
