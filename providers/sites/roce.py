"""RoceAssignment: static RoCE addresses per (site, hostname, interface), applied as MAAS STATIC links.

One resource per *site* holds the whole site's table (docs/sites-bundles-roce.md explains why): the
allocation sees every holding of the site in one place (its own state), so four provider threads can
never race two machines onto one address, and `check` can compute the table (known at preview);
machines consume `table[hostname]`, equal for machines that did not change.

Pure core: `allocate(pools, nics, existing, held)`: existing assignments are kept (never
renumbered); new interfaces, in (hostname, rail) order, take the lowest free address of their
rail's pool range that nobody holds (state or MAAS). Errors name the pool and the hostname and carry
a `failures.RoceFail` code (ROC0xx: docs/sites-bundles-roce.md), as every failure of the kind does.
Reconciler: `plan` allocates with MAAS's holdings of the pools' subnets (any owner: a second stack
declaring the same pools, a hand link) and is what `check` records, so a preview shows the exact
addresses; `converge` makes the same allocation at create/update, then links interfaces of machines
MAAS lets us edit (Ready, Allocated, ...); machines not yet in MAAS, or deployed, are linked by
the machine lifecycle's RoCE stage from this table. The recorded table: addresses in rail order (`Table`).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

import clients.maas
from clients.maas import MaasError, MaasStatus
from clients.vault import VaultCredentials, VaultError
from environments.ca_paths import resolve_ca
from environments.coded import CodedError, line, raises_coded
from environments.findings import Code
from providers.common import VaultInputs, vault_reader
from providers.machines.records import OWNER_RESOURCE
from providers.sites.failures import ROCE_CLIENTS, RoceFail
from providers.sites.roce_table import MachineNics, NicGroup, Table, addresses_of, canonical_table, grouped
from providers.wire import FabricMode

if TYPE_CHECKING:  # the HTTP clients load when a call first makes one (clients/maas, clients/platform)
    from clients.maas import MaasSiteClient, StaticHolding
    from clients.maas import MachineNics as MaasMachineNics

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


@dataclass(frozen=True, slots=True)
class Nic:
    """One fabric interface of a machine (8,192 at a 1,024-machine site, made from the validated spec at every
    check: a plain record)."""

    hostname: str
    interface: str
    rail: int


@dataclass(frozen=True, slots=True)
class Entry:
    """One row of the address table (`allocate` builds 8,192 at a 1,024-machine site from pools and addresses
    already checked: a plain record, not a model validated again)."""

    interface: str
    rail: int
    subnet: str
    address: str
    mtu: int
    vlan: int | None = None


class AllocationError(CodedError):
    def __init__(self, code: RoceFail, pool: str, hostname: str, message: str) -> None:
        self.pool, self.hostname = pool, hostname
        super().__init__(code, f"{pool}: host {hostname}", message, code.fix)


def allocate(pools: list[Pool], nics: list[Nic], existing: Mapping[Key, str],
             held: Mapping[str, str] | None = None) -> dict[Key, Entry]:
    """The table for `nics`. `existing`: (hostname, interface) -> address already assigned (kept);
    `held`: address -> who holds it outside this table (e.g. MAAS links of other machines)."""
    by_rail = {p.rail: p for p in pools}
    # Addresses as integers (issue 29: a site's 8,192 kept addresses were IPv4Address objects hashed, compared
    # and formatted, most of a RoCE check's allocation); a held address that does not parse holds nothing.
    held_at = {parsed: who for text, who in (held or {}).items() if (parsed := _parsed(text)) is not None}
    bounds = {p.rail: (int(p.start), int(p.end)) for p in pools}
    taken: dict[int, Key] = {}
    out: dict[Key, Entry] = {}
    rail_fields = {p.rail: (str(p.subnet), p.mtu, p.vlan) for p in pools}

    def entry(n: Nic, text: str) -> Entry:
        subnet, mtu, vlan = rail_fields[n.rail]
        return Entry(n.interface, n.rail, subnet, text, mtu, vlan)

    ordered = sorted(nics, key=lambda n: (n.hostname, n.rail, n.interface))
    for n in ordered:
        if n.rail not in by_rail:
            raise AllocationError(RoceFail.RAIL_WITHOUT_POOL, f"site {pools[0].site if pools else '?'} rail {n.rail}",
                                  n.hostname, f"interface {n.interface} is on rail {n.rail}, which has no pool")
    # 1. keep what is already assigned (stable), checking it is still valid
    for n in ordered:
        old = existing.get((n.hostname, n.interface))
        if old is None:
            continue
        a = _parsed(old)
        if a is None:  # state edited by hand
            raise AllocationError(RoceFail.RECORD_NOT_ADDRESS, by_rail[n.rail].label(), n.hostname,
                                  f"{n.interface} is recorded with {old!r}")
        lo, hi = bounds[n.rail]
        if not lo <= a <= hi:  # (text inet_pton accepts is canonical: the record's text is the address)
            raise AllocationError(RoceFail.OUTSIDE_RANGE, by_rail[n.rail].label(), n.hostname,
                                  f"{n.interface} holds {old}, outside the pool's range now")
        if a in taken:
            raise AllocationError(RoceFail.ADDRESS_TWICE, by_rail[n.rail].label(), n.hostname,
                                  f"{n.interface} and {taken[a][0]}/{taken[a][1]} both hold {old}")
        if a in held_at:
            raise AllocationError(RoceFail.ADDRESS_HELD, by_rail[n.rail].label(), n.hostname,
                                  f"{n.interface} holds {old}, which MAAS also gives to {held_at[a]}")
        taken[a] = (n.hostname, n.interface)
        out[(n.hostname, n.interface)] = entry(n, old)  # the record's text (what parses is canonical already)
    # 2. new interfaces: lowest free address of the rail's range
    cursor: dict[int, int] = {}
    for n in ordered:
        if (n.hostname, n.interface) in out:
            continue
        lo, hi = bounds[n.rail]
        i = cursor.get(n.rail, lo)
        while i <= hi and (i in taken or i in held_at):
            i += 1
        if i > hi:
            raise AllocationError(RoceFail.POOL_EXHAUSTED, by_rail[n.rail].label(), n.hostname,
                                  f"no free address left for {n.interface}")
        cursor[n.rail] = i + 1
        taken[i] = (n.hostname, n.interface)
        out[(n.hostname, n.interface)] = entry(n, str(ipaddress.IPv4Address(i)))
    return out


def _parsed(text: str) -> int | None:
    """The integer of an IPv4 address in dotted-quad text, or None (inet_pton accepts what `IPv4Address` does,
    leading zeros refused alike, so accepted text is canonical): a RoCE check parses every address MAAS holds
    on a site's rails and every recorded one, 16,384 at 1,024 machines, ~10x cheaper than IPv4Address."""
    try:
        return int.from_bytes(socket.inet_pton(socket.AF_INET, text), "big")
    except (OSError, TypeError):
        return None


