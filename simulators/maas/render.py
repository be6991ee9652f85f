"""JSON shapes of MAAS objects, as the 2.0 API renders them (field names from canonical/maas
DISPLAYED_*_FIELDS). python-libmaas reads these through its viscera objects."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from .config import hw_sync_interval
from .enums import NodeStatus
from .state import BlockDevice, Interface, Link, Machine, Script, Store, Subnet, Tag, Vlan, Zone

API = "/MAAS/api/2.0"


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")


def zone_json(z: Zone) -> dict[str, Any]:
    return {"id": z.id, "name": z.name, "description": z.description, "resource_uri": f"{API}/zones/{z.name}/"}


def fabric_json(store: Store, fabric_id: int) -> dict[str, Any]:
    fab = store.fabrics[fabric_id]
    vlans = [vlan_json(store, v) for v in store.vlans.values() if v.fabric_id == fabric_id]
    return {"id": fab.id, "name": fab.name, "class_type": None, "vlans": vlans,
            "resource_uri": f"{API}/fabrics/{fab.id}/"}


def _shared(store: Store, kind: str, obj: Vlan | Subnet) -> dict[str, Any] | None:
    memo = store.network_json.get((kind, obj.id))
    return memo[1] if memo is not None and memo[0] is obj else None


def vlan_json(store: Store, v: Vlan) -> dict[str, Any]:
    """Built once per VLAN and shared by every machine that shows it (the network is frozen):
    callers must not modify it."""
    out = _shared(store, "vlan", v)
    if out is None:
        out = {"id": v.id, "vid": v.vid, "name": v.name, "mtu": v.mtu, "dhcp_on": v.vid == 0,
               "external_dhcp": None, "relay_vlan": None, "primary_rack": None, "secondary_rack": None,
               "space": "undefined", "fabric": store.fabrics[v.fabric_id].name, "fabric_id": v.fabric_id,
               "resource_uri": f"{API}/vlans/{v.id}/"}
        store.network_json[("vlan", v.id)] = (v, out)
    return out


def subnet_json(store: Store, s: Subnet) -> dict[str, Any]:
    """Shared like vlan_json's: callers must not modify it."""
    out = _shared(store, "subnet", s)
    if out is None:
        out = {"id": s.id, "name": s.name, "cidr": str(s.cidr), "vlan": vlan_json(store, store.vlans[s.vlan_id]),
               "gateway_ip": s.gateway_ip, "dns_servers": list(s.dns_servers), "rdns_mode": 2,
               "allow_dns": True, "allow_proxy": True, "active_discovery": False, "managed": True,
               "disabled_boot_architectures": [], "space": "undefined", "description": "",
               "resource_uri": f"{API}/subnets/{s.id}/"}
        store.network_json[("subnet", s.id)] = (s, out)
    return out


def link_json(store: Store, lk: Link) -> dict[str, Any]:
    out: dict[str, Any] = {"id": lk.id, "mode": lk.mode.value}
    if lk.subnet_id is not None and lk.subnet_id in store.subnets:
        out["subnet"] = subnet_json(store, store.subnets[lk.subnet_id])
    if lk.ip_address:
        out["ip_address"] = lk.ip_address
    return out


def interface_json(store: Store, m: Machine, i: Interface) -> dict[str, Any]:
    """Reused while every input below (the key) is unchanged, like machine_list_body's JSON: a
    status poll renders each NIC of each machine again. Shared, so callers must not modify it."""
    key = (m.system_id, i.id, i.name, i.mac_address, i.enabled, i.vlan_id, i.mtu, i.vendor, i.product,
           i.speed_mbps, tuple(i.tags), [(lk.id, lk.mode, lk.subnet_id, lk.ip_address) for lk in i.links])
    if i.rendered is not None and i.rendered[0] == key:
        return i.rendered[1]
    out = {
        "id": i.id, "name": i.name, "type": "physical", "mac_address": i.mac_address, "enabled": i.enabled,
        "system_id": m.system_id, "vlan": vlan_json(store, store.vlans[i.vlan_id]) if i.vlan_id else None,
        "links": [link_json(store, lk) for lk in i.links], "discovered": None, "tags": list(i.tags),
        "params": "", "parents": [], "children": [], "effective_mtu": i.mtu, "vendor": i.vendor,
        "product": i.product, "firmware_version": None, "link_connected": True,
        "interface_speed": i.speed_mbps, "link_speed": i.speed_mbps if i.vlan_id else 0, "numa_node": 0,
        "sriov_max_vf": 0, "resource_uri": f"{API}/nodes/{m.system_id}/interfaces/{i.id}/",
    }
    i.rendered = (key, out)
    return out


