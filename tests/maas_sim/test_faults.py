"""Every fault mode, set at start or at run time, globally or per machine, is observable through
python-libmaas."""

from __future__ import annotations

import time

import aiohttp
import pytest
from maas.client.bones import CallError
from maas.client.viscera.machines import FailedCommissioning, FailedDeployment, FailedDiskErasing

from simulators.maas import ApiErrorBurst, ApiFaults, MachineFaults, NodeStatus, SimFaults
from simulators.maas.faults import DATASOURCE_ERROR

from .conftest import connect, session

WAIT = {"wait": True, "wait_interval": 0.01}


def _machine(client, hostname: str):
    return client.machines.list(hostnames=[hostname])[0]


def test_commissioning_failure_per_machine_at_start(maas_sim_factory) -> None:
    sim = maas_sim_factory(faults={"per_machine": {"gpu-a-001": {"commissioning_failures": 1}}})
    client = connect(sim)
    victim, bystander = _machine(client, "gpu-a-001"), _machine(client, "gpu-a-002")
    with pytest.raises(FailedCommissioning):
        victim.commission(**WAIT)
    assert victim.status_name == "Failed commissioning"
    bystander.commission(**WAIT)
    assert bystander.status_name == "Ready"
    victim.commission(**WAIT)  # the count is consumed: the retry passes
    assert victim.status_name == "Ready"


def test_testing_failure_is_failed_testing(maas_sim, client) -> None:
    maas_sim.admin.set_machine_faults("gpu-a-002", MachineFaults(testing_failures=1))
    machine = _machine(client, "gpu-a-002")
    with pytest.raises(Exception, match="failed testing"):
        machine.commission(**WAIT)
    assert machine.status_name == "Failed testing"


def test_deploy_datasource_failure_first_n_attempts(maas_sim, client) -> None:
    maas_sim.admin.set_global_faults(MachineFaults(deploy_failures=2))
    machine = _machine(client, "gpu-a-001")
    for _ in range(2):
        with pytest.raises(FailedDeployment):
            machine.deploy(**WAIT)
        assert machine.status_name == "Failed deployment"
        assert machine._data["error_description"] == DATASOURCE_ERROR
        machine.release(**WAIT)
    machine.deploy(**WAIT)
    assert machine.status_name == "Deployed"
    events = maas_sim.admin.events(machine.system_id)
    failures = [e for e in events if "-> Failed deployment" in e["description"]]
    assert len(failures) == 2 and DATASOURCE_ERROR in failures[0]["description"]
    causes = [e for e in events if e["description"] == "'cloudinit' searching for network datasources"]
    assert len(causes) == 2


def test_a_stalled_deploy_waits_for_its_abort_and_the_next_deploy_runs(maas_sim, client) -> None:
    machine = _machine(client, "gpu-a-001")
    maas_sim.admin.set_machine_faults("gpu-a-001", MachineFaults(deploy_stalls=1))
    machine.deploy()
    time.sleep(0.2)  # several whole deploys at the suite's 1e-4 (a deploy is 60 ms)
    machine.refresh()
    assert machine.status_name == "Deploying"
    machine.abort()
    assert machine.status_name == "Allocated"
    machine.deploy(**WAIT)  # the fault was one stall
    assert machine.status_name == "Deployed"


def test_disk_erase_failure_then_plain_release(maas_sim, client) -> None:
    machine = _machine(client, "gpu-a-001")
    machine.deploy(**WAIT)
    maas_sim.admin.set_machine_faults(machine.system_id, MachineFaults(erase_failures=1))
    with pytest.raises(FailedDiskErasing):
        machine.release(erase=True, **WAIT)
    assert machine.status_name == "Failed disk erasing"
    machine.release(**WAIT)  # the no-erase fallback
    assert machine.status_name == "Ready"


def test_power_driver_errors(maas_sim, client) -> None:
    machine = _machine(client, "gpu-a-001")
    machine.deploy(**WAIT)
    maas_sim.admin.set_machine_faults("gpu-a-001", MachineFaults(power_error="IPMI: connection timed out"))
    with pytest.raises(CallError) as info:
        machine.query_power_state()
    assert info.value.status == 503 and b"connection timed out" in info.value.content
    with pytest.raises(CallError) as info:
        machine.power_on()
    assert info.value.status == 503
    assert client.machines.get(system_id=machine.system_id).power_state.value == "error"
    # a lifecycle op whose power action fails ends in the failed status
    maas_sim.admin.set_machine_faults("gpu-a-002", MachineFaults(power_error="BMC unreachable"))
    other = _machine(client, "gpu-a-002")
    with pytest.raises(FailedDeployment):
        other.deploy(**WAIT)
    assert "Power on for the node failed: BMC unreachable" in other._data["error_description"]
    maas_sim.admin.set_machine_faults("gpu-a-001", None)
    assert machine.query_power_state().value == "on"


