"""Asynchronous operations as a state table: kind -> ordered steps, each with its effect.

An operation is `pending` until its first step starts (START_DELAY), `running` through its steps
(each lasting `seconds` of simulated time), then `succeeded`; an injected failure stops it at a
step with `failed`. Steps fire from `Store.tick` so progress follows the scaled clock exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from clients.platform.models import (
    InstanceStatus,
    Member,
    MemberStatus,
    Operation,
    OperationError,
    OperationKind,
    OperationStatus,
    PublishedEndpoint,
)

from . import adapters, gateway
from .nodes import fire_node_timer
from .state import Store, new_id

START_DELAY_S = 0.5
WAIT_POLL_S = 1.0  # how often a waiting step looks again (simulated seconds)
K, M = OperationKind, MemberStatus
Effect = Callable[[Store, Operation], None]
Gate = Callable[[Store, Operation], "OperationError | None"]


@dataclass(frozen=True)
class Step:
    name: str
    seconds: float
    enter: Effect
    gate: Gate | None = None
    """What the step waits for before it starts: None when it may go, else the error it fails with once
    `adapters.JOIN_WAIT_S` simulated seconds have passed (an RKE2 agent's join waits for a ready server)."""


def set_member(store: Store, member_id: str, status: MemberStatus, op: Operation | None = None) -> None:
    member = store.members[member_id]
    instance = store.instances[member.instance_id]
    update: dict[str, object] = {
        "status": status,
        "updated_at": store.clock.now(),
        "adapter_detail": adapters.adapter_detail(instance.app_type, member.component_key, status,
                                                  instance.app_version),
    }
    if op is not None:
        update |= {"last_operation_id": op.operation_id, "last_correlation_id": op.correlation_id}
    store.members[member_id] = member.model_copy(update=update)


def live_members(store: Store, instance_id: str) -> list[Member]:
    return [m for m in store.members.values() if m.instance_id == instance_id and m.status is not M.REMOVED]


def _all(status: MemberStatus, only: MemberStatus | None = None, control_plane: bool | None = None) -> Effect:
    """Every live member (of the control plane, or not, when `control_plane` says) to `status`."""

    def effect(store: Store, op: Operation) -> None:
        cp = adapters.adapter(store.instances[op.instance_id].app_type).control_plane
        for m in live_members(store, op.instance_id):
            if (only is None or m.status is only) and control_plane in (None, m.component_key in cp):
                set_member(store, m.member_id, status, op)

    return effect


def _finish_create(store: Store, op: Operation) -> None:
    _all(M.ACTIVE, only=M.PROVISIONING)(store, op)
    inst = store.instances[op.instance_id]
    published = adapters.adapter(inst.app_type).endpoints(inst.name, inst.instance_id, inst.project_id)
    store.instances[inst.instance_id] = inst.model_copy(update={"endpoints": [
        PublishedEndpoint(name=n, component_key=k, url=u) for n, k, u in published]})


def _join_gate(store: Store, op: Operation) -> OperationError | None:
    """A member whose component joins after another (RKE2 agent after server) waits for an ACTIVE one."""
    inst = store.instances[op.instance_id]
    key = store.members[op.member_id].component_key if op.member_id else ""
    after = adapters.adapter(inst.app_type).components.get(key)
    needed = after.joins_after if after else None
    if needed is None or any(m.component_key == needed and m.status is M.ACTIVE
                             for m in live_members(store, op.instance_id)):
        return None
    return OperationError(code="server_not_ready" if needed == "server" else f"{needed}_not_ready",
                          message=f"the {key} cannot join: no {needed} of instance {inst.name} is ready; "
                          f"add or heal a {needed} first")


def _member(status: MemberStatus, which: str = "member_id") -> Effect:
    def effect(store: Store, op: Operation) -> None:
        member_id = getattr(op, which)
        if member_id:
            set_member(store, member_id, status, op)

    return effect


def _both(*effects: Effect) -> Effect:
    def effect(store: Store, op: Operation) -> None:
        for e in effects:
            e(store, op)

    return effect


def set_instance(store: Store, instance_id: str, status: InstanceStatus, **extra: object) -> None:
    inst = store.instances[instance_id]
    live = live_members(store, instance_id)
    counts: dict[str, int] = {}
    for m in live:
        counts[m.component_key] = counts.get(m.component_key, 0) + 1
    store.instances[instance_id] = inst.model_copy(
        update={"status": status, "member_counts": counts, "updated_at": store.clock.now(), **extra}
    )


def settle_instance(store: Store, instance_id: str) -> None:
    """After an operation ends: ready unless a live member failed (degraded)."""
    inst = store.instances[instance_id]
    if inst.status in (InstanceStatus.DECOMMISSIONED, InstanceStatus.FAILED):
        set_instance(store, instance_id, inst.status)
        return
    failed = any(m.status is M.FAILED for m in live_members(store, instance_id))
    set_instance(store, instance_id, InstanceStatus.DEGRADED if failed else InstanceStatus.READY)


def _finish_upgrade(store: Store, op: Operation) -> None:
    args = store.op_args.pop(op.operation_id, {})
    extra = {"app_version": args["app_version"]} if "app_version" in args else {}
    if args.get("config") is not None:
        extra["config"] = args["config"]
    set_instance(store, op.instance_id, InstanceStatus.UPGRADING, **extra)
    _all(M.ACTIVE, only=M.UPDATING)(store, op)


def _finish_decommission(store: Store, op: Operation) -> None:
    _all(M.REMOVED)(store, op)
    set_instance(store, op.instance_id, InstanceStatus.DECOMMISSIONED, endpoints=[])
    gateway.withdraw(store, op.instance_id)


PLANS: dict[OperationKind, tuple[tuple[Step, ...], Effect]] = {
    K.INSTANCE_CREATE: (
        (
            Step("allocate_nodes", 2.0, _all(M.PROVISIONING, only=M.PENDING)),
            Step("bootstrap_controller", 3.0, lambda s, o: None),
            Step("join_workers", 3.0, _all(M.ACTIVE, control_plane=True)),
        ),
        _finish_create,
    ),
    K.INSTANCE_UPGRADE: (
        (Step("roll_members", 3.0, _all(M.UPDATING, only=M.ACTIVE)), Step("verify", 2.0, lambda s, o: None)),
        _finish_upgrade,
    ),
    K.INSTANCE_DECOMMISSION: (
        (
            Step("drain_members", 2.0, _all(M.DRAINING, control_plane=False)),
            Step("drain_control_plane", 1.0, _all(M.DRAINING, control_plane=True)),  # drained last
            Step("release_nodes", 2.0, _all(M.REMOVING)),
        ),
        _finish_decommission,
    ),
    K.MEMBER_ADD: (
        (Step("allocate_node", 1.0, _member(M.PROVISIONING)), Step("join", 3.0, lambda s, o: None, _join_gate)),
        _member(M.ACTIVE),
    ),
    K.MEMBER_DRAIN: ((Step("drain", 3.0, _member(M.DRAINING)),), _member(M.DRAINED)),
    K.MEMBER_REMOVE: ((Step("remove", 2.0, _member(M.REMOVING)),), _member(M.REMOVED)),
    K.MEMBER_REPLACE: (
        (
            Step("provision_replacement", 3.0, _member(M.PROVISIONING, "replacement_member_id")),
            Step("retire_old", 2.0, _both(_member(M.ACTIVE, "replacement_member_id"), _member(M.REMOVING))),
        ),
        _member(M.REMOVED),
    ),
}


def _fail_effect(store: Store, op: Operation) -> None:
    if op.kind is K.INSTANCE_CREATE:
        _all(M.FAILED)(store, op)
        set_instance(store, op.instance_id, InstanceStatus.FAILED)
    elif op.kind is K.INSTANCE_UPGRADE:
        store.op_args.pop(op.operation_id, None)
        _all(M.ACTIVE, only=M.UPDATING)(store, op)  # the adapter rolled back
        set_instance(store, op.instance_id, InstanceStatus.DEGRADED)
    elif op.kind is K.INSTANCE_DECOMMISSION:
        set_instance(store, op.instance_id, InstanceStatus.FAILED)
    else:
        target = op.replacement_member_id if op.kind is K.MEMBER_REPLACE else op.member_id
        if target:
            set_member(store, target, M.FAILED, op)
        settle_instance(store, op.instance_id)


def start(store: Store, op: Operation, component_key: str | None) -> Operation:
    store.operations[op.operation_id] = op
    failure = store.faults.operation_failure(op.kind, component_key)
    store.schedule(
        START_DELAY_S,
        "op",
        op.operation_id,
        index=0,
        fail=failure.model_dump(include={"at_step", "code", "message"}) if failure else None,
    )
    return op


def new_operation(
    store: Store,
    kind: OperationKind,
    project_id: str,
    instance_id: str,
    correlation_id: str,
    idempotency_key: str | None,
    requested_by: str,
    member_id: str | None = None,
    replacement_member_id: str | None = None,
) -> Operation:
    now = store.clock.now()
    return Operation(
        operation_id=new_id("op"),
        kind=kind,
        status=OperationStatus.PENDING,
        step=None,
        project_id=project_id,
        instance_id=instance_id,
        member_id=member_id,
        replacement_member_id=replacement_member_id,
        correlation_id=correlation_id,
        idempotency_key=idempotency_key,
        requested_by=requested_by,
        error=None,
        created_at=now,
        updated_at=now,
        finished_at=None,
    )


def _fail(store: Store, op: Operation, error: OperationError, now: datetime) -> None:
    op = op.model_copy(update={"status": OperationStatus.FAILED, "updated_at": now, "finished_at": now,
                               "error": error})
    store.operations[op.operation_id] = op
    _fail_effect(store, op)


def _advance(store: Store, op_id: str, index: int, fail: dict[str, object] | None, at_s: float) -> None:
    op = store.operations[op_id]
    steps, finish = PLANS[op.kind]
    now = store.clock.at(at_s)  # when the step was due, not when someone looked
    # A failure at step k strikes when step k would complete (its effect has already happened).
    if fail and "at_step" in fail and index == min(int(str(fail["at_step"])), len(steps) - 1) + 1:
        _fail(store, op, OperationError(code=str(fail["code"]), message=str(fail["message"])), now)
        return
    if index < len(steps):
        step = steps[index]
        blocked = step.gate(store, op) if step.gate else None
        if blocked is not None:
            waited = float(str((fail or {}).get("waited_s", 0.0)))
            if waited < adapters.JOIN_WAIT_S:
                op = op.model_copy(update={"status": OperationStatus.RUNNING, "step": f"wait_{step.name}",
                                           "updated_at": now})
                store.operations[op_id] = op
                store.schedule(WAIT_POLL_S, "op", op_id, base_s=at_s, index=index,
                               fail={**(fail or {}), "waited_s": waited + WAIT_POLL_S})
                return
            _fail(store, op, blocked, now)
            return
        op = op.model_copy(update={"status": OperationStatus.RUNNING, "step": step.name, "updated_at": now})
        store.operations[op_id] = op
        step.enter(store, op)
        store.schedule(step.seconds, "op", op_id, base_s=at_s, index=index + 1, fail=fail)
        return
    op = op.model_copy(update={"status": OperationStatus.SUCCEEDED, "updated_at": now, "finished_at": now})
    store.operations[op_id] = op
    finish(store, op)
    settle_instance(store, op.instance_id)


def tick(store: Store) -> None:
    """Fire every timer whose simulated time has come (called before each request is handled)."""
    with store.lock:
        while True:
            due = store.due_timers()
            if not due:
                return
            for timer in due:
                if timer.kind == "op":
                    _advance(store, timer.ref, timer.payload["index"], timer.payload["fail"], timer.at_s)
                else:
                    fire_node_timer(store, timer.ref, timer.payload["expect"], timer.payload["to"], timer.at_s)
