"""UI routes of an app instance through the platform-owned gateway's route contract (seed 000 §4).

The environment's routes (`instance.ui_routes`) become `UiRouteCreate` bodies; `check` has already refused
shared cookies, a pure iframe and a link-out without a reason, and the contract has no field for either.
`converge_routes` removes routes no longer declared (or changed) and registers the missing ones; a route
the gateway rejects is reported like a failed operation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from clients.platform import PlatformApiError
from clients.platform import models as pm
from providers.wire import FramePolicy

from .failures import REFUSED, AppInstanceFailed, OpFailure, idempotency_key
from .spec import AppInstanceSpec, UiRouteSpec

if TYPE_CHECKING:  # the HTTP client loads when a call first makes one (clients/platform)
    from clients.platform import PlatformClient


def route_body(r: UiRouteSpec) -> pm.UiRouteCreate:
    """The gateway's contract has no cookie field and no pure iframe: `check` refused those before."""
    policy = pm.FramePolicy.LINK_OUT if r.frame_policy is FramePolicy.LINK_OUT else pm.FramePolicy.EMBED
    return pm.UiRouteCreate(name=r.name, component_key=r.component, port=r.port, websocket=r.websocket,
                            frame_policy=policy, link_out_reason=r.link_out_fallback.reason if r.link_out_fallback
                            else None)


def _route_differs(have: pm.UiRoute, want: pm.UiRouteCreate) -> bool:
    return any(getattr(have, f) != getattr(want, f) for f in pm.UiRouteCreate.model_fields)


def converge_routes(api: PlatformClient, spec: AppInstanceSpec, iid: str, where: str) -> None:
    """UI routes through the platform-owned gateway (seed 000 §4): a changed route is removed and registered
    again; a route the gateway rejects is reported like a failed operation, with its correlation id."""
    pid, want = spec.project_id, {r.name: route_body(r) for r in spec.instance.ui_routes}
    have = {r.name: r for r in api.list_ui_routes(pid, iid)}
    seen = idempotency_key(*sorted(r.route_id for r in have.values()))
    failures = []
    for name, route in sorted(have.items()):
        if name not in want or _route_differs(route, want[name]):
            api.remove_ui_route(pid, iid, route.route_id, idempotency_key=idempotency_key(iid, "route-remove",
                                                                                         route.route_id))
            have.pop(name)
    for name, body in sorted(want.items()):
        if name in have:
            continue
        key = idempotency_key(iid, "route", name, body.model_dump_json(), seen)
        try:
            api.register_ui_route(pid, iid, body, idempotency_key=key)
        except PlatformApiError as e:
            now = {r.name: r for r in api.list_ui_routes(pid, iid)} if e.status == 409 else {}
            if name in now and not _route_differs(now[name], body):
                continue  # another run registered the same route meanwhile: adopt it
            if e.status in REFUSED:
                raise
            failures.append(OpFailure(action=f"register UI route {name}", code=e.code, message=e.message,
                                      correlation_id=e.correlation_id))
    if failures:
        raise AppInstanceFailed(where, failures, "fix the route and run up again")

