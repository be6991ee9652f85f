"""components/stack.py's pipeline with Pulumi's mocks: every kind gets its typed spec, one Vault input shape for
every area, and the stack settings flow to the resources that use them."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components.settings import StackSettings, vault_inputs
from environments import load_environment


class Recorder(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        outs = dict(args.inputs) | STAND_INS.get(_kind(args), {})
        return f"{args.name}-id", outs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


# What the providers would return (the mocks only echo inputs).
STAND_INS: dict[str, dict[str, Any]] = {
    "BootstrapBundle": {"ref": {"bucket": "b", "key": "k", "version_id": "v"}, "url": "s3://b/k", "digest": "0" * 64},
    "SiteProfile": {"site_id": "site-1", "profile_id": "prof-1", "commissioning_scripts": []},
    "RoceAssignment": {"table": {}},
    "MaasMachine": {"node_id": "node-1"},
    "MachinePool": {"machines_state": {}},
}


@pytest.fixture
def recorder() -> Recorder:
    rec = Recorder()
    pulumi.runtime.set_mocks(rec, project="gpuaas-infra", stack="staging", preview=False)
    return rec


def _kind(args: pulumi.runtime.MockResourceArgs) -> str:
    return args.typ.rsplit(":", 1)[-1]


@pulumi.runtime.test
def test_the_pipeline_declares_each_kind_with_one_vault_shape(recorder: Recorder) -> Any:
    from components.stack import declare_environment

    env = load_environment("staging")
    settings = StackSettings.from_config("staging", {"app_member_parallelism": "7", "hostRoles": "{}"})
    outputs = declare_environment(env, settings)
    assert outputs["areas"] == ["sites", "machines", "apps", "host_roles"]

    def check(_: Any) -> None:
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for r in recorder.resources:
            by_kind.setdefault(_kind(r), []).append(r.inputs)
        assert {"SiteProfile", "BootstrapBundle", "RoceAssignment"} <= set(by_kind), sorted(by_kind)
        vault = vault_inputs(env, settings).model_dump(mode="json", exclude_none=True)  # Pulumi drops None
        for kind in ("SiteProfile", "BootstrapBundle", "RoceAssignment", "AppInstance", "HostConvergence"):
            for inputs in by_kind.get(kind, []):
                assert inputs["vault"] == vault, kind
        assert by_kind["AppInstance"] and all(i["max_parallel"] == 7 for i in by_kind["AppInstance"])
        if env.hosts:
            (hc,) = by_kind["HostConvergence"]
            assert [h["hostname"] for h in hc["hosts"]] == [h.hostname for h in env.hosts]
            assert "address_overrides" not in hc and hc["environment"] == env.name

    # every area's outputs resolved: every resource has been registered with the mocks by then
    return pulumi.Output.from_input({k: outputs[k] for k in ("sites", "machines", "app_instances", "host_roles")
                                     }).apply(check)
