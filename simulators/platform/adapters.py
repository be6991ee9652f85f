"""The app adapters the simulator plays, one per app type: what each component key means.

The platform model stays generic (seed 004); an adapter says which component keys exist and how many,
which member operations a component supports, what `adapter_detail` shows, what the app publishes once
it runs (`endpoints`), which keys are control plane, and the runtime ordering the app needs: a join
that must wait for another component (an RKE2 agent joins only once a server is ready) and a drain that
must come last (RKE2 servers). Slurm's own rules stay in `slurm.py`; RKE2's in `rke2.py`; vLLM and
OpenClaw's in `inference.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from clients.platform.models import (
    AddMember,
    AppType,
    ComponentSpec,
    DrainMember,
    MemberStatus,
    RemoveMember,
    ReplaceMember,
)
from clients.platform.models import ErrorCode as E

from .errors import ApiError

JOIN_WAIT_S = 30.0  # how long a join waits for the component it joins after (simulated seconds)
MemberRequest = AddMember | DrainMember | RemoveMember | ReplaceMember
Detail = Callable[[str, MemberStatus, str], dict[str, Any]]


@dataclass(frozen=True)
class ComponentRule:
    minimum: int
    maximum: int
    drainable: bool
    control_plane: bool = False
    counts: frozenset[int] | None = None
    """Exact counts allowed (RKE2 servers: 1 or 3, an etcd quorum); None: any in minimum..maximum."""
    joins_after: str | None = None
    """A component at least one ACTIVE member of which this one's join waits for (RKE2 agent: server)."""
    ports: frozenset[int] = frozenset()
    """Ports a UI route may expose on this component (the gateway refuses any other)."""


@dataclass(frozen=True)
class AppAdapter:
    app_type: AppType
    components: dict[str, ComponentRule]
    detail: Detail
    endpoints: Callable[[str, str, str], list[tuple[str, str, str]]] = field(default=lambda name, iid, pid: [])
    """(instance name, instance id, project id) -> [(endpoint name, component key, url)] once ready."""

    @property
    def control_plane(self) -> frozenset[str]:
        return frozenset(k for k, r in self.components.items() if r.control_plane)


ADAPTERS: dict[AppType, AppAdapter] = {}


def register(adapter: AppAdapter) -> AppAdapter:
    ADAPTERS[adapter.app_type] = adapter
    return adapter


def adapter(app_type: AppType) -> AppAdapter:
    from . import inference, rke2, slurm  # noqa: F401 - each registers its adapter at import

    return ADAPTERS[app_type]


def rule(app_type: AppType, key: str) -> ComponentRule:
    found = adapter(app_type).components.get(key)
    if found is None:
        keys = sorted(adapter(app_type).components)
        raise ApiError(
            422,
            E.UNKNOWN_COMPONENT_KEY,
            f"'{key}' is not a component of {app_type.value}; use one of {keys}",
            {"component_key": key},
        )
    return found


def _count_ok(r: ComponentRule, count: int) -> bool:
    return r.minimum <= count <= r.maximum and (r.counts is None or count in r.counts)


def _allowed(r: ComponentRule) -> str:
    return " or ".join(map(str, sorted(r.counts))) if r.counts else f"between {r.minimum} and {r.maximum}"


def validate_components(app_type: AppType, components: Iterable[ComponentSpec]) -> None:
    seen: set[str] = set()
    for index, comp in enumerate(components):
        r = rule(app_type, comp.component_key)
        where = {"path": f"components[{index}]", "component_key": comp.component_key}
        if comp.component_key in seen:
            raise ApiError(422, E.DUPLICATE_COMPONENT_KEY, "each component_key may appear once", where)
        seen.add(comp.component_key)
        if not _count_ok(r, comp.count):
            raise ApiError(
                422,
                E.COMPONENT_CARDINALITY,
                f"{comp.component_key} needs {_allowed(r)} members, got {comp.count}",
                where,
            )
        if len(comp.node_ids) > comp.count:
            raise ApiError(422, E.TOO_MANY_PLACEMENTS, "more node_ids than members", where)
    missing = [k for k, r in adapter(app_type).components.items() if r.minimum > 0 and k not in seen]
    if missing:
        raise ApiError(
            422, E.COMPONENT_MISSING, f"a {app_type.value} instance needs {missing}", {"missing": missing}
        )


def check_member_operation(
    app_type: AppType, req: MemberRequest, key: str, live: dict[str, list[MemberStatus]]
) -> None:
    """`key` is the component of the member acted on (for add: the requested one); `live`: component
    key -> statuses of the instance's live members."""
    r = rule(app_type, key)
    count = len(live.get(key, []))
    if isinstance(req, AddMember) and count + 1 > r.maximum:
        raise ApiError(
            409,
            E.COMPONENT_CARDINALITY,
            f"{key} already has {count} of at most {r.maximum} members; replace instead",
            {"component_key": key},
        )
    if isinstance(req, DrainMember) and not r.drainable:
        raise ApiError(
            422,
            E.OPERATION_NOT_SUPPORTED,
            f"a {key} cannot be drained; replace it instead",
            {"component_key": key, "operation": "drain"},
        )
    if isinstance(req, DrainMember) and r.control_plane:
        serving = sorted(k for k, statuses in live.items() if k not in adapter(app_type).control_plane
                         and MemberStatus.ACTIVE in statuses)
        if serving:
            raise ApiError(
                409,
                E.DRAIN_ORDER,
                f"a {key} is drained last: drain the {', '.join(serving)} members first",
                {"component_key": key, "active": serving},
            )
    if isinstance(req, RemoveMember) and count - 1 < r.minimum:
        raise ApiError(
            409,
            E.COMPONENT_CARDINALITY,
            f"removing would leave {key} below its minimum of {r.minimum}; replace instead",
            {"component_key": key},
        )


def adapter_detail(app_type: AppType, key: str, status: MemberStatus, app_version: str) -> dict[str, Any]:
    return adapter(app_type).detail(key, status, app_version)
