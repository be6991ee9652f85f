"""Typed, synchronous client of the GPUaaS platform API (httpx + tenacity).

One method per endpoint of `clients.platform.catalogue`; paths, methods and response models come
from the catalogue so the client cannot disagree with the contract. Retries happen only for safe
requests (GET) or requests carrying an X-Idempotency-Key, and every mutation carries one: callers
may pass a stable key (e.g. derived from a resource URN and generation) or get a fresh one per call,
reused across that call's retries. Synchronous on purpose: Pulumi runs providers in worker threads
with no event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import httpx
from pydantic import SecretStr

from . import models as m
from .catalogue import BY_OPERATION_ID
from .errors import PlatformApiError
from .models.codes import ErrorCode
from .retry import RetryPolicy
from .transport import Transport, poll

CLIENT_METHODS: dict[str, str] = {}  # operationId -> method name; a test checks it covers the catalogue
_F = TypeVar("_F", bound=Callable[..., Any])


def endpoint(operation_id: str) -> Callable[[_F], _F]:
    if operation_id not in BY_OPERATION_ID:
        raise KeyError(f"{operation_id} is not in the catalogue")

    def mark(fn: _F) -> _F:
        CLIENT_METHODS[operation_id] = fn.__name__
        return fn

    return mark


class PlatformClient:
    def __init__(
        self,
        base_url: str,
        token: str | SecretStr | None = None,
        *,
        timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        ca_bundle: str | None = None,
    ) -> None:
        """`ca_bundle`: a PEM file for a platform behind a private CA (default: the system trust store)."""
        self._t = Transport(
            base_url, token, timeout=timeout, retry=retry or RetryPolicy(), transport=transport, ca_bundle=ca_bundle
        )
        self._call = self._t.call

    def _all(self, operation_id: str, **kw: Any) -> list[Any]:
        """Every item of a list endpoint, following `next_cursor` page by page."""
        query: dict[str, str | None] = dict(kw.pop("query", None) or {})
        items: list[Any] = []
        while True:
            page = self._call(operation_id, query=query, **kw)
            items.extend(page.items)
            if not page.next_cursor:
                return items
            query["cursor"] = page.next_cursor

    def __repr__(self) -> str:
        return f"PlatformClient({self._t.base_url})"

    @property
    def retry(self) -> RetryPolicy:
        return self._t.retry

    def close(self) -> None:
        self._t.close()

    def __enter__(self) -> PlatformClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- admin: MAAS sites ---------------------------------------------------------------------
    @endpoint("listMaasSites")
    def list_sites(self, name: str | None = None) -> list[m.MaasSite]:
        return self._all("listMaasSites", query={"name": name})

    @endpoint("createMaasSite")
    def create_site(self, spec: m.MaasSiteCreate, *, idempotency_key: str | None = None) -> m.MaasSite:
        return self._call("createMaasSite", body=spec, idempotency_key=idempotency_key)

    @endpoint("getMaasSite")
    def get_site(self, site_id: str) -> m.MaasSite:
        return self._call("getMaasSite", path={"site_id": site_id})

    @endpoint("updateMaasSite")
    def update_site(self, site_id: str, spec: m.MaasSiteUpdate, *, idempotency_key: str | None = None) -> m.MaasSite:
        return self._call("updateMaasSite", path={"site_id": site_id}, body=spec, idempotency_key=idempotency_key)

    @endpoint("deleteMaasSite")
    def delete_site(self, site_id: str, *, idempotency_key: str | None = None) -> None:
        self._call("deleteMaasSite", path={"site_id": site_id}, idempotency_key=idempotency_key)

    def find_site(self, name: str) -> m.MaasSite | None:
        """The site with this name, or None (adoption: look before creating)."""
        return next(iter(self.list_sites(name=name)), None)

    # --- admin: site profiles ------------------------------------------------------------------
    @endpoint("listSiteProfiles")
    def list_profiles(self, site_id: str, name: str | None = None) -> list[m.SiteProfile]:
        return self._all("listSiteProfiles", path={"site_id": site_id}, query={"name": name})

    @endpoint("createSiteProfile")
    def create_profile(
        self, site_id: str, spec: m.SiteProfileCreate, *, idempotency_key: str | None = None
    ) -> m.SiteProfile:
        return self._call("createSiteProfile", path={"site_id": site_id}, body=spec, idempotency_key=idempotency_key)

    @endpoint("getSiteProfile")
    def get_profile(self, site_id: str, profile_id: str) -> m.SiteProfile:
        return self._call("getSiteProfile", path={"site_id": site_id, "profile_id": profile_id})

    @endpoint("updateSiteProfile")
    def update_profile(
        self,
        site_id: str,
        profile_id: str,
        policy: m.SiteProfilePolicy,
        *,
        idempotency_key: str | None = None,
    ) -> m.SiteProfile:
        return self._call(
            "updateSiteProfile",
            path={"site_id": site_id, "profile_id": profile_id},
            body=m.SiteProfileUpdate(policy=policy),
            idempotency_key=idempotency_key,
        )

    @endpoint("deleteSiteProfile")
    def delete_profile(self, site_id: str, profile_id: str, *, idempotency_key: str | None = None) -> None:
        self._call(
            "deleteSiteProfile",
            path={"site_id": site_id, "profile_id": profile_id},
            idempotency_key=idempotency_key,
        )

    # --- node bootstrap ------------------------------------------------------------------------
    @endpoint("mintEnrollmentToken")
    def mint_enrollment_token(
        self, site_id: str, req: m.EnrollmentTokenRequest, *, idempotency_key: str | None = None
    ) -> m.EnrollmentTokenGrant:
        return self._call("mintEnrollmentToken", path={"site_id": site_id}, body=req, idempotency_key=idempotency_key)

    @endpoint("listNodes")
    def list_nodes(
        self,
        *,
        site_id: str | None = None,
        hostname: str | None = None,
        system_id: str | None = None,
        status: m.NodeStatus | None = None,
    ) -> list[m.Node]:
        query = {
            "site_id": site_id,
            "hostname": hostname,
            "system_id": system_id,
            "status": status.value if status else None,
        }
        return self._all("listNodes", query=query)

    @endpoint("getNode")
    def get_node(self, node_id: str) -> m.Node:
        return self._call("getNode", path={"node_id": node_id})

    @endpoint("transitionNode")
    def transition_node(
        self,
        node_id: str,
        action: m.NodeAction,
        reason: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> m.Node:
        return self._call(
            "transitionNode",
            path={"node_id": node_id},
            body=m.NodeTransitionRequest(action=action, reason=reason),
            idempotency_key=idempotency_key,
        )

    @endpoint("removeNode")
    def remove_node(self, node_id: str, *, idempotency_key: str | None = None) -> m.Node:
        return self._call("removeNode", path={"node_id": node_id}, idempotency_key=idempotency_key)

    @endpoint("enrollNode")
    def enroll(self, req: m.EnrollmentRequest, *, idempotency_key: str | None = None) -> m.EnrollmentResult:
        return self._call("enrollNode", body=req, idempotency_key=idempotency_key)

    @endpoint("reportNodeBootstrap")
    def report_bootstrap(
        self, req: m.BootstrapReportRequest, *, idempotency_key: str | None = None
    ) -> m.BootstrapReportAck:
        return self._call("reportNodeBootstrap", body=req, idempotency_key=idempotency_key)

    @endpoint("agentHeartbeat")
    def agent_heartbeat(
        self, req: m.AgentHeartbeatRequest, *, idempotency_key: str | None = None
    ) -> m.AgentHeartbeatAck:
        return self._call("agentHeartbeat", body=req, idempotency_key=idempotency_key)

    def wait_for_node(
        self,
        node_id: str,
        statuses: Iterable[m.NodeStatus] = (m.NodeStatus.ACTIVE,),
        *,
        timeout_s: float = 900.0,
        poll_s: float = 2.0,
    ) -> m.Node:
        wanted = frozenset(statuses)
        return poll(
            lambda: self.get_node(node_id),
            lambda n: n.status in wanted,
            timeout_s,
            poll_s,
            f"node {node_id} to reach {sorted(s.value for s in wanted)}",
        )

    # --- projects: app instances -----------------------------------------------------------------
    @endpoint("listAppInstances")
    def list_instances(self, project_id: str, name: str | None = None) -> list[m.AppInstance]:
        return self._all("listAppInstances", path={"project_id": project_id}, query={"name": name})

    @endpoint("createAppInstance")
    def create_instance(
        self, project_id: str, spec: m.AppInstanceCreate, *, idempotency_key: str | None = None
    ) -> m.Operation:
        return self._call(
            "createAppInstance", path={"project_id": project_id}, body=spec, idempotency_key=idempotency_key
        )

    @endpoint("getAppInstance")
    def get_instance(self, project_id: str, instance_id: str) -> m.AppInstance:
        return self._call("getAppInstance", path={"project_id": project_id, "instance_id": instance_id})

    @endpoint("upgradeAppInstance")
    def upgrade_instance(
        self,
        project_id: str,
        instance_id: str,
        spec: m.AppInstanceUpgrade,
        *,
        idempotency_key: str | None = None,
    ) -> m.Operation:
        return self._call(
            "upgradeAppInstance",
            path={"project_id": project_id, "instance_id": instance_id},
            body=spec,
            idempotency_key=idempotency_key,
        )

    @endpoint("decommissionAppInstance")
    def decommission_instance(
        self,
        project_id: str,
        instance_id: str,
        reason: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> m.Operation:
        return self._call(
            "decommissionAppInstance",
            path={"project_id": project_id, "instance_id": instance_id},
            body=m.AppInstanceDecommission(reason=reason),
            idempotency_key=idempotency_key,
        )

    @endpoint("listUiRoutes")
    def list_ui_routes(self, project_id: str, instance_id: str) -> list[m.UiRoute]:
        return self._all("listUiRoutes", path={"project_id": project_id, "instance_id": instance_id})

    @endpoint("registerUiRoute")
    def register_ui_route(
        self, project_id: str, instance_id: str, route: m.UiRouteCreate, *, idempotency_key: str | None = None
    ) -> m.UiRoute:
        return self._call(
            "registerUiRoute",
            path={"project_id": project_id, "instance_id": instance_id},
            body=route,
            idempotency_key=idempotency_key,
        )

    @endpoint("removeUiRoute")
    def remove_ui_route(
        self, project_id: str, instance_id: str, route_id: str, *, idempotency_key: str | None = None
    ) -> None:
        self._call(
            "removeUiRoute",
            path={"project_id": project_id, "instance_id": instance_id, "route_id": route_id},
            idempotency_key=idempotency_key,
        )

    @endpoint("listMembers")
    def list_members(self, project_id: str, instance_id: str) -> list[m.Member]:
        return self._all("listMembers", path={"project_id": project_id, "instance_id": instance_id})

    @endpoint("getMember")
    def get_member(self, project_id: str, instance_id: str, member_id: str) -> m.Member:
        return self._call(
            "getMember", path={"project_id": project_id, "instance_id": instance_id, "member_id": member_id}
        )

    @endpoint("requestMemberOperation")
    def request_member_operation(
        self,
        project_id: str,
        instance_id: str,
        req: m.AddMember | m.DrainMember | m.RemoveMember | m.ReplaceMember,
        *,
        idempotency_key: str | None = None,
    ) -> m.Operation:
        return self._call(
            "requestMemberOperation",
            path={"project_id": project_id, "instance_id": instance_id},
            body=req,
            idempotency_key=idempotency_key,
        )

    def add_member(
        self,
        project_id: str,
        instance_id: str,
        component_key: str,
        node_id: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> m.Operation:
        return self.request_member_operation(
            project_id,
            instance_id,
            m.AddMember(component_key=component_key, node_id=node_id),
            idempotency_key=idempotency_key,
        )

    def drain_member(
        self, project_id: str, instance_id: str, member_id: str, *, idempotency_key: str | None = None
    ) -> m.Operation:
        return self.request_member_operation(
            project_id, instance_id, m.DrainMember(member_id=member_id), idempotency_key=idempotency_key
        )

    def remove_member(
        self, project_id: str, instance_id: str, member_id: str, *, idempotency_key: str | None = None
    ) -> m.Operation:
        return self.request_member_operation(
            project_id, instance_id, m.RemoveMember(member_id=member_id), idempotency_key=idempotency_key
        )

    def replace_member(
        self,
        project_id: str,
        instance_id: str,
        member_id: str,
        node_id: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> m.Operation:
        return self.request_member_operation(
            project_id,
            instance_id,
            m.ReplaceMember(member_id=member_id, node_id=node_id),
            idempotency_key=idempotency_key,
        )

    @endpoint("listInstanceOperations")
    def list_operations(self, project_id: str, instance_id: str) -> list[m.Operation]:
        return self._all("listInstanceOperations", path={"project_id": project_id, "instance_id": instance_id})

    @endpoint("getOperation")
    def get_operation(self, project_id: str, operation_id: str) -> m.Operation:
        return self._call("getOperation", path={"project_id": project_id, "operation_id": operation_id})

    def wait_for_operation(
        self,
        project_id: str,
        operation_id: str,
        *,
        timeout_s: float = 900.0,
        poll_s: float = 1.0,
        raise_on_failure: bool = True,
    ) -> m.Operation:
        """Poll until the operation is terminal; a failed one raises (code = the operation's error code)."""
        op = poll(
            lambda: self.get_operation(project_id, operation_id),
            lambda o: o.status.terminal,
            timeout_s,
            poll_s,
            f"operation {operation_id} to finish",
        )
        if raise_on_failure and op.status is m.OperationStatus.FAILED:
            err = op.error or m.OperationError(code=ErrorCode.OPERATION_FAILED, message="no error detail")
            raise PlatformApiError(None, err.code, err.message, op.correlation_id, operation_id=op.operation_id)
        return op

    @endpoint("listAuditEvents")
    def list_audit_events(self, project_id: str) -> list[m.AuditEvent]:
        return self._all("listAuditEvents", path={"project_id": project_id})
