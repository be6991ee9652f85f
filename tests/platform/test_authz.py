"""Authorization: each role gets exactly the rights the catalogue (and so the contract) states,
project and tenant boundaries hold, every denial is the envelope, and privileged mutations
(accepted or denied) leave audit records."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from clients.platform import PlatformClient
from clients.platform import models as m
from clients.platform.catalogue import ENDPOINTS, Endpoint
from tests.fixtures.platform_sim import RunningSim

from .conftest import HTTP, ClientFor
from .test_client_roundtrip import SLURM, make_site_and_profile

ROLES = ("platform_admin", "tenant_admin", "project_admin", "service_account")
ENVELOPE = {"code", "message", "correlation_id", "details"}


def world(sim: RunningSim, client_for: ClientFor) -> dict[str, str]:
    """Real ids for every path parameter of the catalogue."""
    admin = client_for("platform_admin")
    site, profile = make_site_and_profile(admin)
    grant = admin.mint_enrollment_token(
        site.site_id, m.EnrollmentTokenRequest(profile_id=profile.profile_id, hostname="gpu-01", system_id="abc123")
    )
    api, pid = client_for("service_account"), sim.creds.project_id
    op = api.wait_for_operation(pid, api.create_instance(pid, SLURM).operation_id, timeout_s=10)
    member = api.list_members(pid, op.instance_id)[0]
    route = api.register_ui_route(pid, op.instance_id, m.UiRouteCreate(
        name="ui-a", component_key="controller", port=6820, frame_policy=m.FramePolicy.LINK_OUT,
        link_out_reason="sets its own frame-ancestors"))
    return {
        "route_id": route.route_id,
        "site_id": site.site_id,
        "profile_id": profile.profile_id,
        "node_id": grant.node_id,
        "project_id": pid,
        "instance_id": op.instance_id,
        "member_id": member.member_id,
        "operation_id": op.operation_id,
    }


BODIES: dict[str, Any] = {
    "createMaasSite": {"name": "site-b", "maas_url": "http://maas-b/MAAS", "credential_ref": {"path": "maas/b"}},
    "updateMaasSite": {"maas_url": "http://maas-b/MAAS", "credential_ref": {"path": "maas/b"}},
    "createSiteProfile": {"name": "p2", "policy": {}},
    "updateSiteProfile": {"policy": {"batch_max_parallel": 2}},
    "mintEnrollmentToken": {"profile_id": "{profile_id}", "hostname": "gpu-09", "system_id": "zzz999"},
    "transitionNode": {"action": "quarantine"},
    "createAppInstance": {**SLURM.model_dump(mode="json"), "name": "hpc-2"},
    "upgradeAppInstance": {"app_version": "25.1"},
    "decommissionAppInstance": {},
    "requestMemberOperation": {"operation": "add", "component_key": "worker"},
    "registerUiRoute": {"name": "ui-b", "component_key": "controller", "port": 6820},
}


def call(
    sim: RunningSim,
    ep: Endpoint,
    token: str | None,
    ids: dict[str, str],
    project_id: str | None = None,
    request_id: str | None = None,
) -> httpx.Response:
    path_ids = {**ids, **({"project_id": project_id} if project_id else {})}
    headers = {"X-Request-Id": request_id or f"req-{uuid.uuid4().hex[:12]}"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if ep.mutation:
        headers["X-Idempotency-Key"] = f"authz-{uuid.uuid4().hex}"
    body = BODIES.get(ep.operation_id)
    if isinstance(body, dict) and "profile_id" in body:
        body = {**body, "profile_id": ids["profile_id"]}
    return HTTP.request(
        ep.method.value,
        sim.url + ep.path.format(**path_ids),
        headers=headers,
        json=body if ep.request is not None else None,
    )


def assert_envelope(resp: httpx.Response, status: int, code: str, request_id: str | None = None) -> None:
    body = resp.json()
    assert resp.status_code == status and body["code"] == code, resp.text
    assert set(body) == ENVELOPE
    if request_id:
        assert body["correlation_id"] == request_id == resp.headers["X-Correlation-Id"]


GUARDED = [e for e in ENDPOINTS if e.roles]


@pytest.mark.parametrize("role", ROLES)
def test_each_role_gets_exactly_the_rights_of_the_contract(
    platform_sim: RunningSim, client_for: ClientFor, role: str
) -> None:
    ids = world(platform_sim, client_for)
    token = getattr(platform_sim.creds, role)
    allowed, denied = [], []
    # Reads first, destructive calls last, so every call meets live resources.
    order = sorted(GUARDED, key=lambda e: (e.method.value == "DELETE", "decommission" in e.operation_id))
    for ep in order:
        rid = f"req-{uuid.uuid4().hex[:12]}"
        resp = call(platform_sim, ep, token, ids, request_id=rid)
        if role in {r.value for r in ep.roles}:
            assert resp.status_code not in (401, 403), f"{role} refused {ep.operation_id}: {resp.text}"
            allowed.append(ep.operation_id)
        else:
            assert_envelope(resp, 403, "role_not_permitted", rid)
            denied.append(ep.operation_id)
    assert allowed and (denied or role == "tenant_admin")


def test_a_service_account_cannot_touch_another_projects_instances(
    platform_sim: RunningSim, client_for: ClientFor
) -> None:
    ids = world(platform_sim, client_for)
    outsider = platform_sim.creds.other_service_account
    before = len(platform_sim.operations())
    for ep in (e for e in GUARDED if e.project_scoped and e.operation_id != "listAuditEvents"):
        assert_envelope(call(platform_sim, ep, outsider, ids), 403, "project_boundary")
    # Its own project path with the other project's instance id: not found, nothing leaks.
    resp = call(
        platform_sim,
        next(e for e in ENDPOINTS if e.operation_id == "getAppInstance"),
        outsider,
        ids,
        project_id=platform_sim.creds.other_project_id,
    )
    assert_envelope(resp, 404, "app_instance_not_found")
    assert len(platform_sim.operations()) == before


def test_tenant_admin_is_bounded_by_its_tenant(platform_sim: RunningSim, client_for: ClientFor) -> None:
    ids = world(platform_sim, client_for)
    other_tenant = platform_sim.create_tenant("globex")
    stranger = platform_sim.issue_token(m.Role.TENANT_ADMIN, tenant_id=other_tenant)
    own_admin = PlatformClient(platform_sim.url, platform_sim.creds.tenant_admin)
    assert own_admin.get_instance(ids["project_id"], ids["instance_id"]).instance_id == ids["instance_id"]
    for ep in (e for e in GUARDED if e.project_scoped):
        assert_envelope(call(platform_sim, ep, stranger, ids), 403, "tenant_boundary")


@pytest.mark.parametrize("token", [None, "gpuaas_not-a-real-token", ""])
def test_unauthenticated_requests_get_401_envelopes(
    platform_sim: RunningSim, client_for: ClientFor, token: str | None
) -> None:
    ids = world(platform_sim, client_for)
    for ep in GUARDED:
        rid = f"req-{uuid.uuid4().hex[:12]}"
        assert_envelope(call(platform_sim, ep, token, ids, request_id=rid), 401, "unauthenticated", rid)


def test_privileged_mutations_are_audited(platform_sim: RunningSim, client_for: ClientFor) -> None:
    ids = world(platform_sim, client_for)
    sa = platform_sim.creds.service_account
    up = next(e for e in ENDPOINTS if e.operation_id == "upgradeAppInstance")
    assert call(platform_sim, up, sa, ids, request_id="req-upgrade-1").status_code == 202
    assert (
        call(platform_sim, up, platform_sim.creds.other_service_account, ids, request_id="req-denied-1").status_code
        == 403
    )
    events = {e.correlation_id: e for e in platform_sim.audit()}
    accepted, denied = events["req-upgrade-1"], events["req-denied-1"]
    assert (accepted.action, accepted.outcome, accepted.role) == (
        "app_instance.upgrade",
        m.AuditOutcome.ACCEPTED,
        m.Role.SERVICE_ACCOUNT,
    )
    assert accepted.target == ids["instance_id"] and accepted.project_id == ids["project_id"]
    assert (denied.outcome, denied.action) == (m.AuditOutcome.DENIED, "app_instance.upgrade")
    # Every audited endpoint of the world-building calls left an accepted record.
    actions = {e.action for e in platform_sim.audit() if e.outcome is m.AuditOutcome.ACCEPTED}
    assert {"maas_site.create", "site_profile.create", "node_bootstrap.mint_token", "app_instance.create"} <= actions
    # Reads are not audited; the service account may not read the audit trail, its admins may.
    with pytest.raises(Exception) as err:
        client_for("service_account").list_audit_events(ids["project_id"])
    assert getattr(err.value, "code", None) == "role_not_permitted"
    assert client_for("project_admin").list_audit_events(ids["project_id"])


def test_a_mutation_refused_with_404_through_the_callers_own_project_is_audited_as_denied(
    platform_sim: RunningSim, client_for: ClientFor
) -> None:
    """Another project's instance via the caller's own project path: 404 (nothing leaks), and an
    audit record like a 403's (denied, principal, target), so cross-project probing is visible."""
    ids = world(platform_sim, client_for)
    own = platform_sim.creds.other_project_id
    outsider = platform_sim.creds.other_service_account
    probes = ("upgradeAppInstance", "decommissionAppInstance", "requestMemberOperation")
    for op in probes:
        ep = next(e for e in ENDPOINTS if e.operation_id == op)
        assert_envelope(call(platform_sim, ep, outsider, ids, own, f"req-probe-{op}"), 404, "app_instance_not_found")
    events = {e.correlation_id: e for e in platform_sim.audit()}
    for op in probes:
        event = events[f"req-probe-{op}"]
        ep = next(e for e in ENDPOINTS if e.operation_id == op)
        assert (event.outcome, event.action, event.role) == (
            m.AuditOutcome.DENIED,
            ep.audit_action,
            m.Role.SERVICE_ACCOUNT,
        )
        assert event.principal_id and event.target == ids["instance_id"] and event.project_id == own
    # The instance is untouched; a 403 denial names its target the same way.
    assert platform_sim.store.instances[ids["instance_id"]].status not in (
        m.InstanceStatus.DECOMMISSIONING,
        m.InstanceStatus.DECOMMISSIONED,
    )
    up = next(e for e in ENDPOINTS if e.operation_id == "upgradeAppInstance")
    assert call(platform_sim, up, outsider, ids, request_id="req-403-target").status_code == 403
    denied = next(e for e in platform_sim.audit() if e.correlation_id == "req-403-target")
    assert (denied.outcome, denied.target) == (m.AuditOutcome.DENIED, ids["instance_id"])
    # Reads refused with 404 are not audited (reads never are).
    get = next(e for e in ENDPOINTS if e.operation_id == "getAppInstance")
    call(platform_sim, get, outsider, ids, own, "req-probe-read")
    assert all(e.correlation_id != "req-probe-read" for e in platform_sim.audit())
