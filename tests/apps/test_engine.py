"""The local stack's Slurm instance run by the real Pulumi CLI (tools/pulumi_cli) and the SDK's dynamic-provider
server, against the embedded MAAS + platform simulators, OpenBao and S3 (simulators/localstack.py).

The environment is a copy of `local` trimmed to two MAAS machines (local-gpu-1 standalone, local-gpu-2
in the pool), so the workers can move between enrolled nodes without deploying a fleet per test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.platform import models as m
from simulators.localstack import LocalStack
from simulators.platform import ErrorBurst, FaultPlan
from tests.fixtures.backend import state_text

from .conftest import REPO, edit, set_workers

APP = "slurm-local"
URN_TAIL = f"gpuaas:AppInstance::app-{APP}"


class World:
    def __init__(self, stack: LocalStack, engine: Any) -> None:
        self.stack, self.engine = stack, engine
        assert stack.platform is not None
        self.sim = stack.platform
        self.pid = stack.env.app_instances[0].project_id

    def app_op(self, result: Any) -> str | None:
        return next((op.value for urn, op in result.ops().items() if urn.endswith(URN_TAIL)), None)

    def member_ops(self) -> list[str]:
        """Kinds of the member operations the audit log records (joined to operations by idempotency key)."""
        by_key = {o.idempotency_key: o.kind.value for o in self.sim.operations()}
        return [by_key[e.idempotency_key] for e in self.sim.audit()
                if e.action == "member.operation" and e.outcome == "accepted"]

    def instance(self) -> m.AppInstance:
        return next(i for i in self.sim.store.instances.values()
                    if i.name == APP and i.status is not m.InstanceStatus.DECOMMISSIONED)

    def members(self) -> list[m.Member]:
        iid = self.instance().instance_id
        return [x for x in self.sim.store.members.values()
                if x.instance_id == iid and x.status is not m.MemberStatus.REMOVED]

    def node_of(self, hostname: str) -> str:
        return next(n.node_id for n in self.sim.store.nodes.values() if n.hostname == hostname)


@pytest.fixture
def world(engine_factory: Any, tmp_path: Path, env_file: Path) -> Iterator[World]:
    with LocalStack("local") as stack:
        cfg = stack.stack_config()
        cfg["gpuaas-infra:environment"] = str(env_file)
        yield World(stack, engine_factory(REPO, "local", config=cfg, backend=tmp_path / "backend"))


def ok(result: Any) -> Any:
    assert result.ok, result.errors() or result.log[-3000:]
    return result


def test_create_same_scale_rebind_upgrade_destroy(world: World, env_file: Path) -> None:
    engine = world.engine
    runs = [ok(engine.preview())]
    assert world.app_op(runs[0]) == "create", "preview passes check with node ids still unknown"
    apps = f"/api/v1/projects/{world.pid}/app-instances"
    # every response to the app lane's first two mutations is lost after the platform committed them
    world.sim.inject(FaultPlan(error_bursts=[ErrorBurst(status=503, count=2, path_prefix=apps, methods=["POST"],
                                                        after_commit=True)]))
    up = ok(engine.up())
    runs.append(up)
    assert world.app_op(up) == "create"
    assert world.sim.store.faults.plan.error_bursts == [], "the burst hit the create"
    assert [o.kind for o in world.sim.operations()] == [m.OperationKind.INSTANCE_CREATE], "one create"
    inst = world.instance()
    assert inst.status is m.InstanceStatus.READY and inst.app_version == "23.11.10"
    members = {x.component_key: x for x in world.members()}
    assert members["worker"].node and members["worker"].node.node_id == world.node_of("local-gpu-1"), \
        "the worker is bound to the node local-gpu-1 enrolled as"
    assert world.member_ops() == []
    out = up.outputs["app_instances"][APP]
    # the worker on the host it was declared on; the controller where the platform allocated it (no host named)
    assert out["status"] == "ready" and {x.get("host") for x in out["members"]} == {None, "local-gpu-1"}
    assert all(x["last_operation_status"] == "succeeded" and x["last_correlation_id"] for x in out["members"])

    assert world.app_op(ok(engine.up())) == "same"

    edit(env_file, set_workers(3, ["local-gpu-1"]))
    assert world.app_op(ok(engine.preview())) == "update"
    world.sim.inject(FaultPlan(error_bursts=[ErrorBurst(status=502, count=3, path_prefix=apps, methods=["POST"],
                                                        after_commit=True)]))
    runs.append(ok(engine.up()))
    assert world.sim.store.faults.plan.error_bursts == []
    assert world.member_ops() == ["member_add", "member_add"], "lost responses replayed, not repeated"

    edit(env_file, set_workers(2, ["local-gpu-1"]))
    ok(engine.up())
    assert world.member_ops()[2:] == ["member_drain", "member_remove"]
    assert len([x for x in world.members() if x.component_key == "worker"]) == 2

    edit(env_file, set_workers(2, ["local-gpu-2"]))
    ok(engine.up())
    assert world.member_ops()[4:] == ["member_replace"]
    nodes = {x.node.node_id for x in world.members() if x.component_key == "worker" and x.node}
    assert world.node_of("local-gpu-2") in nodes and world.node_of("local-gpu-1") not in nodes

    def upgrade(doc: dict[str, Any]) -> None:
        doc["app_instances"][0]["app"]["version"] = "24.05.1"
    edit(env_file, upgrade)
    up = ok(engine.up())
    assert world.app_op(up) == "update" and world.instance().app_version == "24.05.1"
    assert world.member_ops()[5:] == [] and world.instance().instance_id == inst.instance_id

    runs.append(ok(engine.destroy()))
    assert world.sim.store.instances[inst.instance_id].status is m.InstanceStatus.DECOMMISSIONED
    assert world.member_ops()[5:] == ["member_drain", "member_drain"]
    roles = {e.role for e in world.sim.audit() if e.project_id == world.pid}
    assert roles == {m.Role.SERVICE_ACCOUNT}, "the app lane is driven by the project's service account only"
    state = state_text(engine)
    secrets = world.stack.secret_values()
    assert secrets and not [s for s in secrets if s in state], "a secret value is in the stack's state"
    assert not [s for s in secrets for r in runs if s in r.log or s in str(r.outputs)], "a secret in a log"
