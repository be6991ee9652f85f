"""RKE2 self-managed (seed 000 §1) through the reconciler against the platform simulator's RKE2 adapter:
the lifecycle with exactly the expected member operations, the adapter's runtime order (an agent joins
only once a server is ready; servers are drained last), a failed agent join, and the non-negotiable rule:
no app instance, member or operation carries node SSH credentials."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from clients.platform import PlatformApiError
from clients.platform import models as m
from clients.platform.contract import CONTRACT_PATH
from environments.rules_values import looks_like_ssh_material
from providers.apps.failures import AppInstanceFailed
from providers.apps.reconciler import InstanceOut
from providers.apps.spec import AppInstanceSpec, rule_failures
from simulators.platform import FaultPlan, OperationFailure

from .conftest import Lab


def rke2(lab: Lab, agents: int = 1, agent_nodes: tuple[str, ...] = ("gpu-1",), servers: int = 1,
         version: str = "v1.30.4+rke2r1", **extra: Any) -> AppInstanceSpec:
    return lab.app_spec("rke2", {"server": {"count": servers, "nodes": ["lab-1"][:servers]},
                                 "agent": {"count": agents, "nodes": list(agent_nodes)}},
                        version=version, **extra)


def ops(lab: Lab, since: int = 0) -> list[tuple[str, str]]:
    """(operation kind, component key) of every member operation the platform ran, in order."""
    key = {x.member_id: x.component_key for x in lab.sim.store.members.values()}
    return [(k, key.get(mid or "", "?")) for k, mid in lab.member_ops()[since:]]


def hosts(out: InstanceOut) -> dict[str, str | None]:
    return {x.member_id: x.host for x in out.members}


def test_create_scale_replace_upgrade_destroy(lab: Lab) -> None:
    out = lab.rec(rke2(lab)).converge()
    assert out.status is m.InstanceStatus.READY
    assert [(x.component_key, x.host, x.status) for x in out.members] == [
        ("agent", "gpu-1", m.MemberStatus.ACTIVE), ("server", "lab-1", m.MemberStatus.ACTIVE)]
    detail = {x.component_key: x.adapter_detail for x in lab.sim.store.members.values()}
    assert detail["server"]["service"] == "rke2-server" and detail["agent"]["node_state"] == "Ready"
    assert ops(lab) == []

    up3 = lab.rec(rke2(lab, agents=3)).converge(out.instance_id, hosts(out))
    assert ops(lab) == [("member_add", "agent")] * 2
    n = len(lab.member_ops())
    down2 = lab.rec(rke2(lab, agents=2)).converge(up3.instance_id, hosts(up3))
    assert ops(lab, n) == [("member_drain", "agent"), ("member_remove", "agent")]

    n = len(lab.member_ops())
    moved = lab.rec(rke2(lab, agents=2, agent_nodes=("gpu-2",))).converge(down2.instance_id, hosts(down2))
    assert ops(lab, n) == [("member_replace", "agent")], "a member replaced: one operation"
    assert lab.nodes["gpu-2"] in {x.node_id for x in moved.members}

    n = len(lab.member_ops())
    spec = rke2(lab, agents=2, agent_nodes=("gpu-2",), version="v1.31.1+rke2r1")
    upgraded = lab.rec(spec).converge(moved.instance_id, hosts(moved))
    assert upgraded.app_version == "v1.31.1+rke2r1" and ops(lab, n) == []

    n = len(lab.member_ops())
    lab.rec(spec).release(upgraded.instance_id)
    assert ops(lab, n) == [("member_drain", "agent")] * 2 + [("member_drain", "server")], \
        "agents drained, then the server: servers are drained last"
    assert lab.api.get_instance(lab.pid, upgraded.instance_id).status is m.InstanceStatus.DECOMMISSIONED
    decommission = [o for o in lab.sim.operations() if o.kind is m.OperationKind.INSTANCE_DECOMMISSION]
    assert len(decommission) == 1 and decommission[0].status is m.OperationStatus.SUCCEEDED


def test_servers_are_drained_last_and_agents_join_only_after_a_ready_server(lab: Lab) -> None:
    out = lab.rec(rke2(lab)).converge()
    server = next(x for x in out.members if x.component_key == "server")
    with pytest.raises(PlatformApiError) as refused:
        lab.api.drain_member(lab.pid, out.instance_id, server.member_id)
    assert refused.value.status == 409 and refused.value.code == "drain_order"
    assert "drain the agent members first" in refused.value.message

    # a server that fails leaves agents nothing to join: the add waits, then fails with server_not_ready
    lab.sim.inject(FaultPlan(operation_failures=[OperationFailure(kind=m.OperationKind.MEMBER_REPLACE,
                                                                  component_key="server", at_step=1)]))
    op = lab.api.replace_member(lab.pid, out.instance_id, server.member_id)
    assert lab.api.wait_for_operation(lab.pid, op.operation_id, timeout_s=10,
                                      raise_on_failure=False).status is m.OperationStatus.FAILED
    servers = [x.status for x in lab.api.list_members(lab.pid, out.instance_id) if x.component_key == "server"]
    assert m.MemberStatus.FAILED in servers and m.MemberStatus.ACTIVE not in servers
    add = lab.api.add_member(lab.pid, out.instance_id, "agent", lab.nodes["gpu-3"])
    done = lab.api.wait_for_operation(lab.pid, add.operation_id, timeout_s=20, raise_on_failure=False)
    assert done.status is m.OperationStatus.FAILED and done.error is not None
    assert done.error.code == "server_not_ready" and "no server" in done.error.message


def test_a_failed_agent_join_is_reported_and_only_it_is_retried(lab: Lab) -> None:
    out = lab.rec(rke2(lab)).converge()
    lab.sim.inject(FaultPlan(operation_failures=[OperationFailure(
        kind=m.OperationKind.MEMBER_ADD, component_key="agent", at_step=1, code="rke2_agent_join_failed",
        message="agent could not reach the server's supervisor port 9345")]))
    with pytest.raises(AppInstanceFailed) as failed:
        lab.rec(rke2(lab, agents=3)).converge(out.instance_id, hosts(out))
    bad = next(o for o in lab.sim.operations() if o.status is m.OperationStatus.FAILED)
    text = str(failed.value)
    assert "rke2_agent_join_failed: agent could not reach the server's supervisor port 9345" in text
    assert f"correlation_id={bad.correlation_id}" in text and f"operation_id={bad.operation_id}" in text
    assert ops(lab) == [("member_add", "agent")] * 2

    again = lab.rec(rke2(lab, agents=3)).converge(out.instance_id, hosts(out))
    assert ops(lab)[2:] == [("member_replace", "agent")], "the next up redoes only the failed join"
    assert [x.status for x in again.members] == [m.MemberStatus.ACTIVE] * 4


@pytest.mark.parametrize(("servers", "agents", "code"), [(2, 1, "APP006"), (0, 1, "APP004")])
def test_check_refuses_bad_server_counts(lab: Lab, servers: int, agents: int, code: str) -> None:
    spec = lab.app_spec("rke2", {"server": {"count": servers}, "agent": {"count": agents}})
    messages = [msg for _, msg in rule_failures(spec)]
    assert any(msg.startswith(code) for msg in messages), messages
    if servers == 0:
        assert any(msg.startswith("APP007") and "join after a server" in msg for msg in messages)


SSH_INPUTS = [
    {"node_ssh_key": "dev/ssh/lab-admin#private_key"},
    {"bootstrap": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"},
    {"admin_access": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9d operator@lab"},
]


@pytest.mark.parametrize("inputs", SSH_INPUTS, ids=["key-name", "private-key", "public-key"])
def test_no_node_ssh_credentials_reach_an_app(lab: Lab, inputs: dict[str, str]) -> None:
    spec = rke2(lab, inputs=inputs)
    messages = [msg for _, msg in rule_failures(spec)]
    assert any(msg.startswith("APP008") for msg in messages), messages
    assert not any(v in msg for v in inputs.values() for msg in messages), "the value is never echoed"
    # the platform refuses it too, whoever sends it (defence in depth behind the provider's check)
    body = m.AppInstanceCreate(name="rke2-ssh", app_type=m.AppType.RKE2, app_version="v1.30.4+rke2r1",
                               components=[m.ComponentSpec(component_key="server", count=1)], config=inputs)
    with pytest.raises(PlatformApiError) as refused:
        lab.api.create_instance(lab.pid, body)
    assert refused.value.code == "node_credentials_refused" and not lab.sim.operations()


def test_the_contract_has_no_field_for_node_credentials() -> None:
    doc = yaml.safe_load(CONTRACT_PATH.read_text())
    app_schemas = [n for n in doc["components"]["schemas"] if n.startswith(
        ("AppInstance", "Component", "Member", "Operation", "AddMember", "DrainMember", "RemoveMember",
         "ReplaceMember", "NodeBinding", "Allocation", "PublishedEndpoint", "UiRoute"))]
    assert "AppInstanceCreate" in app_schemas and "Member" in app_schemas

    def names(schema: Any) -> list[str]:
        if isinstance(schema, dict):
            return [*schema.get("properties", {}), *(n for v in schema.values() for n in names(v))]
        return [n for v in schema for n in names(v)] if isinstance(schema, list) else []

    fields = {n for s in app_schemas for n in names(doc["components"]["schemas"][s])}
    assert not [f for f in fields if looks_like_ssh_material(f, None) or "password" in f], fields
