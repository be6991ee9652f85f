"""Enrollment tokens: node-bound, single-use, expiring after the profile's TTL; and end to end
through the MAAS simulator, which enrolls a deployed machine the way cloud-init would."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import maas.client
import pytest

from clients.platform import PlatformApiError, PlatformClient
from clients.platform import models as m
from tests.fixtures.maas_sim import maas_sim_factory  # noqa: F401 - fixture
from tests.fixtures.platform_sim import RunningSim, agent_alive

from .conftest import HTTP
from .test_client_roundtrip import make_site_and_profile

TTL = 120


@pytest.fixture
def grant(platform_sim: RunningSim, admin: PlatformClient) -> tuple[m.MaasSite, m.SiteProfile, m.EnrollmentTokenGrant]:
    # Only `advance` moves the token's clock in these tests: at the fixture's 0.01 its 120 s TTL is 1.2 real seconds,
    # and "valid just before its TTL" had 50 ms of margin, which a loaded host can spend between two calls.
    platform_sim.set_time_scale(1000.0)
    site, profile = make_site_and_profile(admin, ttl=TTL)
    g = admin.mint_enrollment_token(
        site.site_id, m.EnrollmentTokenRequest(profile_id=profile.profile_id, hostname="gpu-01", system_id="abc123")
    )
    return site, profile, g


def enroll(sim: RunningSim, g: m.EnrollmentTokenGrant, **override: str) -> httpx.Response:
    body = {
        "node_id": g.node_id,
        "enrollment_token": g.enrollment_token.get_secret_value(),
        "hostname": "gpu-01",
        "system_id": "abc123",
        **override,
    }
    return HTTP.post(f"{sim.url}/api/v1/node-bootstrap/enroll", json=body)


def assert_denied(resp: httpx.Response, status: int, code: str, secret: str) -> None:
    body = resp.json()
    assert (resp.status_code, body["code"]) == (status, code)
    assert set(body) == {"code", "message", "correlation_id", "details"}
    assert secret not in resp.text  # a denial never echoes the token


def test_token_works_once_then_is_refused(platform_sim: RunningSim, admin: PlatformClient, grant) -> None:
    _, _, g = grant
    first = enroll(platform_sim, g)
    assert first.status_code == 200 and first.json()["status"] == "enrolling"
    assert_denied(enroll(platform_sim, g), 409, "enrollment_token_used", g.enrollment_token.get_secret_value())
    agent_alive(platform_sim.url, first.json())  # active once its node agent is seen
    assert admin.wait_for_node(g.node_id, timeout_s=10).status is m.NodeStatus.ACTIVE


def test_token_expires_after_the_profile_ttl(platform_sim: RunningSim, admin: PlatformClient, grant) -> None:
    _, _, g = grant
    assert g.ttl_seconds == TTL
    platform_sim.advance(TTL + 1)
    assert_denied(enroll(platform_sim, g), 401, "enrollment_token_expired", g.enrollment_token.get_secret_value())
    assert admin.get_node(g.node_id).status is m.NodeStatus.BOOTSTRAP_ISSUED


def test_token_is_valid_just_before_its_ttl(platform_sim: RunningSim, grant) -> None:
    _, _, g = grant
    platform_sim.advance(TTL - 5)
    assert enroll(platform_sim, g).status_code == 200


def test_token_only_works_for_its_node(platform_sim: RunningSim, admin: PlatformClient, grant) -> None:
    site, profile, g = grant
    other = admin.mint_enrollment_token(
        site.site_id, m.EnrollmentTokenRequest(profile_id=profile.profile_id, hostname="gpu-02", system_id="def456")
    )
    secret = g.enrollment_token.get_secret_value()
    assert_denied(
        enroll(platform_sim, g, node_id=other.node_id, hostname="gpu-02", system_id="def456"),
        403,
        "enrollment_token_node_mismatch",
        secret,
    )
    assert_denied(enroll(platform_sim, g, hostname="gpu-99"), 403, "enrollment_identity_mismatch", secret)
    # Neither refusal used the token up: the right node still enrolls with it.
    assert enroll(platform_sim, g).status_code == 200


def test_minting_again_revokes_the_unused_token(platform_sim: RunningSim, admin: PlatformClient, grant) -> None:
    site, profile, g = grant
    again = admin.mint_enrollment_token(
        site.site_id, m.EnrollmentTokenRequest(profile_id=profile.profile_id, hostname="gpu-01", system_id="abc123")
    )
    assert again.node_id == g.node_id and again.token_id != g.token_id
    assert_denied(enroll(platform_sim, g), 401, "enrollment_token_revoked", g.enrollment_token.get_secret_value())
    assert enroll(platform_sim, again).status_code == 200


def test_unknown_token_and_client_error_shape(platform_sim: RunningSim, grant) -> None:
    _, _, g = grant
    bogus = "gpuaas-enroll-" + "x" * 30
    assert_denied(enroll(platform_sim, g, enrollment_token=bogus), 401, "enrollment_token_invalid", bogus)
    with pytest.raises(PlatformApiError) as err:
        PlatformClient(platform_sim.url).enroll(
            m.EnrollmentRequest(node_id=g.node_id, enrollment_token=bogus, hostname="gpu-01", system_id="abc123")
        )
    assert (err.value.status, err.value.code) == (401, "enrollment_token_invalid")
    assert err.value.correlation_id and bogus not in str(err.value)


def test_mint_is_refused_for_a_quarantined_node(admin: PlatformClient, grant, platform_sim: RunningSim) -> None:
    site, profile, g = grant
    enrolled = enroll(platform_sim, g)
    assert enrolled.status_code == 200
    agent_alive(platform_sim.url, enrolled.json())
    admin.wait_for_node(g.node_id, timeout_s=10)
    admin.transition_node(g.node_id, m.NodeAction.QUARANTINE, "bad GPU")
    with pytest.raises(PlatformApiError) as err:
        admin.mint_enrollment_token(
            site.site_id, m.EnrollmentTokenRequest(profile_id=profile.profile_id, hostname="gpu-01", system_id="abc123")
        )
    assert (err.value.status, err.value.code) == (409, "node_not_mintable")


# --- end to end through the MAAS simulator --------------------------------------------------------
def _maas(sim: Any) -> Any:
    try:  # python-libmaas's sync API wants an event loop on the calling thread
        asyncio.get_event_loop()
    except RuntimeError:
        asyncio.set_event_loop(asyncio.new_event_loop())
    return maas.client.connect(sim.url, apikey=sim.api_key)


def _user_data(g: m.EnrollmentTokenGrant) -> bytes:
    content = json.dumps({"node_id": g.node_id, "enrollment_token": g.enrollment_token.get_secret_value()})
    return (
        f"#cloud-config\nwrite_files:\n  - path: /etc/gpuaas/enrollment.json\n    permissions: '0600'\n"
        f"    content: '{content}'\n"
    ).encode()


def _wait_enroll_event(maas_sim: Any, hostname: str, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for e in maas_sim.admin.events(hostname):
            if e["type"].startswith("ENROLL"):
                return str(e["description"])
        time.sleep(0.02)
    raise AssertionError(f"{hostname} never tried to enroll")


def test_maas_deploy_with_token_enrolls_the_node_end_to_end(
    platform_sim: RunningSim,
    admin: PlatformClient,
    maas_sim_factory: Callable[..., Any],  # noqa: F811
) -> None:
    maas_sim = maas_sim_factory(platform_url=platform_sim.url)
    client = _maas(maas_sim)
    first, second, third = sorted(client.machines.list(), key=lambda x: x.hostname)[:3]
    site, profile = make_site_and_profile(admin, ttl=TTL)

    def mint(machine: Any) -> m.EnrollmentTokenGrant:
        return admin.mint_enrollment_token(
            site.site_id,
            m.EnrollmentTokenRequest(
                profile_id=profile.profile_id, hostname=machine.hostname, system_id=machine.system_id
            ),
        )

    g1 = mint(first)
    first.deploy(user_data=_user_data(g1), wait=True, wait_interval=0.01)
    assert admin.wait_for_node(g1.node_id, timeout_s=10).hostname == first.hostname
    assert "status=200" in _wait_enroll_event(maas_sim, first.hostname)

    # The first (now used) token in another machine's user_data: refused; that node never enrolls.
    g2 = mint(second)
    stolen = g2.model_copy(update={"node_id": g1.node_id, "enrollment_token": g1.enrollment_token})
    second.deploy(user_data=_user_data(stolen), wait=True, wait_interval=0.01)
    assert "enrollment_token_used" in _wait_enroll_event(maas_sim, second.hostname)
    assert admin.get_node(g2.node_id).status is m.NodeStatus.BOOTSTRAP_ISSUED

    # A token whose TTL passed before the machine booted: refused as expired.
    g3 = mint(third)
    platform_sim.advance(TTL + 1)
    third.deploy(user_data=_user_data(g3), wait=True, wait_interval=0.01)
    assert "enrollment_token_expired" in _wait_enroll_event(maas_sim, third.hostname)
    assert admin.get_node(g3.node_id).status is m.NodeStatus.BOOTSTRAP_ISSUED


def test_the_answer_names_the_agent_package_and_the_used_token_sends_one_final_report(
    platform_sim: RunningSim, admin: PlatformClient, grant
) -> None:
    _, _, g = grant
    report = {"bundle_digest": "a" * 64, "outcome": "enrolled", "steps": [], "runner": "launcher"}
    first = enroll(platform_sim, g, report=report)  # type: ignore[arg-type]
    assert first.status_code == 200, first.text
    agent = m.NodeAgentPackage.model_validate(first.json()["agent_package"])
    assert agent == platform_sim.agent_package
    blob = HTTP.get(agent.url).content  # unauthenticated: the package holds no secret
    assert hashlib.sha256(blob).hexdigest() == agent.sha256
    body = {"node_id": g.node_id, "enrollment_token": g.enrollment_token.get_secret_value(), "hostname": "gpu-01",
            "system_id": "abc123"}
    final = {**report, "outcome": "failed", "failed_step": "agent-install",
             "steps": [{"step": "agent-install", "ok": False, "duration_s": 0.1, "output_tail": "refused"}]}
    url = f"{platform_sim.url}/api/v1/node-bootstrap/report"
    assert HTTP.post(url, json={**body, "report": final}).status_code == 200
    node = admin.get_node(g.node_id)
    assert node.bootstrap is not None and node.bootstrap.failed_step == "agent-install"
    # once: the final report is in, the used token is refused again
    assert_denied(HTTP.post(url, json={**body, "report": final}), 409, "enrollment_token_used",
                  g.enrollment_token.get_secret_value())
