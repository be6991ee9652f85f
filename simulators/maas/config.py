"""MAAS server settings (MaasHandler `get_config` / `set_config`): the items this simulator models, with
MAAS's defaults and validation. `hardware_sync_interval` is MAAS's one interval per region, in systemd time
span syntax ("15m"); a machine's `sync_interval` and the deploy-time timer follow it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from clients.maas import timespan_seconds  # MAAS's time-span vocabulary: one copy

from . import errors
from .routes import Request, Response, RouteTable, ok_text

if TYPE_CHECKING:
    from .core import SimCore
    from .state import Store

DEFAULTS: dict[str, str] = {"hardware_sync_interval": "15m"}  # the settings modelled; others are refused
def hw_sync_interval(store: Store) -> int:
    """Seconds between a hardware-sync machine's reports, from the region's setting."""
    return timespan_seconds(setting(store, "hardware_sync_interval")) or 900


def setting(store: Store, name: str) -> str:
    return store.config.get(name, DEFAULTS[name])


def register(routes: RouteTable, core: SimCore) -> None:
    store = core.store
    maas = routes.handler("MaasHandler", "maas/", doc="Manage the MAAS server.")

    def name_of(req: Request) -> str:
        name = req.get("name")
        if name not in DEFAULTS:
            raise errors.validation({"name": [f"{name} is not a valid config setting (valid: "
                                              f"{', '.join(sorted(DEFAULTS))})."]})
        return str(name)

    @maas.action("get_config", "GET", "get_config")
    def get_config(req: Request) -> Any:
        """Get a config value (JSON-encoded)."""
        name = name_of(req)
        with store.lock:
            return Response(200, json.dumps(setting(store, name)).encode())

    @maas.action("set_config", "POST", "set_config")
    def set_config(req: Request) -> Any:
        """Set a config value."""
        name, value = name_of(req), req.get("value")
        if value is None:
            raise errors.validation({"value": ["This field is required."]})
        if name == "hardware_sync_interval" and not timespan_seconds(str(value)):
            raise errors.validation({"hardware_sync_interval": [f"'{value}' is not a valid systemd time span "
                                                                "(e.g. 15m, 1h 30m)."]})
        with store.lock:
            store.config[name] = str(value)
        return ok_text()
