"""Idempotency: the same mutation with the same key returns the same operation and changes
nothing more; another body with the same key is refused with idempotency_key_reused."""

from __future__ import annotations

import pytest

from clients.platform import PlatformApiError
from clients.platform import models as m
from simulators.platform import ErrorBurst, FaultPlan
from tests.fixtures.platform_sim import RunningSim

from .conftest import HTTP, ClientFor
from .test_client_roundtrip import SLURM

KEY = "create-hpc-0001"


def snapshot(sim: RunningSim) -> tuple[int, int, int, int]:
    s = sim.store
    with s.lock:
        return len(s.operations), len(s.members), len(s.instances), len(s.audit)


def test_same_key_same_body_replays_the_original_operation(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    first = api.create_instance(pid, SLURM, idempotency_key=KEY)
    before = snapshot(platform_sim)
    again = api.create_instance(pid, SLURM, idempotency_key=KEY)
    assert again == first  # the original operation, as first returned (pending), not a new one
    assert snapshot(platform_sim) == before
    raw = HTTP.post(
        f"{platform_sim.url}/api/v1/projects/{pid}/app-instances",
        headers={"Authorization": f"Bearer {platform_sim.creds.service_account}", "X-Idempotency-Key": KEY},
        content=SLURM.model_dump_json(indent=2),
    )  # other whitespace, same JSON document
    assert raw.status_code == 202 and raw.headers["X-Idempotent-Replay"] == "true"
    assert raw.json()["operation_id"] == first.operation_id
    assert snapshot(platform_sim) == before


def test_same_key_different_body_is_refused(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    api.create_instance(pid, SLURM, idempotency_key=KEY)
    before = snapshot(platform_sim)
    with pytest.raises(PlatformApiError) as err:
        api.create_instance(pid, SLURM.model_copy(update={"name": "other"}), idempotency_key=KEY)
    assert (err.value.status, err.value.code) == (422, "idempotency_key_reused")
    assert err.value.details == {"idempotency_key": KEY} and err.value.correlation_id
    assert snapshot(platform_sim) == before


def test_same_key_on_another_endpoint_is_refused(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    op = api.wait_for_operation(pid, api.create_instance(pid, SLURM, idempotency_key=KEY).operation_id, timeout_s=10)
    with pytest.raises(PlatformApiError) as err:
        api.add_member(pid, op.instance_id, "worker", idempotency_key=KEY)
    assert err.value.code == "idempotency_key_reused"


def test_member_operation_replay_returns_the_same_operation(platform_sim: RunningSim, client_for: ClientFor) -> None:
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    inst = api.wait_for_operation(pid, api.create_instance(pid, SLURM).operation_id, timeout_s=10).instance_id
    add = api.add_member(pid, inst, "worker", idempotency_key="add-worker-3")
    done = api.wait_for_operation(pid, add.operation_id, timeout_s=10)
    before = snapshot(platform_sim)
    replay = api.add_member(pid, inst, "worker", idempotency_key="add-worker-3")
    assert replay.operation_id == add.operation_id and done.status is m.OperationStatus.SUCCEEDED
    assert snapshot(platform_sim) == before
    assert api.get_instance(pid, inst).member_counts["worker"] == 3


def test_keys_are_scoped_to_the_principal(platform_sim: RunningSim, client_for: ClientFor) -> None:
    pid = platform_sim.creds.project_id
    a = client_for("service_account").create_instance(pid, SLURM, idempotency_key=KEY)
    b = client_for("project_admin").create_instance(
        pid, SLURM.model_copy(update={"name": "hpc-b"}), idempotency_key=KEY
    )
    assert a.operation_id != b.operation_id


@pytest.mark.parametrize("key", [None, "short", "has space in it"])
def test_mutations_without_a_valid_key_are_refused(platform_sim: RunningSim, key: str | None) -> None:
    headers = {"Authorization": f"Bearer {platform_sim.creds.service_account}"}
    if key is not None:
        headers["X-Idempotency-Key"] = key
    resp = HTTP.post(
        f"{platform_sim.url}/api/v1/projects/{platform_sim.creds.project_id}/app-instances",
        headers=headers,
        json=SLURM.model_dump(mode="json"),
    )
    assert resp.status_code == 400
    assert resp.json()["code"] == ("idempotency_key_required" if key is None else "idempotency_key_invalid")
    assert not platform_sim.operations()


def test_a_lost_response_retried_with_the_same_key_creates_one_operation(
    platform_sim: RunningSim, client_for: ClientFor
) -> None:
    """The change commits, the response is lost (503 after commit); the client's retry carries the
    same key and gets the original operation back."""
    api, pid = client_for("service_account"), platform_sim.creds.project_id
    platform_sim.inject(
        FaultPlan(
            error_bursts=[
                ErrorBurst(status=503, count=1, after_commit=True, methods=["POST"], path_prefix="/api/v1/projects/")
            ]
        )
    )
    op = api.create_instance(pid, SLURM)
    assert platform_sim.store.faults.fired == 1
    assert [o.operation_id for o in platform_sim.operations()] == [op.operation_id]
    assert len(api.list_instances(pid)) == 1
