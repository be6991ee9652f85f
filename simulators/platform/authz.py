"""Authentication and authorization: the catalogue says which roles may call an endpoint;
this module adds the project and tenant boundaries. Every denial is an ApiError (envelope)."""

from __future__ import annotations

from clients.platform.catalogue import Endpoint
from clients.platform.models import Role
from clients.platform.models.codes import ErrorCode as E

from .errors import ApiError
from .state import Principal, Store


def authenticate(store: Store, endpoint: Endpoint, authorization: str | None) -> Principal | None:
    if not endpoint.roles:
        return None  # enrollment: the body's token is the credential
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, E.UNAUTHENTICATED, "send 'Authorization: Bearer <token>'")
    principal = store.principal_for(token.strip())
    if principal is None:
        raise ApiError(401, E.UNAUTHENTICATED, "the bearer token is not valid")
    return principal


def authorize(store: Store, endpoint: Endpoint, principal: Principal | None, params: dict[str, str]) -> None:
    if principal is None:
        return
    if principal.role not in endpoint.roles:
        raise ApiError(
            403,
            E.ROLE_NOT_PERMITTED,
            f"role {principal.role.value} may not {endpoint.operation_id}",
            {"role": principal.role.value, "allowed_roles": sorted(r.value for r in endpoint.roles)},
        )
    if not endpoint.project_scoped:
        return
    project = store.projects.get(params["project_id"])
    if principal.role is Role.TENANT_ADMIN:
        if project is None or project.tenant_id != principal.tenant_id:
            raise ApiError(
                403,
                E.TENANT_BOUNDARY,
                "the project is not in your tenant",
                {"project_id": params["project_id"]},
            )
    elif project is None or project.project_id != principal.project_id:
        raise ApiError(
            403,
            E.PROJECT_BOUNDARY,
            "your credentials are scoped to another project",
            {"project_id": params["project_id"]},
        )