def _partitions(m: Machine, d: BlockDevice) -> tuple[list[dict[str, Any]], str, int]:
    """Partitions the applied storage layout puts on the boot disk (flat/lvm: ESP + root)."""
    if d.id != m.boot_disk_id or m.storage_layout in (None, "blank"):
        return [], "", 0
    esp = 512 * 1024**2
    rest = d.size - esp - 8 * 1024**2
    base = f"{API}/nodes/{m.system_id}/blockdevices/{d.id}/partition"
    root_fs = ({"fstype": "ext4", "label": "root", "mount_point": "/", "mount_options": None, "uuid": None}
               if m.storage_layout == "flat" else None)
    parts = [
        {"id": d.id * 10 + 1, "type": "partition", "size": esp, "bootable": True, "tags": [],
         "system_id": m.system_id, "device_id": d.id, "path": f"/dev/disk/by-dname/{d.name}-part1",
         "used_for": "fat32 formatted filesystem mounted at /boot/efi", "uuid": None,
         "filesystem": {"fstype": "fat32", "label": "efi", "mount_point": "/boot/efi", "mount_options": None,
                        "uuid": None}, "resource_uri": f"{base}/{d.id * 10 + 1}"},
        {"id": d.id * 10 + 2, "type": "partition", "size": rest, "bootable": False, "tags": [],
         "system_id": m.system_id, "device_id": d.id, "path": f"/dev/disk/by-dname/{d.name}-part2",
         "used_for": ("ext4 formatted filesystem mounted at /" if root_fs else "LVM volume for vgroot"),
         "uuid": None, "filesystem": root_fs, "resource_uri": f"{base}/{d.id * 10 + 2}"},
    ]
    return parts, "GPT partitioned with 2 partitions", esp + rest


def block_device_json(m: Machine, d: BlockDevice) -> dict[str, Any]:
    """Reused while its inputs (the key) are unchanged, like interface_json's; shared, not to modify."""
    key = (m.system_id, m.boot_disk_id, m.storage_layout, d.id, d.name, d.model, d.serial, d.size,
           d.block_size, d.id_path, tuple(d.tags))
    if d.rendered is not None and d.rendered[0] == key:
        return d.rendered[1]
    parts, used_for, used = _partitions(m, d)
    out = {
        "id": d.id, "name": d.name, "type": "physical", "model": d.model, "serial": d.serial,
        "id_path": d.id_path, "path": f"/dev/disk/by-dname/{d.name}", "size": d.size,
        "block_size": d.block_size, "tags": list(d.tags), "uuid": None, "available_size": d.size - used,
        "used_size": used, "used_for": used_for, "partition_table_type": "GPT" if parts else None,
        "partitions": parts, "filesystem": None, "storage_pool": None, "system_id": m.system_id,
        "firmware_version": "1.0", "numa_node": 0,
        "resource_uri": f"{API}/nodes/{m.system_id}/blockdevices/{d.id}/",
    }
    d.rendered = (key, out)
    return out


