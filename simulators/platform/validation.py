"""Request bodies are checked against the committed OpenAPI document itself, then parsed into the
pydantic models: the simulator accepts exactly what the contract says (4.0 is an integer, "4" is not).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from clients.platform.contract import CONTRACT_PATH
from clients.platform.models import ErrorCode as E

from .errors import ApiError

# Deeper than any contract body (they nest 4-5 levels); json.loads and the schema walk recurse,
# so a 10,000-deep array would otherwise end in RecursionError, i.e. a 500.
MAX_NESTING = 64
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')  # possessive: linear on hostile input
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def check_nesting(raw: bytes, limit: int = MAX_NESTING) -> None:
    """Refuse a body whose arrays/objects nest deeper than `limit`, before anything parses it.
    Brackets inside strings do not count; malformed JSON is left for the parser to name."""
    depth = 0
    for byte in _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS):
        depth += 1 if byte in b"[{" else -1
        if depth > limit:
            raise ApiError(
                400,
                E.MALFORMED_JSON,
                f"the body nests arrays/objects deeper than {limit} levels",
                {"max_depth": limit},
            )


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
