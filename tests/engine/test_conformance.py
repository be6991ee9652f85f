"""Conformance with the real Pulumi engine: each test takes its expected outcome from pulumi/pulumi's
source (file and function cited), so a change to `engine` that drifts from Pulumi fails here.

Paths are in github.com/pulumi/pulumi: `pkg/resource/deploy/...` (engine), `pkg/backend/...` (state and
locks), `pkg/resource/plugin/plugin.go` (provider output), `sdk/python/lib/pulumi/dynamic/__main__.py`.
"""

from __future__ import annotations

import json

from engine import Severity, StepOp
from tests.engine.conftest import FixtureStack, assert_ok, widget


def _diff_calls(stack: FixtureStack) -> int:
    return sum(1 for op, _name, phase, _t in stack.timed_events() if op == "diff" and phase == "called")


# -- 1. failure semantics ------------------------------------------------------------------------
def test_failed_step_cancels_the_run(stack: FixtureStack) -> None:
    """step_executor.go ``cancelDueToError``: without ContinueOnError a failed step calls ``se.cancel()``;
    ``executeChain`` starts nothing after that, running steps finish. deployment_executor.go ``Execute``:
    the main loop returns on ``ctx.Done()`` before ``performDeletes``. step_executor.go
    ``executeRegisterResourceOutputs(finalizing, errored)``: old stack outputs are kept, new keys overlaid.
    ``reportExecResult("failed")`` ends it."""
    assert_ok(stack.up([widget("stale", size=1), widget("first", size=1)]))
    old_outputs = stack.state(decrypt=True).outputs
    declared = [
        widget("first", size=1),
        widget("running", size=1, delay=2),  # independent, in progress when `bad` fails
        widget("bad", size=1, fail_create=True, refs={"upstream": "first"}),
        widget("late", size=1, refs={"upstream": "running"}),  # registers after the failure
    ]
    result = stack.up(declared, flags=["--skip-preview"])
    assert not result.ok and result.failed == [stack.urn("bad")]
    assert result.errors() == ["RuntimeError: widget quota exceeded in zone None", "update failed"]
    objects = set(stack.objects_by_name())
    assert "running" in objects and stack.resource("running") is not None  # finished and recorded
    assert "late" not in objects and stack.urn("late") not in {s.urn for s in result.steps}  # never started
    assert "stale" in objects and stack.resource("stale") is not None  # no delete ran
    outputs = stack.state(decrypt=True).outputs
    assert outputs.get("stale_id") == old_outputs["stale_id"], "old stack outputs are kept after a failure"


def test_continue_on_error_runs_independent_work_and_deletes(stack: FixtureStack) -> None:
    """deployment_executor.go ``handleSingleEvent``: with ContinueOnError, steps that depend on errored ones
    are skipped (``step.Skip()``), others go ahead; ``performDeletes`` runs, leaving out ``erroredDeps``
    (what an errored resource transitively depends on)."""
    before = [widget("stale", size=1), widget("needed", size=1), widget("user", size=1, refs={"upstream": "needed"})]
    assert_ok(stack.up(before))
    declared = [
        widget("user", size=1, zone="z2", fail_create=True),  # its replacement fails; the old one needs `needed`
        widget("after", size=1, refs={"upstream": "user"}),
        widget("indep", size=1),
    ]
    result = stack.up(declared, flags=["--continue-on-error"])
    assert not result.ok and result.failed == [stack.urn("user")]
    objects = set(stack.objects_by_name())
    assert "indep" in objects and "after" not in objects
    assert "stale" not in objects, "deletes still run with --continue-on-error"
    assert "needed" in objects, "what the failed resource depends on is not deleted"
    infos = [d.message for d in result.diagnostics if d.urn == stack.urn("after")]
    assert infos and infos[0].startswith("skipped")


