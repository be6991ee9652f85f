"""The simulator's inventory file: sites (MAAS zones), fabrics/VLANs/subnets and machines.

YAML or JSON, validated by `SimInventory`. A minimal file:

    sites: [{name: site-a}]
    fabrics: [{name: pxe-a}, {name: roce-a}]
    subnets:
      - {cidr: 10.10.0.0/24, fabric: pxe-a, site: site-a, role: pxe, gateway_ip: 10.10.0.1}
      - {cidr: 10.20.0.0/24, fabric: roce-a, vid: 100, site: site-a, role: roce, rail: 0}
    machines:
      - {hostname: gpu-a-001, pxe_mac: "aa:bb:cc:00:00:01", ipmi_address: 10.9.0.11,
         sku: h200, site: site-a, status: Ready}

`status` is a MAAS status label or enum name; machines without a hostname enlist as "New".
See docs/maas-simulator.md for every field.
"""

from __future__ import annotations

import json
import re
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .enums import NodeStatus
from .hardware import SKUS

_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_HOST = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")

# Statuses an inventory may seed directly; in-progress statuses need a running phase instead.
SEEDABLE = frozenset({NodeStatus.NEW, NodeStatus.READY, NodeStatus.ALLOCATED, NodeStatus.DEPLOYED,
                      NodeStatus.BROKEN, NodeStatus.FAILED_COMMISSIONING, NodeStatus.FAILED_DEPLOYMENT})


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SiteSpec(_Model):
    name: str = Field(description="MAAS zone name")
    description: str = ""


class VlanSpec(_Model):
    vid: int = Field(default=0, ge=0, le=4094)
    name: str | None = None
    mtu: int = 1500


class FabricSpec(_Model):
    name: str
    vlans: list[VlanSpec] = Field(default_factory=lambda: [VlanSpec()])

    @model_validator(mode="after")
    def _untagged_first(self) -> FabricSpec:
        if not any(v.vid == 0 for v in self.vlans):
            raise ValueError("a fabric needs its untagged VLAN (vid 0); add {vid: 0} to vlans")
        return self


class SubnetSpec(_Model):
    cidr: IPv4Network
    name: str | None = None
    fabric: str
    vid: int = 0
    site: str | None = None
    role: Literal["pxe", "roce", "other"] = "other"
    rail: int | None = Field(default=None, ge=0, le=31, description="RoCE rail index (NIC ensNf0np0 = rail N-1)")
    gateway_ip: IPv4Address | None = None
    dns_servers: list[IPv4Address] = Field(default_factory=list)

    @model_validator(mode="after")
    def _rail_only_for_roce(self) -> SubnetSpec:
        if self.role == "roce" and self.rail is None:
            raise ValueError("a roce subnet needs `rail` (0-based rail index)")
        if self.gateway_ip is not None and self.gateway_ip not in self.cidr:
            raise ValueError(f"gateway_ip {self.gateway_ip} is outside {self.cidr}")
        return self


class MachineSpec(_Model):
    hostname: str | None = None
    pxe_mac: str
    ipmi_address: IPv4Address | None = None
    sku: str = "generic-small"
    site: str
    status: NodeStatus = NodeStatus.READY
    power_type: Literal["ipmi", "redfish", "manual", "virsh"] = "ipmi"
    power_user: str = "root"
    power_pass: str = "calvin"
    tags: list[str] = Field(default_factory=list)
    description: str = ""
    enlisted: bool = Field(default=True, description="False: racked but unknown to MAAS until created via the API")

    @field_validator("pxe_mac")
    @classmethod
    def _mac(cls, v: str) -> str:
        v = v.strip().lower().replace("-", ":")
        if not _MAC.match(v):
            raise ValueError(f"{v!r} is not a MAC address like aa:bb:cc:dd:ee:ff")
        return v

    @field_validator("hostname")
    @classmethod
    def _hostname(cls, v: str | None) -> str | None:
        if v is not None and not _HOST.match(v):
            raise ValueError(f"{v!r} is not a valid hostname (lowercase letters, digits, '-')")
        return v

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, v: Any) -> Any:
        return NodeStatus.from_label(v) if isinstance(v, str) else v

    @field_validator("sku")
    @classmethod
    def _sku(cls, v: str) -> str:
        if v not in SKUS:
            raise ValueError(f"unknown sku {v!r}; known: {', '.join(sorted(SKUS))}")
        return v

    @model_validator(mode="after")
    def _seedable(self) -> MachineSpec:
        if self.status not in SEEDABLE:
            names = ", ".join(s.label for s in sorted(SEEDABLE))
            raise ValueError(f"status {self.status.label!r} cannot be seeded; use one of: {names}")
        if self.hostname is None and self.status != NodeStatus.NEW:
            raise ValueError("a machine without hostname can only be seeded as New")
        if self.power_type in ("ipmi", "redfish") and self.ipmi_address is None:
            raise ValueError(f"power_type {self.power_type} needs ipmi_address")
        return self


