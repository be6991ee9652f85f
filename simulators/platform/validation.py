"""Request bodies are checked against the committed OpenAPI document itself, then parsed into the
pydantic models: the simulator accepts exactly what the contract says (4.0 is an integer, "4" is not).
"""

from __future__ import annotations

import functools
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from clients.platform.contract import CONTRACT_PATH
from clients.platform.models.codes import ErrorCode as E

from .errors import ApiError


@functools.cache
def _document() -> dict[str, Any]:
    return yaml.safe_load(CONTRACT_PATH.read_text())


@functools.cache
def body_validator(operation_id: str) -> Draft202012Validator | None:
    doc = _document()
    for item in doc["paths"].values():
        for op in item.values():
            if op.get("operationId") == operation_id and "requestBody" in op:
                schema = op["requestBody"]["content"]["application/json"]["schema"]
                # "#/components/..." refs resolve against this root, which carries the components.
                return Draft202012Validator({**schema, "components": doc["components"]})
    return None


def check_body(operation_id: str, data: Any) -> None:
    validator = body_validator(operation_id)
    if validator is None:
        return
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        # Name the field and the rule, never echo the value: bodies may carry secrets.
        details = [
            {"loc": ".".join(str(p) for p in e.absolute_path) or "body", "rule": str(e.validator)} for e in errors[:20]
        ]
        raise ApiError(
            422,
            E.VALIDATION_FAILED,
            f"{len(errors)} contract violation(s): "
            + "; ".join(f"{d['loc']} fails '{d['rule']}'" for d in details[:5]),
            {"errors": details},
        )
