"""Find the MAAS machine each spec already has, so nothing is ever created twice.

Machines MAAS doesn't know are created (`create_machine`), a failed create retried only after
re-resolving: a 5xx or dropped connection may still have created it.

Precedence: the system_id recorded in state, then hostname, then IPMI (power) address or PXE MAC:
the machines either matches are the candidates; exactly one is adopted, several stop the machine
(MCH020, listing their system_ids). Each key kind is one bulk request for all machines of the run;
the power-address lookup (MAAS has no filter for it: it reads the whole region) runs only for machines
that neither system_id, hostname nor PXE MAC found, i.e. machines that may be new.

A machine found by hostname whose PXE MAC is another than the spec's is other hardware (the plan's
`reidentify`: the spec now names new hardware). It is never adopted: when it is not in use (New, Ready,
failed commissioning or testing) it is renamed `<hostname>-was-<system_id>` so the name is free, and the
spec's hardware is looked up by its own keys; in use, the machine stops with MCH026.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from clients.maas import MaasStatus, MachineView, PortError

from .ports import MachineOps
from .records import Context, FailCode, LifecycleRecord
from .spec import MachineSpec

CREATE_ATTEMPTS = 4
MAX_WORKERS = 32  # concurrent creates per run


# A machine in these states holds nothing: its hostname may be freed for the hardware a spec names now.
FREE_TO_RENAME = frozenset({MaasStatus.NEW, MaasStatus.READY, MaasStatus.FAILED_COMMISSIONING,
                            MaasStatus.FAILED_TESTING})


def other_hardware(spec: MachineSpec, view: MachineView) -> bool:
    """A machine found under the spec's hostname that MAAS knows with another PXE MAC."""
    return bool(view.pxe_mac) and (view.pxe_mac or "").lower() != spec.pxe_mac


def resolve_machines(
    ops: MachineOps,
    specs: list[MachineSpec],
    known: dict[str, str],
    ambiguous: dict[str, list[MachineView]] | None = None,
    held: dict[str, MachineView] | None = None,
) -> dict[str, MachineView]:
    """hostname -> the machine MAAS has for it. A spec that IPMI address and PXE MAC match to
    several machines is not resolved: it lands in `ambiguous` (hostname -> the candidates). A machine
    under the spec's hostname that is other hardware lands in `held` and the spec's own keys decide."""
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
            if s.hostname not in by_name:
                continue
            if other_hardware(s, by_name[s.hostname]):
                if held is not None:
                    held[s.hostname] = by_name[s.hostname]
                continue
            found[s.hostname] = by_name[s.hostname]
    pending = [s for s in specs if s.hostname not in found]
    if pending:
        for name, candidates in _candidates(ops, pending).items():
            if len(candidates) == 1:
                found[name] = candidates[0]
            elif candidates and ambiguous is not None:
                ambiguous[name] = candidates
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


def _candidates(ops: MachineOps, pending: list[MachineSpec]) -> dict[str, list[MachineView]]:
    """hostname -> every machine its PXE MAC or, for a machine the MAC finds nothing for, its IPMI address
    matches. The power-address lookup reads every machine of the region (MAAS cannot filter on it) with
    their BMC credentials, so it runs only for machines no filtered key found (docs/scale.md)."""
    by_mac = {(v.pxe_mac or "").lower(): v for v in ops.by_macs([s.pxe_mac for s in pending])}
    unfound = [s.ipmi_address for s in pending if s.pxe_mac not in by_mac]
    by_power = ops.power_address_matches(unfound) if unfound else {}
    ids = sorted({sid for sids in by_power.values() for sid in sids} - {v.system_id for v in by_mac.values()})
    views = {v.system_id: v for v in ops.read_many(ids)} if ids else {}
    views |= {v.system_id: v for v in by_mac.values()}
    out: dict[str, list[MachineView]] = {}
    for s in pending:
        sids = set(by_power.get(s.ipmi_address, ()))
        if s.pxe_mac in by_mac:
            sids.add(by_mac[s.pxe_mac].system_id)
        out[s.hostname] = [views[sid] for sid in sorted(sids) if sid in views]
    return out


