"""The RoCE assignment's machines and its recorded table, in the shapes its spec and state keep (issue 29:
each fact once): machines grouped by profile and fabric interfaces (`NicGroup`), and the table as hostname ->
addresses in rail order (`Table`). State written before listed every machine and recorded rows: read here as
the same groups and table. A declared rename carries a machine's row to its new hostname (`carried_table`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from providers.wire import FabricMode


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MachineNics(_M):
    hostname: str
    profile: str
    fabric_mode: FabricMode
    enable_phase2_roce: bool
    interfaces: list[str]
    """fabric_interfaces of the machine's SKU: interfaces[r] is on rail r."""
    pxe_mac: str = ""
    """The hardware (a declared rename keeps the addresses of the machine with this PXE MAC); empty: unknown."""


class NicGroup(_M):
    """Machines that share a profile and a SKU's fabric interfaces: the spec carries each such fact once and
    the hostnames (issue 29: state per machine)."""

    profile: str
    fabric_mode: FabricMode
    enable_phase2_roce: bool
    interfaces: list[str]
    hostnames: list[str]
    pxe_macs: list[str] = []
    """hostnames[i]'s PXE MAC (what names the hardware); empty in state written before."""

    @model_validator(mode="after")
    def _parallel(self) -> NicGroup:
        if self.pxe_macs and len(self.pxe_macs) != len(self.hostnames):
            raise ValueError("pxe_macs must list one MAC per hostname, in the same order")
        return self


def nic_groups(machines: list[MachineNics]) -> list[NicGroup]:
    groups: dict[tuple[str, FabricMode, bool, tuple[str, ...]], list[MachineNics]] = {}
    for m in machines:
        groups.setdefault((m.profile, m.fabric_mode, m.enable_phase2_roce, tuple(m.interfaces)), []).append(m)
    out = []
    for (p, f, e, i), ms in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][3])):
        ms = sorted(ms, key=lambda m: m.hostname)
        macs = [m.pxe_mac for m in ms] if all(m.pxe_mac for m in ms) else []
        out.append(NicGroup(profile=p, fabric_mode=f, enable_phase2_roce=e, interfaces=list(i),
                            hostnames=[m.hostname for m in ms], pxe_macs=macs))
    return out


def grouped(props: Mapping[str, Any]) -> dict[str, Any]:
    """Inputs as this version writes them: state written before listed every machine (`machines`)."""
    if "machines" not in props or "groups" in props:
        return dict(props)
    machines = [MachineNics.model_validate(m) for m in props["machines"] or ()]
    out = {k: v for k, v in props.items() if k != "machines"}
    out["groups"] = [g.model_dump(mode="json") for g in nic_groups(machines)]
    return out


Table = dict[str, list[str]]
"""hostname -> its addresses in rail order (`interfaces[r]` is on rail r); interface names, subnets and MTUs are
the SKU's and the pools' (`RoceSpec.links`), kept once (issue 29: state per machine)."""


def canonical_table(table: Mapping[str, Any] | None) -> Table:
    """A recorded table in the shape `table_of` writes. State written before recorded rows
    ({interface, rail, subnet, address, mtu, mac, vlan}); their addresses in rail order are the same table."""
    out: Table = {}
    for h, rows in (table or {}).items():
        rows = list(rows or ())
        if rows and isinstance(rows[0], Mapping):
            rows = [r["address"] for r in sorted(rows, key=lambda r: int(r["rail"]))]
        out[str(h)] = [str(a) for a in rows]
    return out


def carried_table(old_props: Mapping[str, Any], machines: list[MachineNics]) -> Table:
    """The recorded table with each renamed machine's addresses under its new hostname. A machine is the same
    hardware when its PXE MAC is: a declared rename (an in-place change of the machine) keeps its addresses,
    so its RoCE links, and so its deploy, do not change. Records without MACs (state written before) carry
    nothing."""
    table = canonical_table(old_props.get("table") if isinstance(old_props.get("table"), Mapping) else None)
    old_groups = [NicGroup.model_validate(g) for g in grouped(old_props).get("groups") or ()]
    was = {mac: h for g in old_groups for h, mac in zip(g.hostnames, g.pxe_macs, strict=False)}
    moves = {old: m.hostname for m in machines
             if m.pxe_mac and (old := was.get(m.pxe_mac)) and old != m.hostname and old in table}
    out = {h: a for h, a in table.items() if h not in moves and h not in moves.values()}
    out.update({new: table[old] for old, new in moves.items()})
    return out


def addresses_of(table: Mapping[str, Any] | None, hostname: str) -> set[str]:
    return set(canonical_table({hostname: (table or {}).get(hostname) or []})[hostname])
