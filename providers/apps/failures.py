"""What a failed platform call or operation looks like to the operator: the kind's code (AIN0xx, `AppFail`:
docs/app-instances.md lists them), the platform's code, message, correlation id and operation id; bounded
in the exception, in full on stderr. Also the idempotency keys every mutation carries."""

from __future__ import annotations

import hashlib
import sys
from enum import unique

from pydantic import BaseModel, ConfigDict

from environments.coded import CodedError, FailureCode

REFUSED = {401, 403}


@unique
class AppFail(FailureCode):
    """Runtime failures of an app instance (APP0xx are the environment's validation codes: not these)."""

    TOKEN_REFUSED = ("AIN001", "the platform refused the project's service-account token read from Vault",
                     "store there a token of a service account of the instance's project")
    PLATFORM = ("AIN002", "a platform call failed (unreachable, untrusted certificate, an error answer)",
                "the message has the platform's code and correlation id; fix the cause, then run up again")
    OPERATIONS_FAILED = ("AIN003", "platform operations of the instance failed (each listed with its code, "
                         "correlation id and operation id)",
                         "run up again: only the operations not yet done are retried")
    STILL_BUSY = ("AIN004", "the instance is still provisioning/upgrading/decommissioning after its deadline",
                  "run up again later (app_operation_timeout_s sets the deadline)")
    ENDPOINT_MISSING = ("AIN005", "an input names another instance's endpoint, which publishes none yet",
                        "run up again once that instance runs")
    VANISHED = ("AIN006", "the instance disappeared while it was converged", "run up again")
    VAULT = ("AIN007", "the service-account token could not be read from Vault",
             "the message names the address, path and cause")


def idempotency_key(*parts: str) -> str:
    """A stable key for one intended change: the same change retried (or resumed) gets the same key."""
    return "gpuaas-infra." + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:48]


class OpFailure(BaseModel):
    model_config = ConfigDict(frozen=True)

    action: str
    code: str
    message: str
    correlation_id: str | None
    operation_id: str | None = None

    def __str__(self) -> str:
        op = f", operation_id={self.operation_id}" if self.operation_id else ""
        return f"{self.action}: {self.code}: {self.message} (correlation_id={self.correlation_id}{op})"


SHOWN_FAILURES = 3  # failures listed in the exception; the rest go to stderr only
MESSAGE_CHARS = 240  # per failure message in the exception


class AppInstanceFailed(CodedError):
    """Operations failed. The exception (what Pulumi shows, and keeps in its logs) is bounded: the count,
    the first few failures, each cut short; every failure in full goes to stderr (the CLI shows it)."""

    def __init__(self, where: str, failures: list[OpFailure], hint: str,
                 code: AppFail = AppFail.OPERATIONS_FAILED) -> None:
        self.failures = failures
        shown = "; ".join(_short(str(f)) for f in failures[:SHOWN_FAILURES])
        more = len(failures) - SHOWN_FAILURES
        rest = f"; and {more} more (listed in full above)" if more > 0 else ""
        super().__init__(code, where, f"{len(failures)} operation(s) failed: {shown}{rest}", hint)
        if more > 0 or any(len(str(f)) > MESSAGE_CHARS for f in failures):
            for f in failures:
                print(f"[app-instance] {where}: {f}", file=sys.stderr, flush=True)


def _short(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS - 1] + "…"


