"""A python-libmaas session that verifies MAAS's certificate with a named CA bundle.

python-libmaas 0.6.8 builds its aiohttp connector from `verify_ssl` alone (the process-wide default
trust), once for the describe request and once per call in `CallAPI.dispatch`, a method its docstring
offers for overriding. A session from `connect_verified` fetches the describe document itself and
binds every action to `VerifiedCall`, whose `dispatch` sends through a connector holding the CA's
SSL context. The library is not modified and no other session changes.
"""

from __future__ import annotations

import json
import ssl
from typing import Any

import aiohttp
from maas.client.bones import ActionAPI, CallAPI, CallError, CallResult, HandlerAPI, SessionAPI
from maas.client.bones.helpers import RemoteError
from maas.client.utils import api_url
from maas.client.utils.creds import Credentials
from maas.client.utils.maas_async import asynchronous

__all__ = ["VerifiedCall", "connect_verified"]

_ACCEPT = {"Accept": "application/json"}


def _context(call: CallAPI) -> ssl.SSLContext:
    return call.action.handler.session.ssl_context  # type: ignore[no-any-return]


class VerifiedCall(CallAPI):  # type: ignore[misc]  # python-libmaas is untyped
    """One MAAS request, sent with the session's SSL context (same results and errors as libmaas')."""

    @asynchronous  # type: ignore[misc]
    async def dispatch(self, uri: str, body: Any, headers: dict[str, str]) -> CallResult:
        method = self.action.method
        connector = aiohttp.TCPConnector(ssl=_context(self))
        async with aiohttp.ClientSession(connector=connector) as http:
            async with http.request(method, uri, data=body, headers={**_ACCEPT, **headers}) as resp:
                content = await resp.read()
                if resp.status // 100 != 2:
                    request = {"body": body, "headers": headers, "method": method, "uri": uri}
                    raise CallError(request, resp, content, self)
                is_json = (resp.content_type or "").endswith("/json")
                return CallResult(resp, content, json.loads(content.decode("utf-8")) if is_json else content)


async def _describe(url: str, context: ssl.SSLContext) -> Any:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as http:
        async with http.get(url + "describe/", headers=_ACCEPT) as resp:
            if resp.status != 200:
                raise RemoteError(f"{url} -> {resp.status} {resp.reason}")
            return await resp.json()


def _bind(action: ActionAPI) -> None:
    action.bind = lambda **params: VerifiedCall(params, action)


def connect_verified(url: str, apikey: str, context: ssl.SSLContext) -> SessionAPI:
    """Like `SessionAPI.connect(url, apikey=...)`, every request verified with `context`."""
    base = api_url(url)
    description = asynchronous(_describe)(base, context)
    session = SessionAPI(description, Credentials.parse(apikey))
    session.scheme, session.insecure = "https", False
    session.ssl_context = context
    for handler in vars(session).values():
        if isinstance(handler, HandlerAPI):
            for _name, action in handler.actions:
                _bind(action)
    return session
