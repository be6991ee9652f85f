"""Rules about app instances (seed 004): members, component bounds, runtime combinations. The
providers' `check` calls `app_instance` with the values it checks; `app_instances` runs it over a
document."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from .findings import Code, Finding, finding
from .model import Blueprint, ComponentKeySpec, EnvironmentDocument, LogicalRole
from .rules_runtime import app_inputs, member_allocation, ui_routes


class ComponentBounds(NamedTuple):
    """A blueprint component key as the app rules check it."""

    control_plane: bool
    min: int
    max: int
    counts: tuple[int, ...] | None = None
    requires: tuple[str, ...] = ()

    @classmethod
    def of(cls, c: ComponentKeySpec | Any) -> ComponentBounds:
        return cls(c.control_plane, c.min, c.max, tuple(c.counts) if c.counts else None, tuple(c.requires))


class Runtime(NamedTuple):
    """What an instance declares beyond its members' counts and nodes (seed 000), as plain values."""

    inputs: Mapping[str, Any] = {}
    allocations: Mapping[str, Mapping[str, Any] | None] = {}
    """component key -> its members' allocation shape (None: a whole node)."""
    routes: Sequence[Mapping[str, Any]] = ()
    cpu_only_offered: bool = False


def _runtime_text(r: Mapping[str, str]) -> str:
    return "/".join(str(r[k]) for k in RUNTIME_FIELDS)


RUNTIME_FIELDS = ("operating_mode", "control_plane_scope", "runtime_backend", "tenant_boundary_mode")


def app_instance(  # noqa: PLR0913 - the values the rule checks, named (providers call it too)
    *,
    slug: str,
    runtime: Mapping[str, str],
    members: Mapping[str, tuple[int, Sequence[str]]],
    components: Mapping[str, ComponentBounds] | None,
    known_apps: Iterable[str],
    blueprint: str,
    runtime_combinations: Iterable[Mapping[str, str]],
    node_roles: Mapping[str, str | None],
    file: str,
    base: str,
    runtime_parts: Runtime | None = None,
    non_nodes: frozenset[str] = frozenset(),
) -> Iterator[Finding]:
    """One app instance. `members`: key -> (count, nodes); `components`: the blueprint app's keys (None:
    no such app); `node_roles`: declared node -> its host's logical role (None: a machine, not a host);
    `non_nodes`: declared hosts that are no MAAS machine, so never a platform node (APP011)."""
    combos = [{k: str(c[k]) for k in RUNTIME_FIELDS} for c in runtime_combinations]
    if {k: str(runtime[k]) for k in RUNTIME_FIELDS} not in combos:
        yield finding(
            Code.RUNTIME_PAIR_INVALID,
            file,
            f"{base}.runtime",
            f"operating_mode/control_plane_scope/runtime_backend/tenant_boundary_mode {_runtime_text(runtime)} "
            "is not valid",
            hint=f"use one of: {'; '.join(_runtime_text(c) for c in combos)}",
        )
    if components is None:
        yield finding(
            Code.UNKNOWN_COMPONENT_KEY,
            file,
            f"{base}.app.slug",
            f"app {slug!r} is not in blueprint {blueprint!r}",
            hint=f"use one of: {', '.join(sorted(known_apps))}",
        )
        return
    for key, (count, nodes) in members.items():
        yield from _member_findings(slug, key, count, nodes, components, node_roles, file, f"{base}.members.{key}",
                                    non_nodes)
    for key, ck in components.items():
        if key not in members and ck.min > 0:
            yield finding(
                Code.MEMBER_COUNT_OUT_OF_BOUNDS,
                file,
                f"{base}.members",
                f"{slug} needs at least {ck.min} {key} member(s)",
                hint=f"add members.{key}",
            )
    yield from _runtime_findings(slug, members, components, runtime_parts or Runtime(), file, base)


def _runtime_findings(slug: str, members: Mapping[str, tuple[int, Sequence[str]]],
                      components: Mapping[str, ComponentBounds], parts: Runtime, file: str,
                      base: str) -> Iterator[Finding]:
    for key, (count, _) in members.items():
        ck = components.get(key)
        if ck is None or count == 0:
            continue
        for needed in ck.requires:
            if members.get(needed, (0, ()))[0] == 0:
                yield finding(Code.COMPONENT_WITHOUT_REQUIRED, file, f"{base}.members.{key}",
                              f"{slug} {key} members join after a {needed}, and the instance declares none")
        yield from member_allocation(key, parts.allocations.get(key), cpu_only_offered=parts.cpu_only_offered,
                                     file=file, path=f"{base}.members.{key}.allocation")
    yield from app_inputs(parts.inputs, file=file, base=f"{base}.inputs")
    yield from ui_routes(parts.routes, components, file=file, base=f"{base}.ui_routes")


