"""Authentication and authorization: the catalogue says which roles may call an endpoint;
this module adds the project and tenant boundaries. Every denial is an ApiError (envelope)."""

from __future__ import annotations

from clients.platform.catalogue import Endpoint
from clients.platform.models import ErrorCode as E
from clients.platform.models import Role

from .errors import ApiError
from .state import BearerTokenRecord, Principal, Store, TokenState

_REJECTED = {
    TokenState.EXPIRED: "the bearer token has expired; get a new one from your identity provider",
    TokenState.REVOKED: "the bearer token has been revoked; get a new one from your identity provider",
}


class TokenRejected(ApiError):
    """A token the platform issued but no longer accepts (expired, revoked): the 401 is audited,
    because its principal is known; an unknown token has no principal to name."""

    def __init__(self, state: TokenState, record: BearerTokenRecord) -> None:
        super().__init__(401, E.UNAUTHENTICATED, _REJECTED[state], {"reason": f"token_{state.value}"})
        self.state = state
        self.record = record


def authenticate(store: Store, endpoint: Endpoint, authorization: str | None) -> Principal | None:
    if not endpoint.roles:
        return None  # enrollment: the body's token is the credential
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, E.UNAUTHENTICATED, "send 'Authorization: Bearer <token>'")
    record = store.bearer_record(token.strip())
    state = store.token_state(record)
    if record is not None and state in _REJECTED:
        raise TokenRejected(state, record)
    if state is not TokenState.VALID or record is None:
        raise ApiError(401, E.UNAUTHENTICATED, "the bearer token is not valid")
    return store.principals[record.principal_id]


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
