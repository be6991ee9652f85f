"""MAAS's metadata API, the part nodes use (NSPAWN backend), each request signed with the node's key:

- `POST /MAAS/metadata/status/<system_id>`: cloud-init's `webhook` reporting handler posts its events
  (one JSON object per request).
- `GET /MAAS/metadata/<version>/maas-scripts`: the commissioning environment's runner downloads the
  scripts still to run (a tar; 204 when none); `POST /MAAS/metadata/<version>/` with `op=signal`: it
  reports each script's result and the run's outcome (commissioning.py; canonical/maas
  `metadataserver/api.py` VersionIndexHandler.signal, MAASScriptsHandler). `<version>`: latest or 2012-03-01.

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
from .forms import parse_form

if TYPE_CHECKING:
    from .core import SimCore

PREFIX = "/MAAS/metadata/"
STATUS_PATH = re.compile(r"^/MAAS/metadata/status/(?P<system_id>[^/]+)/?$")
SCRIPTS_PATH = re.compile(r"^/MAAS/metadata/(?P<version>latest|2012-03-01)/maas-scripts/?$")
VERSION_PATH = re.compile(r"^/MAAS/metadata/(?P<version>latest|2012-03-01)/?$")
TEXT, TAR = "text/plain; charset=utf-8", "application/x-tar"


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


def handle(core: SimCore, method: str, path: str, authorization: str | None, body: bytes,
           content_type: str = "") -> tuple[int, bytes, str]:
    """(HTTP status, body, content type) for a request under PREFIX."""
    found = STATUS_PATH.match(path)
    scripts, version = SCRIPTS_PATH.match(path), VERSION_PATH.match(path)
    if found is None and scripts is None and version is None:
        return 404, f"Unknown metadata endpoint: {path}".encode(), TEXT
    nodes = core.lifecycle.nodes
    if nodes is None:
        return 401, b"Authorization Error: no node keys (this simulator's machine backend has no nodes)", TEXT
    try:
        signer = nodes.authenticate(authorization)
    except errors.ApiError as exc:
        return exc.status, exc.body, TEXT
    if signer is None or (found is not None and signer != found["system_id"]):
        return 401, b"Authorization Error: the request is not signed with this node's key", TEXT
    if found is None:
        return _commissioning(core, signer, method, scripts is not None, body, content_type)
    if method != "POST":
        return 405, b"Method not allowed: the status endpoint takes POST", TEXT
    return (*_status(core, signer, body), TEXT)


def _commissioning(core: SimCore, signer: str, method: str, scripts: bool, body: bytes,
                   content_type: str) -> tuple[int, bytes, str]:
    """The runner's two calls: the scripts tar (GET maas-scripts), a signal (POST <version>/ op=signal)."""
    path = core.lifecycle.commissioning
    with core.store.lock:
        m = core.store.machines.get(signer)
        if m is None or path is None:
            return 404, b"Not Found: no such machine", TEXT
        if scripts:
            if method != "GET":
                return 405, b"Method not allowed: maas-scripts takes GET", TEXT
            tar = path.scripts_tar(m)
            return (204, b"", TAR) if tar is None else (200, tar, TAR)
        if method != "POST":
            return 405, b"Method not allowed: the version index takes GET (not served here) or POST op=signal", TEXT
        form = parse_form(content_type, body)
        if form.get("op", [b""])[0] != b"signal":
            return 400, f"Unrecognised signature: method=POST op={form.get('op', [b''])[0].decode()}".encode(), TEXT
        status, text = path.signal(m, form)
        return status, text, TEXT


def _status(core: SimCore, signer: str, body: bytes) -> tuple[int, bytes]:
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