def machine_json(store: Store, m: Machine) -> dict[str, Any]:
    zone = store.zones.get(m.zone) or store.zones["default"]
    boot_disk = m.disk(m.boot_disk_id) if m.boot_disk_id is not None else None
    boot_iface = m.iface(m.boot_interface_id)
    ips = [lk.ip_address for i in m.interfaces for lk in i.links if lk.ip_address]
    hidden = not m.commissioned and m.known_macs is not None  # hardware not discovered yet
    disks = [] if hidden else [block_device_json(m, d) for d in m.block_devices]
    nics = [i for i in m.interfaces if not hidden or i.mac_address in (m.known_macs or ())]
    passed = 2 if m.commissioned else -1
    sync_on = m.enable_hw_sync and m.status == NodeStatus.DEPLOYED
    interval = hw_sync_interval(store)  # the region's setting now, as MAAS computes it per read
    return {
        "system_id": m.system_id, "hostname": m.hostname, "description": m.description,
        "hardware_uuid": None, "domain": {"id": 0, "name": store.domain, "authoritative": True, "ttl": None,
                                          "is_default": True, "resource_record_count": 0,
                                          "resource_uri": f"{API}/domains/0/"},
        "fqdn": f"{m.hostname}.{store.domain}", "owner": m.owner, "owner_data": dict(m.owner_data),
        "workload_annotations": dict(m.owner_data), "locked": False, "cache_sets": [], "bcaches": [],
        "bios_boot_method": "uefi", "boot_interface": interface_json(store, m, boot_iface) if boot_iface else None,
        "architecture": m.architecture, "min_hwe_kernel": m.min_hwe_kernel, "hwe_kernel": m.hwe_kernel,
        "cpu_count": 0 if hidden else m.cpu_count, "cpu_speed": 0 if hidden else m.cpu_speed,
        "memory": 0 if hidden else m.memory, "swap_size": None,
        "storage": 0.0 if hidden else round(sum(d.size for d in m.block_devices) / 1000**2, 1), "status": int(m.status),
        "status_name": m.status.label, "status_action": "", "status_message": m.status_message,
        "osystem": m.osystem, "distro_series": m.distro_series, "ephemeral_deploy": False,
        "error_description": m.error_description, "netboot": m.status != NodeStatus.DEPLOYED,
        "power_type": m.power_type, "power_state": m.power_state.value, "tag_names": list(m.tags),
        "address_ttl": None, "ip_addresses": ips,
        "interface_set": [interface_json(store, m, i) for i in nics],
        "zone": zone_json(zone),
        "pool": {"id": 0, "name": "default", "description": "Default pool", "resource_uri": f"{API}/resourcepool/0/"},
        "disable_ipv4": False, "constraints_by_type": {},
        "boot_disk": block_device_json(m, boot_disk) if boot_disk and not hidden else None,
        "blockdevice_set": disks, "physicalblockdevice_set": disks, "virtualblockdevice_set": [],
        "volume_groups": [], "raids": [], "special_filesystems": [], "parent": None,
        "node_type": 0, "node_type_name": "Machine",
        "default_gateways": {"ipv4": {"gateway_ip": None, "link_id": None},
                             "ipv6": {"gateway_ip": None, "link_id": None}},
        "current_commissioning_result_id": None, "current_testing_result_id": None,
        "current_installation_result_id": None,
        **{f"{k}_status": passed for k in ("commissioning", "testing", "cpu_test", "memory_test",
                                           "network_test", "storage_test", "other_test", "interface_test")},
        **{f"{k}_status_name": "Passed" if m.commissioned else "Unknown"
           for k in ("commissioning", "testing", "cpu_test", "memory_test", "network_test", "storage_test",
                     "other_test", "interface_test")},
        "hardware_info": dict(m.hardware_info),
        "numanode_set": [{"index": 0, "cores": list(range(m.cpu_count)), "memory": m.memory,
                          "hugepages_set": []}],
        "enable_hw_sync": m.enable_hw_sync,
        "last_sync": _iso(m.last_sync) if sync_on else None,
        "sync_interval": interval if m.enable_hw_sync else None,
        "next_sync": _iso(m.last_sync + interval) if sync_on and m.last_sync else None,
        "is_sync_healthy": True if m.enable_hw_sync else None,
        "enable_kernel_crash_dump": False, "is_dpu": False,
        "resource_uri": f"{API}/machines/{m.system_id}/",
    }


