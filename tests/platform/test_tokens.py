"""Bearer tokens expire and can be revoked, like a real control plane's: the refusal is the
canonical 401 envelope naming why, and the audit log records the attempt (principal, token id,
never the token)."""

from __future__ import annotations

import uuid

import httpx
import pytest

from clients.platform import PlatformApiError, PlatformClient
from clients.platform import models as m
from simulators.platform.state import Store, TokenState, digest
from tests.fixtures.platform_sim import RunningSim

from .conftest import HTTP
from .test_authz import assert_envelope


def list_instances(sim: RunningSim, token: str, project_id: str, request_id: str) -> httpx.Response:
    return HTTP.get(
        f"{sim.url}/api/v1/projects/{project_id}/app-instances",
        headers={"Authorization": f"Bearer {token}", "X-Request-Id": request_id},
    )


def test_a_token_works_until_its_ttl_then_gets_a_401_envelope(platform_sim: RunningSim) -> None:
    platform_sim.set_time_scale(1000.0)  # only `advance` moves it: 1 s of margin at 0.01 is 10 real ms
    pid = platform_sim.creds.project_id
    token = platform_sim.issue_token(m.Role.SERVICE_ACCOUNT, project_id=pid, name="ci", ttl_s=600)
    assert list_instances(platform_sim, token, pid, "req-fresh-1").status_code == 200
    platform_sim.advance(599)
    assert list_instances(platform_sim, token, pid, "req-fresh-2").status_code == 200
    platform_sim.advance(2)
    resp = list_instances(platform_sim, token, pid, "req-expired-1")
    assert_envelope(resp, 401, "unauthenticated", "req-expired-1")
    body = resp.json()
    assert body["details"] == {"reason": "token_expired"} and "expired" in body["message"]
    assert (
        resp.headers["WWW-Authenticate"]
        == 'Bearer realm="gpuaas", error="invalid_token", error_description="token_expired"'
    )
    assert token not in resp.text


def test_a_revoked_token_is_refused_at_once_and_others_of_the_principal_keep_working(
    platform_sim: RunningSim,
) -> None:
    pid = platform_sim.creds.project_id
    old = platform_sim.issue_token(m.Role.SERVICE_ACCOUNT, project_id=pid, name="rotating")
    new = platform_sim.reissue_token(old, ttl_s=3600)
    token_id = platform_sim.revoke_token(old)
    assert_envelope(list_instances(platform_sim, old, pid, "req-revoked-1"), 401, "unauthenticated", "req-revoked-1")
    assert list_instances(platform_sim, old, pid, "req-revoked-2").json()["details"] == {"reason": "token_revoked"}
    assert list_instances(platform_sim, new, pid, "req-rotated-1").status_code == 200
    anonymous = HTTP.get(f"{platform_sim.url}/api/v1/projects/{pid}/app-instances")
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == 'Bearer realm="gpuaas"'
    assert token_id.startswith("token-") and token_id != platform_sim.token_id(new)


def test_the_typed_client_sees_the_401_with_its_reason(platform_sim: RunningSim) -> None:
    token = platform_sim.issue_token(m.Role.PLATFORM_ADMIN, ttl_s=60)
    with PlatformClient(platform_sim.url, token) as client:
        assert client.list_sites() == []
        platform_sim.advance(61)
        with pytest.raises(PlatformApiError) as err:
            client.list_sites()
    assert (err.value.status, err.value.code, err.value.details) == (
        401,
        "unauthenticated",
        {"reason": "token_expired"},
    )
    assert err.value.correlation_id and token not in str(err.value)