def resolve_records(
    ctx: Context,
    recs: list[LifecycleRecord],
    known: dict[str, str],
    *,
    create_missing: bool,
    sleep: Callable[[float], None] = time.sleep,
    create_now: int | None = None,
) -> list[LifecycleRecord]:
    """Attach each record to its MAAS machine (bulk lookups); create the missing ones if asked (with
    `create_now`, only that many: the rest are returned for `create_records` later). A machine neither
    found nor created is marked (`vanished`, `create_error`): the pre-check decides."""
    ambiguous: dict[str, list[MachineView]] = {}
    held: dict[str, MachineView] = {}
    found = resolve_machines(ctx.ops, [r.spec for r in recs], known, ambiguous, held)
    for r in recs:
        if r.spec.hostname in held and not _free_hostname(ctx, r, held[r.spec.hostname], found.get(r.spec.hostname)):
            continue
        view = found.get(r.spec.hostname)
        if r.spec.hostname in ambiguous:
            listed = ", ".join(f"{v.system_id} ({v.hostname}, {v.status.label})" for v in ambiguous[r.spec.hostname])
            r.create_error = FailCode.AMBIGUOUS_MATCH(
                f"{r.spec.hostname}: IPMI address {r.spec.ipmi_address} / PXE MAC {r.spec.pxe_mac} match several "
                f"MAAS machines: {listed}; delete or fix the wrong ones in MAAS (or the declared addresses), "
                "then run up again"
            )
            continue
        if view is None:
            r.vanished = not create_missing  # the pre-check decides what that means
            continue
        r.adopted = r.spec.hostname not in known
        r.view, r.system_id = view, view.system_id
    missing = [r for r in recs if r.view is None and create_missing and not r.create_error]
    now = missing if create_now is None else missing[:create_now]
    create_records(ctx, now, sleep)
    return missing[len(now):]


def _free_hostname(ctx: Context, r: LifecycleRecord, other: MachineView, own: MachineView | None) -> bool:
    """The spec's hostname is held by other hardware: rename that machine away when it holds nothing,
    else stop this machine (MCH026). True when the spec may go on (adopt its own machine or create it)."""
    h = r.spec.hostname
    if other.status not in FREE_TO_RENAME:
        r.create_error = FailCode.HOSTNAME_HELD(
            f"{h}: MAAS machine {other.system_id} ({other.status.label}, PXE MAC {other.pxe_mac}) holds the "
            f"hostname, but the spec names PXE MAC {r.spec.pxe_mac}: other hardware. Release that machine (or "
            "rename it in MAAS) if it is the hardware being replaced, or fix the declared PXE MAC; then run up again"
        )
        return False
    new_name = f"{h}-was-{other.system_id}"
    ctx.ops.set_hostname(other.system_id, new_name)
    _free_addresses(ctx, other.system_id, {link.address for link in r.spec.roce_links})
    r.notes.append(f"MAAS machine {other.system_id} (PXE MAC {other.pxe_mac}) held the hostname: renamed {new_name}"
                   + (f"; the spec's hardware is {own.system_id}" if own is not None else ""))
    ctx.log(f"{h}: {r.notes[-1]}")
    return True


def _free_addresses(ctx: Context, system_id: str, addresses: set[str]) -> None:
    """The static links the old hardware still holds on the spec's RoCE addresses (MAAS keeps a released
    machine's links): unlinked, so the hardware the spec names now can take them."""
    if not addresses:
        return
    for iface in ctx.ops.detail(system_id).interfaces:
        for link in iface.links:
            if link.get("ip_address") in addresses and link.get("id") is not None:
                ctx.ops.unlink(system_id, iface.id, int(link["id"]))


def create_records(ctx: Context, recs: list[LifecycleRecord], sleep: Callable[[float], None] = time.sleep) -> None:
    """Create the machines of `recs` in MAAS, concurrently (each record gets its view, or a create_error)."""
    if not recs:
        return
    workers = min(max(4, ctx.policy.batch_max_parallel), MAX_WORKERS, len(recs))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="create") as pool:
        for r, view in zip(recs, pool.map(lambda r: create_machine(ctx, r, sleep), recs), strict=True):
            if view is not None:
                r.view, r.system_id = view, view.system_id


def create_machine(ctx: Context, r: LifecycleRecord, sleep: Callable[[float], None]) -> MachineView | None:
    """Create a machine MAAS doesn't know. A create is retried only after checking it did not
    happen: a 5xx or dropped connection may still have created the machine."""
    last: PortError | None = None
    power_user = power_pass = None
    if r.spec.power_user_path and ctx.bmc_credentials is not None:
        try:
            power_user, power_pass = ctx.bmc_credentials(r.spec.power_user_path)
        except Exception as e:  # noqa: BLE001 - e.g. VaultError: names the path, never a value
            r.create_error = FailCode.BMC_CREDENTIALS(f"{r.spec.hostname}: BMC credentials unavailable: {e}")
            return None
    for attempt in range(CREATE_ATTEMPTS):
        if attempt:
            again = resolve_machines(ctx.ops, [r.spec], {})
            if r.spec.hostname in again:
                return again[r.spec.hostname]
            sleep(ctx.deadlines.poll_initial_s * attempt)
        try:
            view = ctx.ops.create(
                hostname=r.spec.hostname,
                pxe_mac=r.spec.pxe_mac,
                power_type=r.spec.power_type.value,
                power_address=r.spec.ipmi_address,
                power_user=power_user,
                power_pass=power_pass,
                commission=False,
            )
            ctx.log(f"{r.spec.hostname}: created in MAAS as {view.system_id}")
            return view
        except PortError as e:
            last = e
            if e.status is not None and e.status < 500:
                break
    r.create_error = FailCode.CREATE(
        f"{r.spec.hostname}: create failed: {last}; fix the machine's record and run up again"
    )
    return None