# What a deployed machine's hardware sync moves at every report (900 s in MAAS, 3.6 s of wall at the bench's
# time scale 4e-3): encoded per read, around the rest of the machine's JSON, which is reused while it is unchanged.
_VOLATILE = ("last_sync", "next_sync")
_MARK = "\x00volatile:{}\x00"


def _encoded_parts(data: dict[str, Any]) -> tuple[bytes | str, ...] | None:
    """json.dumps(data), encoded, with the volatile fields' values cut out: (bytes, key, bytes, key, bytes).
    None when a marker would not be found exactly once (a value holding one): that machine is encoded whole."""
    if [k for k in data if k in _VOLATILE] != list(_VOLATILE):
        return None
    text = json.dumps({**data, **{k: _MARK.format(k) for k in _VOLATILE}})
    pieces: list[bytes | str] = []
    for key in _VOLATILE:  # the order json.dumps writes them in: data's own key order
        marker = json.dumps(_MARK.format(key))
        if text.count(marker) != 1:
            return None
        head, text = text.split(marker)
        pieces += [head.encode(), key]
    return (*pieces, text.encode())


def machine_list_body(rendered: Iterable[tuple[Machine, dict[str, Any]]]) -> bytes:
    """json.dumps() of a list of machine renderings, byte for byte. Encoding a machine costs three
    times rendering it, and fleet-scale polling re-reads mostly unchanged machines: a machine's JSON
    is reused while its new rendering compares equal to the one encoded (with the key order of its
    free-form dicts, which == ignores), all but the hardware sync's times, which are encoded at each
    read (every deployed machine's change between two refreshes at the bench's time scale: re-encoding
    them whole was 0.3-0.5 s of the simulator's CPU a read of 1,024). Call outside store.lock; the
    renderings are the caller's."""
    out: list[bytes] = [b"["]
    for m, data in rendered:
        stable = {k: v for k, v in data.items() if k not in _VOLATILE}
        order = (tuple(data["owner_data"]), tuple(data["hardware_info"]))
        cached = m.rendered
        if cached is None or cached[1] != order or cached[0] != stable:
            cached = (stable, order, _encoded_parts(data))
            m.rendered = cached
        if len(out) > 1:
            out.append(b", ")
        parts = cached[2]
        if parts is None:
            out.append(json.dumps(data).encode())
            continue
        for part in parts:
            out.append(part if isinstance(part, bytes) else json.dumps(data[part]).encode())
    out.append(b"]")
    return b"".join(out)


def tag_json(t: Tag) -> dict[str, Any]:
    return {"name": t.name, "comment": t.comment, "definition": t.definition, "kernel_opts": t.kernel_opts,
            "resource_uri": f"{API}/tags/{t.name}/"}


SCRIPT_TYPE_NAMES = {0: "commissioning", 2: "testing", 3: "release"}


def script_json(s: Script, include_script: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": s.id, "name": s.name, "title": s.title, "description": s.description, "tags": list(s.tags),
        "type": s.script_type, "type_name": SCRIPT_TYPE_NAMES.get(s.script_type, "commissioning"),
        "hardware_type": s.hardware_type, "hardware_type_name": "Node", "parallel": s.parallel,
        "parallel_name": "Disabled", "results": [], "parameters": {}, "packages": {}, "timeout": f"0:00:{s.timeout:02d}"
        if s.timeout < 60 else f"{s.timeout // 3600}:{s.timeout // 60 % 60:02d}:{s.timeout % 60:02d}",
        "destructive": s.destructive, "for_hardware": [], "may_reboot": False, "recommission": False,
        "default": s.default, "apply_configured_networking": False,
        "history": [{"id": s.id, "comment": "", "created": "", "data": ""}],
        "resource_uri": f"{API}/scripts/{s.name}",
    }
    if include_script:
        out["history"][0]["data"] = base64.b64encode(s.script).decode()
    return out


def user_data_digest(data: bytes | None) -> dict[str, Any] | None:
    """What a state dump shows of deployed user_data: never the content (it holds tokens)."""
    if data is None:
        return None
    return {"sha256": hashlib.sha256(data).hexdigest(), "length": len(data)}
