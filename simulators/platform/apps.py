"""Project-scoped app instances, members and member operations (the generic platform side)."""

from __future__ import annotations

from clients.platform.models import (
    AddMember,
    AppInstance,
    AppInstanceCreate,
    AppInstanceDecommission,
    AppInstanceList,
    AppInstanceUpgrade,
    AuditEventList,
    DrainMember,
    InstanceStatus,
    Member,
    MemberList,
    MemberStatus,
    NodeBinding,
    NodeStatus,
    Operation,
    OperationKind,
    OperationList,
    RemoveMember,
    ReplaceMember,
)
from clients.platform.models import ErrorCode as E
from environments.rules_values import looks_like_ssh_material

from . import adapters, engine
from .context import Ctx, Handler, Result
from .errors import ApiError, not_found
from .state import Store, new_id

M = MemberStatus
# Which member statuses each member operation may start from (else 409 illegal_member_transition).
MEMBER_OP_FROM: dict[type, frozenset[MemberStatus]] = {
    DrainMember: frozenset({M.ACTIVE}),
    RemoveMember: frozenset({M.ACTIVE, M.DRAINED, M.FAILED}),
    ReplaceMember: frozenset({M.ACTIVE, M.DRAINED, M.FAILED}),
}
MEMBER_OP_KIND: dict[type, OperationKind] = {
    AddMember: OperationKind.MEMBER_ADD,
    DrainMember: OperationKind.MEMBER_DRAIN,
    RemoveMember: OperationKind.MEMBER_REMOVE,
    ReplaceMember: OperationKind.MEMBER_REPLACE,
}
INSTANCE_OPS = frozenset(
    {OperationKind.INSTANCE_CREATE, OperationKind.INSTANCE_UPGRADE, OperationKind.INSTANCE_DECOMMISSION}
)
_OPEN = frozenset({InstanceStatus.READY, InstanceStatus.DEGRADED})
# The instance statuses each operation may start from (else 409 instance_not_ready).
INSTANCE_ACCEPTS: dict[OperationKind, frozenset[InstanceStatus]] = {
    OperationKind.INSTANCE_UPGRADE: _OPEN,
    OperationKind.INSTANCE_DECOMMISSION: _OPEN | {InstanceStatus.FAILED},  # a failed instance can be torn down
    OperationKind.MEMBER_ADD: _OPEN,
    OperationKind.MEMBER_DRAIN: _OPEN,
    OperationKind.MEMBER_REMOVE: _OPEN,
    OperationKind.MEMBER_REPLACE: _OPEN,
}


def _statuses(live: list[Member]) -> dict[str, list[MemberStatus]]:
    out: dict[str, list[MemberStatus]] = {}
    for m in live:
        out.setdefault(m.component_key, []).append(m.status)
    return out


def _refuse_node_credentials(config: dict[str, str | int | bool] | None) -> None:
    """Seed 000 §1: no app receives node SSH credentials; node mutations go through typed tasks."""
    for key, value in (config or {}).items():
        if looks_like_ssh_material(key, value):
            raise ApiError(
                422,
                E.NODE_CREDENTIALS_REFUSED,
                f"config key '{key}' looks like node SSH material; apps never receive node credentials: "
                "node mutations go through the platform's typed tasks",
                {"key": key},
            )


def _check_allocations(store: Store, req: AppInstanceCreate) -> None:
    """Seed 000 §6: CPU-only allocations exist only where the platform offers them (an open product question)."""
    for index, comp in enumerate(req.components):
        if comp.allocation is not None and comp.allocation.cpu_only and not store.cpu_only_allocations:
            raise ApiError(
                422,
                E.ALLOCATION_SHAPE_UNSUPPORTED,
                f"{comp.component_key}: this platform offers no CPU-only allocations; use a 1-GPU slice",
                {"path": f"components[{index}].allocation", "component_key": comp.component_key},
            )


def _instance(ctx: Ctx) -> AppInstance:
    inst = ctx.store.instances.get(ctx.params["instance_id"])
    if inst is None or inst.project_id != ctx.params["project_id"]:
        raise not_found("app_instance", ctx.params["instance_id"])
    return inst


def _in_flight(store: Store, instance_id: str) -> list[Operation]:
    return [o for o in store.operations.values() if o.instance_id == instance_id and not o.status.terminal]


def _require_open(inst: AppInstance, store: Store, kind: OperationKind, member_id: str | None = None) -> None:
    """Instance-level operations run alone; member operations run beside each other, one per member."""
    member_op = kind not in INSTANCE_OPS
    for op in _in_flight(store, inst.instance_id):
        touches = member_id is not None and member_id in (op.member_id, op.replacement_member_id)
        if not member_op or op.kind in INSTANCE_OPS or touches:
            raise ApiError(
                409,
                E.OPERATION_IN_PROGRESS,
                f"operation '{op.operation_id}' ({op.kind.value}) is still running; poll it and retry "
                "when it is terminal",
                {"operation_id": op.operation_id, "kind": op.kind.value},
            )
    allowed = INSTANCE_ACCEPTS[kind]
    if inst.status not in allowed:
        raise ApiError(
            409,
            E.INSTANCE_NOT_READY,
            f"cannot start {kind.value} while the instance is {inst.status.value}",
            {"instance_id": inst.instance_id, "status": inst.status.value, "allowed": sorted(allowed)},
        )


