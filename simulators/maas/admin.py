"""The admin endpoint (`/_sim/...`, which a real MAAS doesn't have and the describe document
doesn't list) and `AdminClient`, its Python client for tests, benchmarks and the demo.

    GET  /_sim/health                      {"ok": true}
    GET  /_sim/stats                       request counts, peak/current concurrency per site
    POST /_sim/stats/reset
    GET  /_sim/stats/busy                  per site: [[monotonic time, busy, commissioning], ...] at each change
    GET  /_sim/faults                      PUT it with a whole SimFaults
    PUT  /_sim/faults/global               MachineFaults for every machine
    PUT  /_sim/faults/api                  ApiFaults (latency, dropped connections, 5xx bursts)
    PUT  /_sim/faults/machines/{key}       MachineFaults for one machine (system_id or hostname)
    DELETE /_sim/faults/machines/{key}
    GET  /_sim/machines                    [{system_id, hostname, status, status_name, zone}]
    GET  /_sim/machines/{key}/events       event history
    GET  /_sim/machines/{key}/user_data    the deployed user_data (base64)
    GET  /_sim/state                       JSON dump (user_data only as digest)
    PUT  /_sim/time_scale                  {"time_scale": 0.01}: phases started from now on
"""

from __future__ import annotations

import base64
import json
import re
import time
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import ValidationError

from .enums import NodeStatus
from .faults import ApiFaults, MachineFaults, SimFaults

if TYPE_CHECKING:
    from .core import SimCore

PREFIX = "/_sim/"


def handle(core: SimCore, method: str, path: str, body: bytes) -> tuple[int, Any]:
    """Route one admin request; returns (status, JSON-able body)."""
    rel = path[len(PREFIX):].strip("/")
    try:
        payload = json.loads(body) if body.strip() else {}
    except json.JSONDecodeError as exc:
        return 400, {"error": f"body is not JSON: {exc}"}
    try:
        return _route(core, method, rel, payload)
    except ValidationError as exc:
        return 400, {"error": "invalid fault configuration", "details": json.loads(exc.json())}


def _route(core: SimCore, method: str, rel: str, payload: Any) -> tuple[int, Any]:
    if (method, rel) == ("GET", "health"):
        return 200, {"ok": True}
    if (method, rel) == ("GET", "stats"):
        return 200, core.stats.as_dict()
    if (method, rel) == ("GET", "stats/busy"):
        return 200, core.stats.busy_changes()
    if (method, rel) == ("POST", "stats/reset"):
        core.stats.reset()
        return 200, {"ok": True}
    if rel == "faults":
        if method == "PUT":
            core.faults.replace(SimFaults.model_validate(payload))
        return 200, core.faults.snapshot().model_dump()
    if (method, rel) == ("PUT", "faults/global"):
        core.faults.set_global(MachineFaults.model_validate(payload))
        return 200, core.faults.snapshot().model_dump()
    if (method, rel) == ("PUT", "faults/api"):
        core.faults.set_api(ApiFaults.model_validate(payload))
        return 200, core.faults.snapshot().model_dump()
    mo = re.fullmatch(r"faults/machines/([^/]+)", rel)
    if mo and method in ("PUT", "DELETE"):
        core.faults.set_machine(mo.group(1), MachineFaults.model_validate(payload) if method == "PUT" else None)
        return 200, core.faults.snapshot().model_dump()
    if (method, rel) == ("GET", "machines"):
        with core.store.lock:
            return 200, [{"system_id": m.system_id, "hostname": m.hostname, "status": int(m.status),
                          "status_name": m.status.label, "zone": m.zone, "sku": m.sku,
                          "error_description": m.error_description}
                         for m in core.store.machines.values()]
    mo = re.fullmatch(r"machines/([^/]+)/(events|user_data)", rel)
    if mo and method == "GET":
        key, what = mo.groups()
        m = core.find(key)
        if what == "events":
            events = core.events(m.system_id if m else key)
            return (404, {"error": f"no machine {key}"}) if events is None else (200, events)
        if m is None:
            return 404, {"error": f"no machine {key}"}
        with core.store.lock:
            data = m.user_data
        return 200, {"system_id": m.system_id,
                     "user_data": None if data is None else base64.b64encode(data).decode()}
    if (method, rel) == ("GET", "state"):
        return 200, core.dump()
    if rel == "time_scale":
        if method == "PUT":
            value = payload.get("time_scale") if isinstance(payload, dict) else None
            if not isinstance(value, int | float) or value < 0:
                return 400, {"error": "time_scale must be a number >= 0, e.g. {\"time_scale\": 0.01}"}
            core.lifecycle.time_scale = float(value)
        return 200, {"time_scale": core.lifecycle.time_scale}
    return 404, {"error": f"no admin endpoint {method} {PREFIX}{rel}"}


