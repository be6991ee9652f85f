"""Which kills the SIGKILL tests stage (tests/convergence/kill.py `stages`), on the step lists of a first up and a
redeploy of the `local` stack as the clean runs start them."""

from __future__ import annotations

from typing import Any

from tests.convergence.kill import stages, step_name

DYN = "pulumi-python:dynamic/gpuaas:"


def _step(op: str, kind: str, name: str) -> dict[str, Any]:
    return {"op": op, "type": kind, "urn": f"urn:pulumi:local::gpuaas-infra::{kind}::{name}"}


HEAD = [("pulumi:pulumi:Stack", "gpuaas-infra-local"), ("gpuaas:index:Site", "local"),
        ("gpuaas:index:SiteMachines", "local"), ("gpuaas:index:ProjectApps", "project-1"),
        ("pulumi:providers:pulumi-python", "default")]
CUSTOM = [("RoceAssignment", "roce-local"), ("BootstrapBundle", "bundle-local-h200"),
          ("SiteProfile", "profile-local-h200-lab"), ("MaasMachine", "machine-local-gpu-1"),
          ("MachinePool", "pool-local-h200"), ("AppInstance", "app-slurm-local")]


def _labels(steps: list[dict[str, Any]]) -> list[str]:
    return ["preview" if n is None and step is None else f"after {n}" if step is None else f"during {step_name(step)}"
            for n, step in stages(steps)]


def test_a_first_up_is_killed_after_the_first_step_the_last_before_the_customs_and_at_and_during_every_create() -> None:
    steps = [_step("create", kind, name) for kind, name in HEAD] + [
        _step("create", DYN + kind, name) for kind, name in CUSTOM]
    labels = _labels(steps)
    assert labels == ["preview", "after 1", "after 5"] + [
        label for n, (_, name) in enumerate(CUSTOM, 6) for label in (f"after {n}", f"during create {name}")]


def test_a_redeploy_is_killed_around_its_one_update_only() -> None:
    sames = [_step("same", kind, name) for kind, name in HEAD] + [
        _step("same", DYN + kind, name) for kind, name in CUSTOM[:3]]
    steps = sames + [_step("update", DYN + "MaasMachine", "machine-local-gpu-1"),
                     _step("same", DYN + "MachinePool", "pool-local-h200"),
                     _step("same", DYN + "AppInstance", "app-slurm-local")]
    assert _labels(steps) == ["preview", "after 1", "after 8", "after 9", "during update machine-local-gpu-1",
                              "after 11"]


def test_a_delete_is_a_provider_call_and_a_component_delete_is_not() -> None:
    steps = [_step("same", "pulumi:pulumi:Stack", "s"), _step("delete", "gpuaas:index:Site", "old"),
             _step("delete", DYN + "MaasMachine", "machine-old")]
    assert _labels(steps) == ["preview", "after 1", "after 2", "after 3", "during delete machine-old"]
