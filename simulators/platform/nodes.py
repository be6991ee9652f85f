"""Node records, enrollment tokens and the node lifecycle as an explicit state table."""

from __future__ import annotations

import secrets
from datetime import timedelta

from pydantic import SecretStr

from clients.platform.models import (
    AgentHeartbeatAck,
    AgentHeartbeatRequest,
    AgentLiveness,
    BootstrapOutcome,
    BootstrapReportAck,
    BootstrapReportRequest,
    EnrollmentRequest,
    EnrollmentResult,
    EnrollmentTokenGrant,
    EnrollmentTokenRequest,
    Node,
    NodeAction,
    NodeList,
    NodeStatus,
    NodeTransitionRequest,
)
from clients.platform.models import ErrorCode as E

from .context import Ctx, Handler, Result
from .errors import ApiError, not_found
from .state import EnrollmentTokenRecord, Store, digest, new_id

S = NodeStatus
# Operator actions: (from, action) -> to. Anything else is 409 illegal_node_transition.
NODE_TRANSITIONS: dict[tuple[NodeStatus, NodeAction], NodeStatus] = {
    (S.ACTIVE, NodeAction.QUARANTINE): S.QUARANTINED,
    (S.OFFLINE, NodeAction.QUARANTINE): S.QUARANTINED,
    (S.QUARANTINED, NodeAction.UNQUARANTINE): S.ACTIVE,
    (S.ACTIVE, NodeAction.DRAIN): S.DRAINING,
    (S.DRAINING, NodeAction.RETIRE): S.RETIRED,
    (S.QUARANTINED, NodeAction.RETIRE): S.RETIRED,
    (S.OFFLINE, NodeAction.RETIRE): S.RETIRED,
}
# A token may be minted (one per deploy attempt) for a new node or one in these statuses;
# ACTIVE/OFFLINE/RETIRED cover reimage. Minting moves the node to BOOTSTRAP_ISSUED.
MINTABLE_FROM = frozenset({S.BOOTSTRAP_ISSUED, S.ACTIVE, S.OFFLINE, S.RETIRED})
# Timed settling: removing -> deleted. (Enrolling -> active is no timer: the node agent's first heartbeat.)
SETTLE_SECONDS: dict[NodeStatus, tuple[float, NodeStatus]] = {
    S.REMOVING: (2.0, S.DELETED),
}
HEARTBEAT_INTERVAL_S = 30  # what the enrollment answer asks of the node agent (platform seconds)
# A heartbeat is taken from a node in these statuses; the first one makes an enrolling node active.
HEARTBEAT_FROM = frozenset({S.ENROLLING, S.ACTIVE, S.OFFLINE, S.QUARANTINED, S.DRAINING})


def set_status(
    store: Store, node: Node, status: NodeStatus, reason: str | None = None, base_s: float | None = None
) -> Node:
    updated = node.model_copy(update={"status": status, "status_reason": reason, "updated_at": store.clock.now()})
    store.nodes[node.node_id] = updated
    if status in SETTLE_SECONDS:
        delay, target = SETTLE_SECONDS[status]
        store.schedule(delay, "node", node.node_id, base_s=base_s, expect=status.value, to=target.value)
    return updated


def fire_node_timer(store: Store, node_id: str, expect: str, to: str, at_s: float) -> None:
    node = store.nodes.get(node_id)
    if node is not None and node.status.value == expect:  # superseded transitions do not fire
        set_status(store, node, NodeStatus(to), base_s=at_s)


def _node(store: Store, node_id: str) -> Node:
    node = store.nodes.get(node_id)
    if node is None:
        raise not_found("node", node_id)
    return node


def _revoke_unused(store: Store, node_id: str) -> None:
    for rec in store.enrollment_tokens.values():
        if rec.node_id == node_id and rec.used_at_s is None:
            rec.revoked = True


