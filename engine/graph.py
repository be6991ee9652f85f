"""Dependency ordering of resources (parent + depends_on + property dependencies)."""

from __future__ import annotations

from collections.abc import Iterable

from engine.model import ResourceState


def topo_order(resources: Iterable[ResourceState]) -> list[ResourceState]:
    """Dependencies before dependents; otherwise the given order is kept (stable, deterministic).

    Edges to URNs outside the set are ignored. Entries with the same URN (a live resource and a replaced
    one waiting for deletion) are ordered independently.
    """
    items = list(resources)
    index_by_urn: dict[str, list[int]] = {}
    for i, res in enumerate(items):
        index_by_urn.setdefault(res.urn, []).append(i)
    emitted: set[int] = set()
    visiting: set[int] = set()
    out: list[ResourceState] = []

    def visit(i: int) -> None:
        if i in emitted or i in visiting:  # a cycle cannot come from the SDK; never loop on a bad file
            return
        visiting.add(i)
        for dep in sorted(items[i].all_dependencies()):
            for j in index_by_urn.get(dep, []):
                if j != i:
                    visit(j)
        visiting.discard(i)
        emitted.add(i)
        out.append(items[i])

    for i in range(len(items)):
        visit(i)
    return out


def delete_order(resources: Iterable[ResourceState]) -> list[ResourceState]:
    """Reverse dependency order: every resource is deleted before anything it depends on."""
    return list(reversed(topo_order(resources)))


def dependents_of(urn: str, resources: Iterable[ResourceState]) -> list[ResourceState]:
    """Resources that (transitively) depend on ``urn``."""
    items = list(resources)
    found: dict[str, ResourceState] = {}
    frontier = {urn}
    while frontier:
        nxt: set[str] = set()
        for res in items:
            if res.urn not in found and res.urn != urn and res.all_dependencies() & frontier:
                found[res.urn] = res
                nxt.add(res.urn)
        frontier = nxt
    return list(found.values())
