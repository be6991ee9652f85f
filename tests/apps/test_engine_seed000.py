"""Seed 000's app types run by the real Pulumi CLI, the SDK's provider server and the platform simulator,
on the local environment reduced to its hosts (the platform places every member):

- RKE2: create, scale, a failed agent join (code, message, correlation id; the next up redoes only it, as
  a replace), upgrade, destroy (agents drained, then the server) — exactly these member operations in the
  audit log;
- vLLM + OpenClaw: OpenClaw is created only after vLLM's endpoint exists (it depends on vLLM's outputs),
  and is reconfigured in place when the endpoint changes (vLLM replaced).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.platform import models as m
from simulators.localstack import LocalStack
from simulators.platform import FaultPlan, OperationFailure
from tests.fixtures.preview import planned

from .conftest import REPO, edit
from .test_engine import ok

PID = "project-10ca1000000000a1"
RUNTIME = {"operating_mode": "tenant_dedicated", "control_plane_scope": "project",
           "tenant_boundary_mode": "dedicated_nodes"}
TOKEN = "local/platform/sa-proj-lab#token"
RKE2 = {"name": "rke2-local", "project_id": PID, "app": {"slug": "rke2", "version": "v1.30.4+rke2r1"},
        "runtime": {**RUNTIME, "runtime_backend": "kubernetes"}, "service_account_token_path": TOKEN,
        "members": {"server": {"count": 1}, "agent": {"count": 1}}}
VLLM = {"name": "vllm-chat", "project_id": PID, "app": {"slug": "vllm", "version": "0.6.3"},
        "runtime": {**RUNTIME, "runtime_backend": "allocation"}, "service_account_token_path": TOKEN,
        "members": {"serve": {"count": 1, "allocation": {"capacity_shape": "gpu_slice", "gpu_count": 4}}}}
OPENCLAW = {"name": "openclaw", "project_id": PID, "app": {"slug": "openclaw", "version": "2026.1.5"},
            "runtime": {**RUNTIME, "runtime_backend": "allocation"}, "service_account_token_path": TOKEN,
            "members": {"gateway": {"count": 1, "allocation": {"capacity_shape": "gpu_slice", "gpu_count": 1}}},
            "inputs": {"llm_endpoint": {"instance": "vllm-chat", "endpoint": "openai"}}}


class Run:
    def __init__(self, stack: LocalStack, engine: Any) -> None:
        assert stack.platform is not None
        self.sim, self.engine = stack.platform, engine

    def member_ops(self, name: str) -> list[tuple[str, str]]:
        """(kind, component key) of the accepted member operations of instance `name`, from the audit log."""
        ops = {o.idempotency_key: o for o in self.sim.operations()}
        key = {x.member_id: x.component_key for x in self.sim.store.members.values()}
        names = {i.instance_id: i.name for i in self.sim.store.instances.values()}
        out = []
        for e in self.sim.audit():
            op = ops.get(e.idempotency_key)
            if e.action == "member.operation" and e.outcome == "accepted" and op and names[op.instance_id] == name:
                out.append((op.kind.value, key.get(op.member_id or "", "?")))
        return out

    def live(self, name: str) -> m.AppInstance:
        return next(i for i in self.sim.store.instances.values()
                    if i.name == name and i.status is not m.InstanceStatus.DECOMMISSIONED)


def _declare(*instances: dict[str, Any]) -> Any:
    def fn(doc: dict[str, Any]) -> None:
        doc["app_instances"] = [dict(i) for i in instances]
    return fn


@pytest.fixture
def run(engine_factory: Any, tmp_path: Path, bare_env_file: Path) -> Iterator[Run]:
    with LocalStack("local") as stack:
        cfg = stack.stack_config()
        cfg["gpuaas-infra:environment"] = str(bare_env_file)
        yield Run(stack, engine_factory(REPO, "local", config=cfg, backend=tmp_path / "backend"))


def test_rke2_through_the_engine(run: Run, bare_env_file: Path) -> None:
    edit(bare_env_file, _declare(RKE2))
    ok(run.engine.up())
    assert run.live("rke2-local").status is m.InstanceStatus.READY and run.member_ops("rke2-local") == []

    run.sim.inject(FaultPlan(operation_failures=[OperationFailure(
        kind=m.OperationKind.MEMBER_ADD, component_key="agent", at_step=1, code="rke2_agent_join_failed",
        message="agent could not reach the server's supervisor port 9345")]))
    edit(bare_env_file, _declare({**RKE2, "members": {**RKE2["members"], "agent": {"count": 3}}}))
    failed = run.engine.up()
    assert not failed.ok
    bad = next(o for o in run.sim.operations() if o.status is m.OperationStatus.FAILED)
    error = "\n".join(failed.errors())
    assert "rke2-local" in error and "rke2_agent_join_failed: agent could not reach" in error
    assert f"correlation_id={bad.correlation_id}" in error and "run up again" in error
    ok(run.engine.up())
    assert run.member_ops("rke2-local") == [("member_add", "agent")] * 2 + [("member_replace", "agent")], \
        "the next up redoes only the failed join"

    edit(bare_env_file, _declare({**RKE2, "members": {**RKE2["members"], "agent": {"count": 2}}}))
    ok(run.engine.up())
    assert run.member_ops("rke2-local")[3:] == [("member_drain", "agent"), ("member_remove", "agent")]

    edit(bare_env_file, _declare({**RKE2, "app": {"slug": "rke2", "version": "v1.31.1+rke2r1"},
                                  "members": {**RKE2["members"], "agent": {"count": 2}}}))
    ok(run.engine.up())
    assert run.live("rke2-local").app_version == "v1.31.1+rke2r1" and len(run.member_ops("rke2-local")) == 5

    ok(run.engine.destroy())
    assert run.member_ops("rke2-local")[5:] == [("member_drain", "agent")] * 2 + [("member_drain", "server")]
    assert not [i for i in run.sim.store.instances.values() if i.status is not m.InstanceStatus.DECOMMISSIONED]


def test_openclaw_follows_the_vllm_endpoint(run: Run, bare_env_file: Path) -> None:
    edit(bare_env_file, _declare(OPENCLAW, VLLM))  # declared consumer first: the component orders them
    preview = ok(run.engine.preview())
    step = planned(preview, "gpuaas:AppInstance::app-openclaw")
    assert step["op"] == "create"
    assert any(d.endswith("gpuaas:AppInstance::app-vllm-chat") for d in step["newState"]["dependencies"])

    up = ok(run.engine.up())
    vllm, claw = run.live("vllm-chat"), run.live("openclaw")
    creates = [o for o in run.sim.operations() if o.kind is m.OperationKind.INSTANCE_CREATE]
    assert [o.instance_id for o in creates] == [vllm.instance_id, claw.instance_id]
    assert creates[1].created_at >= creates[0].finished_at, "OpenClaw created only after vLLM's endpoint exists"
    url = vllm.endpoints[0].url
    assert claw.config["llm_endpoint"] == url and up.outputs["app_instances"]["vllm-chat"]["endpoints"] == {
        "openai": url}
    assert claw.components[0].allocation is not None and claw.components[0].allocation.gpu_count == 1

    # vLLM replaced (its runtime metadata changed): a new endpoint, and OpenClaw follows it in place
    edit(bare_env_file, _declare(OPENCLAW, {**VLLM, "runtime": {**VLLM["runtime"],
                                                                "operating_mode": "platform_managed"}}))
    preview = ok(run.engine.preview())
    ops = {s.urn.rsplit("::", 1)[-1]: s.op.value for s in preview.steps if "AppInstance" in s.urn}
    assert ops["app-vllm-chat"] in ("replace", "delete-replaced", "create-replacement")
    assert ops["app-openclaw"] == "update"
    ok(run.engine.up())
    new_url = run.live("vllm-chat").endpoints[0].url
    assert new_url != url and run.live("openclaw").instance_id == claw.instance_id
    assert run.live("openclaw").config["llm_endpoint"] == new_url
    assert run.member_ops("openclaw") == [], "a reconfiguration, no member operation"
    assert run.engine.preview(expect_no_changes=True).ok
