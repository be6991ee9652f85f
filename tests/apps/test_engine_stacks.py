"""The real project's previews: dev declares its Slurm instance (controller on the app_control host,
the worker bound to the node the dev-gpu-1 machine will enroll as), and a controller placed on a
worker_compute host is refused by validation before anything runs (seed 003, ROLE002)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from providers.kind import UNKNOWN
from tests.fixtures.preview import planned

from .conftest import REPO, edit


def test_dev_previews_its_rke2_instance_bound_to_its_machine(engine_factory: Any, tmp_path: Path) -> None:
    """Seed 000 §1: dev's RKE2 agent on the GPU worker; its server is allocated by the platform (the app_control
    host is no platform node: APP011), and so are Slurm's members (a node serves one member of one instance)."""
    engine = engine_factory(REPO, "dev", config={"gpuaas-infra:environment": "dev"}, backend=tmp_path / "backend")
    preview = engine.preview(timeout=300)
    assert preview.ok, preview.errors()
    step = planned(preview, "gpuaas:AppInstance::app-rke2-lab")
    assert step["op"] == "create"
    state = step["newState"]
    inputs = state["inputs"]
    assert inputs["topology"] == {"dev-gpu-1": "worker_compute"}
    assert not inputs["instance"]["members"]["server"].get("nodes")
    # the server is placed by the platform (no node named); the agent waits for the machine's node id
    assert inputs["placements"]["server"] == [] and inputs["placements"]["agent"] == UNKNOWN
    assert any(d.endswith("gpuaas:MaasMachine::machine-dev-gpu-1") for d in state["dependencies"])
    slurm = planned(preview, "gpuaas:AppInstance::app-slurm-lab")
    assert slurm["op"] == "create" and slurm["newState"]["inputs"]["placements"] == {
        "controller": [], "worker": []}

def test_a_controller_on_a_worker_compute_host_is_refused(engine_factory: Any, tmp_path: Path,
                                                          env_file: Path) -> None:
    def misplace(doc: dict[str, Any]) -> None:
        doc["app_instances"][0]["members"]["controller"]["nodes"] = ["local-gpu-1"]
    edit(env_file, misplace)
    engine = engine_factory(REPO, "local", config={"gpuaas-infra:environment": str(env_file)},
                            backend=tmp_path / "backend")
    preview = engine.preview(timeout=300)
    assert not preview.ok
    text = "\n".join(preview.errors()) + preview.log
    assert "ROLE002" in text and "app_instances[0].members.controller.nodes[0]" in text
    assert not [s for s in preview.steps if "AppInstance" in s.urn]
