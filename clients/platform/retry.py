"""Retry policy of the platform client (applies only to safe or idempotency-keyed requests)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RetryPolicy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: int = Field(default=4, ge=1, le=20, description="Total attempts, the first included.")
    initial_backoff_s: float = Field(default=0.2, ge=0)
    max_backoff_s: float = Field(default=5.0, ge=0)
    max_retry_after_s: float = Field(default=30.0, ge=0, description="Cap on honouring a server's Retry-After.")
