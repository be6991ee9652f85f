"""Bulk machine reads decode only what the client reads (issue 29: a 1,024-machine answer is 34 MB of
JSON), through python-libmaas and the simulator over HTTP:

- every bulk read gives the views a whole-document decode gives, field for field (owner data, tags, PXE
  MAC, power state, status message), before and after a deploy;
- a poll decodes interfaces and disks (typed, only those) only when it picks a machine, and a picked
  machine's detail is what a single machine read gives, for every machine of a poll and for the document
  shapes MAAS versions send (disks under `physicalblockdevice_set`, nulls, fields this client ignores);
- an answer without what the client reads, in a view or in a picked machine's detail, is a MaasError
  naming the request and where, never a crash and never the answer's values.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import simulators.maas.handlers_machines as sim_handlers
from clients.maas import BlockDeviceView, InterfaceView, MaasClient, MaasError, MaasStatus, MachineDetail
from clients.maas.parse import machine_detail, machine_details, machine_view, machine_views
from simulators.maas.enums import NodeStatus


def _whole(c: MaasClient, **params: Any) -> list[Any]:
    """The same read decoded as any JSON (no typed decoder): the reference."""
    return list(c._call("Machines", "read", read=True, **params))


def _deploy_one(sim: Any, c: MaasClient) -> str:
    sid = c.by_hostnames(["gpu-a-001"])[0].system_id
    c.set_tags(sid, ["gpuaas-bench"])
    c.deploy(sid, user_data=b"#cloud-config\n", distro_series="jammy", hwe_kernel=None, enable_hw_sync=True)
    sim.admin.wait_for_status(sid, NodeStatus.DEPLOYED)
    c.set_owner_data(sid, {"gpuaas/pool": "bench", "gpuaas/spec": "a1b2"})
    return sid


def _one_machine_rendered_as(sim: Any, c: MaasClient, monkeypatch: pytest.MonkeyPatch,
                             change: Callable[[dict[str, Any]], None]) -> str:
    """A deployed machine whose owner data holds a value no error may show, and whose document the simulator
    renders changed by `change` (the others as they are)."""
    sid = _deploy_one(sim, c)
    c.set_owner_data(sid, {"gpuaas/note": "value-never-in-an-error"})
    render = sim_handlers.machine_json

    def changed(store: Any, m: Any) -> dict[str, Any]:
        data = dict(render(store, m))
        if m.system_id == sid:
            change(data)
        return data

    monkeypatch.setattr(sim_handlers, "machine_json", changed)
    return sid


def test_every_bulk_read_gives_the_views_of_the_whole_document(maas_sim: Any) -> None:
    c = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    for deployed in (False, True):
        if deployed:
            _deploy_one(maas_sim, c)
        raw = _whole(c)
        assert len(raw) == 3
        whole = {r["system_id"]: machine_view(r) for r in raw}
        for r in raw:  # each field against the document itself, not through the client's own model
            v = whole[r["system_id"]]
            assert (v.hostname, v.status, v.status_message, v.power_state, v.pxe_mac, v.owner_data,
                    v.enable_hw_sync, v.tags) == (
                r["hostname"], MaasStatus(r["status"]), r["status_message"] or "", r["power_state"],
                r["boot_interface"]["mac_address"].lower(), r["owner_data"], bool(r["enable_hw_sync"]),
                tuple(r["tag_names"]))
        ids = sorted(whole)
        assert {v.system_id: v for v in c.read_many(ids)} == whole
        assert {v.system_id: v for v in c.by_hostnames([r["hostname"] for r in raw])} == whole
        macs = [r["boot_interface"]["mac_address"] for r in raw]
        assert {v.system_id: v for v in c.by_macs(macs)} == whole
        assert all(v.pxe_mac for v in whole.values()) and all(v.hostname for v in whole.values())
    tagged = c.with_tag("gpuaas-bench")
    assert [v.owner_data for v in tagged] == [{"gpuaas/pool": "bench", "gpuaas/spec": "a1b2"}]
    assert tagged[0].status is MaasStatus.DEPLOYED
    assert tagged[0].enable_hw_sync is True and "gpuaas-bench" in tagged[0].tags


def test_a_poll_decodes_details_only_for_the_machines_it_picks(maas_sim: Any) -> None:
    c = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    views = c.by_hostnames(["gpu-a-001", "gpu-a-002", "cpu-a-001"])
    ids = sorted(v.system_id for v in views)
    picked = ids[1]
    polled = c.poll_many(ids, detail_when=lambda v: v.system_id == picked)
    assert [v.system_id for v, _ in polled] == ids
    assert {v.system_id: d for v, d in polled if d is not None} == {picked: c.detail(picked)}
    detail = c.detail(picked)
    assert detail.interfaces and detail.block_devices  # a real detail, not an empty one
    assert all(d is None for _, d in c.poll_many(ids, detail_when=lambda v: False))


def test_an_answer_without_what_the_client_reads_is_a_maas_error(maas_sim: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    c = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    _one_machine_rendered_as(maas_sim, c, monkeypatch, lambda data: data.pop("system_id"))
    with pytest.raises(MaasError) as e:
        c.with_tag("gpuaas-bench")
    msg = str(e.value)
    assert msg.startswith("MAAS Machines.read: an answer this client cannot read (1 problem; first at [0.system_id]")
    assert "fix:" in msg and "value-never-in-an-error" not in msg


def test_every_machine_of_a_poll_has_the_single_reads_detail(maas_sim: Any) -> None:
    c = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    _deploy_one(maas_sim, c)  # one deployed machine among the ready ones: links and owner data in the answer
    ids = sorted(v.system_id for v in c.by_hostnames(["gpu-a-001", "gpu-a-002", "cpu-a-001"]))
    polled = c.poll_many(ids, detail_when=lambda v: True)
    assert [v.system_id for v, _ in polled] == ids
    for view, detail in polled:
        assert detail == c.detail(view.system_id)
        assert detail.machine == view


_BASE = {"system_id": "abc123", "hostname": "gpu-a-001", "status": 4, "status_message": "Ready",
         "power_state": "off", "boot_interface": {"mac_address": "52:54:00:AA:BB:CC"}, "owner_data": {},
         "enable_hw_sync": False, "tag_names": []}
_LINK = {"id": 1, "mode": "auto", "subnet": {"id": 3, "cidr": "10.0.0.0/24"}}
_ETH0 = InterfaceView(id=7, name="eth0", mac_address="52:54:00:aa:bb:cc")


@pytest.mark.parametrize("doc, interfaces, disks, boot_mac, boot_disk_id", [
    pytest.param({**_BASE,
                  "interface_set": [{"id": 7, "name": "eth0", "mac_address": "52:54:00:AA:BB:CC", "links": [_LINK]}],
                  "physicalblockdevice_set": [{"id": 9, "name": "sda", "model": "QEMU", "size": 10 ** 11}],
                  "boot_disk": {"id": 9}},
                 (_ETH0.model_copy(update={"links": (_LINK,)}),),
                 (BlockDeviceView(id=9, name="sda", model="QEMU", size=10 ** 11),), "52:54:00:aa:bb:cc", 9,
                 id="disks-under-physicalblockdevice_set"),
    pytest.param({**_BASE, "boot_interface": None,
                  "interface_set": [{"id": 7, "name": "eth0", "mac_address": None, "links": None}],
                  "blockdevice_set": [{"id": 9, "name": "sda", "model": None, "size": None}], "boot_disk": None},
                 (InterfaceView(id=7, name="eth0", mac_address=""),), (BlockDeviceView(id=9, name="sda"),),
                 None, None, id="nulls"),
    pytest.param({**_BASE, "cpu_count": 8, "memory": 4096,
                  "interface_set": [{"id": 7, "name": "eth0", "mac_address": "52:54:00:aa:bb:cc", "links": [],
                                     "vlan": {"id": 5000, "mtu": 9000}, "enabled": True}],
                  "blockdevice_set": [{"id": 9, "name": "sda", "model": "M", "size": 5, "serial": "S1",
                                       "partitions": [{"id": 1}]}],
                  "physicalblockdevice_set": [{"id": 10, "name": "sdb"}], "boot_disk": {"id": 9, "name": "sda"}},
                 (_ETH0,), (BlockDeviceView(id=9, name="sda", model="M", size=5),), "52:54:00:aa:bb:cc", 9,
                 id="fields-this-client-ignores"),
    pytest.param(dict(_BASE), (), (), "52:54:00:aa:bb:cc", None, id="no-interfaces-or-disks"),
])
def test_the_detail_reads_the_shapes_maas_sends(doc: dict[str, Any], interfaces: tuple[InterfaceView, ...],
                                                disks: tuple[BlockDeviceView, ...], boot_mac: str | None,
                                                boot_disk_id: int | None) -> None:
    """A poll's answer and a single read's, for the document shapes MAAS versions send: disks listed only
    under `physicalblockdevice_set` (older regions), nulls, fields this client does not read."""
    expected = MachineDetail(machine=machine_views(json.dumps([doc]).encode())[0], boot_interface_mac=boot_mac,
                             interfaces=interfaces, block_devices=disks, boot_disk_id=boot_disk_id)
    assert machine_details(json.dumps([doc, doc]).encode()) == [expected] * 2
    assert machine_detail(json.dumps(doc).encode()) == expected


def test_a_picked_machine_the_client_cannot_read_is_a_maas_error(maas_sim: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the picked machine's detail is read: an interface without its name is the coded error when the
    poll picks that machine, not a KeyError out of the poll, and nothing when it does not."""
    c = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)

    def interface_without_name(data: dict[str, Any]) -> None:
        data["interface_set"] = [{k: v for k, v in i.items() if k != "name"} for i in data["interface_set"]]

    sid = _one_machine_rendered_as(maas_sim, c, monkeypatch, interface_without_name)
    assert [d for _, d in c.poll_many([sid], detail_when=lambda v: False)] == [None]
    with pytest.raises(MaasError) as e:
        c.poll_many([sid], detail_when=lambda v: True)
    msg = str(e.value)
    assert msg.startswith("MAAS Machines.read: an answer this client cannot read (")
    assert "interface_set.0.name" in msg and "fix:" in msg and "value-never-in-an-error" not in msg