class SimInventory(_Model):
    domain: str = "maas"
    sites: list[SiteSpec] = Field(default_factory=lambda: [SiteSpec(name="default")])
    fabrics: list[FabricSpec] = Field(default_factory=list)
    subnets: list[SubnetSpec] = Field(default_factory=list)
    machines: list[MachineSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> SimInventory:
        sites = {s.name for s in self.sites}
        fabrics = {f.name: {v.vid for v in f.vlans} for f in self.fabrics}
        for i, sn in enumerate(self.subnets):
            if sn.fabric not in fabrics:
                raise ValueError(f"subnets[{i}] ({sn.cidr}): fabric {sn.fabric!r} is not in fabrics")
            if sn.vid not in fabrics[sn.fabric]:
                raise ValueError(f"subnets[{i}] ({sn.cidr}): fabric {sn.fabric!r} has no VLAN {sn.vid}")
            if sn.site is not None and sn.site not in sites:
                raise ValueError(f"subnets[{i}] ({sn.cidr}): site {sn.site!r} is not in sites")
        for field in ("hostname", "pxe_mac", "ipmi_address"):
            seen: dict[Any, int] = {}
            for i, m in enumerate(self.machines):
                value = getattr(m, field)
                if value is None:
                    continue
                if value in seen:
                    raise ValueError(f"machines[{i}]: {field} {value} duplicates machines[{seen[value]}]")
                seen[value] = i
        for i, m in enumerate(self.machines):
            if m.site not in sites:
                raise ValueError(f"machines[{i}]: site {m.site!r} is not in sites ({', '.join(sorted(sites))})")
        return self

    @classmethod
    def load(cls, path: str | Path) -> SimInventory:
        """Read a YAML/JSON inventory; errors name the file, the path inside it and the fix."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise InventoryError(f"{p}: cannot read inventory: {exc.strerror}") from exc
        try:
            data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as exc:
            raise InventoryError(f"{p}: not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {exc}") from exc
        return cls.parse(data or {}, source=str(p))

    @classmethod
    def parse(cls, data: Any, source: str = "<inventory>") -> SimInventory:
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            lines = []
            for err in exc.errors():
                loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
                lines.append(f"{source}: {loc}: {err['msg']}")
            raise InventoryError("invalid simulator inventory:\n  " + "\n  ".join(lines)) from None


class InventoryError(ValueError):
    """An inventory file that cannot be used; the message names file, path and fix."""


def demo_inventory(sites: int = 1, h200_per_site: int = 2, small_per_site: int = 1) -> SimInventory:
    """A small self-consistent inventory for tests and the demo: per site a PXE subnet and
    eight RoCE rail subnets, `h200_per_site` H200 nodes and `small_per_site` generic nodes."""
    site_specs, fabrics, subnets, machines = [], [], [], []
    for s in range(sites):
        site = f"site-{chr(ord('a') + s)}"
        site_specs.append(SiteSpec(name=site))
        fabrics.append(FabricSpec(name=f"pxe-{site}"))
        fabrics.append(FabricSpec(name=f"roce-{site}", vlans=[VlanSpec(vid=0)] + [
            VlanSpec(vid=100 + r, name=f"rail{r}", mtu=9000) for r in range(8)]))
        subnets.append(SubnetSpec(cidr=IPv4Network(f"10.{10 + s}.0.0/22"), fabric=f"pxe-{site}",
                                  site=site, role="pxe", gateway_ip=IPv4Address(f"10.{10 + s}.0.1")))
        for r in range(8):
            subnets.append(SubnetSpec(cidr=IPv4Network(f"172.{16 + s}.{r}.0/24"), fabric=f"roce-{site}",
                                      vid=100 + r, site=site, role="roce", rail=r))
        n = 0
        for kind, count in (("h200", h200_per_site), ("generic-small", small_per_site)):
            for _ in range(count):
                n += 1
                prefix = "gpu" if kind == "h200" else "node"
                machines.append(MachineSpec(
                    hostname=f"{prefix}-{chr(ord('a') + s)}-{n:03d}",
                    pxe_mac=f"52:54:00:{s:02x}:{n >> 8:02x}:{n & 255:02x}",
                    ipmi_address=IPv4Address(f"10.{100 + s}.0.{n}"), sku=kind, site=site, status=NodeStatus.READY))
    return SimInventory(sites=site_specs, fabrics=fabrics, subnets=subnets, machines=machines)
