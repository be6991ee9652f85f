"""The simulator's one error type; the HTTP layer renders it as the canonical envelope."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


def not_found(kind: str, ident: str) -> ApiError:
    return ApiError(
        404,
        f"{kind}_not_found",
        f"no {kind.replace('_', ' ')} '{ident}' in your scope",
        {f"{kind}_id": ident},
    )
