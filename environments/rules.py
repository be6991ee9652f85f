"""Semantic rules over a schema-valid environment document and its blueprint.

Each rule is a small function yielding findings; `check_all` runs every rule so that all findings
of an environment come out together. Paths point into the environment document.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Callable, Iterator

from .findings import Code, Finding, finding
from .model import (
    Blueprint,
    EnvironmentDocument,
    Site,
)
from .rules_apps import app_instances
from .rules_fabric import fabric_and_bindings
from .rules_hosts import effective_roles as _roles
from .rules_hosts import host_roles
from .rules_node import apt_sources, login_users, weka_clients
from .rules_policy import profile_policy, site_tls
from .rules_runtime import endpoint_refs, storage_mounts
from .rules_storage import storage_devices
from .rules_tls import ca_bundles
from .rules_values import typed_values
from .vocabulary import FabricMode

Rule = Callable[[EnvironmentDocument, Blueprint, str], Iterator[Finding]]


def unique_names(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    # Hostnames: a host may share its hostname with the MAAS machine it *is* (host.machine).
    is_its_machine = {h.hostname for h in doc.hosts if h.machine == h.hostname}
    first_host: dict[str, str] = {}
    for i, h in enumerate(doc.hosts):
        path = f"hosts[{i}].hostname"
        if h.hostname in first_host:
            yield finding(
                Code.DUPLICATE_HOSTNAME,
                file,
                path,
                f"hostname {h.hostname!r} is already used at {first_host[h.hostname]}",
            )
        first_host.setdefault(h.hostname, path)
    first_machine: dict[str, str] = {}
    for i, m in enumerate(doc.machines):
        path = f"machines[{i}].hostname"
        if m.hostname in first_machine:
            yield finding(
                Code.DUPLICATE_HOSTNAME,
                file,
                path,
                f"hostname {m.hostname!r} is already used at {first_machine[m.hostname]}",
            )
        elif m.hostname in first_host and m.hostname not in is_its_machine:
            yield finding(
                Code.DUPLICATE_HOSTNAME,
                file,
                path,
                f"hostname {m.hostname!r} is already used at {first_host[m.hostname]}",
                hint="rename one, or set machine: <hostname> on the host if it is this machine",
            )
        first_machine.setdefault(m.hostname, path)
    kinds: list[tuple[str, list[str]]] = [
        ("sites", [s.name for s in doc.sites]),
        ("machine_pools", [p.name for p in doc.machine_pools]),
        ("bootstrap_bundles", [b.name for b in doc.bootstrap_bundles]),
        ("app_instances", [a.name for a in doc.app_instances]),
        ("filesystems", [f.name for f in doc.filesystems]),
        ("apt_sources", [a.name for a in doc.apt_sources]),
    ]
    for si, s in enumerate(doc.sites):
        kinds.append((f"sites[{si}].profiles", [p.name for p in s.profiles]))
    for where, names in kinds:
        first: dict[str, int] = {}
        for i, n in enumerate(names):
            if n in first:
                yield finding(
                    Code.DUPLICATE_NAME, file, f"{where}[{i}].name", f"{n!r} is already declared at {where}[{first[n]}]"
                )
            else:
                first[n] = i


def unique_addresses(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    seen: dict[ipaddress.IPv4Address, str] = {}
    entries = [(h.address, f"hosts[{i}].address") for i, h in enumerate(doc.hosts)]
    entries += [(m.ipmi_address, f"machines[{i}].ipmi_address") for i, m in enumerate(doc.machines)]
    for addr, path in entries:
        if addr in seen:
            yield finding(Code.DUPLICATE_ADDRESS, file, path, f"{addr} is already used at {seen[addr]}")
        else:
            seen[addr] = path
    macs: dict[str, str] = {}
    for i, m in enumerate(doc.machines):
        if m.pxe_mac in macs:
            yield finding(
                Code.DUPLICATE_MAC, file, f"machines[{i}].pxe_mac", f"{m.pxe_mac} is already used at {macs[m.pxe_mac]}"
            )
        else:
            macs[m.pxe_mac] = f"machines[{i}].pxe_mac"


def addresses_in_networks(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    for i, h in enumerate(doc.hosts):
        if h.address not in doc.host_network:
            yield finding(
                Code.ADDRESS_OUTSIDE_NETWORK,
                file,
                f"hosts[{i}].address",
                f"{h.address} is outside host_network {doc.host_network}",
            )
    sites = {s.name: s for s in doc.sites}
    for i, m in enumerate(doc.machines):
        site = sites.get(m.site)
        if site and m.ipmi_address not in site.bmc_network:
            yield finding(
                Code.ADDRESS_OUTSIDE_NETWORK,
                file,
                f"machines[{i}].ipmi_address",
                f"{m.ipmi_address} is outside site {site.name}'s bmc_network {site.bmc_network}",
            )


def references(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    # size: one pass per kind of reference (sites, profiles, bundles, SKUs, pools, nodes), in document order
    sites = {s.name: s for s in doc.sites}
    bundles = {b.name: b for b in doc.bootstrap_bundles}
    pools = {p.name: p for p in doc.machine_pools}
    machines = {m.hostname for m in doc.machines}

    def bundle_ref(ref: str | None, site: str, path: str) -> Iterator[Finding]:
        if ref is None:
            return
        if ref not in bundles:
            yield finding(
                Code.UNKNOWN_BUNDLE,
                file,
                path,
                f"bootstrap bundle {ref!r} is not declared",
                hint=f"declare it under bootstrap_bundles or use one of: {', '.join(sorted(bundles)) or 'none'}",
            )
        elif bundles[ref].site != site:
            yield finding(
                Code.BUNDLE_SITE_MISMATCH,
                file,
                path,
                f"bundle {ref!r} belongs to site {bundles[ref].site!r}, not {site!r}",
            )

    for si, s in enumerate(doc.sites):
        for pi, p in enumerate(s.profiles):
            base = f"sites[{si}].profiles[{pi}]"
            yield from bundle_ref(p.site_bootstrap_bundle_ref, s.name, f"{base}.site_bootstrap_bundle_ref")
            yield from bundle_ref(p.commissioning_bundle_ref, s.name, f"{base}.commissioning_bundle_ref")
            yield from bundle_ref(
                p.post_deploy_validation_bundle_ref, s.name, f"{base}.post_deploy_validation_bundle_ref"
            )
            if p.storage_layout_profile not in bp.storage_layouts:
                yield finding(
                    Code.UNKNOWN_STORAGE_LAYOUT,
                    file,
                    f"{base}.storage_layout_profile",
                    f"storage layout {p.storage_layout_profile!r} is not in blueprint {bp.name!r}",
                    hint=f"use one of: {', '.join(sorted(bp.storage_layouts))}",
                )
    for bi, b in enumerate(doc.bootstrap_bundles):
        if b.site not in sites:
            yield finding(Code.UNKNOWN_SITE, file, f"bootstrap_bundles[{bi}].site", f"site {b.site!r} is not declared")
    for pi, pool in enumerate(doc.machine_pools):
        if pool.site not in sites:
            yield finding(Code.UNKNOWN_SITE, file, f"machine_pools[{pi}].site", f"site {pool.site!r} is not declared")
        elif pool.profile not in {p.name for p in sites[pool.site].profiles}:
            yield finding(
                Code.UNKNOWN_PROFILE,
                file,
                f"machine_pools[{pi}].profile",
                f"site {pool.site!r} has no profile {pool.profile!r}",
            )
    for i, m in enumerate(doc.machines):
        base = f"machines[{i}]"
        if m.sku not in bp.skus:
            yield finding(
                Code.UNKNOWN_SKU,
                file,
                f"{base}.sku",
                f"SKU {m.sku!r} is not in blueprint {bp.name!r}",
                hint=f"use one of: {', '.join(sorted(bp.skus))}",
            )
        site = sites.get(m.site)
        if site is None:
            yield finding(
                Code.UNKNOWN_SITE,
                file,
                f"{base}.site",
                f"site {m.site!r} is not declared",
                hint=f"use one of: {', '.join(sorted(sites)) or 'none (declare a site)'}",
            )
            continue
        profile = next((p for p in site.profiles if p.name == m.profile), None)
        if profile is None:
            yield finding(
                Code.UNKNOWN_PROFILE,
                file,
                f"{base}.profile",
                f"site {m.site!r} has no profile {m.profile!r}",
                hint=f"use one of: {', '.join(p.name for p in site.profiles)}",
            )
            continue
        if m.bundle is not None:
            yield from bundle_ref(m.bundle, m.site, f"{base}.bundle")
        if m.pool is not None:
            member_of = pools.get(m.pool)
            if member_of is None:
                yield finding(Code.UNKNOWN_POOL, file, f"{base}.pool", f"machine pool {m.pool!r} is not declared")
            elif (member_of.site, member_of.profile) != (m.site, m.profile):
                yield finding(
                    Code.POOL_MISMATCH,
                    file,
                    f"{base}.pool",
                    f"pool {member_of.name!r} is {member_of.site}/{member_of.profile}, "
                    f"the machine is {m.site}/{m.profile}",
                )
    for i, h in enumerate(doc.hosts):
        if h.machine is not None and h.machine not in machines:
            yield finding(Code.UNKNOWN_MACHINE, file, f"hosts[{i}].machine", f"machine {h.machine!r} is not declared")


def roce_pools(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    sites = {s.name: s for s in doc.sites}
    for i, p in enumerate(doc.roce_pools):
        base = f"roce_pools[{i}]"
        if p.site not in sites:
            yield finding(Code.UNKNOWN_SITE, file, f"{base}.site", f"site {p.site!r} is not declared")
        elif not any(pr.fabric_mode is FabricMode.ROCE for pr in sites[p.site].profiles):
            yield finding(
                Code.ROCE_POOL_WITHOUT_ROCE_SITE, file, f"{base}.site", f"site {p.site!r} has no RoCE profile"
            )
        if p.range.start not in p.subnet or p.range.end not in p.subnet or p.range.start > p.range.end:
            yield finding(
                Code.ROCE_RANGE_INVALID,
                file,
                f"{base}.range",
                f"range {p.range.start}-{p.range.end} is not an ordered range inside {p.subnet}",
            )
        for j, q in enumerate(doc.roce_pools[:i]):
            if p.subnet.overlaps(q.subnet):
                yield finding(
                    Code.ROCE_POOL_OVERLAP,
                    file,
                    f"{base}.subnet",
                    f"{p.subnet} (site {p.site}, rail {p.rail}) overlaps roce_pools[{j}] {q.subnet} "
                    f"(site {q.site}, rail {q.rail})",
                )
    # Every RoCE machine needs one address per rail of its SKU, from that rail's pool.
    by_site_rail = {(p.site, p.rail): (i, p) for i, p in enumerate(doc.roce_pools)}
    need: Counter[tuple[str, int]] = Counter()
    first_machine: dict[tuple[str, int], int] = {}
    for mi, m in enumerate(doc.machines):
        site = sites.get(m.site)
        prof = next((p for p in site.profiles if p.name == m.profile), None) if site else None
        sku = bp.skus.get(m.sku)
        if not (prof and sku and prof.enable_phase2_roce and prof.fabric_mode is FabricMode.ROCE):
            continue
        for rail in range(len(sku.fabric_interfaces)):
            need[(m.site, rail)] += 1
            first_machine.setdefault((m.site, rail), mi)
    for (site_name, rail), n in sorted(need.items()):
        if (site_name, rail) not in by_site_rail:
            yield finding(
                Code.ROCE_RAIL_MISSING,
                file,
                f"machines[{first_machine[(site_name, rail)]}]",
                f"site {site_name} has RoCE machines but no pool for rail {rail}",
                hint=f"add a roce_pools entry with site: {site_name}, rail: {rail}",
            )
            continue
        i, p = by_site_rail[(site_name, rail)]
        size = int(p.range.end) - int(p.range.start) + 1
        if size < n:
            yield finding(
                Code.ROCE_POOL_TOO_SMALL,
                file,
                f"roce_pools[{i}].range",
                f"pool {site_name}/rail {rail} holds {size} addresses for {n} machines",
            )


def policy_combinations(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    for si, s in enumerate(doc.sites):
        yield from site_tls(s.name, s.tls_verify, doc.tier, file, f"sites[{si}].tls_verify")
        yield from one_hw_sync_interval(s, file, f"sites[{si}]")
        for pi, p in enumerate(s.profiles):
            yield from profile_policy(
                s.name,
                p.name,
                fabric_mode=p.fabric_mode,
                enable_phase2_roce=p.enable_phase2_roce,
                retry_enabled=p.enable_deploy_retry_on_datasource_failure,
                retry_attempts_set="max_deploy_retry_attempts" in p.model_fields_set,
                customer_handoff=s.customer_handoff,
                release_erase_mode=p.release_erase_mode,
                file=file,
                base=f"sites[{si}].profiles[{pi}]",
            )


def one_hw_sync_interval(site: Site, file: str, base: str) -> Iterator[Finding]:
    """MAAS holds one hardware_sync_interval per region, which each site profile sets: they must agree."""
    if not site.profiles:
        return
    first = site.profiles[0]
    for pi, p in enumerate(site.profiles[1:], start=1):
        if p.hardware_sync_interval != first.hardware_sync_interval:
            yield finding(Code.HW_SYNC_INTERVAL_DIFFERS, file, f"{base}.profiles[{pi}].hardware_sync_interval",
                          f"site {site.name}: profile {p.name} asks MAAS for a hardware sync every "
                          f"{p.hardware_sync_interval}s, profile {first.name} every {first.hardware_sync_interval}s; "
                          "MAAS holds one interval for the region")


RULES: tuple[Rule, ...] = (
    unique_names,
    unique_addresses,
    addresses_in_networks,
    references,
    host_roles,
    roce_pools,
    policy_combinations,
    app_instances,
    typed_values,
    fabric_and_bindings,
    ca_bundles,
    endpoint_refs,
    storage_mounts,
    storage_devices,
    apt_sources,
    login_users,
    weka_clients,
)


def check_all(doc: EnvironmentDocument, bp: Blueprint, file: str) -> list[Finding]:
    return [f for rule in RULES for f in rule(doc, bp, file)]


def compile_roles(doc: EnvironmentDocument, bp: Blueprint) -> tuple:
    """Hosts with their effective Ansible roles filled in."""
    return tuple(h.model_copy(update={"roles": _roles(h.logical_role, h.extra_roles, bp)}) for h in doc.hosts)
