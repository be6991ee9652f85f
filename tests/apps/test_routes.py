"""App UI routes through the platform-owned gateway's route contract (seed 000 §4): registered, changed and
removed by the reconciler; a route the gateway rejects is reported with code and correlation id; shared
cookies, a pure iframe and a link-out without a reason are refused by `check`; the preview note lists
routes added and removed."""

from __future__ import annotations

from typing import Any

import pytest

from clients.platform import models as m
from preview_note.changes import Action
from preview_note.kinds import route_lines
from providers.apps.failures import AppInstanceFailed
from providers.apps.spec import AppInstanceSpec, rule_failures

from .conftest import Lab

CHAT = {"name": "chat", "component": "gateway", "port": 18789, "websocket": True}
ADMIN = {"name": "admin", "component": "gateway", "port": 18789, "frame_policy": "link_out",
         "link_out_fallback": {"reason": "the admin console sets frame-ancestors 'none'"}}


def claw(lab: Lab, routes: list[dict[str, Any]]) -> AppInstanceSpec:
    return lab.app_spec("openclaw", {"gateway": {"count": 1}}, name="openclaw", version="2026.1.5",
                        backend="allocation", ui_routes=routes)


def test_routes_are_registered_changed_and_removed(lab: Lab) -> None:
    out = lab.rec(claw(lab, [CHAT])).converge()
    assert set(out.ui_routes) == {"chat"} and out.ui_routes["chat"].startswith("https://chat--")
    (route,) = lab.api.list_ui_routes(lab.pid, out.instance_id)
    assert (route.port, route.websocket, route.frame_policy) == (18789, True, m.FramePolicy.EMBED)
    lab.rec(claw(lab, [CHAT])).converge(out.instance_id)
    assert lab.audit_actions().count("ui_route.register") == 1, "an unchanged route is left alone"

    again = lab.rec(claw(lab, [ADMIN])).converge(out.instance_id)
    assert set(again.ui_routes) == {"admin"}
    assert lab.audit_actions().count("ui_route.remove") == 1 and lab.audit_actions().count("ui_route.register") == 2
    (admin,) = lab.api.list_ui_routes(lab.pid, out.instance_id)
    assert admin.frame_policy is m.FramePolicy.LINK_OUT and "frame-ancestors" in (admin.link_out_reason or "")

    lab.rec(claw(lab, [ADMIN])).release(out.instance_id)
    assert lab.sim.store.routes == {}, "a decommissioned instance's routes are withdrawn"


def test_a_route_another_run_registered_meanwhile_is_adopted(lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs converge one instance's routes: the other registered `chat` after this run listed none. The
    gateway's 409 route_name_conflict is looked up again and, being the same route, adopted."""
    from clients.platform import PlatformClient
    from providers.apps.routes import route_body

    out = lab.rec(claw(lab, [])).converge()
    lab.api.register_ui_route(lab.pid, out.instance_id, route_body(claw(lab, [CHAT]).instance.ui_routes[0]),
                              idempotency_key="other-run-chat-route")
    real, blind = PlatformClient.list_ui_routes, [1]

    def stale(self: Any, *a: Any, **kw: Any) -> Any:
        if blind[0]:
            blind[0] -= 1
            return []
        return real(self, *a, **kw)

    monkeypatch.setattr(PlatformClient, "list_ui_routes", stale)
    again = lab.rec(claw(lab, [CHAT])).converge(out.instance_id)
    monkeypatch.undo()
    assert not blind[0] and set(again.ui_routes) == {"chat"}
    assert len(lab.api.list_ui_routes(lab.pid, out.instance_id)) == 1


def test_a_route_the_gateway_rejects_is_reported(lab: Lab) -> None:
    with pytest.raises(AppInstanceFailed) as failed:
        lab.rec(claw(lab, [{**CHAT, "port": 8080}])).converge()
    text = str(failed.value)
    assert "register UI route chat: route_rejected: openclaw gateway exposes no UI on port 8080" in text
    assert "correlation_id=req-" in text and "fix the route and run up again" in text
    assert lab.sim.store.routes == {}
    inst = next(i for i in lab.sim.store.instances.values() if i.name == "openclaw")
    out = lab.rec(claw(lab, [CHAT])).converge(inst.instance_id)
    assert set(out.ui_routes) == {"chat"}, "fixed: the next up registers it on the same instance"


@pytest.mark.parametrize(("route", "code"), [
    ({**CHAT, "cookies": "shared"}, "ROUTE001"),
    ({**CHAT, "frame_policy": "iframe"}, "ROUTE002"),
    ({**CHAT, "frame_policy": "link_out"}, "ROUTE003"),
    ({**CHAT, "component": "web"}, "ROUTE004"),
])
def test_check_refuses_routes_the_gateway_model_forbids(lab: Lab, route: dict[str, Any], code: str) -> None:
    messages = [msg for _, msg in rule_failures(claw(lab, [route]))]
    assert any(msg.startswith(code) for msg in messages), messages


class _Change:
    def __init__(self, action: Action, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
        self.action = action
        self._io = {"old": {"instance": {"ui_routes": old}}, "new": {"instance": {"ui_routes": new}}}

    def inputs(self, which: str) -> dict[str, Any]:
        return self._io[which]


def test_the_preview_note_shows_routes_added_and_removed() -> None:
    lines = route_lines(_Change(Action.UPDATE, [CHAT], [ADMIN]))  # type: ignore[arg-type]
    assert lines == ["UI route `admin` added (`gateway`:18789, link_out)", "UI route `chat` removed"]
    assert route_lines(_Change(Action.CREATE, [], [CHAT])) == [  # type: ignore[arg-type]
        "UI route `chat` added (`gateway`:18789, embed, WebSocket)"]
    changed = route_lines(_Change(Action.UPDATE, [CHAT], [{**CHAT, "port": 18790}]))  # type: ignore[arg-type]
    assert changed == [
        "UI route `chat` changed (`gateway`:18789, embed, WebSocket → `gateway`:18790, embed, WebSocket)"]
    assert route_lines(_Change(Action.DELETE, [CHAT], [CHAT])) == ["UI route `chat` removed"]  # type: ignore[arg-type]
