"""The seed-000 endpoints against the contract, deterministically: an RKE2 instance is created, an agent
added and drained, a vLLM instance gets a UI route registered, listed and removed; every response is
validated by schemathesis against contracts/platform-api.yaml (status, headers, body schema), the way
the stateful test validates its random sequences, so a drift of the simulator from the contract fails
here even when the random walk does not reach these operations."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis

from clients.platform import PlatformClient
from clients.platform import models as m
from clients.platform.contract import CONTRACT_PATH
from simulators.platform import PlatformSimulator

SCHEMA = schemathesis.openapi.from_path(CONTRACT_PATH)


class Caller:
    def __init__(self, sim: PlatformSimulator, token: str, project_id: str) -> None:
        self.sim, self.token, self.project_id = sim, token, project_id
        self.seen: list[str] = []

    def __call__(self, operation_id: str, body: Any = None, **params: str) -> Any:
        op = SCHEMA.find_operation_by_id(operation_id)
        headers = {"Authorization": f"Bearer {self.token}", m.IDEMPOTENCY_HEADER: f"seed000-{uuid.uuid4().hex}"}
        kwargs: dict[str, Any] = {"path_parameters": {"project_id": self.project_id, **params}, "headers": headers}
        if body is not None:
            kwargs["body"] = body
        case = op.Case(**kwargs)
        response = case.call(base_url=self.sim.url)
        case.validate_response(response, excluded_checks=[schemathesis.checks.positive_data_acceptance])
        assert response.status_code < 300, (operation_id, response.status_code, response.text[:300])
        self.seen.append(operation_id)
        return response.json() if response.content else None


@pytest.fixture
def call() -> Iterator[Caller]:
    sim = PlatformSimulator(time_scale=0.01).start()
    try:
        creds = sim.bootstrap()
        yield Caller(sim, creds.tenant_admin, creds.project_id)
    finally:
        sim.stop()


def _wait(call: Caller, operation_id: str) -> None:
    with PlatformClient(call.sim.url, call.token) as api:
        done = api.wait_for_operation(call.project_id, operation_id)
    assert done.status is m.OperationStatus.SUCCEEDED, done


def test_rke2_member_operations_and_ui_routes_honour_the_contract(call: Caller) -> None:
    rke2 = call(
        "createAppInstance",
        {"name": "rke2-c", "app_type": "rke2", "app_version": "v1.30.4+rke2r1",
         "components": [{"component_key": "server", "count": 1}, {"component_key": "agent", "count": 0}]},
    )
    _wait(call, rke2["operation_id"])
    iid = rke2["instance_id"]
    added = call("requestMemberOperation", {"operation": "add", "component_key": "agent"}, instance_id=iid)
    _wait(call, added["operation_id"])
    members = call("listMembers", instance_id=iid)
    agent = next(x for x in members["items"] if x["component_key"] == "agent")
    drained = call("requestMemberOperation", {"operation": "drain", "member_id": agent["member_id"]}, instance_id=iid)
    _wait(call, drained["operation_id"])

    vllm = call(
        "createAppInstance",
        {"name": "vllm-c", "app_type": "vllm", "app_version": "0.6.3",
         "components": [{"component_key": "serve", "count": 1}]},
    )
    _wait(call, vllm["operation_id"])
    vid = vllm["instance_id"]
    route = call("registerUiRoute", {"name": "chat", "component_key": "serve", "port": 8000}, instance_id=vid)
    listed = call("listUiRoutes", instance_id=vid)
    assert [r["route_id"] for r in listed["items"]] == [route["route_id"]]
    call("removeUiRoute", instance_id=vid, route_id=route["route_id"])
    assert call("listUiRoutes", instance_id=vid)["items"] == []
    assert {"registerUiRoute", "listUiRoutes", "removeUiRoute", "requestMemberOperation"} <= set(call.seen)
