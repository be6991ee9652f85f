"""One machine's lifecycle facts during a run, what the lifecycle runs with, and the typed result of
one step. Scheduling state (slots, polls, deadlines) is the scheduler's and lives there."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum, unique
from typing import Protocol

from clients.maas import MachineDetail, MachineView, PortError
from environments.coded import line

from .lease import SlotLease
from .ports import Enrollment, MachineOps
from .spec import BundlePin, Deadlines, LifecyclePolicy, MachineSpec, TeardownMode
from .status import MachineOutcome, Stage

# Owner-data keys we keep on the MAAS machine (survive a killed provider; MAAS is the record).
OWNER_FINGERPRINT = "gpuaas_deploy_fingerprint"
OWNER_CHECKS = "gpuaas_checks_fingerprint"  # plan.checks_fingerprint of the deploy (SKU, profile, boot NIC)
# The resource that manages the machine ("<stack>/<resource name>"): written at deploy and when a resource
# adopts a deployed machine, so the resource a machine moved away from (a renamed pool, a machine moved into
# a pool) never releases it at its delete.
OWNER_RESOURCE = "gpuaas_resource"
OWNER_NODE_ID = "gpuaas_node_id"
OWNER_MANAGED = "gpuaas_managed_by"
# The deploy retry budget spent so far, and what it belongs to ("<deploy fingerprint>/<retry_generation>"):
# a machine that always fails is not retried forever, run after run. MAAS keeps owner data while the
# machine is Deploying / Deployed / Failed deployment, and clears it on release.
OWNER_ATTEMPTS = "gpuaas_deploy_attempts"
OWNER_ATTEMPTS_FOR = "gpuaas_deploy_attempts_for"


class Goal(StrEnum):
    DEPLOYED = "deployed"
    RELEASED = "released"


@unique
class FailCode(StrEnum):
    """Stable codes of runtime failures (the reason starts with one; docs/machines.md lists them)."""

    CREATE = "MCH001"  # MAAS refused the create, or kept failing it
    BMC_CREDENTIALS = "MCH002"  # the BMC credentials' Vault ref could not be read
    COMMISSIONING = "MCH003"  # commissioning or its tests failed again
    UNCLAIMED_NEW = "MCH004"  # a New machine under another name; auto_claim_single_new_machine is off
    PXE_PREFLIGHT = "MCH005"  # boot interface / PXE MAC mismatch
    BOOT_DISK = "MCH006"  # no block device matches the SKU's boot disk hint
    ROCE_INTERFACE = "MCH007"  # a RoCE interface is missing on the machine
    DEPLOY = "MCH008"  # deployment failed (not a datasource failure, or retries exhausted)
    ERASE = "MCH009"  # disk erase failed and release_fallback_no_erase is off
    POWER_OFF = "MCH010"  # MAAS refused the power off
    NODE_STATE = "MCH011"  # the platform node is quarantined/retired/deleted, not active
    NEEDS_OPERATOR = "MCH012"  # a MAAS status no stage handles (Broken, rescue, ...)
    VANISHED = "MCH013"  # the machine disappeared from MAAS while onboarding
    DEADLINE = "MCH014"  # a waiting stage passed its deadline
    MAAS_ERROR = "MCH015"  # a 4xx from MAAS or the platform, or too many failed calls
    INTERNAL = "MCH016"  # a bug: the machine failed, the others went on
    POWER_NOT_APPLIED = "MCH017"  # MAAS did not take in-place power settings (read back)
    IDENTITY_NOT_APPLIED = "MCH018"  # MAAS did not take a hostname/tag drift repair (read back)
    MAAS_UNAVAILABLE = "MCH019"  # MAAS kept answering 5xx / dropping connections past the retry budget
    AMBIGUOUS_MATCH = "MCH020"  # several MAAS machines match the declared IPMI address / PXE MAC
    VALIDATION = "MCH021"  # a post-deploy validation script failed on the node (outcome validation_failed)
    BOOTSTRAP = "MCH022"  # another launcher step failed on the node (fetch, packages, storage, enroll, ...)
    BUNDLE_DIGEST = "MCH023"  # the node reports a bundle digest other than the one deployed
    NO_REPORT = "MCH024"  # the node enrolled without a bootstrap report (its launcher did not run the bundle)
    VALIDATION_DIGEST = "MCH025"  # the node ran validation scripts of a bundle other than the pinned one
    HOSTNAME_HELD = "MCH026"  # the hostname is held by other hardware (another PXE MAC) that is in use
    ROCE_ADDRESS_HELD = "MCH027"  # a planned RoCE address is held in MAAS by another machine's interface
    SLOT_LEASE = "MCH028"  # the batch_max_parallel slot lease in Vault could not be read or written

    def __call__(self, reason: str) -> str:
        return line(self.value, "", reason)


class StepKind(StrEnum):
    COMPLETE = "complete"  # the step is done: enter `stage` now (with an `outcome`: the machine is finished)
    CONTINUE = "continue"  # MAAS or the platform is working: look again in `stage` after a back-off
    DELAYED = "delayed"  # no free batch_max_parallel slot: try again when one frees
    FAILED = "failed"  # the machine stops here; `outcome` and `reason` say why
    ERROR = "error"  # a call failed: re-read the machine and let the table decide again


class Presign(Protocol):
    def __call__(self, spec: MachineSpec, ttl_seconds: int, pin: BundlePin | None = None) -> str: ...


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
    def fail(code: FailCode | None, reason: str, outcome: MachineOutcome = MachineOutcome.FAILED) -> Step:
        """`code` None: `reason` already carries its code (e.g. a recorded create failure)."""
        return Step(StepKind.FAILED, Stage.FAILED, outcome, code(reason) if code else reason)

    @staticmethod
    def error(reason: str) -> Step:
        return Step(StepKind.ERROR, reason=reason)


@dataclass
class LifecycleRecord:
    """What is known about one machine in one run (MAAS owner data is the durable record)."""

    spec: MachineSpec
    goal: Goal
    teardown: TeardownMode = TeardownMode.FULL_DECOMMISSION
    handoff: bool = False  # the site's restricted release (customer handoff): the handoff teardown table
    system_id: str | None = None
    node_id: str | None = None
    stage: Stage = Stage.RESOLVE
    outcome: MachineOutcome | None = None
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    deploy_attempts: int = 0
    commission_attempts: int = 0
    erase_attempts: int = 0  # releases with erase asked for in this run
    recommissions: int = 0  # automatic re-commissions after a failure, this run (at most one)
    errors: int = 0
    last_error: PortError | None = None
    recent_error: str = ""  # the last failed call since the last good read (named if a deadline passes)
    waiting_for: str = ""  # what a waiting stage still waits for (named if its deadline passes)
    view: MachineView | None = None
    detail: MachineDetail | None = None  # read by the preflight, reused by storage and RoCE links
    owner_data_recorded: bool = False
    vanished: bool = False  # MAAS does not know (or no longer knows) this machine
    create_error: str = ""
    adopted: bool = False

    def attempts_key(self) -> str:
        return f"{self.spec.deploy_fingerprint()}/{self.spec.retry_generation}"

    def load_attempts(self) -> None:
        """Take the attempts a previous run spent (MAAS owner data) on this fingerprint and generation."""
        data = self.view.owner_data if self.view else {}
        if data.get(OWNER_ATTEMPTS_FOR) == self.attempts_key():
            try:
                self.deploy_attempts = max(self.deploy_attempts, int(data.get(OWNER_ATTEMPTS) or 0))
            except ValueError:
                pass  # not ours to trust: count from this run only

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
    progress: Callable[[str], None] = print
    """Where progress lines go: provider stdout (the Pulumi CLI shows it while the step runs)."""
    label: str = "machines"
    """What progress lines call this run (e.g. `pool dal1-h200`)."""
    owner: str | None = None
    """The managing resource ("<stack>/<resource name>", OWNER_RESOURCE); None in state written before it."""
    presign: Presign | None = None
    """(spec, ttl seconds[, pin]) -> a presigned GET URL of the spec's bundle version, or of `pin`
    (its validation bundle) (runtime.bundle_presigner)."""
    read_secret: Callable[[str], str] | None = None
    """Vault ref -> its value, read at deploy time for the login user's SSH keys and password hash (never stored)."""
    node_ca: str = ""
    """The private CAs deployed nodes trust (PEM, node_trust.node_ca_bundle): the environment's platform and
    artifact-store CAs; "" when it names none."""
    lease: Callable[[str, str], SlotLease] | None = None
    """(site, profile) -> the profile's slot lease in Vault (runtime.slot_leases); None only in tests that
    run one scheduler alone (the bound is then this process's)."""
