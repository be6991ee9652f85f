"""A python-libmaas session whose every request verifies MAAS's certificate with a named CA bundle
(or the system store, or not at all when TLS verification is off) and has a per-request timeout.

python-libmaas 0.6.8 builds its aiohttp connector from `verify_ssl` alone (the process-wide default
trust), once for the describe request and once per call in `CallAPI.dispatch`, a method its docstring
offers for overriding, and leaves aiohttp's 5-minute default timeout in place: a MAAS that accepts a
connection and never answers would hold a run for 5 minutes per request. A session from
`connect_verified` fetches the describe document itself and binds every action to `VerifiedCall`, whose
`dispatch` sends through a connector holding the SSL setting, with `REQUEST_TIMEOUT_S`; a timeout is
retried like any outage (clients/maas/retry.py). The library is not modified.
"""

from __future__ import annotations

import json
import ssl
from typing import Any
from urllib.parse import urlparse

import aiohttp
from maas.client.bones import ActionAPI, CallAPI, CallError, CallResult, HandlerAPI, SessionAPI
from maas.client.bones.helpers import RemoteError
from maas.client.utils import api_url
from maas.client.utils.creds import Credentials
from maas.client.utils.maas_async import asynchronous

__all__ = ["VerifiedCall", "connect_verified"]

_ACCEPT = {"Accept": "application/json"}
# One MAAS API request, connect to last byte (the client passes its RetryBudget.request_timeout_s).
# MAAS answers in well under a second; deploy and commission calls only start the work.
REQUEST_TIMEOUT_S = 60.0

SslSetting = ssl.SSLContext | bool  # a context, or False for "do not verify" (tls_verify: false)


def _context(call: CallAPI) -> SslSetting:
    return call.action.handler.session.ssl_context  # type: ignore[no-any-return]


def _timeout(call: CallAPI) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=call.action.handler.session.request_timeout)


class VerifiedCall(CallAPI):  # type: ignore[misc]  # python-libmaas is untyped
    """One MAAS request, sent with the session's SSL context (same results and errors as libmaas')."""

    @asynchronous  # type: ignore[misc]
    async def dispatch(self, uri: str, body: Any, headers: dict[str, str]) -> CallResult:
        method = self.action.method
        connector = aiohttp.TCPConnector(ssl=_context(self))
        async with aiohttp.ClientSession(connector=connector, timeout=_timeout(self)) as http:
            async with http.request(method, uri, data=body, headers={**_ACCEPT, **headers}) as resp:
                content = await resp.read()
                if resp.status // 100 != 2:
                    request = {"body": body, "headers": headers, "method": method, "uri": uri}
                    raise CallError(request, resp, content, self)
                is_json = (resp.content_type or "").endswith("/json")
                return CallResult(resp, content, json.loads(content.decode("utf-8")) if is_json else content)


async def _describe(url: str, context: SslSetting, timeout: float) -> Any:
    limit = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context), timeout=limit) as http:
        async with http.get(url + "describe/", headers=_ACCEPT) as resp:
            if resp.status != 200:
                raise RemoteError(f"{url} -> {resp.status} {resp.reason}")
            return await resp.json()


def _bind(action: ActionAPI) -> None:
    action.bind = lambda **params: VerifiedCall(params, action)


def connect_verified(
    url: str, apikey: str, context: SslSetting, timeout: float = REQUEST_TIMEOUT_S
) -> SessionAPI:
    """Like `SessionAPI.connect(url, apikey=...)`, every request sent with `context` (an SSL context, or
    False not to verify) and bounded by `timeout` seconds."""
    base = api_url(url)
    description = asynchronous(_describe)(base, context, timeout)
    session = SessionAPI(description, Credentials.parse(apikey))
    session.scheme, session.insecure = urlparse(base).scheme, context is False
    session.ssl_context = context
    session.request_timeout = timeout
    for handler in vars(session).values():
        if isinstance(handler, HandlerAPI):
            for _name, action in handler.actions:
                _bind(action)
    return session
