"""One engine operation in this process: load config and state, start the provider server, run, report."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from engine.config import ConfigError, load_stack_config
from engine.crypto import TEST_PASSPHRASE
from engine.deployment import Deployment
from engine.model import SUMMARY_OPS, Diagnostic, EngineResult, Operation, Severity, StepOp
from engine.program import run_program
from engine.provider_host import ProviderError, ProviderHost
from engine.state import StateError, StateStore
from engine.teardown import destroy, finish_up, refresh
from engine.values import mask_secrets

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class RunOptions(BaseModel):
    operation: Operation
    project_dir: Path
    stack: str
    state_path: Path
    config_overrides: dict[str, str] = Field(default_factory=dict)
    targets: list[str] = Field(default_factory=list)
    expect_no_changes: bool = False
    passphrase: str | None = None


def _summary(dep: Deployment) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in dep.steps:
        if step.op in SUMMARY_OPS:
            counts[step.op.value] = counts.get(step.op.value, 0) + 1
    return counts


_CHANGES = (StepOp.CREATE, StepOp.UPDATE, StepOp.REPLACE, StepOp.DELETE)


def _check_no_changes(dep: Deployment) -> None:
    changed = sorted({s.urn for s in dep.steps if s.op in _CHANGES or (s.op is StepOp.REFRESH and s.diffReasons)})
    if changed:
        dep.diag(
            f"no changes were expected (--expect-no-changes), but {len(changed)} resource(s) changed: "
            + ", ".join(changed)
        )


def run_operation(
    opts: RunOptions, emit: Callable[[str], None], on_deployment: Callable[[Deployment], None] | None = None
) -> EngineResult:
    """Run one operation. ``on_deployment`` receives the deployment once it exists (the CLI uses it to
    wire SIGINT/SIGTERM to ``deployment.cancelled``)."""
    # size: one operation end to end (config, state lock, program, steps, save, result), read top to bottom
    started = time.monotonic_ns()
    passphrase = opts.passphrase or os.environ.get("PULUMI_CONFIG_PASSPHRASE")
    warnings: list[str] = []
    if not passphrase:
        passphrase = TEST_PASSPHRASE
        warnings.append(
            "PULUMI_CONFIG_PASSPHRASE is not set: secrets in the state file are encrypted with the "
            "fixed test passphrase (fine for tests, not for a real stack)"
        )
    try:
        cfg = load_stack_config(opts.project_dir, opts.stack, opts.config_overrides)
        store = StateStore(opts.state_path, passphrase, cfg.project.name, opts.stack)
        if opts.operation is not Operation.PREVIEW:
            store.lock()
    except (ConfigError, StateError) as exn:
        return EngineResult(
            operation=opts.operation,
            ok=False,
            exitCode=EXIT_USAGE,
            diagnostics=[Diagnostic(message=str(exn), severity=Severity.ERROR)],
        )

    # Provider output is passed through the deployment's redactor (see Deployment.emit).
    host = ProviderHost(cfg.project.directory, cfg.project.name, sink=lambda line: dep.emit(line))
    dep = Deployment(opts.operation, store, host, cfg.project.name, opts.stack, opts.targets, emit)
    for message in warnings:
        dep.diag(message, Severity.WARNING)
    if on_deployment is not None:
        on_deployment(dep)
    summary: dict[str, int] | None = None
    try:
        host.start(cfg.values)
        if opts.operation in (Operation.PREVIEW, Operation.UP):
            if run_program(cfg, dep) and not dep.cancelled.is_set():
                finish_up(dep)
            else:
                dep.diag("deletes were skipped because the program did not finish", Severity.WARNING)
        elif opts.operation is Operation.REFRESH:
            summary = refresh(dep)
        else:
            destroy(dep)
        if opts.expect_no_changes:
            _check_no_changes(dep)
        with dep.lock:
            dep.save()  # also clears pending operations left by an interrupted earlier run
    except ProviderError as exn:
        dep.diag(exn.message)
    finally:
        host.stop()
    errors = [d for d in dep.diagnostics if d.severity is Severity.ERROR]
    ok = not errors and not dep.failed
    return EngineResult(
        operation=opts.operation,
        ok=ok,
        steps=dep.steps,
        changeSummary=summary if summary is not None else _summary(dep),
        diagnostics=dep.diagnostics,
        outputs=mask_secrets(dep.stack_outputs),
        failed=sorted(dep.failed),
        exitCode=EXIT_OK if ok else EXIT_FAILED,
        durationNs=time.monotonic_ns() - started,
    )
