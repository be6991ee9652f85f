"""How long a MAAS call may retry through an outage, and the error when it could not: plain models,
importable without python-libmaas or aiohttp (the lifecycle and the provider modules need them at
import; the HTTP stack is loaded only when a client talks to MAAS: clients/maas/__init__.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .vocabulary import MaasError


class RetryBudget(BaseModel):
    """How long one call may keep retrying through an outage (documented in docs/machines.md)."""

    model_config = ConfigDict(frozen=True)

    attempts: int = Field(default=10, ge=1)
    total_s: float = Field(default=120.0, ge=0)
    initial_s: float = Field(default=0.5, ge=0)
    max_wait_s: float = Field(default=15.0, ge=0)
    # One attempt: a region that accepts and never answers is an outage, retried. A bulk read's timeout grows
    # with the answer expected (`timeout_for`): MAAS renders the whole list before its first byte.
    request_timeout_s: float = Field(default=60.0, gt=0)
    machine_render_s: float = Field(default=0.05, ge=0)
    """What a busy region takes to render one machine of a bulk machine read (~20 a second); a small row
    (an address, a machine's power parameters) is counted as 1/50 of that."""

    def timeout_for(self, machines: int = 0, rows: int = 0) -> float:
        """The timeout of one request whose answer holds `machines` machine objects and `rows` small rows."""
        return self.request_timeout_s + (machines + rows / 50) * self.machine_render_s

    def scaled(self, factor: float) -> RetryBudget:
        """Waits scaled (tests shrink MAAS-scale waits); the attempt count is kept, and so is the
        per-request timeout: how long an HTTP answer takes is real time, not simulated MAAS time (a
        1,024-machine bench on 2 cores saw answers slower than a scaled timeout and called it an outage)."""
        return self.model_copy(
            update={
                "total_s": self.total_s * factor,
                "initial_s": self.initial_s * factor,
                "max_wait_s": self.max_wait_s * factor,
            }
        )


DEFAULT_BUDGET = RetryBudget()


class MaasUnavailable(MaasError):
    """MAAS kept failing a call that is safe to repeat until the retry budget ran out."""
