"""The simulator's in-memory world. One re-entrant lock guards it; every handler holds it.

Contract records are stored as the contract's own (frozen) pydantic models and replaced with
`model_copy(update=...)`; what the contract does not show (token digests, idempotency records,
principals) lives in small dataclasses beside them.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from clients.platform.models import (
    AppInstance,
    AuditEvent,
    AuditOutcome,
    MaasSite,
    Member,
    Node,
    NodeAgentPackage,
    Operation,
    Role,
    SiteProfile,
    UiRoute,
)
from clients.platform.models.common import ID_PATTERN

from .clock import SimClock
from .faults import FaultPlan, FaultState

IDEMPOTENCY_RETENTION_S = 24 * 3600.0


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(8)}"


def digest(secret: str) -> str:
    """Tokens are stored by digest only: the simulator never keeps a bearer or enrollment secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass
class Project:
    project_id: str
    tenant_id: str
    name: str


@dataclass
class Principal:
    principal_id: str
    name: str
    role: Role
    tenant_id: str | None
    project_id: str | None


@dataclass
class BearerTokenRecord:
    """A principal's API token: kept by digest, with an optional expiry (simulated seconds)."""

    token_id: str
    principal_id: str
    expires_at_s: float | None = None
    revoked: bool = False


class TokenState(StrEnum):
    VALID = "valid"
    UNKNOWN = "unknown"
    EXPIRED = "expired"
    REVOKED = "revoked"


@dataclass
class EnrollmentTokenRecord:
    token_id: str
    node_id: str
    expires_at_s: float
    used_at_s: float | None = None
    revoked: bool = False


@dataclass
class IdempotencyRecord:
    fingerprint: str
    status: int
    body: bytes
    created_s: float


@dataclass
class Timer:
    """A scheduled state change (an operation step, a node settling); fired by `Store.tick`."""

    at_s: float
    seq: int
    kind: str  # "op" or "node"
    ref: str
    payload: dict[str, Any] = field(default_factory=dict)


