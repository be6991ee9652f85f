"""Rules that need the whole document at once: RoCE pools against each other and against the site's
networks, and nodes bound twice across app members (caught today only after machines deployed)."""

from __future__ import annotations

from collections.abc import Iterator

from .findings import Code, Finding, finding
from .model import Blueprint, EnvironmentDocument


def fabric_and_bindings(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    seen: dict[tuple[str, int], int] = {}
    sites = {s.name: s for s in doc.sites}
    for i, p in enumerate(doc.roce_pools):
        base = f"roce_pools[{i}]"
        key = (p.site, p.rail)
        if key in seen:
            yield finding(Code.ROCE_POOL_DUPLICATE, file, f"{base}.rail",
                          f"site {p.site} rail {p.rail} already has roce_pools[{seen[key]}]")
        seen.setdefault(key, i)
        net = p.subnet
        if net.prefixlen < 31:
            for end, addr in (("start", p.range.start), ("end", p.range.end)):
                if addr in (net.network_address, net.broadcast_address):
                    yield finding(Code.ROCE_RANGE_INVALID, file, f"{base}.range.{end}",
                                  f"{addr} is the network or broadcast address of {net}",
                                  hint="start the range after the network address and end it before the broadcast")
        others = [("host_network", doc.host_network)]
        site = sites.get(p.site)
        if site is not None:
            others.append((f"the BMC network of site {p.site}", site.bmc_network))
        for what, other in others:
            if net.overlaps(other):
                yield finding(Code.ROCE_POOL_OVERLAP, file, f"{base}.subnet", f"{net} overlaps {what} {other}",
                              hint="give the RoCE fabric its own subnets, apart from host and BMC networks")
    # A node is bound by what it is: a host that is a MAAS machine and the machine are one platform node,
    # whichever name a member uses.
    machine_of = {h.hostname: h.machine for h in doc.hosts if h.machine}
    bound: dict[str, tuple[str, str]] = {}
    for i, app in enumerate(doc.app_instances):
        for component, spec in app.members.items():
            for j, node in enumerate(spec.nodes):
                where = f"app_instances[{i}].members.{component}.nodes[{j}]"
                identity = machine_of.get(node, node)
                if identity in bound:
                    first, as_named = bound[identity]
                    alias = "" if as_named == node else f" as {as_named}: both name machine {identity}"
                    yield finding(Code.NODE_BOUND_TWICE, file, where, f"node {node} is already bound by {first}{alias}")
                else:
                    bound[identity] = (where, node)
