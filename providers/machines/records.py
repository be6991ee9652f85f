"""One machine's lifecycle facts during a run, what the lifecycle runs with, and the typed result of
one step. Scheduling state (slots, polls, deadlines) is the scheduler's and lives there."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from .ports import Enrollment, MachineDetail, MachineOps, MachineView, PortError
from .spec import Deadlines, LifecyclePolicy, MachineSpec, TeardownMode
from .status import MachineOutcome, Stage

# Owner-data keys we keep on the MAAS machine (survive a killed provider; MAAS is the record).
OWNER_FINGERPRINT = "gpuaas_deploy_fingerprint"
OWNER_NODE_ID = "gpuaas_node_id"
OWNER_MANAGED = "gpuaas_managed_by"


class Goal(StrEnum):
    DEPLOYED = "deployed"
    RELEASED = "released"


class StepKind(StrEnum):
    COMPLETE = "complete"  # the step is done: enter `stage` now (with an `outcome`: the machine is finished)
    CONTINUE = "continue"  # MAAS or the platform is working: look again in `stage` after a back-off
    DELAYED = "delayed"  # no free batch_max_parallel slot: try again when one frees
    FAILED = "failed"  # the machine stops here; `outcome` and `reason` say why
    ERROR = "error"  # a call failed: re-read the machine and let the table decide again


@dataclass(frozen=True)
class Step:
    kind: StepKind
    stage: Stage | None = None
    outcome: MachineOutcome | None = None
    reason: str = ""

    @staticmethod
    def complete(stage: Stage) -> Step:
        return Step(StepKind.COMPLETE, stage)

    @staticmethod
    def finish(outcome: MachineOutcome, stage: Stage, reason: str = "") -> Step:
        return Step(StepKind.COMPLETE, stage, outcome, reason)

    @staticmethod
    def wait(stage: Stage) -> Step:
        return Step(StepKind.CONTINUE, stage)

    @staticmethod
    def delayed() -> Step:
        return Step(StepKind.DELAYED)

    @staticmethod
    def fail(reason: str, outcome: MachineOutcome = MachineOutcome.FAILED) -> Step:
        return Step(StepKind.FAILED, Stage.FAILED, outcome, reason)

    @staticmethod
    def error(reason: str) -> Step:
        return Step(StepKind.ERROR, reason=reason)


@dataclass
class LifecycleRecord:
    """What is known about one machine in one run (MAAS owner data is the durable record)."""

    spec: MachineSpec
    goal: Goal
    teardown: TeardownMode = TeardownMode.FULL_DECOMMISSION
    system_id: str | None = None
    node_id: str | None = None
    stage: Stage = Stage.RESOLVE
    outcome: MachineOutcome | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    deploy_attempts: int = 0
    commission_attempts: int = 0
    errors: int = 0
    last_error: PortError | None = None
    view: MachineView | None = None
    detail: MachineDetail | None = None  # read by the preflight, reused by storage and RoCE links
    owner_data_recorded: bool = False
    vanished: bool = False  # MAAS does not know (or no longer knows) this machine
    create_error: str = ""
    adopted: bool = False

    def ident(self) -> str:
        status = self.view.status.label if self.view else "unknown"
        return f"{self.spec.hostname} (system_id {self.system_id or '-'}, status {status})"


@dataclass
class Context:
    ops: MachineOps
    enrollment: Enrollment
    policy: LifecyclePolicy
    deadlines: Deadlines
    platform_url: str = ""
    bmc_credentials: Callable[[str], tuple[str, str]] | None = None
    """Vault ref -> (user, password) of a machine's BMC, read at create time (never stored)."""
    clock: Callable[[], float] = time.monotonic
    log: Callable[[str], None] = print
