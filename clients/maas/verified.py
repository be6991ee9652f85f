"""A python-libmaas session whose every request verifies MAAS's certificate with a named CA bundle
(or the system store, or not at all when TLS verification is off), has a per-request timeout and reuses
its connections.

python-libmaas 0.6.8 builds its aiohttp connector from `verify_ssl` alone (the process-wide default
trust), once for the describe request and once per call in `CallAPI.dispatch`, a method its docstring
offers for overriding, and leaves aiohttp's 5-minute default timeout in place: a MAAS that accepts a
connection and never answers would hold a run for 5 minutes per request. A new connection per call
also cost a TCP (and TLS) handshake per request: a third of the provider's CPU while onboarding a
pool (issue 18). A session from `connect_verified` fetches the describe document itself and binds
every action to `VerifiedCall`, whose `dispatch` sends through the calling thread's `httpx.Client`
of the session (a keep-alive connection, the SSL setting, `REQUEST_TIMEOUT_S`), and whose `prepare` writes
the forms the provider sends without the email package (clients/maas/form.py). Transport failures surface as
`TimeoutError` / `ConnectionError`, retried like any outage (clients/maas/retry.py). The library is
not modified.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple
from urllib.parse import urlencode, urlparse

import httpx
import orjson
from maas.client.bones import ActionAPI, CallAPI, CallError, CallResult, HandlerAPI, SessionAPI
from maas.client.bones.helpers import RemoteError
from maas.client.utils import api_url, sign
from maas.client.utils.creds import Credentials
from maas.client.utils.maas_async import asynchronous

from .form import encode_form, plain_form

__all__ = ["VerifiedCall", "connect_verified", "this_call"]

_ACCEPT = {"Accept": "application/json"}
# One MAAS API request, connect to last byte (the client passes its RetryBudget.request_timeout_s).
# MAAS answers in well under a second; deploy and commission calls only start the work.
REQUEST_TIMEOUT_S = 60.0
# Each thread has its own client keeping one connection open: one shared pool serialised every request
# on its lock and checked each pooled connection's socket per request (a pool drives up to
# batch_max_parallel machines from as many threads).
_LIMITS = httpx.Limits(max_connections=4, max_keepalive_connections=1)
# httpx writes a POST's headers and body separately: with Nagle's algorithm on, the body can wait for
# the server's delayed ACK of the headers (40 ms on Linux). aiohttp, which libmaas used, sets it too.
_NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]

SslSetting = ssl.SSLContext | bool  # a context, or False for "do not verify" (tls_verify: false)


class ThreadClients:
    """The session's HTTP clients, one per calling thread (same SSL setting and timeout)."""

    def __init__(self, context: SslSetting, timeout: float) -> None:
        self._context, self._timeout = context, timeout
        self._local = threading.local()

    def get(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            transport = httpx.HTTPTransport(verify=self._context, limits=_LIMITS, socket_options=_NODELAY)
            client = self._local.client = httpx.Client(transport=transport, timeout=self._timeout)
        return client


class Answer(NamedTuple):
    """What python-libmaas reads of a response (CallError: `status`, `reason`)."""

    status: int
    reason: str


_THIS_CALL = threading.local()  # the request the calling thread is making: its timeout, its decoder


@contextlib.contextmanager
def this_call(timeout: float | None = None, decode: Callable[[bytes], Any] | None = None) -> Iterator[None]:
    """Requests this thread sends inside the block wait up to `timeout` seconds (None: the session's timeout):
    a bulk read whose answer grows with what it asks for gets a timeout that grows with it; their JSON answers
    are decoded by `decode` (None: as any JSON): a bulk machine read decodes only what its caller reads
    (1,024 machines are 34 MB of JSON)."""
    before = getattr(_THIS_CALL, "seconds", None), getattr(_THIS_CALL, "decode", None)
    _THIS_CALL.seconds, _THIS_CALL.decode = timeout, decode
    try:
        yield
    finally:
        _THIS_CALL.seconds, _THIS_CALL.decode = before


def _send(http: httpx.Client, method: str, uri: str, body: Any = None, headers: dict[str, str] | None = None
          ) -> httpx.Response:
    """One request; a transport failure as the builtin error the retry policy knows (the httpx error
    kept as the cause: an untrusted certificate is found in the chain)."""
    seconds = getattr(_THIS_CALL, "seconds", None)
    try:
        return http.request(method, uri, content=body, headers={**_ACCEPT, **(headers or {})},
                            timeout=seconds if seconds else httpx.USE_CLIENT_DEFAULT)
    except httpx.TimeoutException as e:
        raise TimeoutError(f"{method} {uri}: no answer within {seconds or http.timeout.read} s") from e
    except httpx.TransportError as e:
        raise ConnectionError(f"{method} {uri}: {type(e).__name__}: {e}") from e


def decode_json(content: bytes) -> Any:
    """A JSON answer: orjson (a pool's bulk machine reads are most of what the provider decodes); the
    standard library for what orjson refuses (integers beyond 64 bits), with its error when invalid."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content.decode("utf-8"))


def _is_json(resp: httpx.Response) -> bool:
    return resp.headers.get("content-type", "").split(";")[0].strip().endswith("/json")


class VerifiedCall(CallAPI):  # type: ignore[misc]  # python-libmaas is untyped
    """One MAAS request, sent through the session's client (same results and errors as libmaas')."""

    def prepare(self, data: dict[str, Any]) -> tuple[str, Any, dict[str, str]]:
        """libmaas' `prepare` (offered for overriding "to marshal the request in a different way"): a PUT or
        POST form the provider sends is encoded by clients/maas/form.py, the same parts without the email
        package's cost; GET, DELETE and any other form go through the library."""
        if self.action.method not in ("POST", "PUT") or not plain_form(data):
            return super().prepare(data)  # type: ignore[no-any-return]
        body, headers = encode_form(data)
        op = self.action.op
        uri = urlparse(self.uri)._replace(query=urlencode([] if op is None else [("op", op)])).geturl()
        credentials = self.action.handler.session.credentials
        if credentials is not None:
            sign(uri, headers, credentials)
        return uri, body, headers

    @asynchronous  # type: ignore[misc]
    async def dispatch(self, uri: str, body: Any, headers: dict[str, str]) -> CallResult:
        # A coroutine, as libmaas' own: ActionAPI.__call__ runs it on the calling thread's loop. The
        # request itself is synchronous (each worker thread has its own loop; nothing else runs on it).
        method = self.action.method
        resp = _send(self.action.handler.session.http.get(), method, uri, body, headers)
        answer = Answer(resp.status_code, resp.reason_phrase)
        if resp.status_code // 100 != 2:
            request = {"body": body, "headers": headers, "method": method, "uri": uri}
            raise CallError(request, answer, resp.content, self)
        if not _is_json(resp):
            return CallResult(answer, resp.content, resp.content)
        return CallResult(answer, resp.content, (getattr(_THIS_CALL, "decode", None) or decode_json)(resp.content))


def _bind(action: ActionAPI) -> None:
    action.bind = lambda **params: VerifiedCall(params, action)


def connect_verified(
    url: str, apikey: str, context: SslSetting, timeout: float = REQUEST_TIMEOUT_S
) -> SessionAPI:
    """Like `SessionAPI.connect(url, apikey=...)`, every request sent with `context` (an SSL context, or
    False not to verify) and bounded by `timeout` seconds."""
    base = api_url(url)
    http = ThreadClients(context, timeout)
    resp = _send(http.get(), "GET", base + "describe/")
    if resp.status_code != 200 or not _is_json(resp):
        raise RemoteError(f"{base} -> {resp.status_code} {resp.reason_phrase}")
    session = SessionAPI(resp.json(), Credentials.parse(apikey))
    session.scheme, session.insecure = urlparse(base).scheme, context is False
    session.http = http  # cached with the session for the process (clients/maas/client.py)
    for handler in vars(session).values():
        if isinstance(handler, HandlerAPI):
            for _name, action in handler.actions:
                _bind(action)
    return session