class AdminError(RuntimeError):
    pass


class AdminClient:
    """Client for the simulator's admin endpoint. `url` is the simulator's MAAS URL or its root."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        root = url.split("/MAAS", 1)[0].rstrip("/")
        self.base = root + PREFIX.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, rel: str, body: Any = None) -> Any:
        resp = httpx.request(method, f"{self.base}/{rel}", json=body, timeout=self.timeout)
        if resp.status_code >= 400:
            raise AdminError(f"{method} {rel}: HTTP {resp.status_code}: {resp.text}")
        return resp.json()

    def health(self) -> bool:
        return bool(self._call("GET", "health").get("ok"))

    def stats(self) -> dict[str, Any]:
        return dict(self._call("GET", "stats"))

    def request_counts(self) -> dict[str, dict[str, int]]:
        """{handler: {action: count}}, e.g. {"MachineHandler": {"deploy": 1, "read": 7}}."""
        return dict(self.stats()["requests"])

    def peak_concurrency(self) -> dict[str, dict[str, int]]:
        """{site: {"commissioning": n, "deploying": n, "busy": n}} peaks since start/reset."""
        return {site: v["peak"] for site, v in self.stats()["concurrency"].items()}

    def busy_seconds(self) -> dict[str, float]:
        """{site: machine-seconds spent commissioning, testing or deploying} since start/reset."""
        return {site: float(v["busy_seconds"]) for site, v in self.stats()["concurrency"].items()}

    def busy_changes(self) -> dict[str, list[tuple[float, int, int]]]:
        """{site: [(time.monotonic(), machines commissioning, testing or deploying, of them commissioning or
        testing), ...]} at each change since start/reset (the machine-wide monotonic clock)."""
        return {site: [(float(t), int(n), int(c)) for t, n, c in rows]
                for site, rows in self._call("GET", "stats/busy").items()}

    def reset_stats(self) -> None:
        self._call("POST", "stats/reset")

    def faults(self) -> SimFaults:
        return SimFaults.model_validate(self._call("GET", "faults"))

    def set_faults(self, faults: SimFaults) -> None:
        self._call("PUT", "faults", faults.model_dump())

    def set_global_faults(self, faults: MachineFaults) -> None:
        self._call("PUT", "faults/global", faults.model_dump())

    def set_api_faults(self, faults: ApiFaults) -> None:
        self._call("PUT", "faults/api", faults.model_dump())

    def set_machine_faults(self, key: str, faults: MachineFaults | None) -> None:
        if faults is None:
            self._call("DELETE", f"faults/machines/{key}")
        else:
            self._call("PUT", f"faults/machines/{key}", faults.model_dump())

    def machines(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "machines"))

    def events(self, key: str) -> list[dict[str, Any]]:
        return list(self._call("GET", f"machines/{key}/events"))

    def user_data(self, key: str) -> bytes | None:
        data = self._call("GET", f"machines/{key}/user_data")["user_data"]
        return None if data is None else base64.b64decode(data)

    def dump_state(self) -> dict[str, Any]:
        return dict(self._call("GET", "state"))

    def set_time_scale(self, time_scale: float) -> None:
        """Applies to phases that start after the call."""
        self._call("PUT", "time_scale", {"time_scale": time_scale})

    def status(self, key: str) -> NodeStatus:
        for m in self.machines():
            if key in (m["system_id"], m["hostname"]):
                return NodeStatus(m["status"])
        raise AdminError(f"no machine {key}")

    def wait_for_status(self, key: str, *statuses: NodeStatus, timeout: float = 10.0,
                        interval: float = 0.01) -> NodeStatus:
        """Poll until the machine is in one of `statuses`; raise with its events if it is not in time."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.status(key)
            if current in statuses:
                return current
            if time.monotonic() > deadline:
                history = "; ".join(e["description"] for e in self.events(key)[-5:])
                raise AdminError(f"{key} still {current.label} after {timeout}s (wanted "
                                 f"{', '.join(s.label for s in statuses)}); last events: {history}")
            time.sleep(interval)
