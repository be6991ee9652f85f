"""Fault injection: 5xx bursts, added latency, and operations made to fail.

Faults are matched against requests (method + path prefix) and operations (kind + component);
each rule has a remaining count so a test states exactly how many times it bites.
"""

from __future__ import annotations

import threading
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clients.platform.models import OperationKind


class FaultModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBurst(FaultModel):
    """The next `count` matching requests answer `status` (429 or 5xx) with the error envelope,
    and with `Retry-After` when `retry_after_s` is set."""

    status: int = Field(default=503, ge=429, le=599)
    retry_after_s: int | None = Field(default=None, ge=0, le=3600)
    count: int = Field(default=1, ge=1)
    path_prefix: str = "/api/"
    methods: list[str] = Field(default_factory=lambda: ["GET", "POST", "PUT", "DELETE"])
    # True: the request takes effect, then the response is lost (the case idempotency keys exist for).
    after_commit: bool = False

    @model_validator(mode="after")
    def _throttle_or_server_error(self) -> ErrorBurst:
        if self.status != 429 and self.status < 500:
            raise ValueError(f"status must be 429 or 5xx, got {self.status}")
        return self


class Latency(FaultModel):
    """Matching requests wait `seconds` (real time) before being handled."""

    seconds: float = Field(ge=0, le=30)
    count: int | None = Field(default=None, ge=1, description="None: every matching request")
    path_prefix: str = "/api/"


class OperationFailure(FaultModel):
    """The next `count` matching operations fail at step `at_step` with `code`."""

    kind: OperationKind | None = None
    component_key: str | None = None
    count: int = Field(default=1, ge=1)
    at_step: int = Field(default=0, ge=0)
    code: str = "adapter_step_failed"
    message: str = "injected failure"


class FaultPlan(FaultModel):
    error_bursts: list[ErrorBurst] = Field(default_factory=list)
    latency: list[Latency] = Field(default_factory=list)
    operation_failures: list[OperationFailure] = Field(default_factory=list)


class FaultPhase(StrEnum):
    BEFORE = "before"
    AFTER = "after"


class FaultState:
    """The live plan; counts are consumed as faults fire. Thread-safe."""

    def __init__(self, plan: FaultPlan | None = None) -> None:
        self._lock = threading.Lock()
        self.plan = plan.model_copy(deep=True) if plan else FaultPlan()
        self.fired = 0

    def add(self, plan: FaultPlan) -> None:
        with self._lock:
            self.plan.error_bursts.extend(plan.error_bursts)
            self.plan.latency.extend(plan.latency)
            self.plan.operation_failures.extend(plan.operation_failures)

    def clear(self) -> None:
        with self._lock:
            self.plan = FaultPlan()

    def latency_for(self, path: str) -> float:
        with self._lock:
            total = 0.0
            for rule in list(self.plan.latency):
                if path.startswith(rule.path_prefix):
                    total += rule.seconds
                    if rule.count is not None:
                        rule.count -= 1
                        if rule.count == 0:
                            self.plan.latency.remove(rule)
            return total

    def burst_for(self, method: str, path: str, phase: FaultPhase) -> ErrorBurst | None:
        with self._lock:
            for rule in self.plan.error_bursts:
                if (
                    rule.after_commit == (phase is FaultPhase.AFTER)
                    and method in rule.methods
                    and path.startswith(rule.path_prefix)
                ):
                    rule.count -= 1
                    if rule.count == 0:
                        self.plan.error_bursts.remove(rule)
                    self.fired += 1
                    return rule.model_copy()
            return None

    def operation_failure(self, kind: OperationKind, component_key: str | None) -> OperationFailure | None:
        with self._lock:
            for rule in self.plan.operation_failures:
                if rule.kind not in (None, kind):
                    continue
                if rule.component_key not in (None, component_key):
                    continue
                rule.count -= 1
                if rule.count == 0:
                    self.plan.operation_failures.remove(rule)
                self.fired += 1
                return rule.model_copy()
            return None