def _binding(store: Store, inst_name: str, key: str, node_id: str | None, seq: int) -> NodeBinding:
    if node_id is None:  # allocated from the platform's pool
        return NodeBinding(node_id=new_id("node"), hostname=f"{inst_name}-{key}-{seq}")
    node = store.nodes.get(node_id)
    if node is None or node.status is not NodeStatus.ACTIVE:
        raise ApiError(
            422,
            E.NODE_NOT_AVAILABLE,
            f"node '{node_id}' is not an active enrolled node",
            {"node_id": node_id, "status": node.status.value if node else None},
        )
    holder = next(
        (m for m in store.members.values() if m.node and m.node.node_id == node_id and m.status is not M.REMOVED),
        None,
    )
    if holder:
        raise ApiError(
            409,
            E.NODE_ALREADY_BOUND,
            f"node '{node_id}' already hosts member '{holder.member_id}'",
            {"node_id": node_id, "member_id": holder.member_id},
        )
    return NodeBinding(node_id=node.node_id, hostname=node.hostname)


def _new_member(store: Store, inst: AppInstance, key: str, node: NodeBinding) -> Member:
    now = store.clock.now()
    member = Member(
        member_id=new_id("member"),
        instance_id=inst.instance_id,
        component_key=key,
        status=M.PENDING,
        node=node,
        last_operation_id=None,
        last_correlation_id=None,
        adapter_detail=adapters.adapter_detail(inst.app_type, key, M.PENDING, inst.app_version),
        created_at=now,
        updated_at=now,
    )
    store.members[member.member_id] = member
    return member


def _operation(
    ctx: Ctx,
    kind: OperationKind,
    inst: AppInstance,
    member_id: str | None = None,
    replacement: str | None = None,
) -> Operation:
    assert ctx.principal is not None
    return engine.new_operation(
        ctx.store,
        kind,
        inst.project_id,
        inst.instance_id,
        ctx.correlation_id,
        ctx.idempotency_key,
        ctx.principal.principal_id,
        member_id,
        replacement,
    )


def _mark(store: Store, inst: AppInstance, op: Operation, status: InstanceStatus | None = None) -> None:
    update: dict[str, object] = {
        "last_operation_id": op.operation_id,
        "last_correlation_id": op.correlation_id,
        "updated_at": store.clock.now(),
    }
    if status is not None:
        update["status"] = status
    store.instances[inst.instance_id] = store.instances[inst.instance_id].model_copy(update=update)


def list_instances(ctx: Ctx) -> Result:
    name, pid = ctx.query.get("name"), ctx.params["project_id"]
    items = [i for i in ctx.store.instances.values() if i.project_id == pid and name in (None, i.name)]
    return Result(200, AppInstanceList(items=items))


def create_instance(ctx: Ctx) -> Result:
    req: AppInstanceCreate = ctx.body
    store, pid = ctx.store, ctx.params["project_id"]
    adapters.validate_components(req.app_type, req.components)
    _refuse_node_credentials(req.config)
    _check_allocations(store, req)
    clash = next(
        (
            i
            for i in store.instances.values()
            if i.project_id == pid and i.name == req.name and i.status is not InstanceStatus.DECOMMISSIONED
        ),
        None,
    )
    if clash:
        raise ApiError(
            409,
            E.INSTANCE_NAME_CONFLICT,
            f"the project already has a live instance '{req.name}'",
            {"instance_id": clash.instance_id, "name": req.name},
        )
    placements = [n for c in req.components for n in c.node_ids]
    if len(set(placements)) != len(placements):
        raise ApiError(422, E.DUPLICATE_PLACEMENT, "a node_id appears twice in components[].node_ids")
    now = store.clock.now()
    inst = AppInstance(
        instance_id=new_id("instance"),
        project_id=pid,
        tenant_id=store.projects[pid].tenant_id,
        name=req.name,
        app_type=req.app_type,
        app_version=req.app_version,
        status=InstanceStatus.PROVISIONING,
        components=req.components,
        config=req.config,
        member_counts={},
        last_operation_id=None,
        last_correlation_id=None,
        created_at=now,
        updated_at=now,
    )
    bindings = [
        (
            c.component_key,
            _binding(store, req.name, c.component_key, c.node_ids[i] if i < len(c.node_ids) else None, i),
        )
        for c in req.components
        for i in range(c.count)
    ]  # all validated before anything is stored
    store.instances[inst.instance_id] = inst
    for key, node in bindings:
        _new_member(store, inst, key, node)
    op = _operation(ctx, OperationKind.INSTANCE_CREATE, inst)
    engine.set_instance(store, inst.instance_id, InstanceStatus.PROVISIONING)
    _mark(store, inst, op)
    return Result(202, engine.start(store, op, None), target=inst.instance_id)


