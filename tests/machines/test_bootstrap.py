"""providers/machines/bootstrap.py: what the node's report and the platform's sight of its agent decide. Ready takes
a successful report of the deployed bundle and of the pinned validation bundle, and an agent the platform saw."""

from __future__ import annotations

from typing import Any

from environments import load_environment
from providers.machines.bootstrap import verdict
from providers.machines.ports import BootstrapView, NodeState
from providers.machines.records import FailCode, Goal, LifecycleRecord
from providers.machines.spec import BundlePin
from providers.machines.status import MachineOutcome

from .conftest import specs_for

SITE, VALIDATION = "a" * 64, "b" * 64


def record(validation: bool = False) -> LifecycleRecord:
    spec = specs_for(load_environment("local"), roce=False)["local-gpu-1"]
    deploy = spec.deploy.model_copy(update={"bundle_digest": SITE, "validation_bundle": BundlePin(
        ref="s3://b/bundles/v.tar.gz", digest=VALIDATION, url="") if validation else None})
    return LifecycleRecord(spec=spec.model_copy(update={"deploy": deploy}), goal=Goal.DEPLOYED, system_id="abc123",
                           deploy_attempts=1)


def state(status: str = "active", agent: bool = True, **view: Any) -> NodeState:
    report = BootstrapView(**{"bundle_digest": SITE, "ok": True, "validation_digest": SITE, **view})
    return NodeState(status=status, bootstrap=report, agent_seen=agent)


def test_ready_only_once_the_agent_was_seen() -> None:
    m = record()
    assert verdict(None, m, state(status="enrolling", agent=False)) is None  # type: ignore[arg-type]
    assert "node's agent alive" in m.waiting_for
    step = verdict(None, m, state())  # type: ignore[arg-type]
    assert step is not None and step.outcome is MachineOutcome.READY and m.waiting_for == ""


def test_the_validation_bundle_that_ran_must_be_the_pinned_one() -> None:
    m = record(validation=True)
    step = verdict(None, m, state(validation_digest=SITE))  # type: ignore[arg-type]
    assert step is not None and step.reason.startswith(FailCode.VALIDATION_DIGEST.value), step
    assert VALIDATION in step.reason and "s3://b/bundles/v.tar.gz" in step.reason
    ok = verdict(None, record(validation=True), state(validation_digest=VALIDATION))  # type: ignore[arg-type]
    assert ok is not None and ok.outcome is MachineOutcome.READY
    # a report from before reports named their validation bundle: the site digest alone decides
    old = verdict(None, record(validation=True), state(validation_digest=None))  # type: ignore[arg-type]
    assert old is not None and old.outcome is MachineOutcome.READY
