"""Builds the OpenAPI 3.1 document from the catalogue and the pydantic models.

`python -m clients.platform.contract --write` regenerates `contracts/platform-api.yaml`;
`--check` fails (exit 1) when the committed document differs from what the models say, which is
how a model change cannot silently drift from the published contract.
"""

from __future__ import annotations

import argparse
import sys
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from .catalogue import ENDPOINTS, ERROR_DESCRIPTIONS, Endpoint
from .models import common
from .models.codes import ErrorCode

CONTRACT_PATH = Path(__file__).resolve().parents[2] / "contracts" / "platform-api.yaml"
API_VERSION = "1.0.0"
_REF = "#/components/schemas/{model}"
_ID_PARAM = {"type": "string", "pattern": r"^[a-z]+-[0-9a-f]{16}$"}


def _strip(schema: Any) -> Any:
    """Drop pydantic's cosmetic titles and writeOnly (secrets are returned exactly once, at mint)."""
    if isinstance(schema, dict):
        # A property *named* "title" has a dict value, so only string titles are dropped.
        return {
            k: _strip(v) for k, v in schema.items() if k != "writeOnly" and not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [_strip(x) for x in schema]
    return schema


def _component_schemas() -> dict[str, Any]:
    models: list[tuple[type[BaseModel], str]] = [(common.ErrorEnvelope, "serialization")]
    for e in ENDPOINTS:
        if e.response is not None:
            models.append((e.response, "serialization"))
        if isinstance(e.request, type) and issubclass(e.request, BaseModel):
            models.append((e.request, "validation"))
        elif e.request is not None:  # a discriminated union: register each member
            for arm in typing.get_args(typing.get_args(e.request)[0]):
                models.append((arm, "validation"))
    _, defs = models_json_schema(models, ref_template=_REF)  # type: ignore[arg-type]
    schemas = _strip(defs.get("$defs", {}))
    # Documented, not enumerated: a new server-side code must not break an old client.
    schemas["ErrorEnvelope"]["x-known-codes"] = [c.value for c in ErrorCode]
    return schemas


def _body_schema(e: Endpoint) -> dict[str, Any]:
    if isinstance(e.request, type):
        return {"$ref": _REF.format(model=e.request.__name__)}
    schema = TypeAdapter(e.request).json_schema(ref_template=_REF)
    schema.pop("$defs", None)
    return _strip(schema)


def _parameters(e: Endpoint) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    for name in (seg[1:-1] for seg in e.path.split("/") if seg.startswith("{")):
        params.append({"name": name, "in": "path", "required": True, "schema": dict(_ID_PARAM)})
    for q in e.query:
        schema: dict[str, Any] = {"type": "string"}
        if q.pattern:
            schema["pattern"] = q.pattern
        if q.enum:
            schema["enum"] = [v.value for v in q.enum]
        params.append(
            {"name": q.name, "in": "query", "required": False, "description": q.description, "schema": schema}
        )
    params.append({"$ref": "#/components/parameters/RequestId"})
    if e.mutation:
        params.append(
            {
                "$ref": "#/components/parameters/IdempotencyKey"
                if e.idempotency_required
                else "#/components/parameters/OptionalIdempotencyKey"
            }
        )
    return params


def _operation(e: Endpoint) -> dict[str, Any]:
    roles = sorted(r.value for r in e.roles)
    desc = f"Roles: {', '.join(roles)}." if roles else "No bearer token: the enrollment token is the credential."
    if e.project_scoped:
        desc += " Project-scoped roles act only inside their own project; tenant_admin inside its tenant."
    if e.audit_action:
        desc += f" Audited as `{e.audit_action}`."
    headers = {"X-Correlation-Id": {"$ref": "#/components/headers/CorrelationId"}}
    ok: dict[str, Any] = {"description": "Success.", "headers": dict(headers)}
    if e.response is not None:
        ok["content"] = {"application/json": {"schema": {"$ref": _REF.format(model=e.response.__name__)}}}
    if e.links:  # for clients and for schemathesis' stateful phase
        ok["links"] = {
            name: {"operationId": target, "parameters": dict(params)} for name, (target, params) in e.links.items()
        }
    if e.mutation:
        ok["headers"]["X-Idempotent-Replay"] = {"$ref": "#/components/headers/IdempotentReplay"}
    responses: dict[str, Any] = {str(e.status): ok}
    # Everywhere: 400 for a malformed X-Request-Id, 422 for an unknown query parameter.
    for code in sorted({400, 422, 429, *e.errors}):
        responses[str(code)] = {"$ref": f"#/components/responses/E{code}"}
    responses["5XX"] = {"$ref": "#/components/responses/E5XX"}
    op: dict[str, Any] = {
        "operationId": e.operation_id,
        "summary": e.summary,
        "description": desc,
        "tags": [e.tag],
        "parameters": _parameters(e),
        "responses": responses,
        "x-gpuaas-roles": roles,
    }
    if e.audit_action:
        op["x-gpuaas-audit-action"] = e.audit_action
    if not e.roles:
        op["security"] = []
    if e.request is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": _body_schema(e)}}}
    return op


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "headers": {"X-Correlation-Id": {"$ref": "#/components/headers/CorrelationId"}},
        "content": {"application/json": {"schema": {"$ref": _REF.format(model="ErrorEnvelope")}}},
    }


