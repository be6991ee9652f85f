"""In-memory MAAS state: zones, fabrics, VLANs, subnets, machines with their NICs, disks,
links and event history, tags and node scripts. One re-entrant lock guards all of it;
HTTP threads and the phase scheduler take it for every read-modify-write. Zones, fabrics, VLANs
and subnets are fixed once seeded (frozen; the API only reads them), so render.py shares one
rendering of each.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network
from typing import Any

from .addresses import Addresses
from .enums import LinkMode, NodeStatus, PowerState
from .hardware import SKUS, derived_mac, serial_for
from .inventory import MachineSpec, SimInventory

_SYSTEM_ID_ALPHABET = "abcdefghjkmnpqrstwxy346789"


@dataclass(frozen=True)
class Zone:
    id: int
    name: str
    description: str = ""


@dataclass(frozen=True)
class Fabric:
    id: int
    name: str


@dataclass(frozen=True)
class Vlan:
    id: int
    fabric_id: int
    vid: int
    name: str
    mtu: int = 1500


@dataclass(frozen=True)
class Subnet:
    id: int
    cidr: IPv4Network
    name: str
    vlan_id: int
    site: str | None = None
    role: str = "other"
    rail: int | None = None
    gateway_ip: str | None = None
    dns_servers: list[str] = field(default_factory=list)


@dataclass
class Link:
    id: int
    mode: LinkMode
    subnet_id: int | None
    ip_address: str | None = None


@dataclass
class Interface:
    id: int
    name: str
    mac_address: str
    vendor: str
    product: str
    speed_mbps: int
    mtu: int
    vlan_id: int | None
    links: list[Link] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    enabled: bool = True
    rendered: tuple[Any, Any] | None = field(default=None, repr=False, compare=False)  # interface_json's


@dataclass
class BlockDevice:
    id: int
    name: str
    model: str
    serial: str
    size: int
    block_size: int
    id_path: str
    tags: list[str] = field(default_factory=list)
    rendered: tuple[Any, Any] | None = field(default=None, repr=False, compare=False)  # block_device_json's


_EVENT_IDS = itertools.count(1)


@dataclass
class Event:
    ts: float
    type: str
    description: str
    status: str
    level: str = "INFO"
    id: int = field(default_factory=lambda: next(_EVENT_IDS))

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "ts": self.ts, "type": self.type, "description": self.description,
                "status": self.status, "level": self.level}


@dataclass
class Machine:
    system_id: str
    hostname: str
    zone: str
    sku: str
    architecture: str
    power_type: str
    power_parameters: dict[str, Any]
    status: NodeStatus
    interfaces: list[Interface]
    block_devices: list[BlockDevice]
    boot_disk_id: int | None
    boot_interface_id: int
    cpu_count: int
    cpu_speed: int
    memory: int
    hardware_info: dict[str, str]
    description: str = ""
    previous_status: NodeStatus | None = None
    power_state: PowerState = PowerState.OFF
    owner: str | None = None
    owner_data: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    storage_layout: str | None = None
    osystem: str = ""
    distro_series: str = ""
    hwe_kernel: str | None = None
    min_hwe_kernel: str = ""
    user_data: bytes | None = None
    enable_hw_sync: bool = False
    last_sync: float | None = None
    error_description: str = ""
    status_message: str | None = None
    commissioned: bool = False
    commissioning_scripts: list[str] = field(default_factory=list)
    testing_scripts: list[str] = field(default_factory=list)
    erase: dict[str, bool] | None = None
    phase_token: int = 0
    phase_due: float | None = None
    events: list[Event] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    # MACs MAAS was told at creation; until commissioning discovers the rest, only these show.
    known_macs: set[str] | None = None
    # (rendering, key order of its free-form dicts, its JSON): render.machine_list_body reuses the
    # JSON while a new rendering equals the old one. A cache, not state: never read elsewhere.
    rendered: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)

    def event(self, type_: str, description: str, level: str = "INFO") -> None:
        self.events.append(Event(time.time(), type_, description, self.status.label, level))
        self.status_message = description  # MAAS shows the newest event as status_message

    def iface(self, iface_id: int) -> Interface | None:
        return next((i for i in self.interfaces if i.id == iface_id), None)

    def disk(self, disk_id: int) -> BlockDevice | None:
        return next((d for d in self.block_devices if d.id == disk_id), None)


@dataclass
class Tag:
    name: str
    comment: str = ""
    definition: str = ""
    kernel_opts: str = ""


@dataclass
class Script:
    id: int
    name: str
    script_type: int  # 0 commissioning, 2 testing, 3 release (MAAS SCRIPT_TYPE)
    script: bytes
    title: str = ""
    description: str = ""
    tags: list[str] = field(default_factory=list)
    timeout: int = 0
    destructive: bool = False
    hardware_type: int = 0
    parallel: int = 0
    default: bool = False


class Store:
    """All simulator state. Callers hold `lock` while reading or mutating."""

    def __init__(self, seed: int = 0) -> None:
        self.lock = threading.RLock()
        self.rng = random.Random(seed)
        self.domain = "maas"
        self.zones: dict[str, Zone] = {}
        self.fabrics: dict[int, Fabric] = {}
        self.vlans: dict[int, Vlan] = {}
        self.subnets: dict[int, Subnet] = {}
        self.machines: dict[str, Machine] = {}
        self.tags: dict[str, Tag] = {}
        self.scripts: dict[str, Script] = {}
        self.config: dict[str, str] = {}  # MaasHandler settings (config.py), set over its defaults
        self.rack: dict[str, MachineSpec] = {}  # racked hardware not yet known to MAAS, by PXE MAC
        self.network_json: dict[tuple[str, int], tuple[object, dict[str, Any]]] = {}  # render.py's
        self._ids: dict[str, int] = {}
        self.addresses = Addresses(self.machines)  # IP and MAC lookups

    def next_id(self, kind: str, start: int = 1) -> int:
        value = self._ids.get(kind, start)
        self._ids[kind] = value + 1
        return value

    def new_system_id(self) -> str:
        while True:
            sid = "".join(self.rng.choice(_SYSTEM_ID_ALPHABET) for _ in range(6))
            if sid not in self.machines:
                return sid

    def new_hostname(self) -> str:
        # MAAS names unnamed machines with a petname; two random words are close enough.
        words = ("able", "brave", "calm", "eager", "fair", "glad", "keen", "lucky", "noble", "quick")
        animals = ("ant", "bee", "cat", "doe", "eel", "fox", "gnu", "hen", "koi", "owl", "yak")
        while True:
            name = f"{self.rng.choice(words)}-{self.rng.choice(animals)}-{self.rng.randint(10, 99)}"
            if not any(m.hostname == name for m in self.machines.values()):
                return name

    # --- network objects ------------------------------------------------------------------
    def add_fabric(self, name: str) -> Fabric:
        fab = Fabric(self.next_id("fabric", 0), name)
        self.fabrics[fab.id] = fab
        return fab

    def add_vlan(self, fabric_id: int, vid: int, name: str | None, mtu: int) -> Vlan:
        vlan = Vlan(self.next_id("vlan", 5001), fabric_id, vid, name or ("untagged" if vid == 0 else str(vid)), mtu)
        self.vlans[vlan.id] = vlan
        return vlan

    def vlan_by(self, fabric_id: int, vid: int) -> Vlan | None:
        return next((v for v in self.vlans.values() if v.fabric_id == fabric_id and v.vid == vid), None)

    def fabric_by_name(self, name: str) -> Fabric | None:
        return next((f for f in self.fabrics.values() if f.name == name), None)

    def subnet_for(self, site: str, role: str, rail: int | None = None) -> Subnet | None:
        return next((s for s in self.subnets.values()
                     if s.site == site and s.role == role and (rail is None or s.rail == rail)), None)

    def node(self, system_id: str) -> Machine:
        """The machine a `nodes/{system_id}/...` route names, or MAAS's 404 "No Node matches"."""
        from . import errors  # errors renders HTTP answers; the store stays free of them at import

        m = self.machines.get(system_id)
        if m is None:
            raise errors.not_found("Node")
        return m

    # --- machines -------------------------------------------------------------------------
    def build_machine(self, *, hostname: str | None, pxe_mac: str, sku: str, zone: str, status: NodeStatus,
                      power_type: str, power_parameters: dict[str, Any], architecture: str | None = None,
                      extra_macs: list[str] | None = None, description: str = "") -> Machine:
        spec = SKUS[sku]
        sid = self.new_system_id()
        interfaces: list[Interface] = []
        extra = list(extra_macs or [])
        for n, nic in enumerate(spec.nics):
            if nic.role == "pxe":
                mac = pxe_mac
            else:
                mac = extra.pop(0) if extra else derived_mac(pxe_mac, n)
            interfaces.append(Interface(
                id=self.next_id("interface"), name=nic.name, mac_address=mac.lower(), vendor=nic.vendor,
                product=nic.product, speed_mbps=nic.speed_mbps, mtu=nic.mtu,
                vlan_id=self._vlan_for_nic(zone, nic.role, nic.rail)))
        disks = [BlockDevice(id=self.next_id("blockdevice"), name=d.name, model=d.model,
                             serial=serial_for(pxe_mac, d), size=d.size, block_size=d.block_size,
                             id_path=d.id_path, tags=list(d.tags)) for d in spec.disks]
        boot_disk = next((b.id for b, d in zip(disks, spec.disks, strict=True) if d.boot), None)
        m = Machine(
            system_id=sid, hostname=hostname or self.new_hostname(), zone=zone, sku=sku,
            architecture=architecture or spec.architecture, power_type=power_type,
            power_parameters=dict(power_parameters), status=status, interfaces=interfaces,
            block_devices=disks, boot_disk_id=boot_disk, boot_interface_id=interfaces[0].id,
            cpu_count=spec.cpu_count, cpu_speed=spec.cpu_speed_mhz, memory=spec.memory_mib,
            description=description,
            hardware_info={"system_vendor": spec.system_vendor, "system_product": spec.system_product,
                           "system_version": "1.0", "system_serial": serial_for(pxe_mac, spec.disks[0])[:7],
                           "cpu_model": spec.cpu_model, "mainboard_vendor": spec.system_vendor,
                           "mainboard_product": spec.system_product, "mainboard_firmware_version": "2.1.5",
                           "mainboard_firmware_date": "03/14/2025"},
        )
        self.machines[sid] = m
        self.addresses.add_machine(m)
        return m

    def _vlan_for_nic(self, zone: str, role: str, rail: int | None) -> int | None:
        if role == "roce":
            subnet = self.subnet_for(zone, "roce", rail)
            return subnet.vlan_id if subnet else None
        subnet = self.subnet_for(zone, "pxe")
        if subnet:
            return subnet.vlan_id
        default = self.fabric_by_name("fabric-0")
        vlan = self.vlan_by(default.id, 0) if default else None
        return vlan.id if vlan else None

    # --- seeding --------------------------------------------------------------------------
    def seed(self, inv: SimInventory) -> None:
        with self.lock:
            self.domain = inv.domain
            for site in inv.sites:
                self.zones[site.name] = Zone(self.next_id("zone"), site.name, site.description)
            if "default" not in self.zones:
                self.zones["default"] = Zone(self.next_id("zone"), "default", "")
            for fs in inv.fabrics:
                fab = self.add_fabric(fs.name)
                for vs in fs.vlans:
                    self.add_vlan(fab.id, vs.vid, vs.name, vs.mtu)
            if self.fabric_by_name("fabric-0") is None and not inv.fabrics:
                fab = self.add_fabric("fabric-0")
                self.add_vlan(fab.id, 0, None, 1500)
            for ss in inv.subnets:
                sfab = self.fabric_by_name(ss.fabric)
                assert sfab is not None  # checked by SimInventory
                vlan = self.vlan_by(sfab.id, ss.vid)
                assert vlan is not None
                sn = Subnet(self.next_id("subnet"), ss.cidr, ss.name or str(ss.cidr), vlan.id, ss.site,
                            ss.role, ss.rail, str(ss.gateway_ip) if ss.gateway_ip else None,
                            [str(d) for d in ss.dns_servers])
                self.subnets[sn.id] = sn
            for ms in inv.machines:
                if ms.enlisted:
                    self.seed_machine(ms)
                else:
                    self.rack[ms.pxe_mac] = ms

    def seed_machine(self, ms: MachineSpec) -> Machine:
        params: dict[str, Any] = {}
        if ms.power_type in ("ipmi", "redfish"):
            params = {"power_address": str(ms.ipmi_address), "power_user": ms.power_user,
                      "power_pass": ms.power_pass}
            if ms.power_type == "ipmi":
                params["power_driver"] = "LAN_2_0"
        m = self.build_machine(hostname=ms.hostname, pxe_mac=ms.pxe_mac, sku=ms.sku, zone=ms.site,
                               status=ms.status, power_type=ms.power_type, power_parameters=params,
                               description=ms.description)
        for t in ms.tags:
            self.tags.setdefault(t, Tag(t))
            m.tags.append(t)
        if ms.status != NodeStatus.NEW:
            self.commissioned_links(m)
        if ms.status in (NodeStatus.ALLOCATED, NodeStatus.DEPLOYED, NodeStatus.FAILED_DEPLOYMENT):
            m.owner = "admin"
        if ms.status == NodeStatus.DEPLOYED:
            m.osystem, m.distro_series, m.power_state = "ubuntu", "jammy", PowerState.ON
            self.assign_auto_ips(m)
        m.event("SEED", f"Seeded from inventory as {ms.status.label}")
        return m

    def commissioned_links(self, m: Machine) -> None:
        """After commissioning MAAS applies the default storage layout (flat) if none was chosen
        and links the boot NIC to its subnet in AUTO mode."""
        m.commissioned = True
        if m.storage_layout is None:
            m.storage_layout = "flat"
        boot = m.iface(m.boot_interface_id)
        if boot is None or boot.links:
            return
        subnet = next((s for s in self.subnets.values() if s.vlan_id == boot.vlan_id), None)
        if subnet is not None:
            boot.links.append(Link(self.next_id("link"), LinkMode.AUTO, subnet.id))

    def assign_auto_ips(self, m: Machine) -> None:
        for iface in m.interfaces:
            for lk in iface.links:
                if lk.mode == LinkMode.AUTO and lk.ip_address is None and lk.subnet_id in self.subnets:
                    self.addresses.set_ip(m, lk, self.addresses.allocate_ip(self.subnets[lk.subnet_id]))

    def release_auto_ips(self, m: Machine) -> None:
        for iface in m.interfaces:
            for lk in iface.links:
                if lk.mode in (LinkMode.AUTO, LinkMode.DHCP):
                    lk.ip_address = None

    def parse_ip(self, text: str) -> IPv4Address | None:
        try:
            return IPv4Address(text)
        except ValueError:
            return None
