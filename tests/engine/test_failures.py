"""Failures: a failed step is a diagnostic with the provider's message (no traceback), independent
resources continue, the run exits non-zero, and the state stays resumable (also after a kill)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from engine import StepOp, read_state
from engine.crypto import TEST_PASSPHRASE
from tests.engine.conftest import FIXTURE_PROJECT, FixtureStack, assert_ok, widget


def test_failing_create_leaves_state_resumable(stack: FixtureStack) -> None:
    declared = [
        widget("ok", size=1),
        widget("bad", size=1, zone="z9", fail_create=True, refs={"upstream": "ok"}),
        widget("after_bad", size=1, refs={"upstream": "bad"}),
    ]
    result = stack.up(declared)
    assert not result.ok and result.exitCode == 1
    bad = stack.urn("bad")
    messages = {d.urn: d.message for d in result.diagnostics}
    assert messages[bad] == "RuntimeError: widget quota exceeded in zone z9"
    assert "Traceback" not in json.dumps([d.message for d in result.diagnostics])
    assert result.failed == [bad]
    assert stack.urn("after_bad") not in messages  # never started: nothing is reported for it
    assert set(stack.objects_by_name()) == {"ok"}
    assert stack.resource("bad") is None and stack.resource("ok") is not None
    assert stack.state().pending_operations == []  # a failed create is finished, not pending

    declared[1]["props"]["fail_create"] = False
    result = stack.up(declared)
    assert_ok(result)
    ops = result.ops()
    assert ops[bad] is StepOp.CREATE and ops[stack.urn("after_bad")] is StepOp.CREATE
    assert ops[stack.urn("ok")] is StepOp.SAME


def test_check_failure_names_property_and_reason(stack: FixtureStack) -> None:
    result = stack.up([widget("neg", size=-1)])
    assert not result.ok
    assert result.errors() == [
        "pulumi-python:dynamic/fixture:Widget resource 'neg': property size value {-1.0} has a problem: "
        "must be a number >= 0, got -1.0",
        "preview failed",  # `up` previews first; a failed preview stops it before anything runs
    ]
    assert stack.backend()["objects"] == {}


def test_failed_delete_keeps_everything_it_depends_on(stack: FixtureStack) -> None:
    assert_ok(
        stack.up(
            [
                widget("base", size=1),
                widget("mid", size=1, refs={"upstream": "base"}),
                widget("user", size=1, fail_delete=True, delay=0.5, refs={"upstream": "mid"}),
                widget("other", size=1),
            ]
        )
    )
    result = stack.up([])
    assert not result.ok
    assert result.errors() == ["RuntimeError: widget user is busy", "update failed"]
    # `other` ran beside the failed delete; the run was then cancelled, so mid and base were never reached.
    assert set(stack.objects_by_name()) == {"base", "mid", "user"}
    assert all(stack.resource(n) is not None for n in ("base", "mid", "user"))

    # With --continue-on-error the deletes the failure does not block go ahead; what it needs stays.
    result = stack.up([widget("extra", size=1)], flags=["--continue-on-error"])
    assert not result.ok and result.failed == [stack.urn("user")]
    assert set(stack.objects_by_name()) == {"base", "mid", "user", "extra"}


def test_program_error_skips_deletes(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("a", size=1)]))
    result = stack.up([widget("b", size=1, refs={"upstream": "missing"})])  # KeyError in the program
    assert not result.ok
    assert any(e.startswith("program failed: KeyError") for e in result.errors())
    assert "a" in stack.objects_by_name() and stack.resource("a") is not None


def test_killed_mid_up_resumes_with_the_operator_commands(stack: FixtureStack) -> None:
    """What an operator does after a SIGKILL with a self-hosted backend: `pulumi cancel` (the lock
    stays), `pulumi up` (warns about the pending create and creates again), then
    `pulumi refresh --clear-pending-creates` (the pending create stays in state until then)."""
    declared = [widget("quick", size=1), widget("slow", size=1, delay=30)]
    handle = stack.engine(declared).start_up(flags=["--skip-preview"])
    deadline = time.monotonic() + 30
    # Kill once `quick` is recorded in state and `slow` is inside its provider Create.
    while not (
        ("create", "slow", "start") in {tuple(e[:3]) for e in stack.timed_events()}
        and stack.state_path.exists()
        and stack.resource("quick", decrypt=False) is not None
    ):
        assert time.monotonic() < deadline, handle.log()
        time.sleep(0.05)
    # While it runs, a second run on the same state is refused (the stack is locked).
    concurrent = stack.up(declared)
    assert concurrent.exitCode == 2 and "the stack is currently locked by 1 lock(s)" in concurrent.errors()[0]
    handle.kill()
    killed = handle.wait(timeout=10)
    assert not killed.ok
    state = stack.state()
    assert [(p.type.value, p.resource.urn) for p in state.pending_operations] == [("creating", stack.urn("slow"))]
    assert stack.resource("quick") is not None

    declared[1]["props"]["delay"] = 0
    locked = stack.up(declared)  # the killed run's lock is still there, as with the real backend
    assert locked.exitCode == 2 and "`pulumi cancel`" in locked.errors()[0]
    assert "removed the lock" in stack.engine(declared).cancel()
    result = stack.up(declared)
    assert_ok(result)
    assert any("interrupted while creating" in w for w in result.warnings())
    assert result.ops()[stack.urn("slow")] is StepOp.CREATE
    assert result.ops()[stack.urn("quick")] is StepOp.SAME
    # snapshot.go: a pending CREATE survives every run until the operator resolves it.
    assert [p.type.value for p in stack.state().pending_operations] == ["creating"]
    refreshed = stack.run("refresh", declared, flags=["--clear-pending-creates"])
    assert_ok(refreshed)
    assert stack.state().pending_operations == []
    assert_ok(stack.run("preview", declared, expect_no_changes=True))


def test_wrong_passphrase_is_a_clear_error(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("a", size=1, password="pw", secret=["password"])]))
    engine = stack.engine([])
    engine.passphrase = "not-the-passphrase"
    result = engine.up()
    assert result.exitCode == 2
    assert "does not match the passphrase" in result.errors()[0]
    assert read_state(stack.state_path, TEST_PASSPHRASE).resources  # untouched


def test_cli_reports_secure_config_values_with_file_and_key(tmp_path) -> None:  # noqa: ANN001
    project = tmp_path / "proj"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text((FIXTURE_PROJECT / "Pulumi.yaml").read_text())
    (project / "stacks" / "Pulumi.test.yaml").write_text("config:\n  engine-fixture:key:\n    secure: AAEAxyz\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine",
            "preview",
            "--cwd",
            str(project),
            "--stack",
            "test",
            "--state",
            str(tmp_path / "s.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Pulumi.test.yaml: config `engine-fixture:key` is a `secure:` value" in proc.stdout


def test_secret_plaintexts_are_redacted_from_messages_and_output(stack: FixtureStack) -> None:
    password = "redact-me-6d1e"
    result = stack.up([widget("leaky", password=password, secret=["password"], leak_password=True)])
    assert not result.ok
    assert result.errors() == ["RuntimeError: login refused for password [secret]", "update failed"]
    assert "[provider] using password [secret]" in result.log
    assert password not in result.log and password not in result.model_dump_json()


def test_interrupt_finishes_running_steps_and_starts_no_new_ones(stack: FixtureStack) -> None:
    declared = [
        widget("old", size=1),
        widget("slow", size=1, delay=3),
        widget("next", size=1, opts={"depends_on": ["slow"]}),
    ]
    assert_ok(stack.up(declared[:1]))
    handle = stack.engine(declared[1:]).start_up()  # `old` is no longer declared: a delete is due
    deadline = time.monotonic() + 30
    while ("create", "slow", "start") not in {tuple(e[:3]) for e in stack.timed_events()}:
        assert time.monotonic() < deadline, handle.log()
        time.sleep(0.05)
    handle.interrupt()  # SIGINT to the engine only, like Ctrl-C
    result = handle.wait(timeout=30)
    assert result.exitCode == 1
    assert stack.resource("slow") is not None and "slow" in stack.objects_by_name()  # finished, recorded
    assert stack.resource("next") is None and "next" not in stack.objects_by_name()  # never started
    assert result.errors() == ["update canceled"]  # deployment_executor.go reportExecResult("canceled")
    assert "old" in stack.objects_by_name()  # no deletes after an interrupted program
    assert stack.state().pending_operations == []
