"""The platform-owned UI gateway (seed 000 §4): routes of app instances behind the reverse proxy.

A route lives on its own subdomain (`<route>--<instance>.<project>.apps.gpuaas.internal`): subdomain
isolation keeps one app's origin away from the shell's and from other apps'. The gateway rejects a route
(422 `route_rejected`) on a component the app does not have or a port its adapter does not expose there:
rules of the app's adapter, which a JSON Schema cannot state. A link-out without a reason is refused
earlier, by the contract's schema (`UiRouteCreate`'s if/then: 422 `validation_failed`). A name taken on
the instance is a 409. A decommissioned instance's routes are withdrawn with it.
"""

from __future__ import annotations

from clients.platform.models import ErrorCode as E
from clients.platform.models import InstanceStatus, UiRoute, UiRouteCreate, UiRouteList

from . import adapters
from .context import Ctx, Handler, Result
from .errors import ApiError, not_found
from .state import Store, new_id


def _instance_routes(store: Store, instance_id: str) -> list[UiRoute]:
    return [r for r in store.routes.values() if r.instance_id == instance_id]


def _rejected(message: str, **details: object) -> ApiError:
    return ApiError(422, E.ROUTE_REJECTED, message, dict(details))


def _open_instance(ctx: Ctx) -> tuple[str, str]:  # (instance id, app type)
    inst = ctx.store.instances.get(ctx.params["instance_id"])
    if inst is None or inst.project_id != ctx.params["project_id"]:
        raise not_found("app_instance", ctx.params["instance_id"])
    if inst.status is InstanceStatus.DECOMMISSIONED:
        raise ApiError(409, E.INSTANCE_DECOMMISSIONED, "the instance is decommissioned",
                       {"instance_id": inst.instance_id})
    return inst.instance_id, inst.app_type.value


def list_routes(ctx: Ctx) -> Result:
    inst = ctx.store.instances.get(ctx.params["instance_id"])
    if inst is None or inst.project_id != ctx.params["project_id"]:
        raise not_found("app_instance", ctx.params["instance_id"])
    return Result(200, UiRouteList(items=_instance_routes(ctx.store, inst.instance_id)))


def register_route(ctx: Ctx) -> Result:
    req: UiRouteCreate = ctx.body
    iid, _ = _open_instance(ctx)
    inst = ctx.store.instances[iid]
    rule = adapters.adapter(inst.app_type).components.get(req.component_key)
    if rule is None:
        raise _rejected(f"{inst.app_type.value} has no component '{req.component_key}'",
                        component_key=req.component_key)
    if req.port not in rule.ports:
        raise _rejected(f"{inst.app_type.value} {req.component_key} exposes no UI on port {req.port}; "
                        f"use one of {sorted(rule.ports) or 'none'}", port=req.port, allowed=sorted(rule.ports))
    clash = next((r for r in _instance_routes(ctx.store, iid) if r.name == req.name), None)
    if clash:
        raise ApiError(409, E.ROUTE_NAME_CONFLICT, f"the instance already has a route '{req.name}'",
                       {"route_id": clash.route_id})
    route = UiRoute(
        route_id=new_id("route"), instance_id=iid, name=req.name, component_key=req.component_key, port=req.port,
        websocket=req.websocket, frame_policy=req.frame_policy, link_out_reason=req.link_out_reason,
        url=f"https://{req.name}--{iid.rsplit('-', 1)[-1][:8]}.{inst.project_id}.apps.gpuaas.internal/",
        created_at=ctx.store.clock.now(),
    )
    ctx.store.routes[route.route_id] = route
    return Result(201, route, target=route.route_id)


def remove_route(ctx: Ctx) -> Result:
    route = ctx.store.routes.get(ctx.params["route_id"])
    inst = ctx.store.instances.get(ctx.params["instance_id"])
    if route is None or inst is None or route.instance_id != inst.instance_id or inst.project_id != ctx.params[
            "project_id"]:
        raise not_found("ui_route", ctx.params["route_id"])
    del ctx.store.routes[route.route_id]
    return Result(204, None, target=route.route_id)


def withdraw(store: Store, instance_id: str) -> None:
    """A decommissioned instance's routes go with it."""
    for r in _instance_routes(store, instance_id):
        del store.routes[r.route_id]


HANDLERS: dict[str, Handler] = {
    "listUiRoutes": list_routes,
    "registerUiRoute": register_route,
    "removeUiRoute": remove_route,
}
