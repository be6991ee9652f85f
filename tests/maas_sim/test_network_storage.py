"""Hardware per SKU, interface links (STATIC / AUTO / DHCP / LINK_UP, unlink), block devices and
the boot disk, subnets/VLANs/fabrics, tags and node scripts -- all through python-libmaas."""

from __future__ import annotations

import io
import json

import pytest
from maas.client.bones import CallError
from maas.client.enum import LinkMode

from .conftest import session

WAIT = {"wait": True, "wait_interval": 0.01}


def test_h200_enlists_with_boss_nvme_pxe_and_eight_roce_nics(client) -> None:
    machine = client.machines.list(hostnames=["gpu-a-001"])[0]
    names = [i.name for i in machine.interfaces]
    assert names == ["eno8303"] + [f"ens{n}f0np0" for n in range(1, 9)]
    assert machine.boot_interface.name == "eno8303"
    roce = [i for i in machine.interfaces if i.name.startswith("ens")]
    assert {i.effective_mtu for i in roce} == {9000}
    assert all("ConnectX-7" in i._data["product"] for i in roce)
    assert sorted(i.vlan.vid for i in roce) == list(range(100, 108))  # one rail VLAN per NIC
    disks = {d.name: d for d in machine.block_devices}
    assert machine.boot_disk.name == "sda" and disks["sda"].model == "DELLBOSS VD"
    assert sorted(n for n in disks if n.startswith("nvme")) == [f"nvme{i}n1" for i in range(8)]
    assert machine.cpus == 224 and machine.memory == 2 * 1024 * 1024
    small = client.machines.list(hostnames=["node-a-003"])[0]
    assert [i.name for i in small.interfaces] == ["eno1", "eno2"] and len(small.block_devices) == 1


def test_api_created_machine_shows_hardware_after_commissioning(maas_sim, client) -> None:
    data = session(client).Machines.create(architecture="amd64", mac_addresses=["aa:00:00:00:07:01"],
                                           power_type="manual", commission=False)
    assert data["cpu_count"] == 0 and data["blockdevice_set"] == [] and len(data["interface_set"]) == 1
    machine = client.machines.get(system_id=data["system_id"])
    machine.commission(**WAIT)
    assert machine.cpus > 0 and len(machine.block_devices) == 1 and len(machine.interfaces) == 2


def test_link_modes_and_unlink(client) -> None:
    machine = client.machines.list(hostnames=["gpu-a-001"])[0]
    rail0 = next(s for s in client.subnets.list() if s.cidr == "172.16.0.0/24")
    nic = next(i for i in machine.interfaces if i.name == "ens1f0np0")
    link = nic.links.create(LinkMode.STATIC, subnet=rail0, ip_address="172.16.0.21")
    assert (link.mode, link.ip_address, link.subnet.id) == (LinkMode.STATIC, "172.16.0.21", rail0.id)
    # the same address on another machine's NIC is refused with MAAS's form error
    other = client.machines.list(hostnames=["gpu-a-002"])[0]
    other_nic = next(i for i in other.interfaces if i.name == "ens1f0np0")
    with pytest.raises(CallError) as info:
        other_nic.links.create(LinkMode.STATIC, subnet=rail0, ip_address="172.16.0.21")
    assert json.loads(info.value.content) == {"ip_address": ["IP address is already in use."]}
    with pytest.raises(CallError) as info:
        other_nic.links.create(LinkMode.STATIC, subnet=rail0, ip_address="10.0.0.1")
    assert info.value.status == 400 and b"not in the given subnet" in info.value.content
    auto = other_nic.links.create(LinkMode.STATIC, subnet=rail0)  # next free address
    assert auto.ip_address.startswith("172.16.0.")
    # python-libmaas 0.6.8 can only delete links it read through their interface
    fresh = client.machines.get(system_id=machine.system_id).interfaces.get_by_name("ens1f0np0")
    assert [lk.id for lk in fresh.links] == [link.id]
    fresh.links[0].delete()
    assert len(client.machines.get(system_id=machine.system_id).interfaces.get_by_name("ens1f0np0").links) == 0
    # DHCP then LINK_UP (force clears the other links), AUTO on the PXE NIC
    nic2 = next(i for i in machine.interfaces if i.name == "ens2f0np0")
    nic2.links.create(LinkMode.DHCP)
    with pytest.raises(CallError) as info:
        nic2.links.create(LinkMode.LINK_UP)
    assert info.value.status == 400 and b"Specify force=True" in info.value.content
    up = nic2.links.create(LinkMode.LINK_UP, force=True)
    assert up.mode == LinkMode.LINK_UP and len(nic2.links) == 1
    pxe = machine.boot_interface
    assert [lk.mode for lk in pxe.links] == [LinkMode.AUTO]  # commissioning linked it
    raw = session(client).Interface.link_subnet(system_id=machine.system_id, id=pxe.id, mode="AUTO",
                                                subnet="cidr:10.10.0.0/22")
    assert len(raw["links"]) == 2
    machine.deploy(**WAIT)
    deployed = client.machines.get(system_id=machine.system_id)
    assert len(deployed.ip_addresses) >= 2 and all(ip.startswith("10.10.") for ip in deployed.ip_addresses)


