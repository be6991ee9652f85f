"""`PlatformSimulator`: the platform API on 127.0.0.1 in a background thread, plus a Python
admin interface for tests (the same powers as the /_sim/ HTTP routes)."""

from __future__ import annotations

import asyncio
import secrets
import threading
from types import TracebackType
from typing import Self

from aiohttp import web
from pydantic import BaseModel

from clients.platform.models import AuditEvent, NodeAgentPackage, Operation, Role

from . import agent_package, engine
from .admin import add_routes, set_node_online
from .clock import SimClock
from .faults import FaultPlan
from .http import build_app
from .state import BearerTokenRecord, Store

START_TIMEOUT_S = 10.0


class SimCredentials(BaseModel):
    """A ready-made world: one tenant with two projects, and a token per role."""

    tenant_id: str
    project_id: str
    other_project_id: str
    platform_admin: str
    tenant_admin: str
    project_admin: str
    service_account: str
    other_service_account: str

    def __repr__(self) -> str:  # tokens are secrets: keep them out of test output
        return f"SimCredentials(tenant_id={self.tenant_id!r}, project_id={self.project_id!r}, ...)"

    __str__ = __repr__


class PlatformSimulator:
    def __init__(
        self, time_scale: float = 1.0, faults: FaultPlan | None = None, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.clock = SimClock(time_scale)
        self.store = Store(self.clock, faults)
        self.admin_token = secrets.token_urlsafe(24)
        self._host, self._port = host, port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Self:
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # surfaced to start()'s caller below
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, name="platform-sim", daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S) or failure:
            raise RuntimeError(f"platform simulator did not start on {self._host}:{self._port}: {failure}")
        return self

    async def _serve(self) -> None:
        app = build_app(self.store, add_routes(self.store, self.admin_token))
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://{self._host}:{port}"
        agent = agent_package.build()
        with self.store.lock:
            self.store.agent_artifacts[agent.sha256] = agent.blob
            url = f"{self.url}{agent_package.ROUTE}/{agent.sha256}.tar.gz"
            self.store.agent_package = NodeAgentPackage(url=url, sha256=agent.sha256, version=agent.version)

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT_S)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # --- admin interface for tests -----------------------------------------------------------
    def offer_agent_package(self, package: NodeAgentPackage | None) -> None:
        """What the enrollment response offers from now on (None: no agent). At start: the simulator's
        own LAB STAND-IN agent (`agent_package.py`); a test offers another sha256 for a digest mismatch."""
        with self.store.lock:
            self.store.agent_package = package

    @property
    def agent_package(self) -> NodeAgentPackage | None:
        with self.store.lock:
            return self.store.agent_package

    def create_tenant(self, name: str = "tenant") -> str:
        return self.store.create_tenant(name)

    def create_project(self, tenant_id: str, name: str = "project", project_id: str | None = None) -> str:
        """`project_id`: a fixed id (the local stack's environment names its projects)."""
        return self.store.create_project(tenant_id, name, project_id).project_id

    def issue_token(
        self,
        role: Role,
        *,
        tenant_id: str | None = None,
        project_id: str | None = None,
        name: str | None = None,
        ttl_s: float | None = None,
    ) -> str:
        """A bearer token for a new principal of `role` (project roles need project_id).
        `ttl_s`: it expires after that many simulated seconds (see `advance`); None: never."""
        return self.store.create_principal(role, name or role.value, tenant_id, project_id, ttl_s)[1]

    def reissue_token(self, token: str, ttl_s: float | None = None) -> str:
        """Another token for the principal `token` belongs to (a rotation: both stay valid)."""
        return self.store.issue_bearer(self._record(token).principal_id, ttl_s)[1]

    def revoke_token(self, token: str) -> str:
        """Revoke a token (by value, as tests hold it); returns its token_id, which audit records name."""
        return self.store.revoke_bearer(self._record(token).token_id).token_id

    def token_id(self, token: str) -> str:
        return self._record(token).token_id

    def _record(self, token: str) -> BearerTokenRecord:
        record = self.store.bearer_record(token)
        if record is None:
            raise KeyError("this simulator never issued that token")  # never echo the token
        return record

    def bootstrap(self) -> SimCredentials:
        tenant = self.create_tenant("acme")
        project, other = self.create_project(tenant, "research"), self.create_project(tenant, "other")
        return SimCredentials(
            tenant_id=tenant,
            project_id=project,
            other_project_id=other,
            platform_admin=self.issue_token(Role.PLATFORM_ADMIN),
            tenant_admin=self.issue_token(Role.TENANT_ADMIN, tenant_id=tenant),
            project_admin=self.issue_token(Role.PROJECT_ADMIN, project_id=project),
            service_account=self.issue_token(Role.SERVICE_ACCOUNT, project_id=project),
            other_service_account=self.issue_token(Role.SERVICE_ACCOUNT, project_id=other),
        )

    def advance(self, sim_seconds: float) -> None:
        """Jump the simulated clock (expire tokens, finish operations) without waiting."""
        self.clock.advance(sim_seconds)
        engine.tick(self.store)

    def set_time_scale(self, time_scale: float) -> None:
        """Real seconds per simulated second from now on; the simulated time so far is kept. A test that moves
        the clock only by `advance` sets a large scale first, so the host's speed cannot move it between calls."""
        self.clock.set_time_scale(time_scale)

    def inject(self, plan: FaultPlan) -> None:
        self.store.faults.add(plan)

    def clear_faults(self) -> None:
        self.store.faults.clear()

    def enroll_caller(self, node_id: str) -> str | None:
        """The address the node's enrollment request came from (None: not enrolled)."""
        with self.store.lock:
            return dict(getattr(self.store, "enroll_callers", {})).get(node_id)

    def audit(self) -> list[AuditEvent]:
        with self.store.lock:
            return list(self.store.audit)

    def operations(self) -> list[Operation]:
        with self.store.lock:
            engine.tick(self.store)
            return list(self.store.operations.values())

    def set_node_online(self, node_id: str, online: bool) -> None:
        set_node_online(self.store, node_id, online)
