"""A local HTTP server implementing the contract of GitLab's merge-request notes endpoints.

GET/POST /api/v4/projects/:id/merge_requests/:iid/notes and PUT .../notes/:note_id, with the
PRIVATE-TOKEN header, `page`/`per_page` pagination answered with X-Page/X-Per-Page/X-Next-Page/
X-Total headers, and GitLab's error bodies: {"message": "401 Unauthorized"}, "403 Forbidden",
"404 Not found" (project or MR unknown), "404 Note Not Found". Binds 127.0.0.1 on an ephemeral port.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_NOTES = re.compile(r"^/api/v4/projects/([^/]+)/merge_requests/(\d+)/notes(?:/(\d+))?$")


@dataclass
class GitLabState:
    """What the fake holds; tests read and seed it directly."""

    tokens: dict[str, str] = field(default_factory=dict)  # token -> "write" | "read"
    users: dict[str, dict[str, Any]] = field(default_factory=dict)  # token -> its user ({id, username})
    # (project id or path, mr iid) -> notes (dicts as GitLab returns them)
    notes: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path?query)
    fail_next: list[int] = field(default_factory=list)  # statuses to answer before serving normally
    next_id: int = 1000
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_note(
        self, project: str, iid: int, body: str, *, system: bool = False, author: dict[str, Any] | None = None
    ) -> int:
        with self.lock:
            self.next_id += 1
            self.notes.setdefault((project, iid), []).append(
                {
                    "id": self.next_id,
                    "body": body,
                    "system": system,
                    "author": author or {"id": 7, "username": "alice"},
                    "noteable_type": "MergeRequest",
                    "noteable_iid": iid,
                }
            )
            return self.next_id


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _reply(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        st = self.server.state
        url = urlsplit(self.path)
        with st.lock:
            st.requests.append((method, self.path))
            forced = st.fail_next.pop(0) if st.fail_next else None
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if forced is not None:
            return self._reply(forced, {"message": f"{forced} Service Unavailable"})
        role = st.tokens.get(self.headers.get("PRIVATE-TOKEN", ""))
        if role is None:
            return self._reply(401, {"message": "401 Unauthorized"})
        if url.path == "/api/v4/user" and method == "GET":
            return self._reply(200, st.users.get(self.headers.get("PRIVATE-TOKEN", ""), {"id": 1, "username": "?"}))
        m = _NOTES.match(url.path)
        if not m:
            return self._reply(404, {"error": "404 Not Found"})
        key = (unquote(m.group(1)), int(m.group(2)))
        if key not in st.notes:
            return self._reply(404, {"message": "404 Not found"})
        if method != "GET" and role != "write":
            return self._reply(403, {"message": "403 Forbidden"})
        if method == "GET" and m.group(3) is None:
            return self._list(key, parse_qs(url.query))
        body = self._body(raw)
        if method == "POST" and m.group(3) is None:
            if not body:
                return self._reply(400, {"message": {"body": ["can't be blank"]}})
            token = self.headers.get("PRIVATE-TOKEN", "")
            note_id = st.add_note(key[0], key[1], body, author=st.users.get(token, {"id": 1, "username": "?"}))
            return self._reply(201, self._find(key, note_id))
        if method == "PUT" and m.group(3) is not None:
            note = self._find(key, int(m.group(3)))
            if note is None:
                return self._reply(404, {"message": "404 Note Not Found"})
            if not body:
                return self._reply(400, {"message": {"body": ["can't be blank"]}})
            with st.lock:
                note["body"] = body
            return self._reply(200, note)
        return self._reply(405, {"message": "405 Method Not Allowed"})

    def _body(self, raw: bytes) -> str:
        if "json" in (self.headers.get("Content-Type") or ""):
            try:
                return str(json.loads(raw or b"{}").get("body") or "")
            except ValueError:
                return ""
        return (parse_qs(raw.decode()).get("body") or [""])[0]

    def _find(self, key: tuple[str, int], note_id: int) -> dict[str, Any] | None:
        return next((n for n in self.server.state.notes[key] if n["id"] == note_id), None)

    def _list(self, key: tuple[str, int], query: dict[str, list[str]]) -> None:
        per_page = min(max(int((query.get("per_page") or ["20"])[0]), 1), 100)
        page = max(int((query.get("page") or ["1"])[0]), 1)
        notes = list(self.server.state.notes[key])
        if (query.get("sort") or ["desc"])[0] == "desc":
            notes.reverse()
        chunk = notes[(page - 1) * per_page : page * per_page]
        more = page * per_page < len(notes)
        self._reply(
            200,
            chunk,
            {
                "X-Page": str(page),
                "X-Per-Page": str(per_page),
                "X-Total": str(len(notes)),
                "X-Next-Page": str(page + 1) if more else "",
            },
        )

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._route("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._route("PUT")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: GitLabState


class FakeGitLab:
    """Context manager: a running notes server; `.url` is the /api/v4 root."""

    def __init__(self) -> None:
        self.state = GitLabState()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = self.state
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-gitlab", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/api/v4"

    def __enter__(self) -> FakeGitLab:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
