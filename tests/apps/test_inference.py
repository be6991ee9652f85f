"""vLLM + OpenClaw composed on separate allocations (seed 000 §6), through the reconciler against the
platform simulator: vLLM's lifecycle with exactly the expected member operations, its published endpoint
consumed by OpenClaw as config (reconfigured in place when it changes), and allocation shapes: a 4-GPU
slice, a 1-GPU slice, and CPU-only refused where the platform offers none."""

from __future__ import annotations

from typing import Any

import pytest

from clients.platform import PlatformApiError
from clients.platform import models as m
from environments.coded import CodedError
from providers.apps.reconciler import InstanceOut
from providers.apps.spec import AppInstanceSpec, rule_failures

from .conftest import Lab

SLICE4 = {"capacity_shape": "gpu_slice", "gpu_count": 4}
SLICE1 = {"capacity_shape": "gpu_slice", "gpu_count": 1}
CPU_ONLY = {"capacity_shape": "gpu_slice", "gpu_count": 0, "cpu_only": True}
REF = {"llm_endpoint": {"instance": "vllm-chat", "endpoint": "openai"}, "assistant_name": "claw"}


def vllm(lab: Lab, count: int = 1, nodes: tuple[str, ...] = (), version: str = "0.6.3") -> AppInstanceSpec:
    return lab.app_spec("vllm", {"serve": {"count": count, "nodes": list(nodes), "allocation": SLICE4}},
                        name="vllm-chat", version=version, backend="allocation")


def openclaw(lab: Lab, endpoint: str | None, allocation: dict[str, Any] = SLICE1, **extra: Any) -> AppInstanceSpec:
    return lab.app_spec("openclaw", {"gateway": {"count": 1, "allocation": allocation}}, name="openclaw",
                        version="2026.1.5", backend="allocation", inputs=REF,
                        input_endpoints={"llm_endpoint": endpoint}, **extra)


def hosts(out: InstanceOut) -> dict[str, str | None]:
    return {x.member_id: x.host for x in out.members}


def test_vllm_lifecycle_with_exact_member_operations(lab: Lab) -> None:
    out = lab.rec(vllm(lab)).converge()
    assert out.status is m.InstanceStatus.READY and set(out.endpoints) == {"openai"}
    inst = lab.api.get_instance(lab.pid, out.instance_id)
    assert inst.components[0].allocation == m.Allocation(capacity_shape=m.CapacityShape.GPU_SLICE, gpu_count=4)

    up = lab.rec(vllm(lab, count=2)).converge(out.instance_id, hosts(out))
    assert [k for k, _ in lab.member_ops()] == ["member_add"]
    moved = lab.rec(vllm(lab, count=2, nodes=("gpu-2",))).converge(up.instance_id, hosts(up))
    assert [k for k, _ in lab.member_ops()][1:] == ["member_replace"]
    down = lab.rec(vllm(lab, count=1, nodes=("gpu-2",))).converge(moved.instance_id, hosts(moved))
    assert [k for k, _ in lab.member_ops()][2:] == ["member_drain", "member_remove"]
    upgraded = lab.rec(vllm(lab, count=1, nodes=("gpu-2",), version="0.7.0")).converge(
        down.instance_id, hosts(down))
    assert upgraded.app_version == "0.7.0" and len(lab.member_ops()) == 4
    assert upgraded.endpoints == out.endpoints, "an upgrade keeps the endpoint"
    lab.rec(vllm(lab, count=1, nodes=("gpu-2",), version="0.7.0")).release(upgraded.instance_id)
    assert [k for k, _ in lab.member_ops()][4:] == ["member_drain"]
    assert lab.api.get_instance(lab.pid, out.instance_id).endpoints == [], "a decommissioned instance publishes nothing"


def test_openclaw_consumes_the_vllm_endpoint_and_follows_its_change(lab: Lab) -> None:
    with pytest.raises(CodedError, match=r"^AIN005 app instance openclaw \(project \S+\): input 'llm_endpoint' needs "
                       "endpoint 'openai' of instance 'vllm-chat'"):
        lab.rec(openclaw(lab, None)).converge()
    assert not [i for i in lab.sim.store.instances.values() if i.name == "openclaw"], "never created without it"

    first = lab.rec(vllm(lab)).converge()
    url = first.endpoints["openai"]
    claw = lab.rec(openclaw(lab, url)).converge()
    inst = lab.api.get_instance(lab.pid, claw.instance_id)
    assert inst.config["llm_endpoint"] == url and inst.config["assistant_name"] == "claw"
    assert inst.components[0].allocation is not None and inst.components[0].allocation.gpu_count == 1

    # vLLM replaced (a new instance): a new endpoint; OpenClaw is reconfigured in place, no member operation
    lab.rec(vllm(lab)).release(first.instance_id)
    second = lab.rec(vllm(lab)).converge()
    assert second.endpoints["openai"] != url
    ops = len(lab.member_ops())
    again = lab.rec(openclaw(lab, second.endpoints["openai"])).converge(claw.instance_id, hosts(claw))
    assert again.instance_id == claw.instance_id and len(lab.member_ops()) == ops
    assert lab.api.get_instance(lab.pid, claw.instance_id).config["llm_endpoint"] == second.endpoints["openai"]
    upgrades = [o for o in lab.sim.operations() if o.instance_id == claw.instance_id
                and o.kind is m.OperationKind.INSTANCE_UPGRADE]
    assert len(upgrades) == 1 and upgrades[0].status is m.OperationStatus.SUCCEEDED
    lab.rec(openclaw(lab, second.endpoints["openai"])).converge(claw.instance_id, hosts(claw))
    assert len([o for o in lab.sim.operations() if o.kind is m.OperationKind.INSTANCE_UPGRADE]) == 1, "same: no-op"


def test_cpu_only_where_the_platform_offers_none(lab: Lab) -> None:
    spec = openclaw(lab, "https://x/v1", allocation=CPU_ONLY)
    messages = [msg for _, msg in rule_failures(spec)]
    assert any(msg.startswith("ALLOC002") and "use a 1-GPU slice" in msg for msg in messages), messages
    assert not rule_failures(openclaw(lab, "https://x/v1", allocation=CPU_ONLY, cpu_only_offered=True))
    body = m.AppInstanceCreate(name="openclaw", app_type=m.AppType.OPENCLAW, app_version="2026.1.5", components=[
        m.ComponentSpec(component_key="gateway", count=1, allocation=m.Allocation(gpu_count=0, cpu_only=True))])
    with pytest.raises(PlatformApiError) as refused:
        lab.api.create_instance(lab.pid, body)
    assert refused.value.code == "allocation_shape_unsupported" and "1-GPU slice" in refused.value.message
    lab.sim.store.cpu_only_allocations = True
    op = lab.api.create_instance(lab.pid, body)
    assert lab.api.wait_for_operation(lab.pid, op.operation_id, timeout_s=10).status is m.OperationStatus.SUCCEEDED


@pytest.mark.parametrize(("allocation", "code"), [
    ({"capacity_shape": "gpu_slice", "gpu_count": 3}, "ALLOC001"),
    ({"capacity_shape": "whole_node", "gpu_count": 4}, "ALLOC001"),
    ({"capacity_shape": "gpu_slice", "gpu_count": 2, "cpu_only": True}, "ALLOC001"),
])
def test_check_refuses_bad_allocation_shapes(lab: Lab, allocation: dict[str, Any], code: str) -> None:
    messages = [msg for _, msg in rule_failures(openclaw(lab, "https://x/v1", allocation=allocation))]
    assert any(msg.startswith(code) for msg in messages), messages
