"""The FAST enrollment backend: the simulator enrolls a deployed node itself, instead of a node.

Only for runs with no real nodes (scale benchmarks, lifecycle tests that do not test the node side):
nothing of the bundle runs. `EnrollBackend.FAST` posts the enrollment with a bootstrap report whose
runner is `fast-simulator`, no steps, and the digest the user_data pins (so the lifecycle's digest check
holds); `EnrollBackend.NODE` posts nothing: the node's own launcher enrolls (tests/node, docs/node-bootstrap.md).

When a machine reaches Deployed and the simulator was started with a platform URL, the deployed
user_data (a `#cloud-config` document, or MIME multipart holding one) is searched for a
`write_files` entry at ENROLLMENT_PATH whose content is JSON {"node_id", "enrollment_token"}.
The simulator then POSTs {"node_id", "enrollment_token", "hostname", "system_id"} to
`<platform_url>/api/v1/node-bootstrap/enroll` -- always the configured URL, never one found in
user_data. Only the outcome (status, error code) is recorded; the token never is.
"""

from __future__ import annotations

import base64
import email
import gzip
import json
from email import policy
from enum import StrEnum
from typing import Any

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

ENROLLMENT_PATH = "/etc/gpuaas/enrollment.json"
BUNDLE_PATH = "/etc/gpuaas/bundle.json"
ENROLL_ROUTE = "/api/v1/node-bootstrap/enroll"
HEARTBEAT_ROUTE = "/api/v1/node-agent/heartbeat"
# libyaml's safe loader when PyYAML has it: the pure-Python one parsing each deployed user_data
# was a tenth of the simulator's CPU in a fleet-scale run.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class EnrollBackend(StrEnum):
    """What stands behind a deployed machine (`MachineBackend` is the same enum)."""

    FAST = "fast"  # the simulator enrolls each deployed node itself (no node runs anything); Deployed on a timer
    NODE = "node"  # nothing is posted for the node: its own launcher enrolls; Deployed on a timer
    NSPAWN = "nspawn"  # a real nspawn node boots from the user_data; its cloud-init reports Deployed (nspawn.py)


MachineBackend = EnrollBackend


class Enrollment(BaseModel):
    model_config = ConfigDict(extra="ignore")
    node_id: str
    enrollment_token: str
    bundle_digest: str | None = None  # the sha256 the user_data pins (from BUNDLE_PATH), when there is one
    validation_digest: str | None = None  # the validation bundle's sha256 the user_data pins, when it names one

    def __repr__(self) -> str:  # keep the token out of any accidental log line
        return f"Enrollment(node_id={self.node_id!r}, enrollment_token=<redacted>)"

    __str__ = __repr__


class EnrollResult(BaseModel):
    ok: bool
    status_code: int | None = None
    error_code: str | None = None
    detail: str = ""


def _cloud_configs(user_data: bytes) -> list[str]:
    """Every #cloud-config document inside user_data (plain or MIME multipart, maybe gzipped)."""
    if user_data[:2] == b"\x1f\x8b":
        user_data = gzip.decompress(user_data)
    text = user_data.decode("utf-8", "replace")
    if text.lstrip().startswith("#cloud-config"):
        return [text]
    if "Content-Type:" not in text[:2048] and "MIME-Version" not in text[:2048]:
        return []
    msg = email.message_from_bytes(user_data, policy=policy.compat32)
    out = []
    for part in msg.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        if part.get_content_type() == "text/cloud-config" or payload.lstrip().startswith(b"#cloud-config"):
            out.append(payload.decode("utf-8", "replace"))
    return out


def _file_content(entry: dict[str, Any]) -> str | None:
    content = entry.get("content", "")
    if not isinstance(content, str):
        return None
    encoding = str(entry.get("encoding", "")).lower()
    raw: bytes
    if encoding in ("b64", "base64"):
        raw = base64.b64decode(content)
    elif encoding in ("gz+b64", "gzip+base64", "gz+base64", "gzip+b64"):
        raw = gzip.decompress(base64.b64decode(content))
    else:
        return content
    return raw.decode("utf-8", "replace")


