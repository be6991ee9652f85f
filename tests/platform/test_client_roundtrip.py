"""The typed client against the simulator: every endpoint of the contract, round-tripped."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from clients.platform import CLIENT_METHODS, PlatformApiError, PlatformClient
from clients.platform import models as m
from clients.platform.catalogue import ENDPOINTS
from clients.platform.contract import CONTRACT_PATH, render
from tests.fixtures.platform_sim import RunningSim

from .conftest import ClientFor

SLURM = m.AppInstanceCreate(
    name="hpc",
    app_type=m.AppType.SLURM,
    app_version="24.05.1",
    components=[m.ComponentSpec(component_key="controller", count=1), m.ComponentSpec(component_key="worker", count=2)],
    config={"partition": "gpu"},
)


def test_committed_contract_matches_the_models() -> None:
    assert CONTRACT_PATH.read_text() == render(), "run `python -m clients.platform.contract --write`"


def test_the_docs_describe_every_endpoint() -> None:
    docs = (CONTRACT_PATH.parents[1] / "docs" / "platform-api.md").read_text()
    assert [e.operation_id for e in ENDPOINTS if f"`{e.operation_id}`" not in docs] == []


def test_client_has_one_method_per_endpoint() -> None:
    assert set(CLIENT_METHODS) == {e.operation_id for e in ENDPOINTS}


def make_site_and_profile(admin: PlatformClient, ttl: int = 600) -> tuple[m.MaasSite, m.SiteProfile]:
    site = admin.create_site(
        m.MaasSiteCreate(
            name="site-a",
            maas_url="http://maas.example:5240/MAAS",
            credential_ref=m.VaultCredentialRef(path="gpuaas/maas/site-a"),
        )
    )
    profile = admin.create_profile(
        site.site_id,
        m.SiteProfileCreate(
            name="h200",
            policy=m.SiteProfilePolicy(
                fabric_mode=m.FabricMode.ROCE,
                enable_phase2_roce=True,
                enrollment_token_ttl_seconds=ttl,
                site_bootstrap_bundle_ref="s3://bundles/site-a@sha256:abc",
            ),
        ),
    )
    return site, profile


def test_admin_sites_profiles_and_nodes_round_trip(platform_sim: RunningSim, admin: PlatformClient) -> None:
    site, profile = make_site_and_profile(admin)
    assert admin.find_site("site-a") == site and admin.find_site("nope") is None
    assert admin.get_site(site.site_id) == site
    updated = admin.update_site(
        site.site_id,
        m.MaasSiteUpdate(
            maas_url="https://maas2.example/MAAS", credential_ref=site.credential_ref, description="moved"
        ),
    )
    assert (updated.revision, updated.maas_url) == (2, "https://maas2.example/MAAS")
    assert admin.list_profiles(site.site_id, name="h200") == [profile]
    assert admin.get_profile(site.site_id, profile.profile_id).policy.fabric_mode is m.FabricMode.ROCE
    new_policy = profile.policy.model_copy(update={"batch_max_parallel": 8})
    assert admin.update_profile(site.site_id, profile.profile_id, new_policy).policy.batch_max_parallel == 8

    grant = admin.mint_enrollment_token(
        site.site_id, m.EnrollmentTokenRequest(profile_id=profile.profile_id, hostname="gpu-01", system_id="abc123")
    )
    assert grant.ttl_seconds == 600 and "gpuaas-enroll" not in repr(grant)  # the secret stays out of reprs
    node = admin.get_node(grant.node_id)
    assert node.status is m.NodeStatus.BOOTSTRAP_ISSUED and node.last_token_id == grant.token_id
    assert admin.list_nodes(site_id=site.site_id, hostname="gpu-01") == [node]
    ident = {"node_id": grant.node_id, "enrollment_token": grant.enrollment_token, "hostname": "gpu-01",
             "system_id": "abc123"}
    step = m.BootstrapStepResult(step="validate-gpu-check", ok=False, duration_s=0.5, output_tail="found 7 GPUs")
    stopped = m.BootstrapReport(bundle_digest="a" * 64, outcome=m.BootstrapOutcome.FAILED,
                                failed_step=step.step, steps=[step])
    ack = PlatformClient(platform_sim.url).report_bootstrap(m.BootstrapReportRequest(**ident, report=stopped))
    assert ack.status is m.NodeStatus.BOOTSTRAP_ISSUED and admin.get_node(grant.node_id).bootstrap == stopped
    ran = m.BootstrapReport(bundle_digest="a" * 64, outcome=m.BootstrapOutcome.SUCCEEDED,
                            steps=[step.model_copy(update={"ok": True})])
    enrolled = PlatformClient(platform_sim.url).enroll(m.EnrollmentRequest(**ident, report=ran))
    assert enrolled.status is m.NodeStatus.ENROLLING and enrolled.agent_credential is not None
    assert "gpuaas-agent" not in repr(enrolled)  # the agent's credential stays out of reprs too
    # no timer: the node stays enrolling until the platform takes its node agent's first heartbeat
    with pytest.raises(PlatformApiError) as err:
        admin.wait_for_node(grant.node_id, timeout_s=0.3, poll_s=0.05)
    assert err.value.code == "wait_timeout" and admin.get_node(grant.node_id).agent is None
    beat = m.AgentHeartbeatRequest(node_id=grant.node_id, agent_credential=enrolled.agent_credential,
                                   agent_version="9.9.9")
    with pytest.raises(PlatformApiError) as err:  # someone else's credential
        PlatformClient(platform_sim.url).agent_heartbeat(beat.model_copy(
            update={"agent_credential": SecretStr("gpuaas-agent-" + "x" * 40)}))
    assert (err.value.status, err.value.code) == (401, "agent_credential_invalid")
    ack = PlatformClient(platform_sim.url).agent_heartbeat(beat)
    assert ack.status is m.NodeStatus.ACTIVE and ack.next_heartbeat_seconds >= 1
    active = admin.wait_for_node(grant.node_id, timeout_s=10)
    assert active.status is m.NodeStatus.ACTIVE and active.enrolled_at is not None and active.bootstrap == ran
    assert active.agent is not None and (active.agent.version, active.agent.heartbeats) == ("9.9.9", 1)
    assert admin.list_nodes(status=m.NodeStatus.ACTIVE) == [active]
    assert admin.transition_node(node.node_id, m.NodeAction.QUARANTINE).status is m.NodeStatus.QUARANTINED
    with pytest.raises(PlatformApiError) as err:
        admin.transition_node(node.node_id, m.NodeAction.DRAIN)
    assert (err.value.status, err.value.code) == (409, "illegal_node_transition")
    with pytest.raises(PlatformApiError) as err:
        admin.delete_profile(site.site_id, profile.profile_id)
    assert err.value.code == "profile_in_use"
    assert admin.remove_node(node.node_id).status is m.NodeStatus.REMOVING
    assert admin.wait_for_node(node.node_id, [m.NodeStatus.DELETED], timeout_s=10).status is m.NodeStatus.DELETED
    admin.delete_profile(site.site_id, profile.profile_id)
    admin.delete_site(site.site_id)
    assert admin.list_sites() == []


def test_app_instance_lifecycle_round_trip(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    op = api.create_instance(pid, SLURM)
    assert (op.kind, op.status) == (m.OperationKind.INSTANCE_CREATE, m.OperationStatus.PENDING)
    assert api.wait_for_operation(pid, op.operation_id, timeout_s=10).status is m.OperationStatus.SUCCEEDED
    inst = api.get_instance(pid, op.instance_id)
    assert inst.status is m.InstanceStatus.READY and inst.member_counts == {"controller": 1, "worker": 2}
    assert api.list_instances(pid, name="hpc") == [inst]
    members = api.list_members(pid, inst.instance_id)
    assert {x.status for x in members} == {m.MemberStatus.ACTIVE}
    assert all(x.node is not None and x.last_operation_id == op.operation_id for x in members)
    controller = next(x for x in members if x.component_key == "controller")
    assert controller.adapter_detail["daemon"] == "slurmctld"
    worker = next(x for x in members if x.component_key == "worker")
    assert api.get_member(pid, inst.instance_id, worker.member_id) == worker

    added = api.wait_for_operation(pid, api.add_member(pid, inst.instance_id, "worker").operation_id, timeout_s=10)
    assert api.get_member(pid, inst.instance_id, added.member_id or "").status is m.MemberStatus.ACTIVE
    drained = api.wait_for_operation(
        pid, api.drain_member(pid, inst.instance_id, worker.member_id).operation_id, timeout_s=10
    )
    assert api.get_member(pid, inst.instance_id, worker.member_id).adapter_detail["state"] == "DRAINED"
    assert drained.kind is m.OperationKind.MEMBER_DRAIN
    api.wait_for_operation(pid, api.remove_member(pid, inst.instance_id, worker.member_id).operation_id, timeout_s=10)
    replaced = api.wait_for_operation(
        pid, api.replace_member(pid, inst.instance_id, controller.member_id).operation_id, timeout_s=10
    )
    new_controller = api.get_member(pid, inst.instance_id, replaced.replacement_member_id or "")
    assert new_controller.status is m.MemberStatus.ACTIVE and new_controller.component_key == "controller"
    assert api.get_member(pid, inst.instance_id, controller.member_id).status is m.MemberStatus.REMOVED
    assert api.get_instance(pid, inst.instance_id).member_counts == {"controller": 1, "worker": 2}

    route = api.register_ui_route(pid, inst.instance_id, m.UiRouteCreate(
        name="slurmrestd", component_key="controller", port=6820, frame_policy=m.FramePolicy.LINK_OUT,
        link_out_reason="the REST explorer sets its own frame-ancestors"))
    assert route.url.startswith("https://slurmrestd--") and api.list_ui_routes(pid, inst.instance_id) == [route]
    api.remove_ui_route(pid, inst.instance_id, route.route_id)
    assert api.list_ui_routes(pid, inst.instance_id) == []
    up = api.wait_for_operation(
        pid,
        api.upgrade_instance(pid, inst.instance_id, m.AppInstanceUpgrade(app_version="24.11.0")).operation_id,
        timeout_s=10,
    )
    assert api.get_instance(pid, inst.instance_id).app_version == "24.11.0"
    assert [o.operation_id for o in api.list_operations(pid, inst.instance_id)][-1] == up.operation_id
    assert api.get_operation(pid, up.operation_id) == up
    gone = api.wait_for_operation(
        pid, api.decommission_instance(pid, inst.instance_id, "done").operation_id, timeout_s=10
    )
    assert gone.status is m.OperationStatus.SUCCEEDED
    assert api.get_instance(pid, inst.instance_id).status is m.InstanceStatus.DECOMMISSIONED
    audit = client_for("project_admin").list_audit_events(pid)
    assert [e.action for e in audit if e.outcome is m.AuditOutcome.ACCEPTED] == [
        "app_instance.create",
        "member.operation",
        "member.operation",
        "member.operation",
        "member.operation",
        "ui_route.register",
        "ui_route.remove",
        "app_instance.upgrade",
        "app_instance.decommission",
    ]


def test_every_endpoint_was_exercised(platform_sim: RunningSim, client_for: ClientFor) -> None:
    test_admin_sites_profiles_and_nodes_round_trip(platform_sim, client_for("platform_admin"))
    test_app_instance_lifecycle_round_trip(platform_sim, client_for)
    missing = {e.operation_id for e in ENDPOINTS} - set(platform_sim.store.hits)
    assert not missing, f"endpoints never called successfully: {sorted(missing)}"
