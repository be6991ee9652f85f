"""A pool's machines as one JSON string per hostname (issue 18) read exactly as the list they replace:
old state in either shape, specs compared by meaning, a spec known only after apply still named."""

from __future__ import annotations

import json
from typing import Any

from environments import load_environment
from preview_note import StackPreview, parse_preview, render_note
from preview_note.values import UNKNOWN_SENTINEL
from providers.machines.resource_io import wire_machines
from simulators.localstack import machine_specs

URN = "urn:pulumi:dev::gpuaas-infra::gpuaas:index:SiteMachines$pulumi-python:dynamic/gpuaas:MachinePool::pool-a"


def _state(machines: Any, records: dict[str, Any]) -> dict[str, Any]:
    inputs = {"pool": "a", "machines": machines}
    return {"urn": URN, "custom": True, "type": "pulumi-python:dynamic/gpuaas:MachinePool", "id": "pool-local-a",
            "inputs": inputs, "outputs": {"pool": "a", "machines_state": records}}


def _note(old: Any, new: Any, records: dict[str, Any]) -> str:
    step = {"op": "update", "urn": URN, "oldState": _state(old, records), "newState": _state(new, {})}
    digest = parse_preview(json.dumps({"config": {"gpuaas-infra:environment": "dev"}, "steps": [step]}), "t")
    return render_note([StackPreview(stack="dev", digest=digest)])


def test_pool_note_from_one_leaf_specs_and_old_list_state() -> None:
    specs = machine_specs(load_environment("local"))  # local-gpu-1..4, plain dicts with defaults written
    hosts = sorted(specs)
    records = {h: {"system_id": f"sid-{h[-1]}", "status": "Deployed"} for h in hosts}
    old_list = [specs[h] for h in hosts]  # inputs as state held them before the one-leaf form
    redeployed = {**specs[hosts[1]], "deploy": {**specs[hosts[1]]["deploy"], "bundle_digest": "f" * 64}}
    retagged = {**specs[hosts[2]], "tags": ["h200", "moved"]}
    new = wire_machines([specs[hosts[0]], redeployed, retagged])
    new[hosts[3]] = UNKNOWN_SENTINEL  # e.g. its RoCE addresses come from a resource still to update
    new["local-gpu-9"] = wire_machines([{**specs[hosts[0]], "hostname": "local-gpu-9",
                                        "pxe_mac": "b0:7b:25:20:00:99"}])["local-gpu-9"]
    for old in (old_list, wire_machines(old_list)):
        note = _note(old, new, records)
        assert "  - joins (1): `local-gpu-9`" in note, note
        assert (f"  - redeploys (1, data disks erased (quick erase); rolling, at most 8 at once): `{hosts[1]}` "
                "(deploy.bundle_digest changed)") in note, note
        assert f"  - updated in place (1): `{hosts[2]}` (tags)" in note, note
        assert f"  - spec known after apply, may redeploy (1): `{hosts[3]}`" in note, note
        assert "unchanged machines: 1" in note, note  # defaults written out (old list) are not a change
        assert "leaves" not in note, note
    gone = {h: v for h, v in wire_machines(old_list).items() if h != hosts[0]}
    assert f"  - leaves (1): `{hosts[0]}` (sid-1)" in _note(old_list, gone, records)
