"""The node lifecycle: every status of the seeds is reachable through the contract (or, for the
heartbeat-driven `offline`, through the simulator's admin view), and illegal actions are refused."""

from __future__ import annotations

import pytest

from clients.platform import PlatformApiError, PlatformClient
from clients.platform import models as m
from simulators.platform.nodes import NODE_TRANSITIONS
from tests.fixtures.platform_sim import RunningSim, agent_alive, enroll_alive

from .test_client_roundtrip import make_site_and_profile

S, A = m.NodeStatus, m.NodeAction


def test_a_node_walks_through_every_status(platform_sim: RunningSim, admin: PlatformClient) -> None:
    site, profile = make_site_and_profile(admin)
    req = m.EnrollmentTokenRequest(profile_id=profile.profile_id, hostname="gpu-01", system_id="abc123")
    seen: list[m.NodeStatus] = []

    def enroll(grant: m.EnrollmentTokenGrant) -> None:
        enrolled = PlatformClient(platform_sim.url).enroll(
            m.EnrollmentRequest(
                node_id=grant.node_id, enrollment_token=grant.enrollment_token, hostname="gpu-01", system_id="abc123"
            )
        )
        seen.append(admin.get_node(grant.node_id).status)
        agent_alive(platform_sim.url, enrolled)
        seen.append(admin.wait_for_node(grant.node_id, timeout_s=10).status)

    grant = admin.mint_enrollment_token(site.site_id, req)
    node_id = grant.node_id
    seen.append(admin.get_node(node_id).status)
    enroll(grant)
    platform_sim.set_node_online(node_id, False)
    seen.append(admin.get_node(node_id).status)
    platform_sim.set_node_online(node_id, True)
    seen.append(admin.transition_node(node_id, A.QUARANTINE, "ECC errors").status)
    assert admin.get_node(node_id).status_reason == "ECC errors"
    admin.transition_node(node_id, A.UNQUARANTINE)
    seen.append(admin.transition_node(node_id, A.DRAIN).status)
    seen.append(admin.transition_node(node_id, A.RETIRE).status)
    # Reimage: a retired node gets a fresh token (same node id) and enrolls again.
    again = admin.mint_enrollment_token(site.site_id, req)
    assert again.node_id == node_id
    enroll(again)
    seen.append(admin.remove_node(node_id).status)
    seen.append(admin.wait_for_node(node_id, [S.DELETED], timeout_s=10).status)
    assert set(seen) == set(S), f"never reached: {set(S) - set(seen)}"
    # A deleted node's machine may come back: minting then creates a new node record.
    assert admin.mint_enrollment_token(site.site_id, req).node_id != node_id


@pytest.mark.parametrize("status", [S.BOOTSTRAP_ISSUED, S.ACTIVE])
def test_actions_outside_the_table_are_refused(
    platform_sim: RunningSim, admin: PlatformClient, status: m.NodeStatus
) -> None:
    site, profile = make_site_and_profile(admin)
    grant = admin.mint_enrollment_token(
        site.site_id, m.EnrollmentTokenRequest(profile_id=profile.profile_id, hostname="gpu-01", system_id="abc123")
    )
    if status is S.ACTIVE:
        enroll_alive(platform_sim.url, m.EnrollmentRequest(
            node_id=grant.node_id, enrollment_token=grant.enrollment_token, hostname="gpu-01", system_id="abc123"))
        admin.wait_for_node(grant.node_id, timeout_s=10)
    for action in A:
        if (status, action) in NODE_TRANSITIONS:
            continue
        with pytest.raises(PlatformApiError) as err:
            admin.transition_node(grant.node_id, action)
        assert (err.value.status, err.value.code) == (409, "illegal_node_transition")
        assert err.value.details["status"] == status.value