def _member_findings(
    slug: str,
    key: str,
    count: int,
    nodes: Sequence[str],
    components: Mapping[str, ComponentBounds],
    node_roles: Mapping[str, str | None],
    file: str,
    mbase: str,
    non_nodes: frozenset[str] = frozenset(),
) -> Iterator[Finding]:
    ck = components.get(key)
    if ck is None:
        yield finding(
            Code.UNKNOWN_COMPONENT_KEY,
            file,
            mbase,
            f"app {slug} has no component key {key!r}",
            hint=f"use one of: {', '.join(components)}",
        )
        return
    if not ck.min <= count <= ck.max:
        yield finding(
            Code.MEMBER_COUNT_OUT_OF_BOUNDS,
            file,
            f"{mbase}.count",
            f"{key} count {count} is outside {ck.min}..{ck.max}",
        )
    elif ck.counts and count not in ck.counts:
        yield finding(
            Code.MEMBER_COUNT_NOT_ALLOWED,
            file,
            f"{mbase}.count",
            f"{slug} runs {' or '.join(map(str, ck.counts))} {key} member(s), not {count}",
            hint=f"use count: {' or '.join(map(str, ck.counts))}",
        )
    if len(nodes) > count:
        yield finding(
            Code.MEMBER_NODES_EXCEED_COUNT,
            file,
            f"{mbase}.nodes",
            f"{len(nodes)} nodes listed for {count} {key} member(s)",
        )
    yield from _node_findings(slug, key, nodes, ck.control_plane, node_roles, file, mbase, non_nodes)


def _node_findings(slug: str, key: str, nodes: Sequence[str], control_plane: bool,
                   node_roles: Mapping[str, str | None], file: str, mbase: str,
                   non_nodes: frozenset[str]) -> Iterator[Finding]:
    """Where the members named on nodes can go: a declared node, a platform node (APP011), not a worker for
    a control-plane member (ROLE002)."""
    for ni, node in enumerate(nodes):
        if node not in node_roles:
            yield finding(
                Code.UNKNOWN_NODE, file, f"{mbase}.nodes[{ni}]", f"{node!r} is not a declared host or machine"
            )
            continue
        if node in non_nodes:
            # The contract places members by platform node id only, and only MAAS machines enroll as nodes:
            # a member "on" such a host would land wherever the platform allocates it.
            yield finding(Code.MEMBER_ON_NON_NODE, file, f"{mbase}.nodes[{ni}]",
                          f"{slug} {key} is declared on host {node}, which is no MAAS machine: the platform places "
                          "members by node id only, so nothing can put it there")
            continue
        role = node_roles[node]
        on_worker = role is None or LogicalRole(role) is LogicalRole.WORKER_COMPUTE
        if control_plane and on_worker:
            yield finding(
                Code.APP_CONTROL_PLANE_ON_WORKER,
                file,
                f"{mbase}.nodes[{ni}]",
                f"{slug} {key} is an app control-plane member but {node} is a worker_compute node",
            )


def app_instances(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    # A MAAS machine that is not also a declared host is a GPU node: worker_compute by definition.
    node_roles: dict[str, str | None] = {m.hostname: None for m in doc.machines}
    node_roles.update({h.hostname: h.logical_role.value for h in doc.hosts})
    non_nodes = frozenset(h.hostname for h in doc.hosts if h.machine is None)
    for ai, a in enumerate(doc.app_instances):
        app = bp.apps.get(a.app.slug)
        yield from app_instance(
            slug=a.app.slug,
            runtime=a.runtime.model_dump(mode="json"),
            members={k: (m.count, m.nodes) for k, m in a.members.items()},
            components=None if app is None else {k: ComponentBounds.of(c) for k, c in app.component_keys.items()},
            known_apps=bp.apps,
            blueprint=bp.name,
            runtime_combinations=[c.model_dump(mode="json") for c in bp.runtime_combinations],
            node_roles=node_roles,
            file=file,
            base=f"app_instances[{ai}]",
            runtime_parts=runtime_of(a.model_dump(mode="json"), doc.platform.cpu_only_allocations),
            non_nodes=non_nodes,
        )


def runtime_of(instance: Mapping[str, Any], cpu_only_offered: bool) -> Runtime:
    """The seed-000 parts of an `app_instances` entry as dumped to JSON (the provider's inputs have the same shape)."""
    return Runtime(inputs=instance.get("inputs") or {},
                   allocations={k: m.get("allocation") for k, m in instance["members"].items()},
                   routes=instance.get("ui_routes") or (), cpu_only_offered=cpu_only_offered)


