"""What a handler receives and returns; the HTTP layer does auth, idempotency and rendering."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from clients.platform.catalogue import Endpoint

from .state import Principal, Store


@dataclass
class Ctx:
    store: Store
    endpoint: Endpoint
    principal: Principal | None
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    correlation_id: str
    idempotency_key: str | None
    remote: str | None = None  # the caller's address (the simulator records who enrolled a node)


@dataclass
class Result:
    status: int
    body: BaseModel | None
    target: str | None = None  # the resource id the audit record names


Handler = Callable[[Ctx], Result]
