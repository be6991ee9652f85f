"""The HTTP face of the simulator (aiohttp): routing from the catalogue, then for every request
request id -> faults -> auth -> authz -> idempotency -> body validation -> handler -> audit.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, cast

from aiohttp import web
from pydantic import TypeAdapter, ValidationError

from clients.platform.catalogue import ENDPOINTS, Endpoint
from clients.platform.models import (
    CORRELATION_HEADER,
    IDEMPOTENCY_HEADER,
    REPLAY_HEADER,
    REQUEST_ID_HEADER,
    AuditOutcome,
    ErrorCode,
    ErrorEnvelope,
    Page,
)
from clients.platform.models import ErrorCode as E
from clients.platform.models.common import IDEMPOTENCY_KEY_PATTERN

from . import apps, engine, gateway, nodes, sites
from .authz import TokenRejected, authenticate, authorize
from .context import Ctx, Handler, Result
from .errors import ApiError
from .faults import ErrorBurst, FaultPhase
from .state import IdempotencyRecord, Principal, Store, new_id
from .validation import check_body, check_nesting

HANDLERS: dict[str, Handler] = {**sites.HANDLERS, **nodes.HANDLERS, **apps.HANDLERS, **gateway.HANDLERS}
REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
IDEMPOTENCY_KEY_RE = re.compile(IDEMPOTENCY_KEY_PATTERN)
_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    e.operation_id: TypeAdapter(e.request) for e in ENDPOINTS if e.request is not None
}


def error_response(err: ApiError, correlation_id: str) -> web.Response:
    body = ErrorEnvelope(code=err.code, message=err.message, correlation_id=correlation_id, details=err.details)
    response = _json(err.status, body.model_dump_json().encode(), correlation_id)
    if err.status == 401 and err.code == E.UNAUTHENTICATED:  # RFC 6750 §3: a bearer 401 names its scheme
        reason = err.details.get("reason")
        response.headers["WWW-Authenticate"] = 'Bearer realm="gpuaas"' + (
            f', error="invalid_token", error_description="{reason}"' if reason else ""
        )
    return response


def _json(status: int, body: bytes | None, correlation_id: str, replay: bool = False) -> web.Response:
    headers = {CORRELATION_HEADER: correlation_id, REQUEST_ID_HEADER: correlation_id}
    if replay:
        headers[REPLAY_HEADER] = "true"
    if body is None:
        return web.Response(status=status, headers=headers)
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def _fingerprint(method: str, path: str, raw: bytes) -> str:
    try:  # the same JSON document with other whitespace or key order is the same request
        canonical = json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()
    except ValueError:
        canonical = raw
    return hashlib.sha256(method.encode() + b" " + path.encode() + b"\n" + canonical).hexdigest()


def _query(endpoint: Endpoint, request: web.Request) -> dict[str, str]:
    out: dict[str, str] = {}
    known = {q.name for q in endpoint.query}
    unknown = sorted(set(request.query) - known)
    if unknown:  # a misspelt filter must not silently widen a list to everything
        raise ApiError(
            422,
            E.INVALID_QUERY_PARAMETER,
            f"unknown query parameter(s) {unknown}; this operation takes {sorted(known) or 'none'}",
            {"parameters": unknown},
        )
    for q in endpoint.query:
        value = request.query.get(q.name)
        if value is None:
            continue
        if (q.pattern and not re.fullmatch(q.pattern, value)) or (q.enum and value not in {v.value for v in q.enum}):
            allowed = sorted(v.value for v in q.enum) if q.enum else q.pattern
            raise ApiError(
                422,
                E.INVALID_QUERY_PARAMETER,
                f"query parameter '{q.name}' must match {allowed}",
                {"parameter": q.name},
            )
        out[q.name] = value
    return out


def _body(endpoint: Endpoint, request: web.Request, raw: bytes) -> Any:
    if endpoint.request is None:
        return None
    if request.content_type != "application/json":
        raise ApiError(
            415,
            E.UNSUPPORTED_MEDIA_TYPE,
            "send the body as application/json",
            {"content_type": request.content_type},
        )
    try:
        data = json.loads(raw)
    except ValueError:
        raise ApiError(400, E.MALFORMED_JSON, "the body is not a JSON document") from None
    check_body(endpoint.operation_id, data)
    try:
        return _ADAPTERS[endpoint.operation_id].validate_python(data)
    except ValidationError as exc:  # rules the JSON Schema cannot state
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
        details = [
            {"loc": ".".join(str(p) for p in e["loc"]) or "body", "rule": e["type"], "msg": e["msg"]} for e in errors
        ]
        raise ApiError(
            422, E.VALIDATION_FAILED, "; ".join(f"{d['loc']}: {d['msg']}" for d in details[:5]), {"errors": details}
        ) from None


def _process(store: Store, endpoint: Endpoint, request: web.Request, raw: bytes, corr: str) -> web.Response:
    with store.lock:
        store.calls[endpoint.operation_id] = store.calls.get(endpoint.operation_id, 0) + 1
        engine.tick(store)
        store.expire_idempotency()
        params = dict(request.match_info)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        principal = _admitted(store, endpoint, request, params, key, corr)
        if endpoint.mutation:
            if key is None and endpoint.idempotency_required:
                raise ApiError(
                    400,
                    E.IDEMPOTENCY_KEY_REQUIRED,
                    f"send an {IDEMPOTENCY_HEADER} header with every mutation; reuse it when retrying the same request",
                )
            if key is not None and not IDEMPOTENCY_KEY_RE.fullmatch(key):
                raise ApiError(
                    400,
                    E.IDEMPOTENCY_KEY_INVALID,
                    f"{IDEMPOTENCY_HEADER} must match {IDEMPOTENCY_KEY_PATTERN}",
                )
        query = _query(endpoint, request)
        scope = principal.principal_id if principal else "anonymous"
        fingerprint = _fingerprint(request.method, request.path, raw)
        if key is not None and endpoint.mutation:
            record = store.idempotency.get((scope, key))
            if record is not None:
                if record.fingerprint != fingerprint:
                    raise ApiError(
                        422,
                        E.IDEMPOTENCY_KEY_REUSED,
                        "this idempotency key was used for a different request; use a new key for a new request",
                        {"idempotency_key": key},
                    )
                return _json(record.status, record.body or None, corr, replay=True)
        body = _body(endpoint, request, raw)
        ctx = Ctx(store, endpoint, principal, params, query, body, corr, key, request.remote)
        try:
            result = _paginate(HANDLERS[endpoint.operation_id](ctx), query)
        except ApiError as err:
            # A 404 through the caller's own project path (another project's instance id) is a
            # refused mutation like a 403: audit it, or cross-project probing leaves no trace.
            if err.status == 404 and endpoint.mutation and endpoint.audit_action:
                _audit_denied(store, endpoint, principal, params, corr, key)
            raise
        payload = _serialize(result)
        if key is not None and endpoint.mutation:
            store.idempotency[(scope, key)] = IdempotencyRecord(
                fingerprint, result.status, payload or b"", store.clock.seconds()
            )
        store.hits[endpoint.operation_id] = store.hits.get(endpoint.operation_id, 0) + 1
        if endpoint.audit_action:
            _audit_accepted(store, endpoint, principal, result, params, corr, key)
        return _json(result.status, payload, corr)


def _admitted(
    store: Store, endpoint: Endpoint, request: web.Request, params: dict[str, str], key: str | None, corr: str
) -> Principal | None:
    """Authentication, then authorization; refusals of a known principal leave audit records."""
    try:
        principal = authenticate(store, endpoint, request.headers.get("Authorization"))
    except TokenRejected as err:
        # The attempt is the event: its action names why, its target the token (never its secret).
        store.record_audit(
            store.principals[err.record.principal_id],
            f"auth.token_{err.state.value}",
            err.record.token_id,
            AuditOutcome.DENIED,
            corr,
            key,
            _known_project(store, params),
        )
        raise
    try:
        authorize(store, endpoint, principal, params)
    except ApiError:
        if endpoint.audit_action:
            _audit_denied(store, endpoint, principal, params, corr, key)
        raise
    return principal


def _known_project(store: Store, params: dict[str, str]) -> str | None:
    project_id = params.get("project_id")
    return project_id if project_id in store.projects else None


def _path_target(params: dict[str, str]) -> str | None:
    """The resource a path names: its innermost id (the project is recorded on its own)."""
    ids = [v for k, v in params.items() if k != "project_id"]
    return ids[-1] if ids else None


def _audit_denied(
    store: Store,
    endpoint: Endpoint,
    principal: Principal | None,
    params: dict[str, str],
    corr: str,
    key: str | None,
) -> None:
    store.record_audit(
        principal,
        endpoint.audit_action or "",
        _path_target(params),
        AuditOutcome.DENIED,
        corr,
        key,
        _known_project(store, params),
    )


DEFAULT_PAGE = 100


def _paginate(result: Result, query: dict[str, str]) -> Result:
    """Lists are cut into pages; the cursor is an opaque offset into the (insertion-ordered) list."""
    if not isinstance(result.body, Page):
        return result
    items = list(cast(Any, result.body).items)  # every Page subclass has `items`
    start = 0
    if "cursor" in query:
        try:
            start = int(base64.urlsafe_b64decode(query["cursor"] + "=" * (-len(query["cursor"]) % 4)).decode())
        except ValueError:
            raise ApiError(
                422,
                E.INVALID_CURSOR,
                "cursor is not one this API issued; start over without it",
                {"parameter": "cursor"},
            ) from None
    if start < 0:
        raise ApiError(422, E.INVALID_CURSOR, "cursor is not one this API issued", {"parameter": "cursor"})
    end = start + int(query.get("limit", DEFAULT_PAGE))
    cursor = base64.urlsafe_b64encode(str(end).encode()).decode().rstrip("=") if end < len(items) else None
    page = result.body.model_copy(update={"items": items[start:end], "next_cursor": cursor})
    return Result(result.status, page, result.target)


def _serialize(result: Result) -> bytes | None:
    if result.body is None:
        return None
    # The enrollment token grant is the one response that must carry its secret in clear.
    return result.body.model_dump_json(context={"reveal_secrets": True}).encode()


def _audit_accepted(
    store: Store,
    endpoint: Endpoint,
    principal: Principal | None,
    result: Result,
    params: dict[str, str],
    corr: str,
    key: str | None,
) -> None:
    store.record_audit(
        principal,
        endpoint.audit_action or "",
        result.target,
        AuditOutcome.ACCEPTED,
        corr,
        key,
        params.get("project_id"),
    )


def _injected(burst: ErrorBurst, message: str, corr: str) -> web.Response:
    response = error_response(ApiError(burst.status, E.INJECTED_FAULT, message), corr)
    if burst.retry_after_s is not None:
        response.headers["Retry-After"] = str(burst.retry_after_s)
    return response


def make_handler(store: Store, endpoint: Endpoint) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        supplied = request.headers.get(REQUEST_ID_HEADER)
        corr = supplied if supplied and REQUEST_ID_RE.fullmatch(supplied) else new_id("corr")
        try:
            if supplied is not None and supplied != corr:
                raise ApiError(400, E.INVALID_REQUEST_ID, f"{REQUEST_ID_HEADER} must match {REQUEST_ID_RE.pattern}")
            delay = store.faults.latency_for(request.path)
            if delay:
                await asyncio.sleep(delay)
            burst = store.faults.burst_for(request.method, request.path, FaultPhase.BEFORE)
            if burst:
                return _injected(burst, "simulated platform fault; retry if safe", corr)
            raw = await request.read()  # aiohttp bounds it (client_max_size): 413 beyond
            check_nesting(raw)
            response = _process(store, endpoint, request, raw, corr)
        except ApiError as err:
            ErrorCode(err.code)  # contract routes only use catalogued codes (else: 500 internal_error)
            return error_response(err, corr)
        if 200 <= response.status < 300:
            burst = store.faults.burst_for(request.method, request.path, FaultPhase.AFTER)
            if burst:  # the change happened; the caller only sees a failure
                return _injected(burst, "simulated fault after commit", corr)
        return response

    return handle


@web.middleware
async def envelope_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """aiohttp's own 404/405/413 become the canonical envelope too."""
    try:
        return await handler(request)
    except ApiError as err:
        return error_response(err, new_id("corr"))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        corr = new_id("corr")
        code = {404: E.ROUTE_NOT_FOUND, 405: E.METHOD_NOT_ALLOWED, 413: E.BODY_TOO_LARGE}.get(exc.status, E.HTTP_ERROR)
        response = error_response(ApiError(exc.status, code, exc.reason), corr)
        if "Allow" in exc.headers:  # RFC 9110: a 405 lists the methods that are allowed
            response.headers["Allow"] = exc.headers["Allow"]
        return response
    except Exception:  # a simulator bug: still the envelope, and the traceback on stderr
        traceback.print_exc()
        return error_response(ApiError(500, E.INTERNAL_ERROR, "simulator bug; see its stderr"), new_id("corr"))


def build_app(store: Store, extra_routes: Callable[[web.Application], None] | None = None) -> web.Application:
    app = web.Application(middlewares=[envelope_middleware], client_max_size=1024 * 1024)
    for endpoint in ENDPOINTS:
        app.router.add_route(endpoint.method.value, endpoint.path, make_handler(store, endpoint))
    if extra_routes:
        extra_routes(app)
    return app
