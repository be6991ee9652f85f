"""The simulator's one error type; the HTTP layer renders it as the canonical envelope."""

from __future__ import annotations

from typing import Any

from clients.platform.models import ErrorCode


class ApiError(Exception):
    """`code` is an ErrorCode on every contract route; plain strings only on the /_sim/ admin view."""

    def __init__(self, status: int, code: ErrorCode | str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


def not_found(kind: str, ident: str) -> ApiError:
    return ApiError(
        404,
        ErrorCode(f"{kind}_not_found"),  # ValueError for a kind without a catalogued code
        f"no {kind.replace('_', ' ')} '{ident}' in your scope",
        {f"{kind}_id": ident},
    )
