"""RoceAssignment: static RoCE addresses per (site, hostname, interface), applied as MAAS STATIC links.

One resource per *site* holds the whole site's table (docs/sites-bundles-roce.md explains why):
the allocation sees every holding of the site in one place (its own state), so four provider
threads can never race two machines onto one address, and `check` can compute the table, which
makes it known at preview; machines consume `table[hostname]`, which stays equal for machines
that did not change, so adding one machine shows no change on the others.

Pure core: `allocate(pools, nics, existing, held)`: existing assignments are kept (never
renumbered); new interfaces, in (hostname, rail) order, take the lowest free address of their
rail's pool range that nobody holds (state or MAAS). Errors name the pool and the hostname and
carry the environment's finding codes (ROCE003 exhausted, ROCE004 no pool, ADDR001 collision).
Reconciler: re-allocates with MAAS's holdings at create/update, then links interfaces of machines
MAAS lets us edit (Ready, Allocated, ...); machines not yet in MAAS, or deployed, are linked by
the machine lifecycle's RoCE stage from this table.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from clients.maas import MaasSiteClient, MaasStatus
from clients.maas import MachineNics as MaasMachineNics
from clients.vault import VaultCredentials
from environments.findings import Code
from environments.rules_tls import resolve_ca
from providers.common import VaultInputs, plain, vault_reader
from providers.wire import FabricMode

SOURCE = "roce_pools"
Key = tuple[str, str]  # (hostname, interface)
# MAAS refuses link_subnet outside these statuses (409).
MISSING = "missing"  # link_status prefix after a refresh found links gone
NETWORK_EDITABLE = frozenset({MaasStatus.NEW, MaasStatus.READY, MaasStatus.ALLOCATED, MaasStatus.BROKEN,
                              MaasStatus.FAILED_TESTING})


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Pool(_M):
    site: str
    rail: int = Field(ge=0, le=15)
    subnet: ipaddress.IPv4Network
    start: ipaddress.IPv4Address
    end: ipaddress.IPv4Address
    mtu: int = Field(9000, ge=1280, le=9216)
    vlan: int | None = None

    def label(self) -> str:
        return f"pool {self.site}/rail{self.rail} ({self.subnet}, {self.start}-{self.end})"

    def contains(self, addr: ipaddress.IPv4Address) -> bool:
        return self.start <= addr <= self.end


class Nic(_M):
    hostname: str
    interface: str
    rail: int


class Entry(_M):
    """One row of the address table."""

    interface: str
    rail: int
    subnet: str
    address: str
    mtu: int
    mac: str = ""
    vlan: int | None = None


class AllocationError(Exception):
    def __init__(self, code: Code, pool: str, hostname: str, message: str, hint: str) -> None:
        self.code, self.pool, self.hostname = code, pool, hostname
        super().__init__(f"{code.value} {pool}: host {hostname}: {message}; fix: {hint}")


def allocate(pools: list[Pool], nics: list[Nic], existing: Mapping[Key, str],
             held: Mapping[str, str] | None = None) -> dict[Key, Entry]:
    """The table for `nics`. `existing`: (hostname, interface) -> address already assigned (kept);
    `held`: address -> who holds it outside this table (e.g. MAAS links of other machines)."""
    held = dict(held or {})
    by_rail = {p.rail: p for p in pools}
    taken: dict[ipaddress.IPv4Address, Key] = {}
    out: dict[Key, Entry] = {}

    def entry(n: Nic, p: Pool, a: ipaddress.IPv4Address) -> Entry:
        return Entry(interface=n.interface, rail=n.rail, subnet=str(p.subnet), address=str(a), mtu=p.mtu, vlan=p.vlan)

    ordered = sorted(nics, key=lambda n: (n.hostname, n.rail, n.interface))
    for n in ordered:
        if n.rail not in by_rail:
            raise AllocationError(Code.ROCE_RAIL_MISSING, f"site {pools[0].site if pools else '?'} rail {n.rail}",
                                  n.hostname, f"interface {n.interface} is on rail {n.rail}, which has no pool",
                                  "declare a roce_pools entry for that rail")
    # 1. keep what is already assigned (stable), checking it is still valid
    for n in ordered:
        old = existing.get((n.hostname, n.interface))
        if old is None:
            continue
        p, a = by_rail[n.rail], ipaddress.IPv4Address(old)
        if not p.contains(a):
            raise AllocationError(Code.ROCE_RANGE_INVALID, p.label(), n.hostname,
                                  f"{n.interface} holds {a}, outside the pool's range now",
                                  "widen the range back to include it (assignments are never renumbered)")
        if a in taken:
            raise AllocationError(Code.DUPLICATE_ADDRESS, p.label(), n.hostname,
                                  f"{n.interface} and {taken[a][0]}/{taken[a][1]} both hold {a}",
                                  "remove one assignment from the stack state, then run up again")
        if str(a) in held:
            raise AllocationError(Code.DUPLICATE_ADDRESS, p.label(), n.hostname,
                                  f"{n.interface} holds {a}, which MAAS also gives to {held[str(a)]}",
                                  "unlink the other interface in MAAS or release its address")
        taken[a] = (n.hostname, n.interface)
        out[(n.hostname, n.interface)] = entry(n, p, a)
    # 2. new interfaces: lowest free address of the rail's range
    cursor: dict[int, int] = {}
    for n in ordered:
        if (n.hostname, n.interface) in out:
            continue
        p = by_rail[n.rail]
        lo, hi = int(p.start), int(p.end)
        i = cursor.get(n.rail, lo)
        while i <= hi and (ipaddress.IPv4Address(i) in taken or str(ipaddress.IPv4Address(i)) in held):
            i += 1
        if i > hi:
            raise AllocationError(Code.ROCE_POOL_TOO_SMALL, p.label(), n.hostname,
                                  f"no free address left for {n.interface}", "widen the pool's range")
        a = ipaddress.IPv4Address(i)
        cursor[n.rail] = i + 1
        taken[a] = (n.hostname, n.interface)
        out[(n.hostname, n.interface)] = entry(n, p, a)
    return out


# --- spec -----------------------------------------------------------------------------------------
class MachineNics(_M):
    hostname: str
    profile: str
    fabric_mode: FabricMode
    enable_phase2_roce: bool
    interfaces: list[str]
    """fabric_interfaces of the machine's SKU: interfaces[r] is on rail r."""