def test_set_boot_disk_and_layouts(client) -> None:
    machine = client.machines.list(hostnames=["gpu-a-002"])[0]
    nvme0 = next(d for d in machine.block_devices if d.name == "nvme0n1")
    nvme0.set_as_boot_disk()
    machine.refresh()
    assert machine.boot_disk.name == "nvme0n1"
    for layout, root in (("flat", {"fstype": "ext4", "mount_point": "/"}), ("lvm", None), ("blank", None)):
        data = session(client).Machine.set_storage_layout(system_id=machine.system_id, storage_layout=layout)
        parts = data["boot_disk"]["partitions"]
        if layout == "blank":
            assert parts == []
        else:
            assert parts[0]["filesystem"]["mount_point"] == "/boot/efi"
            assert (parts[1]["filesystem"] and {k: parts[1]["filesystem"][k] for k in root}) == (root or None)


def test_network_objects(client) -> None:
    fabrics = {f.name: f for f in client.fabrics.list()}
    assert {"pxe-site-a", "roce-site-a"} <= set(fabrics)
    roce = client.fabrics.get(fabrics["roce-site-a"].id)
    assert sorted(v.vid for v in roce.vlans) == [0] + list(range(100, 108))
    vlan = session(client).Vlan.read(fabric_id=roce.id, vid=103)
    assert vlan["mtu"] == 9000 and vlan["name"] == "rail3"
    subnet = client.subnets.get(next(s.id for s in client.subnets.list() if s.cidr == "10.10.0.0/22"))
    assert subnet.gateway_ip == "10.10.0.1" and subnet.vlan.vid == 0
    assert [z.name for z in client.zones.list()] == ["site-a", "default"]


def test_tags(client) -> None:
    tag = client.tags.create("gpu-h200", comment="HGX H200 nodes")
    machines = client.machines.list(hostnames=["gpu-a-001", "gpu-a-002"])
    for m in machines:
        m.tags.add(tag)
    listed = session(client).Tag.machines(name="gpu-h200")
    assert sorted(m["hostname"] for m in listed) == ["gpu-a-001", "gpu-a-002"]
    machines[0].tags.remove(tag)
    assert [m["hostname"] for m in session(client).Tag.machines(name="gpu-h200")] == ["gpu-a-002"]
    assert "gpu-h200" in [t.name for t in client.tags.list()]
    assert [t.name for t in client.machines.list(hostnames=["gpu-a-002"])[0].tags] == ["gpu-h200"]
    with pytest.raises(CallError) as info:
        client.tags.create("gpu-h200")
    assert json.loads(info.value.content) == {"name": ["Tag with this Name already exists."]}


