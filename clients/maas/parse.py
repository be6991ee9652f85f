"""MAAS's machine JSON as the client's views (one machine from `Machine.read`, many from a bulk read:
the same representation)."""

from __future__ import annotations

from typing import Any

from .vocabulary import BlockDeviceView, InterfaceView, MaasStatus, MachineDetail, MachineView


def machine_view(raw: dict[str, Any]) -> MachineView:
    boot = raw.get("boot_interface") or {}
    return MachineView(
        system_id=raw["system_id"],
        hostname=raw.get("hostname", ""),
        status=MaasStatus(int(raw["status"])),
        status_message=raw.get("status_message") or "",
        power_state=raw.get("power_state") or "unknown",
        pxe_mac=(boot.get("mac_address") or "").lower() or None,
        owner_data={k: str(v) for k, v in (raw.get("owner_data") or {}).items()},
        enable_hw_sync=bool(raw.get("enable_hw_sync", False)),
        tags=tuple(raw.get("tag_names") or ()),
    )


def machine_detail(raw: dict[str, Any]) -> MachineDetail:
    interfaces = tuple(
        InterfaceView(
            id=i["id"],
            name=i["name"],
            mac_address=(i.get("mac_address") or "").lower(),
            links=tuple(i.get("links") or ()),
        )
        for i in raw.get("interface_set") or ()
    )
    disks = tuple(
        BlockDeviceView(id=b["id"], name=b["name"], model=b.get("model") or "", size=int(b.get("size") or 0))
        for b in raw.get("blockdevice_set") or raw.get("physicalblockdevice_set") or ()
    )
    boot = raw.get("boot_interface") or {}
    boot_disk = raw.get("boot_disk") or {}
    return MachineDetail(
        machine=machine_view(raw),
        boot_interface_mac=(boot.get("mac_address") or "").lower() or None,
        interfaces=interfaces,
        block_devices=disks,
        boot_disk_id=boot_disk.get("id"),
    )
