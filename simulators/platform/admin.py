"""The test-only admin view under /_sim/ (outside the contract), guarded by the sim admin token.

Tenants, projects and principals (with bearer tokens per role, optionally expiring; tokens can be
issued again and revoked), the audit log, all operations,
fault injection, the simulated clock and node heartbeats.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clients.platform.models import ErrorCode as E
from clients.platform.models import NodeStatus, Role

from . import engine
from .agent_package import ROUTE
from .errors import ApiError
from .faults import FaultPlan
from .http import error_response
from .nodes import set_status
from .state import BearerTokenRecord, Store, new_id

PREFIX = "/_sim"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TenantIn(_Body):
    name: str = "tenant"


class ProjectIn(_Body):
    tenant_id: str
    name: str = "project"
    project_id: str | None = None


class PrincipalIn(_Body):
    role: Role
    name: str = "principal"
    tenant_id: str | None = None
    project_id: str | None = None
    ttl_s: float | None = Field(None, gt=0, description="the first token's lifetime (simulated seconds)")


class TokenIn(_Body):
    principal_id: str
    ttl_s: float | None = Field(None, gt=0, description="simulated seconds; omitted: never expires")


class AdvanceIn(_Body):
    seconds: float = Field(ge=0)


class HeartbeatIn(_Body):
    online: bool


def set_node_online(store: Store, node_id: str, online: bool) -> None:
    """Heartbeats are the node agent's business; tests flip them here. active <-> offline only."""
    with store.lock:
        engine.tick(store)
        node = store.nodes.get(node_id)
        if node is None:
            raise ApiError(404, E.NODE_NOT_FOUND, f"no node '{node_id}'")
        if online and node.status is NodeStatus.OFFLINE:
            set_status(store, node, NodeStatus.ACTIVE, "heartbeat resumed")
        elif not online and node.status is NodeStatus.ACTIVE:
            set_status(store, node, NodeStatus.OFFLINE, "heartbeat lost")


def token_view(store: Store, record: BearerTokenRecord, token: str | None = None) -> dict[str, Any]:
    """What the admin view says about a token; the secret itself only once, when it is issued."""
    out: dict[str, Any] = {
        "token_id": record.token_id,
        "principal_id": record.principal_id,
        "expires_at": None if record.expires_at_s is None else store.clock.at(record.expires_at_s).isoformat(),
        "revoked": record.revoked,
    }
    return {**out, "token": token} if token is not None else out


def add_routes(store: Store, admin_token: str) -> Callable[[web.Application], None]:
    # size: one small closure per route over the shared store and token, then the route table.
    def guarded(
        fn: Callable[[web.Request, Any], Any], model: type[BaseModel] | None = None
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            corr = new_id("corr")
            auth = request.headers.get("Authorization", "")
            try:
                if not hmac.compare_digest(auth.encode(), f"Bearer {admin_token}".encode()):
                    raise ApiError(401, "sim_admin_unauthenticated", "send 'Authorization: Bearer <sim admin token>'")
                body = model.model_validate_json(await request.read() or b"{}") if model else None
                with store.lock:
                    engine.tick(store)
                    out = fn(request, body)
            except ValidationError as exc:
                out = ApiError(422, "validation_failed", str(exc.errors(include_url=False, include_input=False)))
            except (KeyError, ValueError) as exc:
                out = ApiError(422, "sim_bad_request", str(exc))
            except ApiError as exc:
                out = exc
            if isinstance(out, ApiError):
                return error_response(out, corr)
            return web.json_response(out, dumps=lambda o: json.dumps(o, default=str))

        return handle

    def principal(_: web.Request, b: PrincipalIn) -> dict[str, Any]:
        p, token = store.create_principal(b.role, b.name, b.tenant_id, b.project_id, b.ttl_s)
        record = store.bearer_record(token)
        assert record is not None  # issued just above, under the store's lock
        return {
            "principal_id": p.principal_id,
            "role": p.role.value,
            "tenant_id": p.tenant_id,
            "project_id": p.project_id,
            **token_view(store, record, token),
        }

    def issue(_: web.Request, b: TokenIn) -> dict[str, Any]:
        record, token = store.issue_bearer(b.principal_id, b.ttl_s)
        return token_view(store, record, token)

    def revoke(request: web.Request, _: None) -> dict[str, Any]:
        return token_view(store, store.revoke_bearer(request.match_info["token_id"]))

    def faults(request: web.Request, b: FaultPlan | None) -> dict[str, Any]:
        if request.method == "POST" and b is not None:
            store.faults.add(b)
        elif request.method == "DELETE":
            store.faults.clear()
        return store.faults.plan.model_dump(mode="json")

    def heartbeat(request: web.Request, b: HeartbeatIn) -> dict[str, Any]:
        set_node_online(store, request.match_info["node_id"], b.online)
        return store.nodes[request.match_info["node_id"]].model_dump(mode="json")

    async def agent_artifact(request: web.Request) -> web.Response:
        sha = request.match_info["name"].removesuffix(".tar.gz")
        with store.lock:
            blob = store.agent_artifacts.get(sha)
        if blob is None:
            return web.Response(status=404, text="no such node agent package")
        return web.Response(body=blob, content_type="application/gzip")

    def register(app: web.Application) -> None:
        r = app.router
        r.add_post(f"{PREFIX}/tenants", guarded(lambda _, b: {"tenant_id": store.create_tenant(b.name)}, TenantIn))
        r.add_post(
            f"{PREFIX}/projects",
            guarded(lambda _, b: vars(store.create_project(b.tenant_id, b.name, b.project_id)), ProjectIn),
        )
        r.add_post(f"{PREFIX}/principals", guarded(principal, PrincipalIn))
        r.add_post(f"{PREFIX}/tokens", guarded(issue, TokenIn))
        r.add_delete(f"{PREFIX}/tokens/{{token_id}}", guarded(revoke))
        r.add_get(f"{PREFIX}/audit", guarded(lambda _, __: [e.model_dump(mode="json") for e in store.audit]))
        r.add_get(
            f"{PREFIX}/operations",
            guarded(lambda _, __: [o.model_dump(mode="json") for o in store.operations.values()]),
        )
        r.add_get(f"{PREFIX}/faults", guarded(faults))
        r.add_post(f"{PREFIX}/faults", guarded(faults, FaultPlan))
        r.add_delete(f"{PREFIX}/faults", guarded(faults))
        r.add_post(
            f"{PREFIX}/clock/advance",
            guarded(lambda _, b: {"sim_seconds": store.clock.advance(b.seconds)}, AdvanceIn),
        )
        r.add_post(f"{PREFIX}/nodes/{{node_id}}/heartbeat", guarded(heartbeat, HeartbeatIn))
        r.add_get(f"{ROUTE}/{{name}}", agent_artifact)  # unguarded: what a node downloads holds no secret

    return register