def test_node_scripts_upload_list_and_use(maas_sim, client) -> None:
    scripts = session(client)
    body = b"#!/bin/bash\n# --- Start MAAS 1.0 script metadata ---\n# name: gpu-burn\n"
    created = scripts.NodeScripts.create(name="gpu-burn", type="testing", tags="gpu,h200",
                                         script=io.BytesIO(body), timeout="600")
    assert (created["name"], created["type"], created["type_name"]) == ("gpu-burn", 2, "testing")
    scripts.NodeScripts.create(name="nvme-fw", type="commissioning", script=io.BytesIO(b"#!/bin/sh\n"))
    testing = [s["name"] for s in scripts.NodeScripts.read(type="testing")]
    assert "gpu-burn" in testing and "nvme-fw" not in testing
    commissioning = [s["name"] for s in scripts.NodeScripts.read(type="commissioning")]
    assert "nvme-fw" in commissioning
    assert scripts.NodeScript.download(name="gpu-burn") == body
    machine = client.machines.list(hostnames=["gpu-a-002"])[0]
    machine.commission(commissioning_scripts=["nvme-fw"], testing_scripts=["gpu"], **WAIT)  # tag selects
    assert machine.status_name == "Ready"
    with pytest.raises(CallError) as info:
        scripts.NodeScripts.create(name="gpu-burn", type="testing", script=io.BytesIO(body))
    assert info.value.status == 400


def test_storage_layout_parameters(client) -> None:
    machine = client.machines.list(hostnames=["gpu-a-002"])[0]
    raw = session(client).Machine
    nvme1 = next(d for d in machine.block_devices if d.name == "nvme1n1")
    data = raw.set_storage_layout(system_id=machine.system_id, storage_layout="flat", root_device=nvme1.id,
                                  root_size="200G")
    assert data["status_name"] == "Ready"
    with pytest.raises(CallError) as info:
        raw.set_storage_layout(system_id=machine.system_id, storage_layout="flat", root_size="900T")
    assert info.value.status == 400 and json.loads(info.value.content)["root_size"][0].startswith(
        "Size is too large.")
    with pytest.raises(CallError) as info:
        raw.set_storage_layout(system_id=machine.system_id, storage_layout="lvm", root_device=424242)
    assert json.loads(info.value.content) == {
        "root_device": ["Select a valid choice. 424242 is not one of the available choices."]}
    with pytest.raises(CallError) as info:
        raw.set_storage_layout(system_id=machine.system_id)
    assert json.loads(info.value.content) == {"storage_layout": ["This field is required."]}


def test_events_query_newest_first(maas_sim, client) -> None:
    from maas.client.viscera.machines import FailedDeployment

    from simulators.maas import MachineFaults

    maas_sim.admin.set_machine_faults("gpu-a-001", MachineFaults(deploy_failures=1))
    machine = client.machines.list(hostnames=["gpu-a-001"])[0]
    with pytest.raises(FailedDeployment):
        machine.deploy(**WAIT)
    data = session(client).Events.query(id=[machine.system_id], limit="2")  # GET params must be str in 0.6.8
    assert data["count"] == 2
    newest, cause = data["events"]
    assert (newest["type"], newest["level"], newest["node"]) == ("Failed deployment", "ERROR", machine.system_id)
    assert "Installation failed (refer to the installation log for more information)." in newest["description"]
    # The cause, worded as real MAAS logs a cloud-init datasource failure (clients/maas/vocabulary.py).
    assert (cause["type"], cause["description"]) == (
        "Node installation failure", "'cloudinit' searching for network datasources"
    )
    assert machine._data["status_message"] == newest["description"]
    everything = session(client).Events.query(hostname=["gpu-a-001"], level="DEBUG")["events"]
    assert [e["id"] for e in everything] == sorted((e["id"] for e in everything), reverse=True)
    assert len(everything) >= 4