def test_check_failure_stops_the_run_and_reports_the_first_invalid_resource(stack: FixtureStack) -> None:
    """step_generator.go ``generateSteps``: Check failures are printed by ``issueCheckFailures`` and the
    generator bails; deployment_executor.go cancels on an event error (even with ContinueOnError). Events
    are handled one at a time, so only the first invalid resource is reported."""
    declared = [widget("neg1", size=-1), widget("neg2", size=-2), widget("fine", size=1)]
    for flags in ([], ["--continue-on-error"]):
        result = stack.up(declared, flags=flags)
        assert not result.ok
        problems = [e for e in result.errors() if "has a problem" in e]
        assert len(problems) == 1, problems
        assert result.errors()[-1] == "preview failed"
        assert stack.backend()["objects"] == {}, "nothing runs after a check failure"


# -- 2. refresh drift --------------------------------------------------------------------------
def test_refresh_drift_is_the_providers_diff(stack: FixtureStack) -> None:
    """step.go ``RefreshStep.Apply``: for a managed resource the provider's Diff of the refreshed state
    against the old inputs decides (``s.diff.Changes == plugin.DiffNone`` -> same); an output that changes
    on every read but that the provider's diff ignores is no drift. A hand change still is."""
    assert_ok(stack.up([widget("w", size=1)]))
    result = stack.run("refresh", [widget("w", size=1)])
    assert_ok(result)
    assert result.changeSummary == {"same": 1, "update": 0, "delete": 0}
    assert_ok(stack.run("preview", [widget("w", size=1)], expect_no_changes=True))
    data = stack.backend()
    (obj,) = data["objects"].values()
    obj["size"] = 7
    stack.backend_path.write_text(json.dumps(data))
    result = stack.run("refresh", [widget("w", size=1)])
    assert result.changeSummary == {"same": 0, "update": 1, "delete": 0}
    assert stack.up([widget("w", size=1)]).ops()[stack.urn("w")] is StepOp.UPDATE
    assert stack.objects_by_name()["w"]["size"] == 1


# -- 3. crash recovery: see test_failures.test_killed_mid_up_resumes_with_the_operator_commands ----
def test_import_pending_creates_is_refused_loudly(stack: FixtureStack) -> None:
    """cmd/pulumi/operations/refresh.go ``pendingCreatesToImports`` turns a pending create into an import,
    which needs the provider's Read to return inputs (step.go ``ImportStep.Apply``: "provider does not
    support importing resources"); the Python dynamic provider's Read returns none. Refused here."""
    result = stack.run("refresh", [], flags=["--import-pending-creates", "urn:x", "id-1"])
    assert result.exitCode == 2
    assert "--clear-pending-creates" in result.log


# -- 4. large errors ---------------------------------------------------------------------------
def test_a_long_failure_report_arrives_whole(stack: FixtureStack) -> None:
    """The CLI's Go gRPC client accepts 16 MiB of header metadata (where a provider's error travels); the
    engine's client is configured the same, so a 100-machine report is not cut to 'metadata size exceeds'."""
    result = stack.up([widget("pool", size=1, fail_create_lines=100)], flags=["--skip-preview"])
    message = next(d.message for d in result.diagnostics if d.urn == stack.urn("pool"))
    assert "machine gpu-000" in message and "machine gpu-099" in message, message[:300]
    assert "metadata" not in message


# -- 5. preview --json shape -------------------------------------------------------------------
def test_preview_json_has_no_invented_diff_and_provider_output_is_diagnostics(stack: FixtureStack) -> None:
    """sdk/python/lib/pulumi/dynamic/__main__.py ``Diff`` sets only changes/replaces/deleteBeforeReplace, so
    the step has no diffReasons and a null detailedDiff (step_generator.go ``diffResource`` computes them
    only for DIFF_UNKNOWN). plugin.go ``newPlugin`` runtrace: provider stdout -> ``info``, stderr ->
    ``info#err`` diagnostics without a URN, message with its newline."""
    assert_ok(stack.up([widget("w", size=1)]))
    result = stack.up([widget("w", size=2), widget("n", size=1, stderr_note="warming up")])
    assert_ok(result)
    step = next(s for s in result.steps if s.urn == stack.urn("w"))
    assert step.op is StepOp.UPDATE and step.digest()["detailedDiff"] is None and "diffReasons" not in step.digest()
    info = [d for d in result.diagnostics if d.severity is Severity.INFO and d.urn is None]
    err = [d for d in result.diagnostics if d.severity is Severity.INFO_ERR]
    assert any(d.message == "creating widget n\n" for d in info)
    assert [d.message for d in err] == ["warming up\n"]