class Store:
    def __init__(self, clock: SimClock, faults: FaultPlan | None = None) -> None:
        self.lock = threading.RLock()
        self.clock = clock
        self.faults = FaultState(faults)
        self.tenants: dict[str, str] = {}
        self.projects: dict[str, Project] = {}
        self.principals: dict[str, Principal] = {}
        self.bearer: dict[str, BearerTokenRecord] = {}  # digest(token) -> record
        self.sites: dict[str, MaasSite] = {}
        self.profiles: dict[str, SiteProfile] = {}
        self.nodes: dict[str, Node] = {}
        self.enrollment_tokens: dict[str, EnrollmentTokenRecord] = {}  # digest -> record
        self.enroll_callers: dict[str, str | None] = {}  # node id -> address its enrollment came from
        self.agent_credentials: dict[str, str] = {}  # digest(node agent credential) -> node id
        self.instances: dict[str, AppInstance] = {}
        self.members: dict[str, Member] = {}
        self.operations: dict[str, Operation] = {}
        self.audit: list[AuditEvent] = []
        self.idempotency: dict[tuple[str, str], IdempotencyRecord] = {}
        self.timers: list[Timer] = []
        self.op_args: dict[str, dict[str, Any]] = {}  # what an operation will apply when it finishes
        self.routes: dict[str, UiRoute] = {}  # the UI gateway's routes (seed 000 §4)
        self.cpu_only_allocations = False  # seed 000 §6: whether this platform offers CPU-only allocations
        self.agent_package: NodeAgentPackage | None = None  # offered in the enrollment response
        self.agent_artifacts: dict[str, bytes] = {}  # sha256 -> a node agent package the simulator serves
        self._seq = 0
        self.hits: dict[str, int] = {}  # operationId -> successful calls (coverage for tests)
        self.calls: dict[str, int] = {}  # operationId -> every request that reached a handler

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Stores pickled before token expiry (tests/compat's v1 world) kept digest -> principal_id."""
        state["bearer"] = {
            d: BearerTokenRecord(new_id("token"), r) if isinstance(r, str) else r
            for d, r in state.get("bearer", {}).items()
        }
        state.setdefault("cpu_only_allocations", False)
        state.setdefault("routes", {})
        state.setdefault("agent_package", None)
        state.setdefault("agent_artifacts", {})
        state.setdefault("agent_credentials", {})
        for node in state.get("nodes", {}).values():  # records pickled before node agents heartbeated
            node.__dict__.setdefault("agent", None)
            if getattr(node, "bootstrap", None) is not None:
                node.bootstrap.__dict__.setdefault("validation_bundle_digest", None)
                node.bootstrap.__dict__.setdefault("validation_bundle_ref", None)
        self.__dict__.update(state)

    # --- identities ------------------------------------------------------------------------
    def create_tenant(self, name: str) -> str:
        with self.lock:
            tenant_id = new_id("tenant")
            self.tenants[tenant_id] = name
            return tenant_id

    def create_project(self, tenant_id: str, name: str, project_id: str | None = None) -> Project:
        """`project_id`: a caller-chosen id (environments name their projects); else one is minted."""
        with self.lock:
            if tenant_id not in self.tenants:
                raise KeyError(f"unknown tenant {tenant_id}")
            if project_id is not None:
                if not re.fullmatch(ID_PATTERN, project_id):
                    raise ValueError(
                        f"project_id {project_id!r} must match {ID_PATTERN} (e.g. project-0123456789abcdef)"
                    )
                if project_id in self.projects:
                    raise ValueError(f"project_id {project_id!r} exists already")
            project = Project(project_id or new_id("project"), tenant_id, name)
            self.projects[project.project_id] = project
            return project

    def create_principal(
        self,
        role: Role,
        name: str,
        tenant_id: str | None = None,
        project_id: str | None = None,
        ttl_s: float | None = None,
    ) -> tuple[Principal, str]:
        """Returns the principal and its bearer token (shown once; only its digest is kept)."""
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0 simulated seconds, got {ttl_s}")
        with self.lock:
            if role in (Role.PROJECT_ADMIN, Role.SERVICE_ACCOUNT):
                if project_id not in self.projects:
                    raise KeyError(f"{role.value} needs an existing project_id, got {project_id!r}")
                tenant_id = self.projects[project_id].tenant_id
            elif role is Role.TENANT_ADMIN:
                if tenant_id not in self.tenants:
                    raise KeyError(f"tenant_admin needs an existing tenant_id, got {tenant_id!r}")
                project_id = None
            else:
                tenant_id = project_id = None
            principal = Principal(new_id("principal"), name, role, tenant_id, project_id)
            self.principals[principal.principal_id] = principal
            return principal, self.issue_bearer(principal.principal_id, ttl_s)[1]

    def issue_bearer(self, principal_id: str, ttl_s: float | None = None) -> tuple[BearerTokenRecord, str]:
        """A new bearer token for an existing principal; `ttl_s` in simulated seconds (None: no expiry)."""
        with self.lock:
            if principal_id not in self.principals:
                raise KeyError(f"unknown principal {principal_id!r}")
            if ttl_s is not None and ttl_s <= 0:
                raise ValueError(f"ttl_s must be > 0 simulated seconds, got {ttl_s}")
            token = f"gpuaas_{secrets.token_urlsafe(32)}"
            expires = None if ttl_s is None else self.clock.seconds() + ttl_s
            record = BearerTokenRecord(new_id("token"), principal_id, expires)
            self.bearer[digest(token)] = record
            return record, token

    def revoke_bearer(self, token_id: str) -> BearerTokenRecord:
        with self.lock:
            record = next((r for r in self.bearer.values() if r.token_id == token_id), None)
            if record is None:
                raise KeyError(f"unknown token {token_id!r}")
            record.revoked = True
            return record

    def bearer_record(self, token: str) -> BearerTokenRecord | None:
        return self.bearer.get(digest(token))

    def token_state(self, record: BearerTokenRecord | None) -> TokenState:
        if record is None or record.principal_id not in self.principals:
            return TokenState.UNKNOWN
        if record.revoked:  # revocation wins: it is the deliberate act
            return TokenState.REVOKED
        if record.expires_at_s is not None and self.clock.seconds() >= record.expires_at_s:
            return TokenState.EXPIRED
        return TokenState.VALID

    # --- audit and timers --------------------------------------------------------------------
    def record_audit(
        self,
        principal: Principal | None,
        action: str,
        target: str | None,
        outcome: AuditOutcome,
        correlation_id: str,
        idempotency_key: str | None,
        project_id: str | None = None,
    ) -> None:
        with self.lock:
            self.audit.append(
                AuditEvent(
                    event_id=new_id("audit"),
                    at=self.clock.now(),
                    principal_id=principal.principal_id if principal else None,
                    role=principal.role if principal else None,
                    tenant_id=self.projects[project_id].tenant_id
                    if project_id in self.projects
                    else (principal.tenant_id if principal else None),
                    project_id=project_id,
                    action=action,
                    target=target,
                    outcome=outcome,
                    correlation_id=correlation_id,
                    idempotency_key=idempotency_key,
                )
            )

    def schedule(self, delay_s: float, kind: str, ref: str, base_s: float | None = None, **payload: Any) -> None:
        """`base_s`: when the scheduling event itself happened (a timer's due time), so a late
        observer still sees every step at its proper simulated time."""
        with self.lock:
            self._seq += 1
            start = self.clock.seconds() if base_s is None else base_s
            self.timers.append(Timer(start + delay_s, self._seq, kind, ref, payload))

    def due_timers(self) -> list[Timer]:
        """Pop the timers whose time has come, in firing order."""
        with self.lock:
            now = self.clock.seconds()
            due = sorted((t for t in self.timers if t.at_s <= now), key=lambda t: (t.at_s, t.seq))
            self.timers = [t for t in self.timers if t.at_s > now]
            return due

    def expire_idempotency(self) -> None:
        with self.lock:
            horizon = self.clock.seconds() - IDEMPOTENCY_RETENTION_S
            for key in [k for k, r in self.idempotency.items() if r.created_s < horizon]:
                del self.idempotency[key]
