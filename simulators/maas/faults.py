"""Fault injection: what goes wrong, for which machine, how many times.

Machine faults (`MachineFaults`) apply globally or per machine (keyed by system_id or hostname;
a per-machine entry replaces the global one for that machine). Counts mean "the next N attempts"
and are consumed as they fire, so "deploy fails with a datasource error twice, then succeeds"
is `deploy_failures: 2`. API faults (`ApiFaults`) act on the HTTP layer.
"""

from __future__ import annotations

import threading
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clients.maas import INSTALL_FAILURE_TYPE, INSTALLATION_FAILED

# A cloud-init datasource failure in real MAAS's words (see clients/maas/vocabulary.py for the
# canonical/maas source): the event cloud-init's failed init-network stage leaves, and the comment
# MAAS marks the node failed with.
DATASOURCE_EVENT_TYPE = INSTALL_FAILURE_TYPE
DATASOURCE_EVENT = "'cloudinit' searching for network datasources"
DATASOURCE_ERROR = INSTALLATION_FAILED


class MachineFaults(BaseModel):
    model_config = ConfigDict(extra="forbid")
    commissioning_failures: int = Field(default=0, ge=0, description="next N commissionings fail")
    testing_failures: int = Field(default=0, ge=0, description="next N commissioning test runs fail")
    deploy_failures: int = Field(default=0, ge=0, description="next N deploys fail with a datasource error")
    deploy_stalls: int = Field(default=0, ge=0, description=(
        "next N deploys stall in Deploying until aborted: a test knob for a deploy still going when the next call "
        "arrives, however loaded the host (not MAAS behaviour: MAAS fails a deploy left that long on its timeout)"))
    erase_failures: int = Field(default=0, ge=0, description="next N disk erasures fail")
    power_error: str | None = Field(default=None, description="power driver error text; every power action fails")


class ApiErrorBurst(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Literal[500, 502, 503] = 503
    count: int = Field(default=1, ge=0, description="the next N matching MAAS API requests fail")
    handler: str | None = Field(default=None, description="only requests to this handler, e.g. MachineHandler")
    op: str | None = Field(default=None, description="only this action name, e.g. deploy or read")
    after_action: bool = Field(
        default=False,
        description="the request is carried out, then its response is replaced by the error (a lost response)",
    )


class ApiFaults(BaseModel):
    model_config = ConfigDict(extra="forbid")
    latency_ms: int = Field(default=0, ge=0, description="added to every MAAS API request")
    drop_connections: int = Field(default=0, ge=0, description="next N MAAS API requests: close without reply")
    errors: list[ApiErrorBurst] = Field(default_factory=list)


class SimFaults(BaseModel):
    """The whole fault configuration; what `/_sim/faults` reads and writes."""

    model_config = ConfigDict(extra="forbid")
    machines: MachineFaults = Field(default_factory=lambda: MachineFaults(), description="global machine faults")
    per_machine: dict[str, MachineFaults] = Field(default_factory=dict)
    api: ApiFaults = Field(default_factory=lambda: ApiFaults())


MachineFaultKind = Literal["commissioning_failures", "testing_failures", "deploy_failures", "deploy_stalls",
                          "erase_failures"]


class FaultBook:
    """Thread-safe holder of the live fault configuration."""

    def __init__(self, faults: SimFaults | None = None) -> None:
        self._lock = threading.Lock()
        self._faults = faults.model_copy(deep=True) if faults else SimFaults()

    def snapshot(self) -> SimFaults:
        with self._lock:
            return self._faults.model_copy(deep=True)

    def replace(self, faults: SimFaults) -> None:
        with self._lock:
            self._faults = faults.model_copy(deep=True)

    def set_machine(self, key: str, faults: MachineFaults | None) -> None:
        with self._lock:
            if faults is None:
                self._faults.per_machine.pop(key, None)
            else:
                self._faults.per_machine[key] = faults.model_copy()

    def set_global(self, faults: MachineFaults) -> None:
        with self._lock:
            self._faults.machines = faults.model_copy()

    def set_api(self, faults: ApiFaults) -> None:
        with self._lock:
            self._faults.api = faults.model_copy(deep=True)

    def _entry(self, system_id: str, hostname: str | None) -> MachineFaults:
        pm = self._faults.per_machine
        if system_id in pm:
            return pm[system_id]
        if hostname and hostname in pm:
            return pm[hostname]
        return self._faults.machines

    def take(self, kind: MachineFaultKind, system_id: str, hostname: str | None) -> bool:
        """True if this attempt should fail; consumes one count."""
        with self._lock:
            entry = self._entry(system_id, hostname)
            left = getattr(entry, kind)
            if left <= 0:
                return False
            setattr(entry, kind, left - 1)
            return True

    def power_error(self, system_id: str, hostname: str | None) -> str | None:
        with self._lock:
            return self._entry(system_id, hostname).power_error

    # --- HTTP layer -------------------------------------------------------------------------
    def latency_ms(self) -> int:
        with self._lock:
            return self._faults.api.latency_ms

    def take_drop(self) -> bool:
        with self._lock:
            if self._faults.api.drop_connections > 0:
                self._faults.api.drop_connections -= 1
                return True
            return False

    def take_error(self, handler: str, action: str, *, after_action: bool = False) -> int | None:
        """The status to answer with, if a burst matches (`after_action`: bursts that fire once the
        request was carried out)."""
        with self._lock:
            for burst in self._faults.api.errors:
                if burst.count <= 0 or burst.after_action is not after_action:
                    continue
                if burst.handler not in (None, handler) or burst.op not in (None, action):
                    continue
                burst.count -= 1
                return burst.status
            return None