def test_refusals_of_expired_and_revoked_tokens_are_audited(platform_sim: RunningSim) -> None:
    pid = platform_sim.creds.project_id
    expiring = platform_sim.issue_token(m.Role.SERVICE_ACCOUNT, project_id=pid, name="short", ttl_s=10)
    revoked = platform_sim.issue_token(m.Role.PROJECT_ADMIN, project_id=pid, name="gone")
    revoked_id = platform_sim.revoke_token(revoked)
    platform_sim.advance(11)
    # A mutation (with an idempotency key) and a read: both attempts are recorded.
    HTTP.post(
        f"{platform_sim.url}/api/v1/projects/{pid}/app-instances",
        headers={"Authorization": f"Bearer {expiring}", "X-Request-Id": "req-exp-mut", "X-Idempotency-Key": "k-exp-1"},
        json={},
    )
    list_instances(platform_sim, revoked, pid, "req-rev-read")
    list_instances(platform_sim, "gpuaas_never-issued", pid, "req-unknown")
    events = {e.correlation_id: e for e in platform_sim.audit()}
    expired_event, revoked_event = events["req-exp-mut"], events["req-rev-read"]
    assert (expired_event.action, expired_event.outcome, expired_event.role) == (
        "auth.token_expired",
        m.AuditOutcome.DENIED,
        m.Role.SERVICE_ACCOUNT,
    )
    assert expired_event.target == platform_sim.token_id(expiring) and expired_event.project_id == pid
    assert expired_event.idempotency_key == "k-exp-1" and expired_event.principal_id
    assert (revoked_event.action, revoked_event.target, revoked_event.role) == (
        "auth.token_revoked",
        revoked_id,
        m.Role.PROJECT_ADMIN,
    )
    # An unknown token names no principal: nothing to attribute, so nothing recorded.
    assert "req-unknown" not in events
    # The project's admins read these records through the contract.
    with PlatformClient(platform_sim.url, platform_sim.creds.project_admin) as admin:
        seen = {e.correlation_id for e in admin.list_audit_events(pid)}
    assert {"req-exp-mut", "req-rev-read"} <= seen
    dump = str([e.model_dump() for e in platform_sim.audit()])
    assert expiring not in dump and revoked not in dump


def test_the_admin_view_issues_expiring_tokens_and_revokes_them(platform_sim: RunningSim) -> None:
    admin = {"Authorization": f"Bearer {platform_sim.admin_token}"}
    pid = platform_sim.creds.project_id
    made = HTTP.post(
        f"{platform_sim.url}/_sim/principals",
        headers=admin,
        json={"role": "service_account", "project_id": pid, "ttl_s": 30},
    ).json()
    assert made["expires_at"] and made["revoked"] is False and made["token"].startswith("gpuaas_")
    again = HTTP.post(
        f"{platform_sim.url}/_sim/tokens", headers=admin, json={"principal_id": made["principal_id"]}
    ).json()
    assert again["expires_at"] is None and again["token_id"] != made["token_id"]
    gone = HTTP.delete(f"{platform_sim.url}/_sim/tokens/{again['token_id']}", headers=admin)
    assert gone.status_code == 200 and gone.json()["revoked"] is True and "token" not in gone.json()
    rid = f"req-{uuid.uuid4().hex[:8]}"
    assert_envelope(list_instances(platform_sim, again["token"], pid, rid), 401, "unauthenticated", rid)
    assert list_instances(platform_sim, made["token"], pid, "req-still-ok").status_code == 200
    HTTP.post(f"{platform_sim.url}/_sim/clock/advance", headers=admin, json={"seconds": 31})
    assert list_instances(platform_sim, made["token"], pid, "req-late").json()["details"]["reason"] == "token_expired"
    # Bad input to the admin view: the envelope, naming the field; unknown tokens are 422.
    bad = HTTP.post(f"{platform_sim.url}/_sim/tokens", headers=admin, json={"principal_id": "x", "ttl_s": 0})
    assert bad.status_code == 422 and "ttl_s" in bad.text
    missing = HTTP.delete(f"{platform_sim.url}/_sim/tokens/token-0000000000000000", headers=admin)
    assert missing.status_code == 422 and "unknown token" in missing.json()["message"]


def test_a_store_pickled_before_token_records_keeps_its_tokens_valid(platform_sim: RunningSim) -> None:
    """tests/compat restores a v1 store whose bearer map held digest -> principal_id."""
    token = platform_sim.creds.service_account
    record = platform_sim.store.bearer_record(token)
    assert record is not None
    state = dict(vars(platform_sim.store))
    state["bearer"] = {digest(token): record.principal_id}
    restored = Store.__new__(Store)
    restored.__setstate__(state)
    upgraded = restored.bearer_record(token)
    assert upgraded is not None and upgraded.principal_id == record.principal_id
    assert restored.token_state(upgraded) is TokenState.VALID
    restored.revoke_bearer(upgraded.token_id)
    assert restored.token_state(upgraded) is TokenState.REVOKED