def build_openapi() -> dict[str, Any]:
    # size: the OpenAPI document assembled top to bottom, one section per block
    paths: dict[str, dict[str, Any]] = {}
    for e in ENDPOINTS:
        paths.setdefault(e.path, {})[e.method.value.lower()] = _operation(e)
    responses = {f"E{c}": _error_response(d) for c, d in ERROR_DESCRIPTIONS.items()}
    responses["E5XX"] = _error_response("Platform fault; retry only idempotent requests or with the same key.")
    for throttled in ("E429", "E5XX"):
        responses[throttled]["headers"]["Retry-After"] = {
            "required": False,
            "description": "Seconds to wait before retrying.",
            "schema": {"type": "integer", "minimum": 0},
        }
    token_schema = {"type": "string", "pattern": common.IDEMPOTENCY_KEY_PATTERN}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "GPUaaS platform API (infrastructure subset)",
            "version": API_VERSION,
            "description": (
                "Admin MAAS sites and site profiles, node bootstrap and enrollment, project-scoped app "
                "instances with members and member operations. Every error is the envelope "
                "{code, message, correlation_id, details}; the X-Request-Id header, when sent, is echoed "
                "as the correlation id. Every authenticated mutation requires X-Idempotency-Key: the same "
                "key with the same request replays the original response, with a different request it "
                "is rejected with 422 idempotency_key_reused. Generated by clients.platform.contract."
            ),
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}],
        "tags": [{"name": "admin"}, {"name": "node-bootstrap"}, {"name": "projects"}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "parameters": {
                "RequestId": {
                    "name": common.REQUEST_ID_HEADER,
                    "in": "header",
                    "required": False,
                    "description": "Caller's request id; echoed as the correlation id.",
                    "schema": {"type": "string", "pattern": r"^[A-Za-z0-9._:-]{1,128}$"},
                },
                "IdempotencyKey": {
                    "name": common.IDEMPOTENCY_HEADER,
                    "in": "header",
                    "required": True,
                    "description": "Scoped to the principal; kept 24 hours.",
                    "schema": token_schema,
                },
                "OptionalIdempotencyKey": {
                    "name": common.IDEMPOTENCY_HEADER,
                    "in": "header",
                    "required": False,
                    "schema": token_schema,
                },
            },
            "headers": {
                "CorrelationId": {
                    "required": True,
                    "schema": {"type": "string"},
                    "description": "The correlation id of this request.",
                },
                "IdempotentReplay": {
                    "required": False,
                    "schema": {"type": "string", "enum": ["true"]},
                    "description": "Present when the response replays an earlier one.",
                },
            },
            "responses": responses,
            "schemas": _component_schemas(),
        },
    }


def render() -> str:
    header = "# GENERATED by `python -m clients.platform.contract --write`; edit the models, not this file.\n"
    return header + yaml.safe_dump(build_openapi(), sort_keys=False, width=110, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the committed contract")
    parser.add_argument("--check", action="store_true", help="fail if the committed contract is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        CONTRACT_PATH.parent.mkdir(parents=True, exist_ok=True)
        CONTRACT_PATH.write_text(text)
        print(f"wrote {CONTRACT_PATH}")
        return 0
    if args.check:
        current = CONTRACT_PATH.read_text() if CONTRACT_PATH.exists() else ""
        if current != text:
            print(f"{CONTRACT_PATH}: stale; run `python -m clients.platform.contract --write`", file=sys.stderr)
            return 1
        print(f"{CONTRACT_PATH}: up to date")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
