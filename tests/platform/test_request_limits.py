"""Hostile bodies get the canonical envelope, never a 500: nesting is bounded before anything
parses the body (json.loads and the schema walk recurse), size by the server (1 MiB)."""

from __future__ import annotations

import json

import pytest

from simulators.platform.validation import MAX_NESTING
from tests.fixtures.platform_sim import RunningSim

from .conftest import HTTP
from .test_authz import ENVELOPE


def post_instance(sim: RunningSim, raw: bytes, request_id: str, idem: str) -> tuple[int, dict[str, object]]:
    resp = HTTP.post(
        f"{sim.url}/api/v1/projects/{sim.creds.project_id}/app-instances",
        headers={
            "Authorization": f"Bearer {sim.creds.service_account}",
            "Content-Type": "application/json",
            "X-Request-Id": request_id,
            "X-Idempotency-Key": idem,
        },
        content=raw,
    )
    body = resp.json()
    assert set(body) == ENVELOPE or resp.status_code < 400, resp.text
    return resp.status_code, body


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 10_000 + b"]" * 10_000,  # 10,000 nested arrays
        b'{"a":' * 10_000 + b"1" + b"}" * 10_000,  # and objects
        b"[" * 10_000,  # unterminated too: refused before the parser sees it
        json.dumps({"name": "x", "members": [[[[[[0]]]]]] * 1}).encode()[:-1] + b"[" * (MAX_NESTING + 1) + b"}",
    ],
    ids=["arrays", "objects", "unterminated", "deep-inside-a-document"],
)
def test_a_deeply_nested_body_is_a_400_envelope(platform_sim: RunningSim, raw: bytes) -> None:
    status, body = post_instance(platform_sim, raw, "req-nested-1", "k-nested-1")
    assert (status, body["code"], body["correlation_id"]) == (400, "malformed_json", "req-nested-1")
    assert body["details"] == {"max_depth": MAX_NESTING}
    # The simulator is unharmed and nothing was created.
    assert platform_sim.operations() == []


def test_nesting_up_to_the_limit_reaches_validation_and_brackets_in_strings_do_not_count(
    platform_sim: RunningSim,
) -> None:
    at_limit = b"[" * MAX_NESTING + b"]" * MAX_NESTING
    status, body = post_instance(platform_sim, at_limit, "req-nested-2", "k-nested-2")
    assert (status, body["code"]) == (422, "validation_failed")  # parsed, then refused by the schema
    in_string = json.dumps({"name": "[" * 10_000 + "{" * 10_000}).encode()
    status, body = post_instance(platform_sim, in_string, "req-nested-3", "k-nested-3")
    assert (status, body["code"]) == (422, "validation_failed")


def test_a_body_over_the_size_limit_is_a_413_envelope(platform_sim: RunningSim) -> None:
    raw = json.dumps({"name": "x" * (1024 * 1024 + 1)}).encode()
    status, body = post_instance(platform_sim, raw, "req-big-1", "k-big-1")
    assert (status, body["code"]) == (413, "body_too_large")
    assert body["correlation_id"] and "x" * 100 not in json.dumps(body)
