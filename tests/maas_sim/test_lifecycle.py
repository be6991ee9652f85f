"""Whole machine lifecycles through python-libmaas over HTTP: create -> accept/commission ->
storage -> deploy (user_data, hwe_kernel, enable_hw_sync) -> release with erase, from the main
thread and from ThreadPoolExecutor workers, as Pulumi's provider server calls them."""

from __future__ import annotations

import base64
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from maas.client.enum import NodeStatus as LibStatus
from maas.client.enum import PowerState

from simulators.maas import NodeStatus
from tests.fixtures.maas_sim import TEST_TIME_SCALE

from .conftest import connect, session

WAIT = {"wait": True, "wait_interval": 0.01}


def _create_new(client, mac: str, hostname: str) -> str:
    """create(commission=False) is missing from python-libmaas 0.6.8: raw handler call."""
    data = session(client).Machines.create(
        architecture="amd64/generic", mac_addresses=[mac], hostname=hostname, power_type="ipmi",
        power_parameters_power_address="10.99.0.5", power_parameters_power_user="root",
        power_parameters_power_pass="calvin", commission=False)
    assert data["status"] == NodeStatus.NEW and data["status_name"] == "New"
    return str(data["system_id"])


def test_create_accept_commission_deploy_release(maas_sim, client) -> None:
    sid = _create_new(client, "aa:00:00:00:00:01", "fresh-001")
    accepted = session(client).Machines.accept(machines=[sid])
    assert [m["system_id"] for m in accepted] == [sid]
    machine = client.machines.get(system_id=sid)
    assert machine.status in (LibStatus.COMMISSIONING, LibStatus.TESTING, LibStatus.READY)
    maas_sim.admin.wait_for_status(sid, NodeStatus.READY)
    machine.refresh()
    assert client.machines.get_power_parameters_for([sid])[sid]["power_address"] == "10.99.0.5"
    # commission again with explicit scripts
    machine.commission(commissioning_scripts=["update_firmware"], testing_scripts=["smartctl-validate"], **WAIT)
    assert machine.status == LibStatus.READY
    events = " ".join(e["description"] for e in maas_sim.admin.events(sid))
    assert "update_firmware" in events and "smartctl-validate" in events
    # storage, then deploy with user_data and a kernel
    boot = next(d for d in machine.block_devices if d.name == "sda")
    boot.set_as_boot_disk()
    out = session(client).Machine.set_storage_layout(system_id=sid, storage_layout="flat")
    assert out["boot_disk"]["partitions"][1]["filesystem"]["mount_point"] == "/"
    user_data = b"#cloud-config\nruncmd: [echo hi]\n"
    machine.deploy(user_data=user_data, distro_series="jammy", hwe_kernel="hwe-22.04", **WAIT)
    assert machine.status == LibStatus.DEPLOYED and machine.status_name == "Deployed"
    assert machine.distro_series == "jammy" and machine.hwe_kernel == "hwe-22.04"
    assert machine.power_state == PowerState.ON
    assert maas_sim.admin.user_data(sid) == user_data
    machine.release(erase=True, secure_erase=True, **WAIT)
    assert machine.status == LibStatus.READY and machine.power_state == PowerState.OFF
    descriptions = [e["description"] for e in maas_sim.admin.events(sid)]
    assert any("secure disk erase" in d for d in descriptions)
    assert maas_sim.admin.user_data(sid) == user_data  # kept after release for tests to read


def test_deploy_with_hw_sync_shows_sync_fields(maas_sim, client) -> None:
    machine = client.machines.list(hostnames=["gpu-a-001"])[0]
    assert machine._data["enable_hw_sync"] is False and machine._data["last_sync"] is None
    payload = base64.b64encode(b"#cloud-config\n{}\n").decode()
    data = session(client).Machine.deploy(system_id=machine.system_id, user_data=payload,
                                          distro_series="noble", enable_hw_sync=True)
    assert data["status_name"] == "Deploying" and data["enable_hw_sync"] is True
    maas_sim.admin.wait_for_status(machine.system_id, NodeStatus.DEPLOYED)
    machine.refresh()
    assert machine._data["sync_interval"] == 900
    assert machine._data["last_sync"] and machine._data["next_sync"] > machine._data["last_sync"]
    first = machine._data["last_sync"]
    deadline = time.monotonic() + 5
    while machine._data["last_sync"] == first and time.monotonic() < deadline:
        time.sleep(0.02)  # the sync interval is 900 s x time_scale: the agent reports again
        machine.refresh()
    assert machine._data["last_sync"] > first


def test_lifecycles_from_thread_pool_workers(maas_sim_factory) -> None:
    from simulators.maas import demo_inventory

    sim = maas_sim_factory(inventory=demo_inventory(sites=2, h200_per_site=3, small_per_site=1))
    hostnames = [m["hostname"] for m in sim.admin.machines()]

    def lifecycle(hostname: str) -> tuple[str, str, str]:
        client = connect(sim)  # a fresh client and event loop per worker thread
        machine = client.machines.list(hostnames=[hostname])[0]
        machine.deploy(user_data=f"#cloud-config\nhostname: {hostname}\n".encode(), **WAIT)
        deployed = machine.status_name
        machine.release(**WAIT)
        return hostname, deployed, machine.status_name

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lifecycle, hostnames))
    elapsed = time.monotonic() - started
    assert results == [(h, "Deployed", "Ready") for h in hostnames]
    peaks = sim.admin.peak_concurrency()
    busy = sim.admin.busy_seconds()  # machine-seconds deploying (the bench's slot occupancy)
    assert set(busy) == {"site-a", "site-b"}
    assert all(0 < busy[s] <= peaks[s]["busy"] * elapsed for s in busy), (busy, peaks, elapsed)
    # Each busy change, in time order (the bench's idle split): the same machine-seconds, every machine back.
    changes = sim.admin.busy_changes()
    assert set(changes) == {"site-a", "site-b"}
    for site, rows in changes.items():
        assert [t for t, _, _ in rows] == sorted(t for t, _, _ in rows)
        assert all(0 <= c <= n <= peaks[site]["busy"] for _, n, c in rows) and rows[-1][1:] == (0, 0)
        integral = sum(n * (t1 - t0) for (t0, n, _), (t1, _, _) in zip(rows, rows[1:], strict=False))
        assert abs(integral - busy[site]) < 0.01, (site, integral, busy[site])
    assert set(peaks) == {"site-a", "site-b"}
    assert all(1 <= p["deploying"] <= 4 for p in peaks.values())
    counts = sim.admin.request_counts()
    assert counts["MachineHandler"]["deploy"] == len(hostnames)
    assert counts["MachineHandler"]["release"] == len(hostnames)


