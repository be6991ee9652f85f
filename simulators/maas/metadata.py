"""MAAS's metadata status endpoint: `POST /MAAS/metadata/status/<system_id>`, where cloud-init's
`webhook` reporting handler posts its events (one JSON object per request, signed with the node's key).

As canonical/maas's StatusHandler / StatusWorkerService (src/metadataserver/api_twisted.py) reads
them: `{event_type: start|finish, origin, name, description, timestamp, result?, files?}`; a `start`
event or a failed one goes to the node's event log; a top-level event (no `/` in its name) finishing
decides the deploy: FAIL/FAILURE -> Failed deployment, and (in this simulator, with the NSPAWN
backend) `modules-final` finishing SUCCESS -> Deployed. Only machines with a node key (NSPAWN
backend, deploy in progress) can post; everything else is 401.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import errors

if TYPE_CHECKING:
    from .core import SimCore

PREFIX = "/MAAS/metadata/"
STATUS_PATH = re.compile(r"^/MAAS/metadata/status/(?P<system_id>[^/]+)/?$")


class EventType(StrEnum):
    START = "start"
    FINISH = "finish"


class EventResult(StrEnum):
    SUCCESS = "SUCCESS"
    WARN = "WARN"
    FAIL = "FAIL"
    FAILURE = "FAILURE"  # curtin's word; MAAS treats both as a failure


FAILED_RESULTS = frozenset({EventResult.FAIL, EventResult.FAILURE})


class StatusMessage(BaseModel):
    """One cloud-init (or curtin) reporting event, as the webhook handler posts it."""

    model_config = ConfigDict(extra="ignore")
    event_type: EventType
    origin: str = "cloudinit"
    name: str
    description: str = ""
    timestamp: float | None = None
    result: EventResult | None = None
    files: list[dict[str, object]] = Field(default_factory=list)

    @property
    def top_level(self) -> bool:
        return "/" not in self.name

    @property
    def failed(self) -> bool:
        return self.result in FAILED_RESULTS


def handle(core: SimCore, method: str, path: str, authorization: str | None, body: bytes) -> tuple[int, bytes]:
    """(HTTP status, plain-text body) for a request under PREFIX."""
    found = STATUS_PATH.match(path)
    if found is None:
        return 404, f"Unknown metadata endpoint: {path}".encode()
    if method != "POST":
        return 405, b"Method not allowed: the status endpoint takes POST"
    nodes = core.lifecycle.nodes
    if nodes is None:
        return 401, b"Authorization Error: no node keys (this simulator's machine backend has no nodes)"
    try:
        signer = nodes.authenticate(authorization)
    except errors.ApiError as exc:
        return exc.status, exc.body
    if signer is None or signer != found["system_id"]:
        return 401, b"Authorization Error: the request is not signed with this node's key"
    try:
        message = StatusMessage.model_validate(json.loads(body or b"{}"))
    except (ValueError, ValidationError) as exc:
        return 400, f"Bad Request: not a status message ({type(exc).__name__})".encode()
    with core.store.lock:
        m = core.store.machines.get(signer)
        if m is None:
            return 404, b"Not Found: no such machine"
        core.lifecycle.node_status(m, message)
    return 200, b"OK"
