"""The Slurm adapter behaviour the simulator plays: what `controller` and `worker` mean.

The platform model stays generic (seed 004); everything Slurm-specific is in this module:
component cardinality, which member operations a component supports, and `adapter_detail`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
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
from clients.platform.models.codes import ErrorCode as E

from .errors import ApiError

MemberRequest = AddMember | DrainMember | RemoveMember | ReplaceMember


@dataclass(frozen=True)
class ComponentRule:
    minimum: int
    maximum: int
    drainable: bool


SLURM_COMPONENTS: dict[str, ComponentRule] = {
    "controller": ComponentRule(minimum=1, maximum=1, drainable=False),
    "worker": ComponentRule(minimum=0, maximum=512, drainable=True),
}

# What slurmctld/slurmd would report for each generic member status.
_CONTROLLER_STATE = {
    MemberStatus.ACTIVE: "up",
    MemberStatus.UPDATING: "restarting",
    MemberStatus.FAILED: "down",
}
_WORKER_STATE = {
    MemberStatus.ACTIVE: "IDLE",
    MemberStatus.UPDATING: "IDLE+COMPLETING",
    MemberStatus.DRAINING: "DRAINING",
    MemberStatus.DRAINED: "DRAINED",
    MemberStatus.REMOVING: "DOWN",
    MemberStatus.REMOVED: "FUTURE",
    MemberStatus.FAILED: "DOWN+NOT_RESPONDING",
}


def _rule(app_type: AppType, key: str) -> ComponentRule:
    rule = SLURM_COMPONENTS.get(key) if app_type is AppType.SLURM else None
    if rule is None:
        raise ApiError(
            422,
            E.UNKNOWN_COMPONENT_KEY,
            f"'{key}' is not a component of {app_type.value}; use one of {sorted(SLURM_COMPONENTS)}",
            {"component_key": key},
        )
    return rule


def validate_components(app_type: AppType, components: Iterable[ComponentSpec]) -> None:
    seen: set[str] = set()
    for index, comp in enumerate(components):
        rule = _rule(app_type, comp.component_key)
        where = {"path": f"components[{index}]", "component_key": comp.component_key}
        if comp.component_key in seen:
            raise ApiError(422, E.DUPLICATE_COMPONENT_KEY, "each component_key may appear once", where)
        seen.add(comp.component_key)
        if not rule.minimum <= comp.count <= rule.maximum:
            raise ApiError(
                422,
                E.COMPONENT_CARDINALITY,
                f"{comp.component_key} needs between {rule.minimum} and {rule.maximum} members, got {comp.count}",
                where,
            )
        if len(comp.node_ids) > comp.count:
            raise ApiError(422, E.TOO_MANY_PLACEMENTS, "more node_ids than members", where)
    missing = [k for k, r in SLURM_COMPONENTS.items() if r.minimum > 0 and k not in seen]
    if missing:
        raise ApiError(422, E.COMPONENT_MISSING, f"a slurm instance needs {missing}", {"missing": missing})


def check_member_operation(app_type: AppType, req: MemberRequest, key: str, live_count: int) -> None:
    """`key` is the component of the member acted on (for add: the requested one)."""
    rule = _rule(app_type, key)
    if isinstance(req, AddMember) and live_count + 1 > rule.maximum:
        raise ApiError(
            409,
            E.COMPONENT_CARDINALITY,
            f"{key} already has {live_count} of at most {rule.maximum} members; replace instead",
            {"component_key": key},
        )
    if isinstance(req, DrainMember) and not rule.drainable:
        raise ApiError(
            422,
            E.OPERATION_NOT_SUPPORTED,
            f"a {key} cannot be drained; replace it instead",
            {"component_key": key, "operation": "drain"},
        )
    if isinstance(req, RemoveMember) and live_count - 1 < rule.minimum:
        raise ApiError(
            409,
            E.COMPONENT_CARDINALITY,
            f"removing would leave {key} below its minimum of {rule.minimum}; replace instead",
            {"component_key": key},
        )


def adapter_detail(key: str, status: MemberStatus, app_version: str) -> dict[str, Any]:
    if key == "controller":
        return {
            "daemon": "slurmctld",
            "state": _CONTROLLER_STATE.get(status, "starting"),
            "munge": "ok" if status is MemberStatus.ACTIVE else "pending",
            "slurm_version": app_version,
        }
    return {
        "daemon": "slurmd",
        "state": _WORKER_STATE.get(status, "FUTURE"),
        "partition": "gpu",
        "slurm_version": app_version,
    }
