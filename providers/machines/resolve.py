"""Find the MAAS machine each spec already has, so nothing is ever created twice.

Precedence: the system_id recorded in state, then hostname, then IPMI (power) address, then PXE MAC.
Each key kind is one bulk request for all machines of the run; the power-address lookup (MAAS has
no filter for it) runs only for machines still unresolved, i.e. machines that may be new.
"""

from __future__ import annotations

from .ports import MachineOps, MachineView
from .spec import MachineSpec


def resolve_machines(ops: MachineOps, specs: list[MachineSpec], known: dict[str, str]) -> dict[str, MachineView]:
    found: dict[str, MachineView] = {}
    if not specs:
        return found
    known_ids = {known[s.hostname]: s.hostname for s in specs if s.hostname in known}
    if known_ids:
        for view in ops.read_many(list(known_ids)):
            found[known_ids[view.system_id]] = view
    pending = [s for s in specs if s.hostname not in found]
    if pending:
        by_name = {v.hostname: v for v in ops.by_hostnames([s.hostname for s in pending])}
        for s in pending:
            if s.hostname in by_name:
                found[s.hostname] = by_name[s.hostname]
    pending = [s for s in specs if s.hostname not in found]
    if pending:
        by_power = ops.by_power_addresses([s.ipmi_address for s in pending])
        ids = {by_power[s.ipmi_address]: s.hostname for s in pending if s.ipmi_address in by_power}
        if ids:
            for view in ops.read_many(list(ids)):
                found[ids[view.system_id]] = view
    pending = [s for s in specs if s.hostname not in found]
    if pending:
        by_mac = {(v.pxe_mac or "").lower(): v for v in ops.by_macs([s.pxe_mac for s in pending])}
        for s in pending:
            if s.pxe_mac in by_mac:
                found[s.hostname] = by_mac[s.pxe_mac]
    claimed: dict[str, str] = {}
    for hostname, view in list(found.items()):
        if view.system_id in claimed:
            # Two specs resolve to one machine (e.g. swapped MACs): never let both drive it.
            raise ValueError(
                f"{hostname} and {claimed[view.system_id]} both resolve to MAAS machine "
                f"{view.system_id} ({view.hostname}); fix their hostname/IPMI/MAC in the environment"
            )
        claimed[view.system_id] = hostname
    return found