class MaasInputs(_M):
    url: str
    api_key_path: str
    tls_verify: bool = True
    ca_bundle: str | None = None
    """PEM file of the CA that signs MAAS's certificate (`ca_bundles.maas`)."""


class RoceSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    site: str
    pools: list[Pool]
    machines: list[MachineNics]
    maas: MaasInputs
    vault: VaultInputs

    def refusals(self) -> list[str]:
        return [f"{Code.ROCE_NEEDS_ROCE_FABRIC.value} site {self.site}: host {m.hostname} (profile {m.profile}, "
                f"fabric_mode {m.fabric_mode.value}, enable_phase2_roce {str(m.enable_phase2_roce).lower()}): "
                "phase-2 RoCE assignment refused; fix: set fabric_mode: roce and enable_phase2_roce: true on the "
                "profile, or leave the machine out of RoCE"
                for m in self.machines if not (m.fabric_mode is FabricMode.ROCE and m.enable_phase2_roce)]

    def nics(self) -> list[Nic]:
        return [Nic(hostname=m.hostname, interface=i, rail=r)
                for m in self.machines for r, i in enumerate(m.interfaces)]


def table_of(entries: dict[Key, Entry], hostnames: list[str]) -> dict[str, list[dict[str, Any]]]:
    # No `vlan: null`: Pulumi drops None inside structs, so a refresh would read the row back without it.
    return {h: [e.model_dump(mode="json", exclude_none=True)
                for (hh, _), e in sorted(entries.items(), key=lambda kv: kv[1].rail) if hh == h]
            for h in sorted(hostnames)}


