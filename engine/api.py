"""Python API: every operation runs ``python -m engine`` in a fresh subprocess.

A subprocess per run keeps the Pulumi SDK's process-global state fresh, and lets tests kill a run
mid-operation (``start_up().kill()``): the engine runs in its own process group with its provider server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.cli import CONFIG_ENV
from engine.model import Diagnostic, EngineResult, Operation, Severity

_REPO_ROOT = Path(__file__).resolve().parents[1]


class EngineHandle:
    """A running engine process."""

    def __init__(self, operation: Operation, popen: subprocess.Popen[bytes], workdir: Path) -> None:
        self.operation = operation
        self.popen = popen
        self._workdir = workdir
        self.result_path = workdir / "result.json"
        self.log_path = workdir / "engine.log"

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the engine's whole process group (engine + provider server)."""
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def interrupt(self, sig: int = signal.SIGINT) -> None:
        """Ask the engine (only) to stop like Ctrl-C: steps in progress finish and are saved, no new one
        starts, deletes are skipped. The provider server is left alone so running calls can complete."""
        try:
            os.kill(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def wait(self, timeout: float | None = None) -> EngineResult:
        code = self.popen.wait(timeout=timeout)
        log = self.log()
        if self.result_path.exists():
            result = EngineResult.model_validate_json(self.result_path.read_text())
        else:  # killed, or crashed before it could report
            result = EngineResult(
                operation=self.operation,
                ok=False,
                exitCode=code,
                diagnostics=[Diagnostic(message=f"engine exited with {code} and no result", severity=Severity.ERROR)],
            )
        result.log = log
        shutil.rmtree(self._workdir, ignore_errors=True)
        return result


class Engine:
    """``Engine(project_dir, stack, state_path).up()`` and friends; see docs/engine.md."""

    def __init__(
        self,
        project_dir: str | os.PathLike[str],
        stack: str,
        state_path: str | os.PathLike[str],
        config_overrides: dict[str, str] | None = None,
        passphrase: str | None = None,
        env: dict[str, str] | None = None,
        stack_states: dict[str, str | os.PathLike[str]] | None = None,
    ) -> None:
        self.project_dir = Path(project_dir).resolve()
        # Stacks this one references (pulumi.StackReference): name -> that stack's state file.
        self.stack_states = {name: Path(p).resolve() for name, p in (stack_states or {}).items()}
        self.stack = stack
        self.state_path = Path(state_path).resolve()
        self.config_overrides = dict(config_overrides or {})
        self.passphrase = passphrase
        self.env = dict(env or {})

    def start(
        self,
        operation: Operation | str,
        targets: list[str] | None = None,
        expect_no_changes: bool = False,
        flags: list[str] | None = None,
    ) -> EngineHandle:
        """Start ``python -m engine <operation>``; ``flags`` are further CLI flags, e.g.
        ``["--continue-on-error"]``, ``["--skip-preview"]``, ``["--clear-pending-creates"]``."""
        operation = Operation(operation)
        workdir = Path(tempfile.mkdtemp(prefix="engine-run-"))
        args = [
            sys.executable,
            "-m",
            "engine",
            operation.value,
            "--cwd",
            str(self.project_dir),
            "--stack",
            self.stack,
            "--state",
            str(self.state_path),
            "--json",
            "--result-file",
            str(workdir / "result.json"),
        ]
        if expect_no_changes:
            args.append("--expect-no-changes")
        args += flags or []
        for name, path in self.stack_states.items():
            args += ["--stack-state", f"{name}={path}"]
        for urn in targets or []:
            args += ["--target", urn]
        env = dict(os.environ)
        env.update(self.env)
        config_file = workdir / "config.json"  # 0600 in a 0700 mkdtemp directory; removed with it
        config_file.write_text(json.dumps(self.config_overrides))
        config_file.chmod(0o600)
        env[CONFIG_ENV] = str(config_file)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        if self.passphrase is not None:
            env["PULUMI_CONFIG_PASSPHRASE"] = self.passphrase
        log = open(workdir / "engine.log", "wb")  # noqa: SIM115 - the child owns it; closed below
        try:
            popen = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.project_dir,
                start_new_session=True,
            )
        finally:
            log.close()
        return EngineHandle(operation, popen, workdir)

    def run(
        self,
        operation: Operation | str,
        targets: list[str] | None = None,
        timeout: float | None = None,
        expect_no_changes: bool = False,
        flags: list[str] | None = None,
    ) -> EngineResult:
        """Run one operation to completion. ``expect_no_changes`` fails the run (exit 1) if any resource
        would be created, updated, replaced or deleted (the CLI's ``--expect-no-changes``)."""
        handle = self.start(operation, targets, expect_no_changes, flags)
        try:
            return handle.wait(timeout)
        except subprocess.TimeoutExpired:
            handle.kill()
            handle.popen.wait()
            raise

    def start_up(self, targets: list[str] | None = None, flags: list[str] | None = None) -> EngineHandle:
        return self.start(Operation.UP, targets, flags=flags)

    def preview(
        self, targets: list[str] | None = None, timeout: float | None = None, expect_no_changes: bool = False
    ) -> EngineResult:
        return self.run(Operation.PREVIEW, targets, timeout, expect_no_changes)

    def up(
        self,
        targets: list[str] | None = None,
        timeout: float | None = None,
        expect_no_changes: bool = False,
        flags: list[str] | None = None,
    ) -> EngineResult:
        """``pulumi up --yes``: a preview first, then the update (``flags=["--skip-preview"]`` skips it)."""
        return self.run(Operation.UP, targets, timeout, expect_no_changes, flags)

    def refresh(
        self, targets: list[str] | None = None, timeout: float | None = None, flags: list[str] | None = None
    ) -> EngineResult:
        return self.run(Operation.REFRESH, targets, timeout, flags=flags)

    def destroy(
        self, targets: list[str] | None = None, timeout: float | None = None, flags: list[str] | None = None
    ) -> EngineResult:
        return self.run(Operation.DESTROY, targets, timeout, flags=flags)

    def cancel(self) -> str:
        """``pulumi cancel``: remove the stack lock a killed run left behind."""
        proc = subprocess.run(
            [sys.executable, "-m", "engine", "cancel", "--stack", self.stack, "--state", str(self.state_path)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONPATH": str(_REPO_ROOT)},
        )
        return proc.stdout.strip()
