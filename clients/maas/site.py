"""Site-level MAAS operations (SiteProfile node scripts, RoCE subnets and static links).

A subclass of the machine client: same session, loop and errors.

  c = MaasSiteClient(url, api_key, tls_verify=...)
  c.whoami() -> username                 (401 here means the key is rejected)
  c.scripts() -> {name: ScriptView}      c.put_script(...) / c.delete_script(name)
  c.subnets() -> [SubnetView]            c.machine_nics([hostnames]) -> {hostname: MachineNics}
  c.static_holdings({cidr, ...}) -> [StaticHolding]   (each subnet's own address list)
  c.interface_addresses({cidr, ...}) -> [StaticHolding]   (the same, any link mode: who has which link)
  c.link_static(...) (inherited)          c.unlink(system_id, interface_id, link_id)
  c.hardware_sync_interval() -> seconds  c.set_hardware_sync_interval(seconds)   (the region's setting)
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, ConfigDict

from .client import MaasClient
from .vocabulary import MaasError, MaasStatus, timespan, timespan_seconds


class ScriptView(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    script_type: str
    """commissioning | testing | release"""
    sha256: str | None = None
    tags: tuple[str, ...] = ()


class SubnetView(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    cidr: str
    vid: int = 0
    mtu: int = 1500


class NicView(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    name: str
    mac_address: str
    links: tuple[tuple[int, str, str | None, str | None], ...] = ()
    """(link id, mode, subnet cidr, ip address)"""


class MachineNics(BaseModel):
    model_config = ConfigDict(frozen=True)

    system_id: str
    hostname: str
    status: MaasStatus
    nics: dict[str, NicView]


class StaticHolding(BaseModel):
    model_config = ConfigDict(frozen=True)

    address: str
    subnet: str
    hostname: str
    system_id: str
    interface: str


_SCRIPT_TYPES = {0: "commissioning", 2: "testing", 3: "release"}
STICKY = 1  # MAAS IPADDRESS_TYPE of an address a static link holds (AUTO 0, USER_RESERVED 4, DHCP 5, DISCOVERED 6)


_SUBNET_READS = 4  # subnets read at once (each answer is one subnet's addresses: up to a few thousand rows)


def _subnet_size(cidr: str) -> int:
    """How many addresses a subnet's list can hold at most (its request's timeout follows it)."""
    return ipaddress.ip_network(cidr, strict=False).num_addresses


def _nics(raw: dict[str, Any]) -> dict[str, NicView]:
    out: dict[str, NicView] = {}
    for i in raw.get("interface_set") or ():
        links = tuple(
            (int(lk.get("id", 0)), str(lk.get("mode", "")), (lk.get("subnet") or {}).get("cidr"), lk.get("ip_address"))
            for lk in i.get("links") or ()
        )
        out[i["name"]] = NicView(
            id=i["id"], name=i["name"], mac_address=(i.get("mac_address") or "").lower(), links=links
        )
    return out


class MaasSiteClient(MaasClient):
    def whoami(self) -> str:
        return str((self._call("Users", "whoami", read=True) or {}).get("username", ""))

    def hardware_sync_interval(self) -> int | None:
        """The region's `hardware_sync_interval` setting (MaasHandler get_config) in seconds; None when MAAS
        holds a value this client cannot read (a drift to repair, never a crash)."""
        raw = self._call("MAAS", "get_config", read=True, name="hardware_sync_interval")
        return timespan_seconds(raw.decode() if isinstance(raw, bytes) else str(raw))

    def set_hardware_sync_interval(self, seconds: int) -> None:
        """Set the region's interval (MaasHandler set_config): an idempotent write, retried like a read."""
        self._call("MAAS", "set_config", read=False, idempotent=True, name="hardware_sync_interval",
                   value=timespan(seconds))

    def scripts(self, with_bodies: bool = True) -> dict[str, ScriptView]:
        out: dict[str, ScriptView] = {}
        for raw in (
            self._call("NodeScripts", "read", read=True, include_script="true" if with_bodies else "false") or ()
        ):
            # MAAS returns the body (base64) in the newest history entry's `data`.
            body = ((raw.get("history") or [{}])[0] or {}).get("data") or raw.get("script")
            digest = hashlib.sha256(base64.b64decode(body)).hexdigest() if isinstance(body, str) and body else None
            stype = raw.get("type_name") or _SCRIPT_TYPES.get(int(raw.get("type", 0)), "commissioning")
            out[raw["name"]] = ScriptView(
                name=raw["name"], script_type=stype, sha256=digest, tags=tuple(raw.get("tags") or ())
            )
        return out

    def put_script(
        self,
        name: str,
        script_type: str,
        body: bytes,
        *,
        title: str = "",
        description: str = "",
        tags: tuple[str, ...] = (),
        replace: bool = False,
    ) -> None:
        """Upload a node script; `replace` deletes the existing one first (a new body, same name)."""
        if replace:
            self.delete_script(name)
        self._call(
            "NodeScripts",
            "create",
            read=False,
            name=name,
            type=script_type,
            script=body,
            title=title or name,
            description=description,
            tags=",".join(tags),
        )

    def delete_script(self, name: str) -> None:
        try:
            self._call("NodeScript", "delete", read=False, name=name)
        except MaasError as e:
            if e.status != 404:  # already gone is fine
                raise

    def subnets(self) -> list[SubnetView]:
        return [
            SubnetView(
                id=s["id"],
                cidr=s["cidr"],
                vid=int((s.get("vlan") or {}).get("vid") or 0),
                mtu=int((s.get("vlan") or {}).get("mtu") or 1500),
            )
            for s in self._call("Subnets", "read", read=True) or ()
        ]

    def machine_nics(self, hostnames: list[str]) -> dict[str, MachineNics]:
        if not hostnames:
            return {}
        out: dict[str, MachineNics] = {}
        for raw in self._call("Machines", "read", read=True, answer_machines=len(hostnames), hostname=hostnames) or ():
            out[raw["hostname"]] = MachineNics(
                system_id=raw["system_id"],
                hostname=raw["hostname"],
                status=MaasStatus(int(raw["status"])),
                nics=_nics(raw),
            )
        return out

    def static_holdings(self, cidrs: set[str]) -> list[StaticHolding]:
        """Every STATIC address MAAS holds on these subnets: each subnet's own address list
        (`Subnet.ip_addresses`, one request per subnet) after one `Subnets.read` for their ids. The answer
        follows the addresses on those subnets, never the region's machines (docs/scale.md)."""
        return self._holdings(cidrs, sticky_only=True)

    def interface_addresses(self, cidrs: set[str]) -> list[StaticHolding]:
        """Every address a machine's interface holds on these subnets, whatever its link mode: the same reads
        as `static_holdings`. A link is there exactly when its address is listed on the interface (what a
        machine's interface links show, at a subnet's size instead of the machines' whole objects)."""
        return self._holdings(cidrs, sticky_only=False)

    def _holdings(self, cidrs: set[str], *, sticky_only: bool) -> list[StaticHolding]:
        ids = {s.cidr: s.id for s in self.subnets() if s.cidr in cidrs}

        def rows_of(cidr: str) -> Any:
            return self._call("Subnet", "ip_addresses", read=True, id=str(ids[cidr]), with_username="0",
                              answer_rows=_subnet_size(cidr))

        # the subnets' reads at once: a site's eight rails would otherwise wait on each other at every check
        with ThreadPoolExecutor(max_workers=max(1, min(_SUBNET_READS, len(ids))),
                                thread_name_prefix="maas-subnets") as reads:
            answers = dict(zip(sorted(ids), reads.map(rows_of, sorted(ids)), strict=True))
        out: list[StaticHolding] = []
        for cidr, rows in answers.items():
            for row in rows or ():
                node = row.get("node_summary") or {}
                held = not sticky_only or int(row.get("alloc_type", -1)) == STICKY
                if not held or not node.get("system_id") or not row.get("ip"):
                    continue
                out.append(StaticHolding(address=str(row["ip"]), subnet=cidr, hostname=str(node.get("hostname") or ""),
                                         system_id=str(node["system_id"]), interface=str(node.get("via") or "")))
        return out


