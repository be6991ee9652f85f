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
        widget("bad", size=1, zone="z9", fail_create=True),
        widget("after_bad", size=1, refs={"upstream": "bad"}),
        widget("indep", size=1, delay=0.2),
    ]
    result = stack.up(declared)
    assert not result.ok and result.exitCode == 1
    bad = stack.urn("bad")
    messages = {d.urn: d.message for d in result.diagnostics}
    assert messages[bad] == "RuntimeError: widget quota exceeded in zone z9"
    assert "Traceback" not in json.dumps([d.message for d in result.diagnostics])
    assert "skipped" in messages[stack.urn("after_bad")]
    assert set(result.failed) == {bad, stack.urn("after_bad")}
    assert set(stack.objects_by_name()) == {"ok", "indep"}  # independent resources went ahead
    assert stack.resource("bad") is None and stack.resource("ok") is not None
    assert stack.state().pending_operations == []

    declared[1]["props"]["fail_create"] = False
    result = stack.up(declared)
    assert_ok(result)
    ops = result.ops()
    assert ops[bad] is StepOp.CREATE and ops[stack.urn("after_bad")] is StepOp.CREATE
    assert ops[stack.urn("ok")] is StepOp.SAME and ops[stack.urn("indep")] is StepOp.SAME


def test_check_failure_names_property_and_reason(stack: FixtureStack) -> None:
    result = stack.up([widget("neg", size=-1)])
    assert not result.ok
    assert result.errors() == ["check failed: property `size`: must be a number >= 0, got -1.0"]
    assert stack.backend()["objects"] == {}


def test_failed_delete_keeps_everything_it_depends_on(stack: FixtureStack) -> None:
    assert_ok(
        stack.up(
            [
                widget("base", size=1),
                widget("mid", size=1, refs={"upstream": "base"}),
                widget("user", size=1, fail_delete=True, refs={"upstream": "mid"}),
                widget("other", size=1),
            ]
        )
    )
    result = stack.up([])
    assert not result.ok
    assert result.errors() == ["RuntimeError: widget user is busy"]
    kept = {d.urn for d in result.diagnostics if "still depends on it" in d.message}
    assert kept == {stack.urn("mid"), stack.urn("base")}  # transitively
    assert set(stack.objects_by_name()) == {"base", "mid", "user"}  # `other` was deleted
    assert all(stack.resource(n) is not None for n in ("base", "mid", "user"))


def test_program_error_skips_deletes(stack: FixtureStack) -> None:
    assert_ok(stack.up([widget("a", size=1)]))
    result = stack.up([widget("b", size=1, refs={"upstream": "missing"})])  # KeyError in the program
    assert not result.ok
    assert any(e.startswith("program failed: KeyError") for e in result.errors())
    assert "a" in stack.objects_by_name() and stack.resource("a") is not None


def test_killed_mid_up_resumes_with_a_warning(stack: FixtureStack) -> None:
    declared = [widget("quick", size=1), widget("slow", size=1, delay=30)]
    handle = stack.engine(declared).start_up()
    deadline = time.monotonic() + 30
    # Kill once `quick` is recorded in state and `slow` is inside its provider Create.
    while not (
        ("create", "slow", "start") in {tuple(e[:3]) for e in stack.timed_events()}
        and stack.state_path.exists()
        and stack.resource("quick", decrypt=False) is not None
    ):
        assert time.monotonic() < deadline, handle.log()
        time.sleep(0.05)
    # While it runs, a second run on the same state is refused (the state has a run lock).
    concurrent = stack.up(declared)
    assert concurrent.exitCode == 2 and "another engine run is using this state" in concurrent.errors()[0]
    handle.kill()
    killed = handle.wait(timeout=10)
    assert not killed.ok
    state = stack.state()
    assert [(p.type.value, p.resource.urn) for p in state.pending_operations] == [("creating", stack.urn("slow"))]
    assert stack.resource("quick") is not None

    declared[1]["props"]["delay"] = 0
    result = stack.up(declared)
    assert_ok(result)
    assert any("interrupted while creating" in w for w in result.warnings())
    assert result.ops()[stack.urn("slow")] is StepOp.CREATE
    assert result.ops()[stack.urn("quick")] is StepOp.SAME
    assert stack.state().pending_operations == []


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
    assert result.errors() == ["RuntimeError: login refused for password [secret]"]
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
    assert any("interrupted" in e for e in result.errors())
    assert "old" in stack.objects_by_name()  # no deletes after an interrupted program
    assert stack.state().pending_operations == []