# -- 6. smaller ones ---------------------------------------------------------------------------
def test_protect_on_replace(stack: FixtureStack) -> None:
    """step_generator.go ``generateStepsFromDiff``: ``if new.Protect && old.Protect`` -> error; a preview still
    shows the step, an update bails before anything else runs. Unprotecting in the same run is allowed."""
    assert_ok(stack.up([widget("p", zone="z1", opts={"protect": True}), widget("other", size=1)]))
    declared = [widget("p", zone="z2", opts={"protect": True}), widget("other", size=2)]
    preview = stack.run("preview", declared)
    assert not preview.ok and preview.ops()[stack.urn("p")] is StepOp.REPLACE
    assert any("unable to replace resource" in e for e in preview.errors())
    result = stack.up(declared, flags=["--skip-preview"])
    assert not result.ok
    assert stack.objects_by_name()["p"]["zone"] == "z1"
    assert_ok(stack.up([widget("p", zone="z2"), widget("other", size=1)]))  # unprotected in the same run
    assert stack.objects_by_name()["p"]["zone"] == "z2"


def test_failed_create_of_a_delete_before_replace_leaves_it_pending_replacement(stack: FixtureStack) -> None:
    """step_generator.go: a delete-before-replace deletes with ``NewDeleteReplacementStep(..., true)`` (the
    old entry stays, ``PendingReplacement``); if the create then fails the next preview says ``replace``
    (``diff.Changes == DiffSome || old.PendingReplacement``), with no second delete."""
    assert_ok(stack.up([widget("x", zone="z1", exclusive=True)]))
    result = stack.up([widget("x", zone="z2", exclusive=True, fail_create=True)], flags=["--skip-preview"])
    assert not result.ok
    assert stack.objects_by_name() == {}
    entry = stack.resource("x")
    assert entry is not None and entry.pendingReplacement
    preview = stack.run("preview", [widget("x", zone="z2", exclusive=True)])
    assert preview.ops()[stack.urn("x")] is StepOp.REPLACE
    assert StepOp.DELETE_REPLACED not in [s.op for s in preview.steps if s.urn == stack.urn("x")]
    assert_ok(stack.up([widget("x", zone="z2", exclusive=True)]))
    assert stack.objects_by_name()["x"]["zone"] == "z2" and not stack.resource("x").pendingReplacement


def test_up_runs_a_preview_first(stack: FixtureStack) -> None:
    """cmd/pulumi/operations/up.go: without --skip-preview ``pulumi up`` previews, then updates, so a
    provider's Check and Diff run twice per resource."""
    assert_ok(stack.up([widget("w", size=1)]))
    stack.clear_events()
    assert_ok(stack.up([widget("w", size=2)]))
    assert _diff_calls(stack) == 2
    stack.clear_events()
    assert_ok(stack.up([widget("w", size=3)], flags=["--skip-preview"]))
    assert _diff_calls(stack) == 1


def test_a_missing_target_is_an_error(stack: FixtureStack) -> None:
    """deployment_executor.go ``checkTargets``: a target that is neither in the old state nor registered
    fails the run ("Target ... could not be found in the stack")."""
    assert_ok(stack.up([widget("w", size=1)]))
    for op in ("up", "refresh", "destroy"):
        result = stack.run(op, [widget("w", size=1)], targets=[stack.urn("nope")])
        assert not result.ok and any("could not be found in the stack" in e for e in result.errors()), op
    assert "w" in stack.objects_by_name()


def test_delete_before_replace_false_overrides_the_provider(stack: FixtureStack) -> None:
    """step_generator.go: ``if goal.DeleteBeforeReplace != nil { deleteBeforeReplace = *goal... }``."""
    assert_ok(stack.up([widget("x", zone="z1", exclusive=True)]))
    stack.clear_events()
    result = stack.up([widget("x", zone="z2", exclusive=True, opts={"delete_before_replace": False})])
    assert_ok(result)
    events = stack.events()
    assert events.index(("create", "x")) < events.index(("delete", "x"))
