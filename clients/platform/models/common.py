"""Shared contract types: the error envelope, roles, list wrappers, the base model.

Request models forbid unknown fields (a typo in a request is a 422, not a silent no-op);
response models ignore unknown fields so an additive server change does not break old clients.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Identifiers the platform mints: a kind prefix and 16 hex digits (e.g. "site-0123456789abcdef").
ID_PATTERN = r"^[a-z]+-[0-9a-f]{16}$"
# Human-chosen names (sites, profiles, instances): DNS-label-like, stable in URLs and logs.
NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
IDEMPOTENCY_KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$"

IDEMPOTENCY_HEADER = "X-Idempotency-Key"
REQUEST_ID_HEADER = "X-Request-Id"
CORRELATION_HEADER = "X-Correlation-Id"
REPLAY_HEADER = "X-Idempotent-Replay"


# defer_build: a model's validator is built when it is first used, not when its module loads. Every provider
# plugin and program imports these ~50 models and most passes use none of them (issue 29; pydantic 2.14's
# rebuild takes a lock, so first uses on several threads are safe).
class RequestModel(BaseModel):
    """A body the client sends: closed, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ResponseModel(BaseModel):
    """A body the server returns: immutable, tolerant of additive fields."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class Role(StrEnum):
    """Who a bearer token speaks for; the rights of each are in `clients.platform.catalogue`."""

    PLATFORM_ADMIN = "platform_admin"
    TENANT_ADMIN = "tenant_admin"
    PROJECT_ADMIN = "project_admin"
    SERVICE_ACCOUNT = "service_account"


class ErrorEnvelope(ResponseModel):
    """The one shape of every error response (seed 004: canonical envelope with correlation_id)."""

    code: str = Field(description="Stable, machine-readable error code (snake_case).")
    message: str = Field(description="Human-readable explanation, including what to do next.")
    correlation_id: str = Field(description="The request's X-Request-Id, or one the platform minted.")
    details: dict[str, Any] = Field(default_factory=dict)


class Page(ResponseModel):
    """A list response. `next_cursor` set: more items; pass it back as `cursor` to get them."""

    next_cursor: str | None = Field(default=None, description="Opaque; absent or null on the last page.")


class AuditOutcome(StrEnum):
    ACCEPTED = "accepted"
    DENIED = "denied"


class AuditEvent(ResponseModel):
    """One privileged mutation (accepted or denied), as recorded by the platform."""

    event_id: str = Field(pattern=ID_PATTERN)
    at: datetime
    principal_id: str | None
    role: Role | None
    tenant_id: str | None
    project_id: str | None
    action: str
    target: str | None
    outcome: AuditOutcome
    correlation_id: str
    idempotency_key: str | None


class AuditEventList(Page):
    items: list[AuditEvent]