def _write_files(user_data: bytes) -> dict[str, str]:
    """path -> content of every write_files entry of the user_data's cloud-config documents."""
    out: dict[str, str] = {}
    for doc in _cloud_configs(user_data):
        try:
            data = yaml.load(doc, Loader=_SAFE_LOADER)
        except yaml.YAMLError:
            continue
        if not isinstance(data, dict):
            continue
        for entry in data.get("write_files") or []:
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                content = _file_content(entry)
                if content is not None:
                    out.setdefault(entry["path"], content)
    return out


def find_enrollment(user_data: bytes | None) -> Enrollment | None:
    if not user_data:
        return None
    files = _write_files(user_data)
    if ENROLLMENT_PATH not in files:
        return None
    try:
        enrollment = Enrollment.model_validate(json.loads(files[ENROLLMENT_PATH]))
    except (json.JSONDecodeError, ValidationError):
        return None
    try:
        bundle = json.loads(files.get(BUNDLE_PATH, "{}"))
        digest, validation = bundle.get("sha256"), (bundle.get("validation") or {}).get("sha256")
    except (json.JSONDecodeError, AttributeError):
        digest = validation = None
    return enrollment.model_copy(update={"bundle_digest": digest if isinstance(digest, str) else None,
                                         "validation_digest": validation if isinstance(validation, str) else None})


# One HTTP client for every enrollment the simulator posts: httpx builds an SSL context per client
# (~20 ms of CPU), which made the simulator's FAST enrollments a visible share of a 1,024-machine bench.
_CLIENT: httpx.Client | None = None


def _client() -> httpx.Client:
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = httpx.Client()
    return _CLIENT


def _heartbeat(platform_url: str, node_id: str, enrolled: httpx.Response, timeout: float) -> EnrollResult | None:
    """FAST: the node agent nothing installed says it is alive once (the platform makes a node active only on a
    heartbeat), with the credential the enrollment answer gave. None when it was taken."""
    try:
        credential = enrolled.json().get("agent_credential")
    except (ValueError, AttributeError):
        credential = None
    if not credential:
        return None  # a platform that hands out no agent credential: nothing to heartbeat with
    body = {"node_id": node_id, "agent_credential": credential, "agent_version": "fast-simulator"}
    try:
        resp = _client().post(platform_url.rstrip("/") + HEARTBEAT_ROUTE, json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        return EnrollResult(ok=False, error_code="connection_error", detail=f"heartbeat: {type(exc).__name__}")
    if resp.status_code >= 400:
        return EnrollResult(ok=False, status_code=resp.status_code, error_code=f"heartbeat_http_{resp.status_code}")
    return None


def post_enrollment(platform_url: str, enrollment: Enrollment, hostname: str, system_id: str,
                    timeout: float = 10.0) -> EnrollResult:
    url = platform_url.rstrip("/") + ENROLL_ROUTE
    body: dict[str, Any] = {"node_id": enrollment.node_id, "enrollment_token": enrollment.enrollment_token,
                            "hostname": hostname, "system_id": system_id}
    if enrollment.bundle_digest:  # FAST: nothing ran; the report says so (runner) and carries the pinned digests
        body["report"] = {"bundle_digest": enrollment.bundle_digest, "outcome": "succeeded", "steps": [],
                          "runner": "fast-simulator",
                          "validation_bundle_digest": enrollment.validation_digest or enrollment.bundle_digest}
    try:
        resp = _client().post(url, json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        return EnrollResult(ok=False, error_code="connection_error", detail=type(exc).__name__)
    if resp.status_code < 400:
        beat = _heartbeat(platform_url, enrollment.node_id, resp, timeout)
        if beat is not None:
            return beat
    error_code = None
    if resp.status_code >= 400:
        try:
            data = resp.json()
            error_code = (data.get("error", {}) or {}).get("code") if isinstance(data.get("error"), dict) \
                else data.get("code") or data.get("error")
        except (ValueError, AttributeError):
            error_code = None
        error_code = str(error_code) if error_code else f"http_{resp.status_code}"
    return EnrollResult(ok=resp.status_code < 400, status_code=resp.status_code, error_code=error_code)