def test_api_error_burst_then_recovery(maas_sim, client) -> None:
    machine = _machine(client, "gpu-a-001")
    maas_sim.admin.set_api_faults(ApiFaults(errors=[ApiErrorBurst(status=503, count=2, handler="MachineHandler",
                                                                  op="read")]))
    for _ in range(2):
        with pytest.raises(CallError) as info:
            client.machines.get(system_id=machine.system_id)
        assert info.value.status == 503
    assert client.machines.get(system_id=machine.system_id).hostname == "gpu-a-001"
    maas_sim.admin.set_api_faults(ApiFaults(errors=[ApiErrorBurst(status=500, count=1)]))
    with pytest.raises(CallError) as info:
        client.machines.list()
    assert info.value.status == 500
    assert len(client.machines.list()) == 3


def test_dropped_connection_then_recovery(maas_sim, client) -> None:
    # aiohttp silently retries an idempotent request once after a disconnect, so a GET needs
    # two drops to surface; a POST surfaces the first one.
    maas_sim.admin.set_api_faults(ApiFaults(drop_connections=2))
    with pytest.raises(aiohttp.ClientError):
        client.machines.list()
    assert len(client.machines.list()) == 3
    machine = _machine(client, "gpu-a-001")
    maas_sim.admin.set_api_faults(ApiFaults(drop_connections=1))
    with pytest.raises(aiohttp.ClientError):
        machine.deploy()
    assert maas_sim.admin.status("gpu-a-001") == NodeStatus.READY  # dropped before MAAS acted


def test_added_latency(maas_sim, client) -> None:
    maas_sim.admin.set_api_faults(ApiFaults(latency_ms=150))
    start = time.monotonic()
    client.machines.list()
    assert time.monotonic() - start >= 0.15  # lower bound only: the latency was injected
    maas_sim.admin.set_api_faults(ApiFaults())


def test_faults_round_trip_through_admin(maas_sim) -> None:
    faults = SimFaults(machines=MachineFaults(deploy_failures=1),
                       per_machine={"gpu-a-001": MachineFaults(power_error="x")},
                       api=ApiFaults(latency_ms=0, errors=[ApiErrorBurst(count=3)]))
    maas_sim.admin.set_faults(faults)
    assert maas_sim.admin.faults() == faults
    import httpx

    bad = httpx.put(f"{maas_sim.root_url}/_sim/faults/global", json={"deploy_failures": -1})
    assert bad.status_code == 400 and "deploy_failures" in bad.text


def test_fault_keyed_by_system_id_beats_global(maas_sim, client) -> None:
    machine = _machine(client, "gpu-a-001")
    maas_sim.admin.set_global_faults(MachineFaults(deploy_failures=5))
    maas_sim.admin.set_machine_faults(machine.system_id, MachineFaults())
    machine.deploy(**WAIT)
    assert machine.status_name == "Deployed"
    assert maas_sim.admin.status("gpu-a-002") == NodeStatus.READY
    data = session(client).Machine.deploy(system_id=_machine(client, "gpu-a-002").system_id)
    assert data["status_name"] == "Deploying"
    assert maas_sim.admin.wait_for_status("gpu-a-002", NodeStatus.FAILED_DEPLOYMENT) == NodeStatus.FAILED_DEPLOYMENT


def test_time_scale_changes_at_run_time(maas_sim, client) -> None:
    import httpx

    maas_sim.admin.set_time_scale(1.0)  # a real-time deploy (15 min) would now outlast the test
    machine = _machine(client, "gpu-a-001")
    machine.deploy()
    with maas_sim.core.store.lock:
        due = maas_sim.core.store.machines[machine.system_id].phase_due
    assert due is not None and due - time.monotonic() > 800  # the 900 s deploy, unscaled
    machine.abort()
    maas_sim.admin.set_time_scale(1e-4)
    machine.deploy(**WAIT)
    assert machine.status_name == "Deployed"
    bad = httpx.put(f"{maas_sim.root_url}/_sim/time_scale", json={"time_scale": -1})
    assert bad.status_code == 400
