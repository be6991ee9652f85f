"""The client under faults: retries only where safe, errors carry status/code/message/correlation id;
and the simulator's fault injection, admin view and standalone mode."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from clients.platform import PlatformApiError, PlatformClient, RetryPolicy
from clients.platform import models as m
from simulators.platform import ErrorBurst, FaultPlan, Latency
from tests.fixtures.platform_sim import RunningSim

from .conftest import HTTP, ClientFor
from .test_client_roundtrip import SLURM

FAST = RetryPolicy(attempts=4, initial_backoff_s=0.01, max_backoff_s=0.02)


def burst(count: int, status: int = 503, methods: tuple[str, ...] = ("GET", "POST")) -> FaultPlan:
    return FaultPlan(error_bursts=[ErrorBurst(status=status, count=count, methods=list(methods))])


def test_a_5xx_burst_shorter_than_the_retry_budget_is_absorbed(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api = client_for("platform_admin", FAST)
    platform_sim.inject(burst(3))
    assert api.list_sites() == []
    assert platform_sim.store.faults.fired == 3


def test_a_longer_burst_surfaces_one_error_with_the_envelope(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api = client_for("platform_admin", FAST)
    platform_sim.inject(burst(10, status=502))
    with pytest.raises(PlatformApiError) as err:
        api.list_sites()
    e = err.value
    assert (e.status, e.code) == (502, "injected_fault") and e.message and e.correlation_id
    assert platform_sim.store.faults.fired == FAST.attempts


def test_mutations_are_retried_with_their_key_and_apply_once(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api, pid = client_for("service_account", FAST), platform_sim.creds.project_id
    platform_sim.inject(burst(2, methods=("POST",)))
    op = api.create_instance(pid, SLURM)
    assert platform_sim.store.faults.fired == 2
    assert [o.operation_id for o in platform_sim.operations()] == [op.operation_id]


def test_no_retry_when_the_policy_says_one_attempt(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api = client_for("platform_admin", RetryPolicy(attempts=1))
    platform_sim.inject(burst(1))
    with pytest.raises(PlatformApiError) as err:
        api.list_sites()
    assert err.value.status == 503 and platform_sim.store.faults.fired == 1


def test_client_errors_are_not_retried(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api, pid = client_for("service_account", FAST), platform_sim.creds.project_id
    with pytest.raises(PlatformApiError) as err:
        api.get_instance(pid, "instance-0000000000000000")
    assert (err.value.status, err.value.code) == (404, "app_instance_not_found")
    assert platform_sim.store.calls["getAppInstance"] == 1


def test_latency_is_added_to_matching_requests(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api = client_for("platform_admin")
    platform_sim.inject(FaultPlan(latency=[Latency(seconds=0.2, count=1, path_prefix="/api/v1/admin/")]))
    start = time.monotonic()
    api.list_sites()
    assert time.monotonic() - start >= 0.2
    assert platform_sim.store.faults.plan.latency == []  # count=1: consumed by that one request


def test_transport_errors_become_platform_errors() -> None:
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = PlatformClient(f"http://127.0.0.1:{port}", "t", retry=FAST)
    with pytest.raises(PlatformApiError) as err:
        api.list_sites()
    assert (err.value.status, err.value.code) == (None, "transport_error") and err.value.correlation_id


def test_the_request_id_comes_back_as_the_correlation_id(platform_sim: RunningSim) -> None:
    resp = HTTP.get(
        f"{platform_sim.url}/api/v1/admin/maas-sites/site-0000000000000000",
        headers={"Authorization": f"Bearer {platform_sim.creds.platform_admin}", "X-Request-Id": "trace-abc-123"},
    )
    assert resp.status_code == 404 and resp.json()["correlation_id"] == "trace-abc-123"
    assert resp.headers["X-Correlation-Id"] == "trace-abc-123"


def test_sim_admin_http_view(platform_sim: RunningSim, client_for: ClientFor) -> None:
    base, auth = f"{platform_sim.url}/_sim", {"Authorization": f"Bearer {platform_sim.admin_token}"}
    assert HTTP.get(f"{base}/audit").status_code == 401
    tenant = HTTP.post(f"{base}/tenants", headers=auth, json={"name": "t2"}).json()["tenant_id"]
    project = HTTP.post(f"{base}/projects", headers=auth, json={"tenant_id": tenant}).json()["project_id"]
    sa = HTTP.post(f"{base}/principals", headers=auth, json={"role": "service_account", "project_id": project}).json()
    api = PlatformClient(platform_sim.url, sa["token"])
    op = api.create_instance(project, SLURM)
    assert [o["operation_id"] for o in HTTP.get(f"{base}/operations", headers=auth).json()] == [op.operation_id]
    assert HTTP.get(f"{base}/audit", headers=auth).json()[-1]["action"] == "app_instance.create"
    HTTP.post(f"{base}/faults", headers=auth, json={"error_bursts": [{"status": 500, "count": 1}]})
    assert (
        HTTP.get(
            f"{platform_sim.url}/api/v1/projects/{project}/app-instances",
            headers={"Authorization": f"Bearer {sa['token']}"},
        ).status_code
        == 500
    )
    assert HTTP.delete(f"{base}/faults", headers=auth).json()["error_bursts"] == []
    HTTP.post(f"{base}/clock/advance", headers=auth, json={"seconds": 60})
    assert api.get_operation(project, op.operation_id).status is m.OperationStatus.SUCCEEDED
    fixed = "project-00000000000000aa"
    assert (
        HTTP.post(f"{base}/projects", headers=auth, json={"tenant_id": tenant, "project_id": fixed}).json()[
            "project_id"
        ]
        == fixed
    )
    for project_id in (fixed, "research"):  # taken; not the contract's id pattern
        resp = HTTP.post(f"{base}/projects", headers=auth, json={"tenant_id": tenant, "project_id": project_id})
        assert resp.status_code == 422 and resp.json()["code"] == "sim_bad_request"
    bad = HTTP.post(f"{base}/principals", headers=auth, json={"role": "service_account", "project_id": "nope"})
    assert bad.status_code == 422 and set(bad.json()) == {"code", "message", "correlation_id", "details"}


def test_standalone_prints_its_url_and_tokens_and_serves() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulators.platform", "--time-scale", "0.01"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        with PlatformClient(info["url"], info["service_account"]) as api:
            assert api.list_instances(info["project_id"]) == []
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_throttling_is_retried_after_the_servers_retry_after(platform_sim: RunningSim, client_for: ClientFor) -> None:
    platform_sim.inject(FaultPlan(error_bursts=[ErrorBurst(status=429, count=1, retry_after_s=1, methods=["GET"])]))
    raw = HTTP.get(
        f"{platform_sim.url}/api/v1/admin/maas-sites",
        headers={"Authorization": f"Bearer {platform_sim.creds.platform_admin}"},
    )
    assert raw.status_code == 429 and raw.headers["Retry-After"] == "1"
    platform_sim.inject(FaultPlan(error_bursts=[ErrorBurst(status=429, count=1, retry_after_s=1, methods=["GET"])]))
    api = client_for("platform_admin", FAST)  # its own backoff is 10-20 ms; the server asked for 1 s
    start = time.monotonic()
    assert api.list_sites() == []
    assert time.monotonic() - start >= 1.0
    capped = client_for("platform_admin", FAST.model_copy(update={"attempts": 1}))
    platform_sim.inject(FaultPlan(error_bursts=[ErrorBurst(status=429, count=1, retry_after_s=7, methods=["GET"])]))
    with pytest.raises(PlatformApiError) as err:
        capped.list_sites()
    assert (err.value.status, err.value.code, err.value.retry_after_s) == (429, "injected_fault", 7.0)


def test_only_throttling_and_server_statuses_can_be_injected() -> None:
    with pytest.raises(ValueError, match="429 or 5xx"):
        ErrorBurst(status=450)
