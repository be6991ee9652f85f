"""EventsHandler.query: a machine's event log, newest first (canonical/maas `api/events.py`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from . import errors
from .routes import Request, RouteTable

if TYPE_CHECKING:
    from .core import SimCore

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MAX_EVENT_LOG_COUNT = 1000


def register(routes: RouteTable, core: SimCore) -> None:
    store = core.store
    events = routes.handler("EventsHandler", "events/", doc="Retrieve filtered node events.")

    @events.action("query", "GET", "query")
    def query(req: Request) -> Any:
        """Events of machines selected by id, hostname or mac_address, at `level` or above, newest first."""
        level = (req.get("level") or "INFO").upper()
        if level not in LEVELS:
            raise errors.field_error("level", f"Select a valid choice. {level} is not one of the available choices.")
        limit_text = req.get("limit") or "100"
        if not limit_text.isdigit():
            raise errors.bad_request(f"Expected an integer for limit, got {limit_text!r}.")
        limit = max(1, int(limit_text))
        if limit > MAX_EVENT_LOG_COUNT:
            raise errors.bad_request(f"Requested number of events {limit} is greater than limit: {MAX_EVENT_LOG_COUNT}")
        ids, hostnames = set(req.get_list("id")), set(req.get_list("hostname"))
        macs = {m.lower() for m in req.get_list("mac_address")}
        floor = LEVELS.index(level)
        out: list[dict[str, Any]] = []
        with store.lock:
            for m in store.machines.values():
                if ids and m.system_id not in ids:
                    continue
                if hostnames and m.hostname not in hostnames:
                    continue
                if macs and not macs & {i.mac_address for i in m.interfaces}:
                    continue
                for e in m.events:
                    if LEVELS.index(e.level) < floor:
                        continue
                    out.append({
                        "username": m.owner or "", "node": m.system_id, "hostname": m.hostname, "id": e.id,
                        "level": e.level,
                        "created": datetime.fromtimestamp(e.ts, UTC).strftime("%a, %d %b. %Y %H:%M:%S"),
                        "type": e.status if e.type == "STATUS" else e.type.replace("_", " ").capitalize(),
                        "description": e.description,
                    })
        out.sort(key=lambda e: e["id"], reverse=True)
        out = out[:limit]
        return {"count": len(out), "events": out, "next_uri": f"{req.base_url}{req.path}?op=query&limit={limit}",
                "prev_uri": f"{req.base_url}{req.path}?op=query&limit={limit}"}