def get_instance(ctx: Ctx) -> Result:
    return Result(200, _instance(ctx))


def upgrade_instance(ctx: Ctx) -> Result:
    req: AppInstanceUpgrade = ctx.body
    inst = _instance(ctx)
    _refuse_node_credentials(req.config)
    _require_open(inst, ctx.store, OperationKind.INSTANCE_UPGRADE)
    op = _operation(ctx, OperationKind.INSTANCE_UPGRADE, inst)
    ctx.store.op_args[op.operation_id] = {"app_version": req.app_version, "config": req.config}
    _mark(ctx.store, inst, op, InstanceStatus.UPGRADING)
    return Result(202, engine.start(ctx.store, op, None), target=inst.instance_id)


def decommission_instance(ctx: Ctx) -> Result:
    assert isinstance(ctx.body, AppInstanceDecommission)
    inst = _instance(ctx)
    if inst.status is InstanceStatus.DECOMMISSIONED:
        raise ApiError(
            409,
            E.INSTANCE_DECOMMISSIONED,
            "the instance is already decommissioned",
            {"instance_id": inst.instance_id},
        )
    _require_open(inst, ctx.store, OperationKind.INSTANCE_DECOMMISSION)
    op = _operation(ctx, OperationKind.INSTANCE_DECOMMISSION, inst)
    _mark(ctx.store, inst, op, InstanceStatus.DECOMMISSIONING)
    return Result(202, engine.start(ctx.store, op, None), target=inst.instance_id)


def list_members(ctx: Ctx) -> Result:
    inst = _instance(ctx)
    items = [m for m in ctx.store.members.values() if m.instance_id == inst.instance_id]
    return Result(200, MemberList(items=items))


def get_member(ctx: Ctx) -> Result:
    inst = _instance(ctx)
    member = ctx.store.members.get(ctx.params["member_id"])
    if member is None or member.instance_id != inst.instance_id:
        raise not_found("member", ctx.params["member_id"])
    return Result(200, member)


def member_operation(ctx: Ctx) -> Result:
    req = ctx.body
    store, inst = ctx.store, _instance(ctx)
    live = engine.live_members(store, inst.instance_id)
    if isinstance(req, AddMember):
        _require_open(inst, store, OperationKind.MEMBER_ADD)
        adapters.check_member_operation(inst.app_type, req, req.component_key, _statuses(live))
        node = _binding(store, inst.name, req.component_key, req.node_id, len(store.members))
        op = _operation(
            ctx, OperationKind.MEMBER_ADD, inst, _new_member(store, inst, req.component_key, node).member_id
        )
        key = req.component_key
    else:
        member = next((m for m in live if m.member_id == req.member_id), None)
        if member is None:
            raise not_found("member", req.member_id)
        _require_open(inst, store, MEMBER_OP_KIND[type(req)], member.member_id)
        key = member.component_key
        adapters.check_member_operation(inst.app_type, req, key, _statuses(live))
        if member.status not in MEMBER_OP_FROM[type(req)]:
            raise ApiError(
                409,
                E.ILLEGAL_MEMBER_TRANSITION,
                f"cannot {req.operation} a member that is {member.status.value}",
                {"member_id": member.member_id, "status": member.status.value},
            )
        replacement = None
        if isinstance(req, ReplaceMember):
            node = _binding(store, inst.name, key, req.node_id, len(store.members))
            replacement = _new_member(store, inst, key, node).member_id
        op = _operation(ctx, MEMBER_OP_KIND[type(req)], inst, member.member_id, replacement)
    for mid in filter(None, (op.member_id, op.replacement_member_id)):
        engine.set_member(store, mid, store.members[mid].status, op)
    _mark(store, inst, op)
    return Result(202, engine.start(store, op, key), target=op.member_id)


def list_operations(ctx: Ctx) -> Result:
    inst = _instance(ctx)
    items = sorted(
        (o for o in ctx.store.operations.values() if o.instance_id == inst.instance_id),
        key=lambda o: o.created_at,
    )
    return Result(200, OperationList(items=items))


def get_operation(ctx: Ctx) -> Result:
    op = ctx.store.operations.get(ctx.params["operation_id"])
    if op is None or op.project_id != ctx.params["project_id"]:
        raise not_found("operation", ctx.params["operation_id"])
    return Result(200, op)


def list_audit(ctx: Ctx) -> Result:
    pid = ctx.params["project_id"]
    return Result(200, AuditEventList(items=[e for e in ctx.store.audit if e.project_id == pid]))


HANDLERS: dict[str, Handler] = {
    "listAppInstances": list_instances,
    "createAppInstance": create_instance,
    "getAppInstance": get_instance,
    "upgradeAppInstance": upgrade_instance,
    "decommissionAppInstance": decommission_instance,
    "listMembers": list_members,
    "getMember": get_member,
    "requestMemberOperation": member_operation,
    "listInstanceOperations": list_operations,
    "getOperation": get_operation,
    "listAuditEvents": list_audit,
}
