"""The client's one exception type: every failure carries status, code, message, correlation id."""

from __future__ import annotations

from typing import Any

from .models.codes import ErrorCode


class PlatformApiError(Exception):
    """An error from (or on the way to) the platform API.

    `status` is the HTTP status, or None when no response arrived (then `code` says why:
    `transport_error`, `wait_timeout`). `code` is the envelope's stable code.
    """

    def __init__(
        self,
        status: int | None,
        code: str,
        message: str,
        correlation_id: str | None,
        details: dict[str, Any] | None = None,
        operation_id: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        self.status = status
        self.retry_after_s = retry_after_s  # the server's Retry-After, when it sent one
        self.code = code
        self.message = message
        self.correlation_id = correlation_id
        self.details = details or {}
        self.operation_id = operation_id
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" [{self.operation_id}]" if self.operation_id else ""
        return f"{self.status or '-'} {self.code}{where}: {self.message} (correlation_id={self.correlation_id})"

    @property
    def retryable_status(self) -> bool:
        # No response at all (connection refused, reset, timeout) or a server-side/throttling status.
        if self.status is None:
            return self.code == ErrorCode.TRANSPORT_ERROR
        return self.status in (429, 500, 502, 503, 504)