# --- spec -----------------------------------------------------------------------------------------
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
    groups: list[NicGroup]
    maas: MaasInputs
    vault: VaultInputs
    stack: str = ""
    """The stack whose machines these are (its machines carry MAAS owner data `gpuaas_resource` = <stack>/...);
    empty in state written before."""

    @model_validator(mode="before")
    @classmethod
    def _machines_listed(cls, data: Any) -> Any:
        return grouped(data) if isinstance(data, Mapping) else data

    @cached_property
    def machines(self) -> list[MachineNics]:
        return [MachineNics(hostname=h, profile=g.profile, fabric_mode=g.fabric_mode,
                            enable_phase2_roce=g.enable_phase2_roce, interfaces=g.interfaces,
                            pxe_mac=g.pxe_macs[n] if g.pxe_macs else "")
                for g in self.groups for n, h in enumerate(g.hostnames)]

    def refusals(self) -> list[str]:
        return [line(Code.ROCE_NEEDS_ROCE_FABRIC.value, f"site {self.site}: host {m.hostname}",
                     f"profile {m.profile} (fabric_mode {m.fabric_mode.value}, enable_phase2_roce "
                     f"{str(m.enable_phase2_roce).lower()}): phase-2 RoCE assignment refused", RoceFail.NOT_ROCE.fix)
                for m in self.machines if not (m.fabric_mode is FabricMode.ROCE and m.enable_phase2_roce)]

    def nics(self) -> list[Nic]:
        return self._nics

    @cached_property
    def _nics(self) -> list[Nic]:
        return [Nic(hostname=m.hostname, interface=i, rail=r)
                for m in self.machines for r, i in enumerate(m.interfaces)]

    def existing(self, table: Mapping[str, Any] | None) -> dict[Key, str]:
        """(hostname, interface) -> address, for this spec's machines (a machine that left has no interfaces
        here: its addresses are MAAS's to hold or free)."""
        interfaces = {m.hostname: m.interfaces for m in self.machines}
        return {(h, interfaces[h][r]): a for h, addrs in canonical_table(table).items() if h in interfaces
                for r, a in enumerate(addrs) if r < len(interfaces[h])}

    def links(self, table: Mapping[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
        """Each machine's links as its lifecycle applies them ({interface, subnet, address, mtu})."""
        rails = {p.rail: (str(p.subnet), p.mtu) for p in self.pools}  # formatted once, not per address
        addrs = canonical_table(table)
        return {m.hostname: [{"interface": i, "subnet": rails[r][0], "address": a, "mtu": rails[r][1]}
                             for r, (i, a) in enumerate(zip(m.interfaces, addrs.get(m.hostname, []), strict=False))
                             if r in rails]
                for m in self.machines}


def table_of(entries: Mapping[Key, Entry], hostnames: list[str]) -> Table:
    by_host: dict[str, list[Entry]] = {h: [] for h in sorted(hostnames)}
    for (h, _), e in entries.items():
        if h in by_host:
            by_host[h].append(e)
    return {h: [e.address for e in sorted(rows, key=lambda e: e.rail)] for h, rows in by_host.items()}


# --- reconciler -------------------------------------------------------------------------------------
_site_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _site_lock(site: str) -> threading.Lock:
    with _locks_guard:
        return _site_locks.setdefault(site, threading.Lock())


class RoceReconciler:
    def __init__(self, spec: RoceSpec, credentials: VaultCredentials | None) -> None:
        self.spec, self._credentials = spec, credentials
        self.where = f"RoCE assignment site {spec.site}"

    def _refuse(self) -> None:
        if refused := self.spec.refusals():
            raise RoceFail.NOT_ROCE(self.where, f"refused for {len(refused)} machine(s)", details=refused)

    def maas(self) -> MaasSiteClient:
        key = vault_reader(self.spec.vault, self._credentials).read(self.spec.maas.api_key_path)
        m = self.spec.maas
        return clients.maas.MaasSiteClient(m.url, key.get_secret_value(), tls_verify=m.tls_verify,
                                           ca_bundle=resolve_ca(m.ca_bundle))

    def plan(self, old_table: Mapping[str, Any] | None) -> Table:
        """The table `converge` will apply, from the recorded one and what MAAS holds on the pools' subnets
        (`check` calls it: the preview shows the addresses the update makes). Without MAAS (a preview run
        by an identity that may not read the MAAS key, or MAAS unavailable) it is planned from the record
        alone: the same table unless MAAS holds one of the addresses it offers, and `update` allocates with
        MAAS's holdings whatever the preview said."""
        self._refuse()
        try:
            entries, _applied = self._allocate(self.maas(), old_table)
        except (VaultError, MaasError):
            entries = allocate(self.spec.pools, self.spec.nics(), self.spec.existing(old_table))
        return table_of(entries, [m.hostname for m in self.spec.machines])

    def _allocate(self, maas: MaasSiteClient,
                  old_table: Mapping[str, Any] | None) -> tuple[dict[Key, Entry], set[Key]]:
        """Allocate against the record and MAAS. What MAAS holds on one of our interfaces, in that rail's
        pool, is its address (MAAS is the truth of what is applied). A recorded address MAAS gives to a
        machine under another name is still ours when that machine is managed by this stack (MAAS owner data
        `gpuaas_resource`: renamed by hand, or mid-rename); when it is not (another stack's machine linked it
        first), the address is not applied to us and is offered again, never failed on. Addresses held by
        others are never offered (`held` names the holder). Returns the table's entries and the keys MAAS
        already holds for us (under their name or another)."""
        recorded = self.spec.existing(old_table)
        rail_of = {(n.hostname, n.interface): n.rail for n in self.spec.nics()}
        range_of = {p.rail: (str(p.subnet), int(p.start), int(p.end)) for p in self.spec.pools}
        applied: dict[Key, str] = {}
        foreign: dict[str, StaticHolding] = {}
        for h in maas.static_holdings({subnet for subnet, _, _ in range_of.values()}):
            key = (h.hostname, h.interface)
            pool = range_of.get(rail_of[key]) if key in rail_of else None
            a = _parsed(h.address)
            ours = (pool is not None and a is not None and pool[0] == h.subnet and pool[1] <= a <= pool[2]
                    and applied.get(key, h.address) == h.address)
            if ours:
                applied[key] = h.address
            else:
                foreign[h.address] = h
        for key, address in self._ours_under_other_names(maas, recorded, foreign).items():
            applied.setdefault(key, address)
            foreign.pop(address, None)
        held = {a: f"{h.hostname}/{h.interface or '?'} ({h.system_id}) in MAAS" for a, h in foreign.items()}
        taken = set(applied.values())
        existing = {k: a for k, a in recorded.items() if a not in held and a not in taken}
        existing.update(applied)
        entries = allocate(self.spec.pools, self.spec.nics(), existing, held)
        return entries, {k for k, e in entries.items() if applied.get(k) == e.address}

    def _ours_under_other_names(self, maas: MaasSiteClient, recorded: Mapping[Key, str],
                                foreign: Mapping[str, StaticHolding]) -> dict[Key, str]:
        """Recorded addresses held by a machine of this stack under another hostname (one bulk read of those
        machines, only when there are such holders)."""
        suspects = {k: a for k, a in recorded.items() if a in foreign and foreign[a].interface == k[1]}
        if not suspects or not self.spec.stack:
            return {}
        views = maas.read_many(sorted({foreign[a].system_id for a in suspects.values()}))
        mine = {v.system_id for v in views
                if str(v.owner_data.get(OWNER_RESOURCE, "")).startswith(f"{self.spec.stack}/")}
        return {k: a for k, a in suspects.items() if foreign[a].system_id in mine}

    @raises_coded(ROCE_CLIENTS)
    def converge(self, old_table: Mapping[str, Any] | None) -> tuple[Table, dict[str, str]]:
        """Allocate against state + MAAS, then link what MAAS lets us link. Returns (table, link status)."""
        self._refuse()
        with _site_lock(self.spec.site):
            maas = self.maas()
            ours = {m.hostname for m in self.spec.machines}
            # Everything is decided before the first mutation: an error leaves MAAS untouched.
            entries, applied = self._allocate(maas, old_table)
            machines = maas.machine_nics(sorted(ours))
            plan = {host: self._plan_links(host, machines.get(host), entries, applied) for host in sorted(ours)}
            for _status, actions in plan.values():
                for system_id, nic_id, e in actions:
                    maas.link_static(system_id, nic_id, e.subnet, e.address)
            for host in sorted(set(old_table or {}) - ours):
                self._unlink_machine(maas, host, old_table or {})
        return table_of(entries, sorted(ours)), {host: st for host, (st, _a) in plan.items()}

    def _plan_links(self, host: str, m: MaasMachineNics | None, entries: dict[Key, Entry],
                    applied: set[Key]) -> tuple[str, list[tuple[str, int, Entry]]]:
        """(link status, the links to make). Raises before anything is changed."""
        mine = [k for k in entries if k[0] == host]
        if mine and all(k in applied for k in mine):
            # MAAS holds every address on its interface (whatever the machine's status, or under its old name:
            # a declared rename the machine pool applies next): what refresh reports as linked too
            return "linked", []
        if m is None:
            return "pending: not in MAAS", []  # the machine lifecycle links it (its RoCE stage)
        if m.status not in NETWORK_EDITABLE:
            return f"pending: MAAS status {m.status.name}", []  # MAAS refuses link changes there
        actions: list[tuple[str, int, Entry]] = []
        for (h, iface), e in entries.items():
            if h != host:
                continue
            nic = m.nics.get(iface)
            if nic is None:
                raise RoceFail.INTERFACE_MISSING(self.where, f"host {host} ({m.system_id}) has no interface {iface} "
                                                 "in MAAS; nothing was changed")
            # Already linked with this address: nothing to do (idempotent).
            if not any(ip == e.address and cidr == e.subnet for _l, _m, cidr, ip in nic.links):
                actions.append((m.system_id, nic.id, e))
        return "linked", actions

    def _unlink_machine(self, maas: MaasSiteClient, host: str, old_table: Mapping[str, Any]) -> None:
        m = maas.machine_nics([host]).get(host)
        if m is None or m.status not in NETWORK_EDITABLE:
            return  # MAAS keeps the links: the addresses stay held, never reused
        addresses, subnets = addresses_of(old_table, host), {str(p.subnet) for p in self.spec.pools}
        for nic in m.nics.values():
            for link_id, _mode, cidr, ip in nic.links:
                if ip in addresses and cidr in subnets:
                    maas.unlink(m.system_id, nic.id, link_id)

    @raises_coded(ROCE_CLIENTS)
    def observe(self, table: Mapping[str, Any], link_status: Mapping[str, str]) -> dict[str, str]:
        """Link status per host, as MAAS has the links now: a host linked before that lost a link is `missing`;
        a `pending` host whose every address is on its interface (its machine lifecycle linked it since) is
        `linked`; a pending host not linked yet stays pending."""
        status = dict(link_status)
        if not status:
            return status
        # The rails' address lists, not the machines' whole objects (34 MB at 1,024 machines, beside the pool's
        # own read at every refresh): a link is there when its address is listed on the interface.
        have = {(h.hostname, h.interface, h.address)
                for h in self.maas().interface_addresses({str(p.subnet) for p in self.spec.pools})}
        recorded: dict[str, list[tuple[str, str]]] = {}
        for (h, i), a in sorted(self.spec.existing(table).items()):
            recorded.setdefault(h, []).append((i, a))
        for host, was in sorted(status.items()):
            rows = recorded.get(host, [])
            lost = [i for i, a in rows if (host, i, a) not in have]
            if was == "linked" or str(was).startswith(MISSING):
                status[host] = f"{MISSING} {len(lost)} link(s): {', '.join(lost)}" if lost else "linked"
            elif rows and not lost:
                status[host] = "linked"
        return status

    @raises_coded(ROCE_CLIENTS)
    def release(self, old_table: Mapping[str, Any]) -> None:
        with _site_lock(self.spec.site):
            maas = self.maas()
            for host in sorted(old_table):
                self._unlink_machine(maas, host, old_table)
