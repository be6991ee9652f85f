"""Retrying MAAS through outages: 5xx, dropped connections and timeouts, with exponential backoff and
full jitter (tenacity), on every call that is safe to repeat (reads, idempotent updates, and the
anonymous describe request python-libmaas makes to connect), bounded by a `RetryBudget`.

The budget (default: 10 attempts within 120 s per call, waits from 0.5 s doubling up to 15 s, each
drawn at random below that bound) rides out a region restart or a load-balancer blip; an outage
that outlasts it ends with `MaasUnavailable`, naming the site, the endpoint, the status seen and what
to do. Calls that are not safe to repeat (create, commission, deploy, link_subnet, ...) are never
retried here: the lifecycle re-reads the machine and decides (a 5xx may still have done the work).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TypeVar

from maas.client.bones import CallError
from maas.client.bones.helpers import RemoteError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay
from tenacity.wait import wait_random_exponential

from ..tls import untrusted
from .budget import MaasUnavailable, RetryBudget

T = TypeVar("T")
_REMOTE_STATUS = re.compile(r"-> (\d{3})\b")


def status_of(exc: BaseException) -> int | None:
    """The HTTP status a python-libmaas error carries (CallError) or names (RemoteError, from connect)."""
    if isinstance(exc, CallError):
        return int(exc.status)
    if isinstance(exc, RemoteError):
        m = _REMOTE_STATUS.search(str(exc))
        return int(m.group(1)) if m else None
    return None


def transient(exc: BaseException) -> bool:
    """A 5xx, a dropped connection or a timeout: MAAS may answer the same request in a moment (an
    untrusted certificate will not be trusted in a moment)."""
    if untrusted(exc):
        return False
    if isinstance(exc, (TimeoutError, ConnectionError)):  # what clients/maas/verified.py raises
        return True
    status = status_of(exc)
    return status is not None and status >= 500


def seen(exc: BaseException) -> str:
    status = status_of(exc)
    if status is not None:
        return f"HTTP {status}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def call_with_retry(
    fn: Callable[[], T],
    *,
    budget: RetryBudget,
    site: str,
    endpoint: str,
    system_id: str | None = None,
    on_attempt: Callable[[], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`fn()` retried on transient failures within `budget`; anything else is raised as it is."""
    started = time.monotonic()
    retrying = Retrying(
        stop=stop_after_attempt(budget.attempts) | stop_after_delay(budget.total_s),
        wait=wait_random_exponential(multiplier=budget.initial_s, max=budget.max_wait_s),
        retry=retry_if_exception(transient),
        reraise=True,
        sleep=sleep,
    )

    def attempt() -> T:
        if on_attempt is not None:
            on_attempt()
        return fn()

    try:
        return retrying(attempt)
    except BaseException as e:
        if not transient(e):
            raise
        tries = int(retrying.statistics.get("attempt_number", 1))
        raise MaasUnavailable(
            f"MAAS of site {site or '?'} is unavailable: {endpoint} failed {tries} time(s) over "
            f"{time.monotonic() - started:.1f} s (last: {seen(e)}); the retry budget ({budget.attempts} attempts "
            f"within {budget.total_s:g} s) is spent. Check the MAAS region (regiond, its load balancer, "
            "PostgreSQL), then run `pulumi up` again: machines resume where they stopped.",
            status=status_of(e),
            system_id=system_id,
        ) from None
