"""MAAS's machine JSON as the client's views (one machine from `Machine.read`, many from a bulk read:
the same representation)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, TypeAdapter

from .vocabulary import BlockDeviceView, InterfaceView, MaasStatus, MachineDetail, MachineView


class _BootInterface(BaseModel):
    mac_address: str | None = None


class MachineListEntry(BaseModel):
    """The fields of MAAS's machine JSON that `MachineView` reads; pydantic's JSON parser skips the rest
    without building Python objects for it (interfaces, links, disks: ~33 KB a machine), which orjson
    cannot (a 1,024-machine read decoded in 0.08 s, not 0.3 s)."""

    system_id: str
    hostname: str | None = None
    status: int
    status_message: str | None = None
    power_state: str | None = None
    boot_interface: _BootInterface | None = None
    owner_data: dict[str, Any] | None = None
    enable_hw_sync: bool | None = None
    tag_names: list[str] | None = None

    def view(self) -> MachineView:
        boot = self.boot_interface
        return MachineView(
            system_id=self.system_id,
            hostname=self.hostname or "",
            status=MaasStatus(self.status),
            status_message=self.status_message or "",
            power_state=self.power_state or "unknown",
            pxe_mac=((boot.mac_address if boot else None) or "").lower() or None,
            owner_data={k: str(v) for k, v in (self.owner_data or {}).items()},
            enable_hw_sync=bool(self.enable_hw_sync),
            tags=tuple(self.tag_names or ()),
        )


_MACHINE_LIST = TypeAdapter(list[MachineListEntry])


def machine_views(content: bytes) -> list[MachineView]:
    """A bulk read's answer (JSON bytes) as views."""
    return [e.view() for e in _MACHINE_LIST.validate_json(content)]


def machine_view(raw: dict[str, Any]) -> MachineView:
    """One decoded machine document as its view."""
    return MachineListEntry.model_validate(raw).view()


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
