"""The request path of the platform client: one place for headers, idempotency keys, retries,
TLS, and translating every failure into `PlatformApiError`.

Retries (tenacity) happen only for safe requests (GET) or requests carrying an X-Idempotency-Key,
and every mutation carries one, reused across that call's retries.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, SecretStr, TypeAdapter, ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from ..tls import trust, untrusted, untrusted_hint
from . import models as m
from .catalogue import BY_OPERATION_ID, Endpoint, Method
from .errors import PlatformApiError
from .models.codes import ErrorCode
from .retry import RetryPolicy

T = TypeVar("T")


def new_idempotency_key() -> str:
    return f"idem-{uuid.uuid4().hex}"


class Transport:
    def __init__(
        self,
        base_url: str,
        token: str | SecretStr | None,
        *,
        timeout: float,
        retry: RetryPolicy,
        transport: httpx.BaseTransport | None,
        ca_bundle: str | None,
    ) -> None:
        secret = token.get_secret_value() if isinstance(token, SecretStr) else token
        self._auth = {"Authorization": f"Bearer {secret}"} if secret else {}
        self.retry = retry
        self.ca_bundle = ca_bundle
        self._http = httpx.Client(
            verify=trust(ca_bundle),
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            transport=transport,
            headers={"Accept": "application/json", "User-Agent": "gpuaas-infra/platform"},
        )

    @property
    def base_url(self) -> str:
        return str(self._http.base_url)

    def close(self) -> None:
        self._http.close()

    def call(
        self,
        operation_id: str,
        *,
        path: dict[str, str] | None = None,
        body: Any = None,
        query: dict[str, str | None] | None = None,
        idempotency_key: str | None = None,
    ) -> Any:
        ep = BY_OPERATION_ID[operation_id]
        url = ep.path.format(**(path or {}))
        headers = {m.REQUEST_ID_HEADER: f"req-{uuid.uuid4().hex[:20]}"}
        if ep.roles:
            headers.update(self._auth)
        if ep.mutation:
            headers[m.IDEMPOTENCY_HEADER] = idempotency_key or new_idempotency_key()
        payload = None
        if body is not None:
            adapter = TypeAdapter(ep.request) if not isinstance(body, BaseModel) else None
            payload = (
                body.model_dump_json(context={"reveal_secrets": True})
                if adapter is None
                else adapter.dump_json(body, context={"reveal_secrets": True}).decode()
            )
            headers["Content-Type"] = "application/json"
        params = {k: v for k, v in (query or {}).items() if v is not None}
        # Safe methods, or any request with an idempotency key (every mutation has one), may be retried.
        retry_ok = ep.method is Method.GET or m.IDEMPOTENCY_HEADER in headers
        send = lambda: self.send(ep, url, headers, payload, params)  # noqa: E731
        if not retry_ok or self.retry.attempts <= 1:
            return send()
        retrying = Retrying(
            stop=stop_after_attempt(self.retry.attempts),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, PlatformApiError) and e.retryable_status),
            reraise=True,
        )
        return retrying(send)

    def _wait(self, state: RetryCallState) -> float:
        """Exponential backoff with jitter, or the server's Retry-After when longer (capped)."""
        backoff = wait_exponential_jitter(
            multiplier=self.retry.initial_backoff_s, max=self.retry.max_backoff_s, jitter=self.retry.initial_backoff_s
        )(state)
        exc = state.outcome.exception() if state.outcome else None
        asked = exc.retry_after_s if isinstance(exc, PlatformApiError) and exc.retry_after_s else 0.0
        return max(backoff, min(asked, self.retry.max_retry_after_s))

    def send(self, ep: Endpoint, url: str, headers: dict[str, str], payload: str | None, params: dict[str, str]) -> Any:
        try:
            resp = self._http.request(ep.method.value, url, headers=headers, content=payload, params=params)
        except httpx.TransportError as exc:
            if untrusted(exc):
                raise PlatformApiError(
                    None,
                    ErrorCode.TLS_UNTRUSTED,
                    f"{ep.method.value} {self.base_url}{url}: certificate not trusted; fix: "
                    + untrusted_hint("platform", self.ca_bundle),
                    headers[m.REQUEST_ID_HEADER],
                ) from None
            raise PlatformApiError(
                None,
                ErrorCode.TRANSPORT_ERROR,
                f"{ep.method.value} {url}: {type(exc).__name__}: {exc}",
                headers[m.REQUEST_ID_HEADER],
            ) from exc
        corr = resp.headers.get(m.CORRELATION_HEADER, headers[m.REQUEST_ID_HEADER])
        if resp.status_code >= 400:
            raise _error_from(resp, corr)
        if ep.response is None:
            return None
        try:
            return ep.response.model_validate_json(resp.content)
        except ValidationError as exc:
            raise PlatformApiError(
                resp.status_code,
                ErrorCode.INVALID_RESPONSE,
                f"{ep.operation_id} returned a body that breaks the contract: "
                f"{exc.error_count()} error(s), first: {exc.errors()[0]['msg']}",
                corr,
            ) from exc


def poll(read: Callable[[], T], done: Callable[[T], bool], timeout_s: float, poll_s: float, what: str) -> T:
    """Read until `done`; the interval doubles from 50 ms up to `poll_s` (quick on simulators,
    gentle on a real platform); gives up with `wait_timeout` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    delay = min(0.05, poll_s)
    while True:
        item = read()
        if done(item):
            return item
        if time.monotonic() >= deadline:
            raise PlatformApiError(
                None,
                ErrorCode.WAIT_TIMEOUT,
                f"gave up after {timeout_s:.0f}s waiting for {what}",
                getattr(item, "correlation_id", None),
            )
        time.sleep(delay)
        delay = min(delay * 2, poll_s)


def _error_from(resp: httpx.Response, corr: str) -> PlatformApiError:
    try:
        env = m.ErrorEnvelope.model_validate_json(resp.content)
    except ValidationError:
        return PlatformApiError(
            resp.status_code,
            ErrorCode.INVALID_ERROR_RESPONSE,
            f"HTTP {resp.status_code} without the error envelope: {resp.text[:200]!r}",
            corr,
        )
    return PlatformApiError(
        resp.status_code, env.code, env.message, env.correlation_id, env.details, retry_after_s=_retry_after(resp)
    )


def _retry_after(resp: httpx.Response) -> float | None:
    """Retry-After in delta-seconds (the HTTP-date form is not used by the platform)."""
    value = resp.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None