def mint_token(ctx: Ctx) -> Result:
    # size: the contract's checks in their documented order, then one atomic mint under the lock.
    store, req = ctx.store, ctx.body
    assert isinstance(req, EnrollmentTokenRequest)
    site_id = ctx.params["site_id"]
    if site_id not in store.sites:
        raise not_found("site", site_id)
    profile = store.profiles.get(req.profile_id)
    if profile is None or profile.site_id != site_id:
        raise ApiError(
            422,
            E.PROFILE_NOT_IN_SITE,
            f"profile '{req.profile_id}' is not a profile of site "
            f"'{site_id}'; list the site's profiles and pass one of them",
            {"profile_id": req.profile_id, "site_id": site_id},
        )
    now = store.clock.now()
    node = next(
        (
            n
            for n in store.nodes.values()
            if n.site_id == site_id and n.system_id == req.system_id and n.status is not S.DELETED
        ),
        None,
    )
    if node is None:
        node = Node(
            node_id=new_id("node"),
            site_id=site_id,
            profile_id=profile.profile_id,
            hostname=req.hostname,
            system_id=req.system_id,
            status=S.BOOTSTRAP_ISSUED,
            status_reason=None,
            enrolled_at=None,
            last_token_id=None,
            created_at=now,
            updated_at=now,
        )
    elif node.status not in MINTABLE_FROM:
        raise ApiError(
            409,
            E.NODE_NOT_MINTABLE,
            f"node '{node.node_id}' is {node.status.value}; tokens can be "
            f"minted only when it is one of {sorted(s.value for s in MINTABLE_FROM)}",
            {"node_id": node.node_id, "status": node.status.value},
        )
    _revoke_unused(store, node.node_id)
    ttl = profile.policy.enrollment_token_ttl_seconds
    secret = f"gpuaas-enroll-{secrets.token_urlsafe(32)}"
    token_id = new_id("token")
    store.enrollment_tokens[digest(secret)] = EnrollmentTokenRecord(token_id, node.node_id, store.clock.seconds() + ttl)
    node = node.model_copy(
        update={
            "hostname": req.hostname,
            "profile_id": profile.profile_id,
            "last_token_id": token_id,
            "bootstrap": None,  # a new deploy attempt: the previous boot's report no longer describes it
            "agent": None,  # nor its agent's heartbeats
        }
    )
    store.nodes[node.node_id] = node
    set_status(store, node, S.BOOTSTRAP_ISSUED, "enrollment token issued")
    grant = EnrollmentTokenGrant(
        token_id=token_id,
        node_id=node.node_id,
        site_id=site_id,
        profile_id=profile.profile_id,
        enrollment_token=SecretStr(secret),
        ttl_seconds=ttl,
        expires_at=now + timedelta(seconds=ttl),
    )
    return Result(201, grant, target=node.node_id)


def _token_node(store: Store, req: EnrollmentRequest | BootstrapReportRequest) -> tuple[EnrollmentTokenRecord, Node]:
    # size: the token checks in their documented order (docs/platform-api.md).
    rec = store.enrollment_tokens.get(digest(req.enrollment_token.get_secret_value()))
    if rec is None:
        raise ApiError(401, E.ENROLLMENT_TOKEN_INVALID, "the enrollment token is not known; mint a new one")
    if rec.node_id != req.node_id:
        raise ApiError(
            403,
            E.ENROLLMENT_TOKEN_NODE_MISMATCH,
            f"the token is bound to another node, not '{req.node_id}'",
            {"node_id": req.node_id},
        )
    if rec.revoked:
        raise ApiError(
            401,
            E.ENROLLMENT_TOKEN_REVOKED,
            "a newer token was minted for this node; use that one",
            {"token_id": rec.token_id},
        )
    if rec.used_at_s is not None:
        raise ApiError(
            409,
            E.ENROLLMENT_TOKEN_USED,
            "the token was already used; tokens are single-use",
            {"token_id": rec.token_id},
        )
    if store.clock.seconds() >= rec.expires_at_s:
        raise ApiError(
            401,
            E.ENROLLMENT_TOKEN_EXPIRED,
            "the token's TTL has passed; mint a new one",
            {"token_id": rec.token_id, "expired_at": store.clock.at(rec.expires_at_s).isoformat()},
        )
    node = _node(store, req.node_id)
    if (node.hostname, node.system_id) != (req.hostname, req.system_id):
        raise ApiError(
            403,
            E.ENROLLMENT_IDENTITY_MISMATCH,
            "hostname/system_id differ from the node record",
            {
                "node_id": node.node_id,
                "expected_hostname": node.hostname,
                "expected_system_id": node.system_id,
            },
        )
    if node.status is not S.BOOTSTRAP_ISSUED:
        raise ApiError(
            409,
            E.NODE_NOT_AWAITING_ENROLLMENT,
            f"node is {node.status.value}",
            {"node_id": node.node_id, "status": node.status.value},
        )
    return rec, node


