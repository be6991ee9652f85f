"""What the lifecycle makes of the node's own bootstrap report (docs/node-bootstrap.md): the launcher
on the node runs the bundle, validates and enrolls; the platform's node record holds its report.

`verdict` turns a report into a step: a failed validation script ends the machine with outcome
`validation_failed`, any other failed launcher step with MCH022, a digest other than the deployed one
with MCH023, an enrolled node without a report with MCH024. A failed report found at the start of a
later run (nothing deployed in this run) releases the machine (the profile's erase mode, as a changed
deploy does) so it is redeployed with a fresh token
and presigned URL: the next `up` after a fix re-runs what is needed.

On a real node a failed launcher step also fails cloud-init's final stage (runcmd exits non-zero), so
MAAS marks the machine Failed deployment; `reported_failure` lets the node's own report name the
cause (MCH021/MCH022: the step, its output tail, what to do) instead of a bare deployment failure.
"""

from __future__ import annotations

import re

from clients.maas import PortError

from .ports import BootstrapView, NodeState
from .records import Context, FailCode, LifecycleRecord, Step
from .status import MachineOutcome, Stage

TAIL_IN_REASON = 400  # characters of the failed step's output tail a reason carries
OUTPUT_MARK = " | output: "  # what follows in a reason is the node's raw output tail: the first to give way
DIGEST_REFUSED = re.compile(r"bundle refused: its sha256 is [0-9a-f]{64}, the user_data pins [0-9a-f]{64}")


def _tail(view: BootstrapView) -> str:
    tail = view.output_tail.strip()
    if len(tail) > TAIL_IN_REASON:
        tail = "..." + tail[-TAIL_IN_REASON:]
    return tail.replace("\n", " | ") or "(no output)"


def _key_sentence(view: BootstrapView) -> str:
    """What the node said last (the failing tool's own words): the last non-empty line of the step's output."""
    lines = [ln.strip() for ln in view.output_tail.splitlines() if ln.strip()]
    return lines[-1][-300:] if lines else "(no output)"


def _validation_ref(m: LifecycleRecord) -> str:
    """The bundle whose validation scripts the node ran: the profile's validation bundle, else the site's."""
    pin = m.spec.deploy.validation_bundle
    return pin.ref if pin is not None else m.spec.deploy.bundle_ref


def _advice(m: LifecycleRecord, step: str, view: BootstrapView) -> str:
    """What to do, for this cause (which object, which command)."""
    tail = view.output_tail
    if step.startswith("validate-"):
        return (f"fix the node or the validation script of bundle {_validation_ref(m)}, then run up again (it "
                "redeploys the machine)")
    if step in ("fetch", "fetch-validation") and DIGEST_REFUSED.search(tail):
        ref = _validation_ref(m) if step == "fetch-validation" else m.spec.deploy.bundle_ref
        return (f"{ref} (the pinned version) no longer holds the published bytes (changed or deleted after "
                "publishing); run `pulumi up --refresh`: it finds the bundle drifted, publishes it again and "
                "redeploys this machine")
    if step.startswith("fetch") and "expired" in tail.lower():
        return ("run up again (a redeploy presigns a fresh URL); if nodes boot that late, raise the profile's "
                "enrollment_token_ttl_seconds")  # the URL's lifetime
    return "fix the cause, then run up again (it redeploys the machine)"


def node_failure(m: LifecycleRecord, view: BootstrapView) -> Step:
    """The node's own key sentence and the advice first, its raw output tail last (what a bounded report cuts)."""
    step = view.failed_step or "unknown step"
    reason = (f"{m.ident()}: on the node, launcher step {step!r} failed: {_key_sentence(view)}; "
              f"{_advice(m, step, view)}{OUTPUT_MARK}{_tail(view)}")
    if step.startswith("validate-"):
        return Step.fail(FailCode.VALIDATION, reason, MachineOutcome.VALIDATION_FAILED)
    return Step.fail(FailCode.BOOTSTRAP, reason)


AGENT_UNSEEN = ("the platform to see the node's agent alive (the launcher's report was accepted, no agent heartbeat "
                "since: on the node, `systemctl status gpuaas-node-agent` and its route to the platform)")


def verdict(ctx: Context, m: LifecycleRecord, state: NodeState) -> Step | None:
    """The step the report decides, or None: keep waiting (m.waiting_for says for what). Ready takes a successful
    report of the deployed bundles and a node the platform saw alive (its agent's heartbeat: `agent_seen`)."""
    view = state.bootstrap
    if view is not None and view.pending:
        m.waiting_for = "the node's launcher to install the node agent and send its final report (it enrolled)"
        return None
    if view is not None and not view.ok:
        if m.deploy_attempts == 0:
            # Found failed from an earlier run: release (as a changed deploy does), then the table deploys again.
            m.notes.append(f"node bootstrap failed earlier at {view.failed_step}; releasing to redeploy")
            return Step.complete(Stage.RELEASE)
        return node_failure(m, view)
    if view is not None and view.bundle_digest != m.spec.deploy.bundle_digest:
        return Step.fail(
            FailCode.BUNDLE_DIGEST,
            f"{m.ident()}: the node ran bundle {view.bundle_digest}, not the deployed {m.spec.deploy.bundle_digest}; "
            "run up again (it redeploys the machine)",
        )
    pin = m.spec.deploy.validation_bundle
    expected = pin.digest if pin is not None else m.spec.deploy.bundle_digest
    if view is not None and view.validation_digest is not None and view.validation_digest != expected:
        return Step.fail(
            FailCode.VALIDATION_DIGEST,
            f"{m.ident()}: the node ran the validation scripts of bundle {view.validation_digest}, not the pinned "
            f"{expected} ({_validation_ref(m)}); run up again (it redeploys the machine)",
        )
    if state.status == "active" and view is None:
        return Step.fail(
            FailCode.NO_REPORT,
            f"{m.ident()}: platform node is active but its launcher never reported the bootstrap (no bundle "
            "digest, no validation results); redeploy it (raise retry_generation or run up after a release)",
        )
    if view is not None and not state.agent_seen:
        m.waiting_for = AGENT_UNSEEN
        return None
    if state.status == "active":
        m.waiting_for = ""
        return Step.finish(MachineOutcome.READY, Stage.READY)
    return None


def reported_failure(ctx: Context, m: LifecycleRecord, node_id: str | None) -> Step | None:
    """MAAS says Failed deployment: the failure the node's launcher reported for this deploy, if it did."""
    if not node_id:
        return None
    try:
        view = ctx.enrollment.node_state(node_id).bootstrap
    except PortError:
        return None  # the platform cannot say: MAAS's own account of the failure stands
    if view is None or view.ok:
        return None
    if m.deploy_attempts == 0:  # failed in an earlier run: release (the table deploys it again), as verdict does
        m.notes.append(f"node bootstrap failed earlier at {view.failed_step} (MAAS: Failed deployment); releasing to "
                       "redeploy")
        return Step.complete(Stage.RELEASE)
    return node_failure(m, view)
