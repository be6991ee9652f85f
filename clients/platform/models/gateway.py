"""The platform-owned UI gateway's route contract (seed 000 §4).

An app instance's UI is reached through the platform's reverse proxy on its own subdomain: the platform
owns auth, session, cookies, CSP and WebSocket behaviour. The contract has no field for cookies or a
frame of the app's own origin, on purpose: an app asks for a route (which component, which port,
WebSocket or not, embedded in the shell or opened as a link-out with the reason it cannot be embedded).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field, model_validator

from .apps import COMPONENT_KEY_PATTERN
from .common import ID_PATTERN, NAME_PATTERN, Page, RequestModel, ResponseModel


class FramePolicy(StrEnum):
    EMBED = "embed"  # framed by the shell, served from the route's own isolated subdomain through the proxy
    LINK_OUT = "link_out"  # opened in its own tab through the same proxy (the fallback; needs a reason)


class UiRouteCreate(RequestModel):
    # The cross-field rule below, stated in the contract too: a JSON Schema can say it, so a request that
    # breaks it is schema-invalid (400/422 validation), not a semantic `route_rejected`.
    model_config = RequestModel.model_config | {
        "json_schema_extra": {
            "if": {"properties": {"frame_policy": {"const": "link_out"}}, "required": ["frame_policy"]},
            "then": {"properties": {"link_out_reason": {"type": "string", "minLength": 1}},
                     "required": ["link_out_reason"]},
        }
    }

    name: str = Field(pattern=NAME_PATTERN, description="Unique among the instance's routes.")
    component_key: str = Field(pattern=COMPONENT_KEY_PATTERN, description="The member component serving the UI.")
    port: int = Field(ge=1, le=65535, description="A port the app's adapter exposes on that component.")
    websocket: bool = False
    frame_policy: FramePolicy = FramePolicy.EMBED
    link_out_reason: str | None = Field(
        default=None, max_length=512, description="Required with link_out: why the app cannot be safely embedded."
    )

    @model_validator(mode="after")
    def _link_out_needs_a_reason(self) -> UiRouteCreate:
        if self.frame_policy is FramePolicy.LINK_OUT and not self.link_out_reason:
            raise ValueError("a link_out route must say why the app cannot be safely embedded (link_out_reason)")
        return self


class UiRoute(ResponseModel):
    route_id: str = Field(pattern=ID_PATTERN)
    instance_id: str = Field(pattern=ID_PATTERN)
    name: str
    component_key: str
    port: int
    websocket: bool
    frame_policy: FramePolicy
    link_out_reason: str | None
    url: str = Field(description="The route's own subdomain on the platform's gateway.")
    created_at: datetime


class UiRouteList(Page):
    items: list[UiRoute]