def enroll(ctx: Ctx) -> Result:
    store, req = ctx.store, ctx.body
    assert isinstance(req, EnrollmentRequest)
    rec, node = _token_node(store, req)
    rec.used_at_s = store.clock.seconds()
    # who consumed the token: a node itself, or something else holding its user_data (a store restored
    # from an older pickle has no such map yet)
    store.__dict__.setdefault("enroll_callers", {})[req.node_id] = ctx.remote
    now = store.clock.now()
    node = node.model_copy(update={"enrolled_at": now, "bootstrap": req.report, "agent": None})
    node = set_status(store, node, S.ENROLLING, "enrollment accepted; waiting for the node agent's first heartbeat")
    credential = f"gpuaas-agent-{secrets.token_urlsafe(32)}"
    agents = store.__dict__.setdefault("agent_credentials", {})  # a store restored from an older pickle: none yet
    for d in [d for d, nid in agents.items() if nid == node.node_id]:
        del agents[d]  # one credential per node: a re-enrollment (redeploy) replaces the old one
    agents[digest(credential)] = node.node_id
    result = EnrollmentResult(node_id=node.node_id, status=node.status, enrolled_at=now,
                              agent_package=store.agent_package, agent_credential=SecretStr(credential),
                              heartbeat_interval_seconds=HEARTBEAT_INTERVAL_S)
    return Result(200, result, target=node.node_id)


def agent_heartbeat(ctx: Ctx) -> Result:
    """The node agent is alive: recorded on the node; the first heartbeat makes an enrolling node active."""
    store, req = ctx.store, ctx.body
    assert isinstance(req, AgentHeartbeatRequest)
    node_id = store.__dict__.get("agent_credentials", {}).get(digest(req.agent_credential.get_secret_value()))
    if node_id is None:
        raise ApiError(401, E.AGENT_CREDENTIAL_INVALID, "the agent credential is not known; the node must enroll again")
    if node_id != req.node_id:
        raise ApiError(403, E.ENROLLMENT_TOKEN_NODE_MISMATCH, f"the credential is bound to another node, not "
                       f"'{req.node_id}'", {"node_id": req.node_id})
    node = _node(store, node_id)
    if node.status not in HEARTBEAT_FROM:
        raise ApiError(409, E.NODE_NOT_ENROLLED, f"node is {node.status.value}: no heartbeat is taken",
                       {"node_id": node.node_id, "status": node.status.value})
    now, seen = store.clock.now(), node.agent
    agent = AgentLiveness(version=req.agent_version, first_heartbeat_at=seen.first_heartbeat_at if seen else now,
                          last_heartbeat_at=now, heartbeats=(seen.heartbeats if seen else 0) + 1)
    node = node.model_copy(update={"agent": agent, "updated_at": now})
    store.nodes[node.node_id] = node
    if node.status in (S.ENROLLING, S.OFFLINE):
        node = set_status(store, node, S.ACTIVE, f"node agent {req.agent_version} alive")
    ack = AgentHeartbeatAck(node_id=node.node_id, status=node.status, next_heartbeat_seconds=HEARTBEAT_INTERVAL_S)
    return Result(200, ack, target=node.node_id)


