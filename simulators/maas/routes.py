"""The simulator's route table: MAAS handlers (name, path, URL params, anon or auth) and their
actions (name, HTTP method, op). Dispatch and the describe document are both generated from it,
so the describe document lists exactly what the simulator implements."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import errors

API_PREFIX = "/MAAS/api/2.0"
_TRUE = {"true", "1", "yes", "on", "t", "y"}
_FALSE = {"false", "0", "no", "off", "f", "n", ""}


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, list[str]]
    form: dict[str, list[bytes]]
    user: str | None
    base_url: str

    def has(self, name: str) -> bool:
        return name in self.form or name in self.query

    def get_list(self, name: str) -> list[str]:
        raw = self.form.get(name)
        if raw is not None:
            return [v.decode("utf-8", "replace") for v in raw]
        return list(self.query.get(name, []))

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self.get_list(name)
        return values[0] if values else default

    def get_bytes(self, name: str) -> bytes | None:
        raw = self.form.get(name)
        if raw:
            return raw[0]
        value = self.get(name)
        return value.encode() if value is not None else None

    def get_bool(self, name: str, default: bool = False) -> bool:
        """formencode's StringBool, as MAAS parses boolean params."""
        value = self.get(name)
        if value is None:
            return default
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise errors.field_error(name, f"Value should be 'true' or 'false', not {value!r}")

    def fields_with_prefix(self, prefix: str) -> dict[str, str]:
        names = set(self.form) | set(self.query)
        return {n[len(prefix):]: self.get(n) or "" for n in sorted(names) if n.startswith(prefix)}


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def ok_text(text: str = "OK") -> Response:
    return Response(200, text.encode(), "text/plain; charset=utf-8")


def deleted() -> Response:
    return Response(204, b"", "text/plain; charset=utf-8")


ActionFn = Callable[[Request], Any]


@dataclass(frozen=True)
class Action:
    name: str
    method: str
    op: str | None
    fn: ActionFn
    doc: str


@dataclass
class HandlerDef:
    name: str
    path: str
    params: tuple[str, ...]
    anon: bool
    doc: str
    actions: list[Action] = field(default_factory=list)

    def action(self, name: str, method: str, op: str | None = None) -> Callable[[ActionFn], ActionFn]:
        def register(fn: ActionFn) -> ActionFn:
            doc = (fn.__doc__ or name).strip()
            self.actions.append(Action(name, method, op, fn, doc))
            return fn

        return register

    def find(self, method: str, op: str | None) -> Action | None:
        return next((a for a in self.actions if a.method == method and a.op == op), None)


class RouteTable:
    def __init__(self) -> None:
        self.handlers: list[HandlerDef] = []
        self._patterns: list[tuple[re.Pattern[str], str]] = []

    def handler(self, name: str, path: str, *, anon: bool = False, doc: str = "") -> HandlerDef:
        """`path` is relative to /MAAS/api/2.0 with {param} placeholders, e.g. machines/{system_id}/."""
        full = f"{API_PREFIX}/{path}"
        params = tuple(re.findall(r"{(\w+)}", full))
        h = HandlerDef(name, full, params, anon, doc or name)
        self.handlers.append(h)
        if full not in {p for _, p in self._patterns}:
            regex = "^" + re.sub(r"\\{(\w+)\\}", r"(?P<\1>[^/]+)", re.escape(full)) + "$"
            self._patterns.append((re.compile(regex), full))
        return h

    def match(self, path: str) -> tuple[str, dict[str, str]] | None:
        for regex, full in self._patterns:
            mo = regex.match(path)
            if mo:
                return full, mo.groupdict()
        return None

    def resolve(self, path: str, authenticated: bool) -> tuple[HandlerDef | None, HandlerDef | None,
                                                                   dict[str, str]] | None:
        """(auth handler, anon handler, params) for a path, or None if no resource lives there."""
        found = self.match(path)
        if found is None:
            return None
        full, params = found
        auth = next((h for h in self.handlers if h.path == full and not h.anon), None)
        anon = next((h for h in self.handlers if h.path == full and h.anon), None)
        return auth, anon, params

    def describe(self, base_url: str) -> dict[str, Any]:
        """The /describe/ document: one resource per path, each with its anon and auth handler."""
        def render(h: HandlerDef | None) -> dict[str, Any] | None:
            if h is None:
                return None
            return {
                "name": h.name, "doc": h.doc, "path": h.path, "params": list(h.params),
                "uri": base_url + h.path,
                "actions": [{"name": a.name, "method": a.method, "op": a.op, "restful": a.op is None,
                             "doc": a.doc} for a in sorted(h.actions, key=lambda a: a.name)],
            }

        resources = []
        for path in dict.fromkeys(h.path for h in self.handlers):
            auth = next((h for h in self.handlers if h.path == path and not h.anon), None)
            anon = next((h for h in self.handlers if h.path == path and h.anon), None)
            first = auth or anon
            assert first is not None
            resources.append({"name": first.name, "anon": render(anon), "auth": render(auth)})
        return {"doc": "MAAS API", "hash": "maas-simulator", "resources": resources}