def test_abort_mark_broken_fixed_and_power(maas_sim, client) -> None:
    machine = client.machines.list(hostnames=["gpu-a-002"])[0]
    sid = machine.system_id
    maas_sim.admin.set_time_scale(1.0)  # a 600 s commissioning: the abort lands in it, however loaded the machine
    machine.commission()
    machine.abort()
    assert machine.status == LibStatus.NEW
    maas_sim.admin.set_time_scale(TEST_TIME_SCALE)
    machine.commission(**WAIT)
    machine.mark_broken(comment="bad DIMM")
    assert machine.status_name == "Broken"
    machine.mark_fixed(comment="DIMM replaced")
    assert machine.status == LibStatus.READY
    machine.deploy(**WAIT)
    machine.power_off()
    assert machine.power_state == PowerState.OFF
    machine.power_on()
    assert machine.query_power_state() == PowerState.ON
    machine.owner_data = {"pulumi-urn": "urn:x", "pool": "gpu"}
    machine.save()
    assert client.machines.get(system_id=sid).owner_data == {"pulumi-urn": "urn:x", "pool": "gpu"}
    session(client).Machine.set_owner_data(system_id=sid, pool="")
    assert client.machines.get(system_id=sid).owner_data == {"pulumi-urn": "urn:x"}
    released = session(client).Machine.release(system_id=sid, force=True)  # `force` is not in 0.6.8
    assert released["status_name"] == "Releasing"
    maas_sim.admin.wait_for_status(sid, NodeStatus.READY)


def test_update_delete_and_filters(maas_sim, client) -> None:
    machine = client.machines.list(hostnames=["node-a-003"])[0]
    mac = machine.boot_interface.mac_address
    assert [m.hostname for m in client.machines.list(hostnames=["node-a-003", "nope"])] == ["node-a-003"]
    by_mac = session(client).Machines.read(mac_address=[mac])
    assert [m["hostname"] for m in by_mac] == ["node-a-003"]
    by_id = session(client).Machines.read(id=[machine.system_id])
    assert [m["system_id"] for m in by_id] == [machine.system_id]
    machine.set_power("ipmi", {"power_address": "10.1.1.1", "power_user": "admin", "power_pass": "x"})
    assert machine.get_power_parameters()["power_address"] == "10.1.1.1"
    machine.hostname = "renamed-003"
    machine.save()
    assert client.machines.get(system_id=machine.system_id).hostname == "renamed-003"
    machine.delete()
    assert len(client.machines.list(hostnames=["renamed-003"])) == 0
    assert maas_sim.admin.events(machine.system_id)[0]["type"] == "SEED"  # history outlives the machine


def test_create_with_json_power_parameters_commissions_by_default(maas_sim, client) -> None:
    machine = client.machines.create("amd64", ["aa:00:00:00:00:31", "aa:00:00:00:00:32"], "redfish",
                                     {"power_address": "10.9.9.9", "power_user": "u", "power_pass": "p"},
                                     hostname="json-001")
    assert machine.status == LibStatus.COMMISSIONING and machine.power_type == "redfish"
    assert machine.get_power_parameters() == {"power_address": "10.9.9.9", "power_user": "u", "power_pass": "p"}
    assert sorted(i.mac_address for i in machine.interfaces) == ["aa:00:00:00:00:31", "aa:00:00:00:00:32"]
    maas_sim.admin.wait_for_status("json-001", NodeStatus.READY)


def test_python_libmaas_quirks_reproduce(maas_sim, client) -> None:
    """DESIGN.md 3.2: MAAS answers `null` to power_off on a manual machine (python-libmaas 0.6.8
    then fails), and reports partition tables as "GPT" (which 0.6.8's enum rejects)."""
    data = session(client).Machines.create(architecture="amd64", mac_addresses=["aa:00:00:00:00:41"],
                                           power_type="manual", hostname="manual-001")
    maas_sim.admin.wait_for_status("manual-001", NodeStatus.READY)
    machine = client.machines.get(system_id=data["system_id"])
    machine.deploy(**WAIT)
    assert session(client).Machine.power_off(system_id=machine.system_id) is None
    try:
        machine.power_off()
    except (TypeError, AttributeError):
        pass
    else:
        raise AssertionError("python-libmaas 0.6.8 is expected to fail on MAAS's null power_off reply")
    machine = client.machines.get(system_id=data["system_id"])  # the failed call left it unusable
    assert machine.query_power_state() == PowerState.UNKNOWN
    disk = client.machines.list(hostnames=["gpu-a-001"])[0].boot_disk
    assert disk._data["partition_table_type"] == "GPT"
    with pytest.raises(ValueError):
        _ = disk.partition_table_type  # python-libmaas 0.6.8 only knows lowercase values