def _post_enrollment_node(store: Store, req: BootstrapReportRequest) -> Node | None:
    """The node this used token enrolled, when its launcher's final report is still due (the enrollment's
    report said `enrolled`) and this is that final report; else None."""
    rec = store.enrollment_tokens.get(digest(req.enrollment_token.get_secret_value()))
    node = store.nodes.get(req.node_id)
    if rec is None or node is None or rec.used_at_s is None or rec.node_id != node.node_id:
        return None
    pending = node.bootstrap is not None and node.bootstrap.outcome is BootstrapOutcome.ENROLLED
    same = (node.hostname, node.system_id) == (req.hostname, req.system_id) and node.last_token_id == rec.token_id
    final = req.report.outcome is not BootstrapOutcome.ENROLLED
    if not (pending and same and final and node.status in (S.ENROLLING, S.ACTIVE)):
        return None
    return node


def report_bootstrap(ctx: Ctx) -> Result:
    """A launcher that stopped says why; the node stays bootstrap_issued and its token unused. An enrolled
    node's launcher sends its final report (after the node agent install) here once, with its used token."""
    store, req = ctx.store, ctx.body
    assert isinstance(req, BootstrapReportRequest)
    try:
        _, node = _token_node(store, req)
    except ApiError as e:
        # after enrolling, the launcher's final report (node agent install) comes with the token it used, once
        late = _post_enrollment_node(store, req) if e.code == E.ENROLLMENT_TOKEN_USED else None
        if late is None:
            raise
        node = late
    at = f" at {req.report.failed_step}" if req.report.failed_step else ""
    reason = f"bootstrap {req.report.outcome.value}{at}"
    node = node.model_copy(update={"bootstrap": req.report, "status_reason": reason, "updated_at": store.clock.now()})
    store.nodes[node.node_id] = node
    return Result(200, BootstrapReportAck(node_id=node.node_id, status=node.status), target=node.node_id)


def list_nodes(ctx: Ctx) -> Result:
    q = ctx.query
    items = [
        n
        for n in ctx.store.nodes.values()
        if all(str(getattr(n, k)) == v for k, v in q.items() if k in ("site_id", "hostname", "system_id", "status"))
    ]
    return Result(200, NodeList(items=items))


def get_node(ctx: Ctx) -> Result:
    return Result(200, _node(ctx.store, ctx.params["node_id"]))


def transition_node(ctx: Ctx) -> Result:
    req = ctx.body
    assert isinstance(req, NodeTransitionRequest)
    node = _node(ctx.store, ctx.params["node_id"])
    target = NODE_TRANSITIONS.get((node.status, req.action))
    if target is None:
        allowed = sorted(a.value for (s, a) in NODE_TRANSITIONS if s is node.status)
        raise ApiError(
            409,
            E.ILLEGAL_NODE_TRANSITION,
            f"cannot {req.action.value} a node that is {node.status.value}; allowed now: {allowed or 'none'}",
            {"node_id": node.node_id, "status": node.status.value, "action": req.action.value},
        )
    return Result(200, set_status(ctx.store, node, target, req.reason or req.action.value), target=node.node_id)


def remove_node(ctx: Ctx) -> Result:
    node = _node(ctx.store, ctx.params["node_id"])
    if node.status in (S.REMOVING, S.DELETED):  # already on its way: removal is idempotent by nature
        return Result(202, node, target=node.node_id)
    _revoke_unused(ctx.store, node.node_id)
    return Result(202, set_status(ctx.store, node, S.REMOVING, "removal requested"), target=node.node_id)


HANDLERS: dict[str, Handler] = {
    "agentHeartbeat": agent_heartbeat,
    "mintEnrollmentToken": mint_token,
    "enrollNode": enroll,
    "reportNodeBootstrap": report_bootstrap,
    "listNodes": list_nodes,
    "getNode": get_node,
    "transitionNode": transition_node,
    "removeNode": remove_node,
}
