"""One engine operation in this process: load config and state, start the provider server, run, report."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from engine.config import ConfigError, StackConfig, load_stack_config
from engine.crypto import TEST_PASSPHRASE
from engine.deployment import Deployment
from engine.locks import StackLock
from engine.model import SUMMARY_OPS, Diagnostic, EngineResult, Operation, Severity, StepOp
from engine.program import run_program
from engine.provider_host import ProviderError, ProviderHost
from engine.stackrefs import StackReferences
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
    # The real CLI's flags of the same names.
    continue_on_error: bool = False
    clear_pending_creates: bool = False
    # Referenced stack name -> its state file (`pulumi:pulumi:StackReference`, engine/stackrefs.py).
    stack_states: dict[str, Path] = Field(default_factory=dict)


def _summary(dep: Deployment) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in dep.steps:
        if step.op in SUMMARY_OPS:
            counts[step.op.value] = counts.get(step.op.value, 0) + 1
    return counts


_CHANGES = (StepOp.CREATE, StepOp.UPDATE, StepOp.REPLACE, StepOp.DELETE)


def _check_no_changes(dep: Deployment) -> None:
    changed = sorted({s.urn for s in dep.steps if s.op in _CHANGES or (s.op is StepOp.REFRESH and s.drifted)})
    if changed:
        dep.diag(
            f"no changes were expected (--expect-no-changes), but {len(changed)} resource(s) changed: "
            + ", ".join(changed)
        )


def _failed(operation: Operation, message: str, code: int = EXIT_USAGE) -> EngineResult:
    return EngineResult(
        operation=operation,
        ok=False,
        exitCode=code,
        diagnostics=[Diagnostic(message=message, severity=Severity.ERROR)],
    )


def _missing_targets(dep: Deployment, when_registered: bool) -> list[str]:
    """deployment_executor.go checkTargets: a target must name a resource in the old state or one the
    program registered; otherwise the run fails."""
    known = set(dep.old) | (dep.registered if when_registered else set())
    return sorted(t for t in dep.targets if t not in known)


def _report_missing_targets(dep: Deployment, missing: list[str]) -> None:
    for target in missing:
        dep.diag(f"Target '{target}' could not be found in the stack.")
    dep.errored.set()
    dep.cancelled.set()


def _execute(opts: RunOptions, cfg: StackConfig, dep: Deployment) -> dict[str, int] | None:
    """The operation's phases; returns refresh's own change summary."""
    if opts.operation in (Operation.REFRESH, Operation.DESTROY):
        missing = _missing_targets(dep, when_registered=False)
        if missing:
            _report_missing_targets(dep, missing)
            return None
    if opts.operation is Operation.REFRESH:
        if opts.clear_pending_creates:
            cleared = [op.resource.urn for op in dep.pending_creates]
            dep.pending_creates = []
            for urn in cleared:
                dep.diag("pending create cleared (refresh --clear-pending-creates)", Severity.INFO, urn)
        return refresh(dep)
    if opts.operation is Operation.DESTROY:
        destroy(dep)
        return None
    finished = run_program(cfg, dep)
    missing = _missing_targets(dep, when_registered=True)
    if missing:
        _report_missing_targets(dep, missing)
    if finished and not dep.cancelled.is_set():
        finish_up(dep)
    elif not finished:
        dep.diag("deletes were skipped because the program did not finish", Severity.WARNING)
    dep.finalize_outputs()
    return None


def _final_diagnostic(dep: Deployment) -> None:
    """deployment_executor.go reportExecResult: "<update|preview> failed" / "... canceled"."""
    kind = "preview" if dep.dry_run else "update"
    if dep.errored.is_set() or dep.failed:
        dep.diag(f"{kind} failed")
    elif dep.cancelled.is_set():
        dep.diag(f"{kind} canceled")


def run_operation(
    opts: RunOptions, emit: Callable[[str], None], on_deployment: Callable[[Deployment], None] | None = None
) -> EngineResult:
    """Run one operation. ``on_deployment`` receives the deployment once it exists (the CLI uses it to
    wire SIGINT/SIGTERM to ``deployment.cancelled``)."""
    started = time.monotonic_ns()
    passphrase = opts.passphrase or os.environ.get("PULUMI_CONFIG_PASSPHRASE")
    warnings: list[str] = []
    if not passphrase:
        passphrase = TEST_PASSPHRASE
        warnings.append(
            "PULUMI_CONFIG_PASSPHRASE is not set: secrets in the state file are encrypted with the "
            "fixed test passphrase (fine for tests, not for a real stack)"
        )
    lock = StackLock(opts.state_path)
    try:
        cfg = load_stack_config(opts.project_dir, opts.stack, opts.config_overrides)
        store = StateStore(opts.state_path, passphrase, cfg.project.name, opts.stack)
        if opts.operation is not Operation.PREVIEW:
            lock.acquire()
    except (ConfigError, StateError) as exn:
        return _failed(opts.operation, str(exn))
    try:
        refs = StackReferences(cfg.project.name, opts.stack_states, passphrase)
        return _run_locked(opts, cfg, store, refs, warnings, emit, on_deployment, started)
    finally:
        lock.release()


def _run_locked(
    opts: RunOptions,
    cfg: StackConfig,
    store: StateStore,
    refs: StackReferences,
    warnings: list[str],
    emit: Callable[[str], None],
    on_deployment: Callable[[Deployment], None] | None,
    started: int,
) -> EngineResult:
    # Provider output becomes info / info#err diagnostics, as plugin.go's runtrace makes them, and is
    # passed through the deployment's redactor (see Deployment.emit).
    host = ProviderHost(cfg.project.directory, cfg.project.name, sink=lambda line, err: dep.provider_output(line, err))
    dep = Deployment(
        opts.operation, store, host, cfg.project.name, opts.stack, opts.targets, emit, opts.continue_on_error, refs
    )
    for message in warnings:
        dep.diag(message, Severity.WARNING)
    if on_deployment is not None:
        on_deployment(dep)
    summary: dict[str, int] | None = None
    try:
        host.start(cfg.values)
        summary = _execute(opts, cfg, dep)
        if opts.expect_no_changes:
            _check_no_changes(dep)
        _final_diagnostic(dep)
        with dep.lock:
            dep.save()  # also drops non-create pending operations left by an interrupted earlier run
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