def canonical_table(table: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """A recorded table (v1 state wrote `vlan: null`, floats for ints) in the shape `table_of` writes."""
    return {h: [Entry.model_validate(plain(r)).model_dump(mode="json", exclude_none=True) for r in rows or ()]
            for h, rows in (table or {}).items()}


def existing_of(table: Mapping[str, Any] | None) -> dict[Key, str]:
    return {(h, e["interface"]): e["address"] for h, rows in (table or {}).items() for e in rows or ()}


# --- reconciler -------------------------------------------------------------------------------------
_site_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _site_lock(site: str) -> threading.Lock:
    with _locks_guard:
        return _site_locks.setdefault(site, threading.Lock())


class RoceReconciler:
    def __init__(self, spec: RoceSpec, credentials: VaultCredentials | None) -> None:
        self.spec, self._credentials = spec, credentials

    def maas(self) -> MaasSiteClient:
        key = vault_reader(self.spec.vault, self._credentials).read(self.spec.maas.api_key_path)
        m = self.spec.maas
        return MaasSiteClient(m.url, key.get_secret_value(), tls_verify=m.tls_verify, ca_bundle=resolve_ca(m.ca_bundle))

    def converge(self, old_table: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, str]]:
        """Allocate against state + MAAS, then link what MAAS lets us link. Returns (table, link status)."""
        if refused := self.spec.refusals():
            raise ValueError("; ".join(refused))
        with _site_lock(self.spec.site):
            maas = self.maas()
            ours = {m.hostname for m in self.spec.machines}
            cidrs = {str(p.subnet) for p in self.spec.pools}
            holdings = maas.static_holdings(cidrs)
            existing = existing_of(old_table)
            held: dict[str, str] = {}
            rail_of = {(n.hostname, n.interface): n.rail for n in self.spec.nics()}
            pool_of = {p.rail: p for p in self.spec.pools}
            for h in holdings:
                key = (h.hostname, h.interface)
                if existing.get(key) == h.address:
                    continue  # our own link, as recorded
                pool = pool_of.get(rail_of[key]) if key in rail_of else None
                adoptable = (key not in existing and pool is not None and str(pool.subnet) == h.subnet
                             and pool.contains(ipaddress.IPv4Address(h.address)))
                if adoptable:  # linked in MAAS before this stack knew it: keep that address
                    existing[key] = h.address
                else:
                    held[h.address] = f"{h.hostname}/{h.interface} in MAAS"
            # Everything is decided before the first mutation: an error leaves MAAS untouched.
            entries = allocate(self.spec.pools, self.spec.nics(), existing, held)
            machines = maas.machine_nics(sorted(ours))
            plan = {host: self._plan_links(host, machines.get(host), entries) for host in sorted(ours)}
            for _status, actions in plan.values():
                for system_id, nic_id, e in actions:
                    maas.link_static(system_id, nic_id, e.subnet, e.address)
            for host in sorted(set(old_table or {}) - ours):
                self._unlink_machine(maas, host, old_table or {})
        macs = {(h, n.name): n.mac_address for h, m in machines.items() for n in m.nics.values()}
        entries = {k: e.model_copy(update={"mac": macs.get(k, "")}) for k, e in entries.items()}
        return table_of(entries, sorted(ours)), {host: st for host, (st, _a) in plan.items()}

    def _plan_links(self, host: str, m: MaasMachineNics | None,
                    entries: dict[Key, Entry]) -> tuple[str, list[tuple[str, int, Entry]]]:
        """(link status, the links to make). Raises before anything is changed."""
        if m is None:
            return "pending: not in MAAS yet (the machine lifecycle links it)", []
        if m.status not in NETWORK_EDITABLE:
            return f"pending: MAAS status {m.status.name} does not allow link changes", []
        actions: list[tuple[str, int, Entry]] = []
        for (h, iface), e in entries.items():
            if h != host:
                continue
            nic = m.nics.get(iface)
            if nic is None:
                raise ValueError(f"site {self.spec.site}: host {host} ({m.system_id}) has no interface {iface} in "
                                 "MAAS; fix: commission the machine or correct the SKU's fabric_interfaces; "
                                 "nothing was changed")
            # Already linked with this address: nothing to do (idempotent).
            if not any(ip == e.address and cidr == e.subnet for _l, _m, cidr, ip in nic.links):
                actions.append((m.system_id, nic.id, e))
        return "linked", actions

    def _unlink_machine(self, maas: MaasSiteClient, host: str, old_table: Mapping[str, Any]) -> None:
        m = maas.machine_nics([host]).get(host)
        if m is None or m.status not in NETWORK_EDITABLE:
            return  # MAAS keeps the links: the addresses stay held, never reused
        for e in old_table.get(host) or ():
            nic = m.nics.get(e["interface"])
            for link_id, _mode, cidr, ip in (nic.links if nic else ()):
                if ip == e["address"] and cidr == e["subnet"]:
                    maas.unlink(m.system_id, nic.id, link_id)  # type: ignore[union-attr]

    def observe(self, table: Mapping[str, Any], link_status: Mapping[str, str]) -> dict[str, str]:
        """Link status per host: do the machines linked before still have their links in MAAS?"""
        status = dict(link_status)
        linked = sorted(h for h, st in status.items() if st == "linked" or str(st).startswith(MISSING))
        machines = self.maas().machine_nics(linked) if linked else {}
        for host in linked:
            m = machines.get(host)
            have = {(n.name, ip) for n in (m.nics.values() if m else ()) for _l, _m, _c, ip in n.links}
            lost = [r["interface"] for r in table.get(host, ()) if (r["interface"], r["address"]) not in have]
            status[host] = f"{MISSING} {len(lost)} link(s): {', '.join(lost)}" if lost else "linked"
        return status

    def release(self, old_table: Mapping[str, Any]) -> None:
        with _site_lock(self.spec.site):
            maas = self.maas()
            for host in sorted(old_table):
                self._unlink_machine(maas, host, old_table)
