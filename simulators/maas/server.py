"""HTTP front end: stdlib ThreadingHTTPServer (one thread per connection, so python-libmaas
calls from ThreadPoolExecutor workers are served concurrently), request parsing (multipart with
base64 parts, as python-libmaas sends them), OAuth, API fault injection and dispatch."""

from __future__ import annotations

import json
import logging
import socket
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from . import admin, errors, metadata
from .forms import parse_form
from .routes import API_PREFIX, Request, Response

if TYPE_CHECKING:
    from .core import SimCore

log = logging.getLogger("simulators.maas")
DESCRIBE = f"{API_PREFIX}/describe/"
_REASONS = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


class SimHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], core: SimCore) -> None:
        self.core = core
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: SimHTTPServer
    protocol_version = "HTTP/1.1"
    # Keep-alive answers are written as headers, then body: with Nagle's algorithm the body waits for the
    # client's delayed ACK (40 ms a request on Linux). MAAS's own front end sends at once.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)

    do_GET = do_POST = do_PUT = do_DELETE = lambda self: self._dispatch()  # noqa: E731

    # --- plumbing ---------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _drop(self) -> None:
        """Close the connection without a response, as a crashed region or LB reset would."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _dispatch(self) -> None:
        core = self.server.core
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = url.path
        if path.startswith(admin.PREFIX):
            status, data = admin.handle(core, self.command, path, body)
            self._send_json(status, data)
            return
        if path.startswith(metadata.PREFIX):  # what nodes call (NSPAWN backend): reporting, commissioning runner
            status, data, content_type = metadata.handle(core, self.command, path, self.headers.get("Authorization"),
                                                         body, self.headers.get("Content-Type") or "")
            self._send(status, data, content_type)
            return
        host = self.headers.get("Host") or "{}:{}".format(*self.server.server_address[:2])
        base_url = f"http://{host}"
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            self._api(core, path, query, body, base_url)
        except errors.ApiError as exc:
            self._send(exc.status, exc.body, exc.content_type, exc.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception:  # a simulator bug must look like a MAAS 500, and be visible in the log
            log.error("simulator error on %s %s:\n%s", self.command, path, traceback.format_exc())
            self._send(500, b"Internal Server Error (simulator bug; see its log)", "text/plain; charset=utf-8")

    def _api(self, core: SimCore, path: str, query: dict[str, list[str]], body: bytes, base_url: str) -> None:
        if path in (DESCRIBE, DESCRIBE.rstrip("/")):
            if self._faulted(core, "DescribeHandler", "read"):
                return
            self._send_json(200, core.routes.describe(base_url))
            return
        resolved = core.routes.resolve(path, authenticated=True)
        if resolved is None:
            raise errors.ApiError(404, f"Unknown API endpoint: {path}.")
        auth_h, anon_h, params = resolved
        user = core.keys.authenticate(self.headers.get("Authorization"))
        # piston: an unauthenticated request goes to the anonymous handler when it accepts the
        # HTTP method, otherwise it is challenged (rc.FORBIDDEN, which is a 401).
        if user is not None:
            handler = auth_h or anon_h
        elif anon_h is not None and any(a.method == self.command for a in anon_h.actions):
            handler = anon_h
        else:
            handler = None
        if handler is None:
            raise errors.unauthorized("Forbidden")
        op = query["op"][0] if query.get("op") else None
        action = handler.find(self.command, op)
        if action is None:
            raise errors.unrecognised(self.command, op)
        if self._faulted(core, handler.name, action.name):
            return
        form = parse_form(self.headers.get("Content-Type") or "", body)
        req = Request(self.command, path, params, query, form, user, base_url)
        result = action.fn(req)
        lost = core.faults.take_error(handler.name, action.name, after_action=True)
        if lost is not None:  # MAAS did the work; the client never hears it
            self._send(lost, _REASONS[lost].encode(), "text/plain; charset=utf-8")
            return
        if isinstance(result, Response):
            self._send(result.status, result.body, result.content_type, result.headers)
        else:
            self._send_json(200, result)

    def _faulted(self, core: SimCore, handler: str, action: str) -> bool:
        """Count the request, then apply API faults; True if the request was answered/dropped."""
        core.stats.count_request(handler, action)
        latency = core.faults.latency_ms()
        if latency:
            time.sleep(latency / 1000)
        if core.faults.take_drop():
            self._drop()
            return True
        status = core.faults.take_error(handler, action)
        if status is not None:
            self._send(status, _REASONS[status].encode(), "text/plain; charset=utf-8")
            return True
        return False
