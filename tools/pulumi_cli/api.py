"""`Engine(project_dir, stack, backend_dir).up()`: a stack run by the real Pulumi CLI, for tests, the demo
and the benchmarks.

Each Engine is one stack of one project on a `file://` backend (a directory; stacks sharing it resolve
each other's `pulumi.StackReference`s). Its workspace (`<backend>/.workspaces/<stack>`) holds a copy of
the project's Pulumi.yaml and the stack's config file (the project's own `stacks/Pulumi.<stack>.yaml`
config plus the overrides; secret keys set with `pulumi config set --secret` from stdin), so the
checkout is never written. Every operation is a fresh runner process (tools/pulumi_cli/runner.py) in its
own session: a test can SIGKILL the whole run (runner, CLI, provider plugins) at any moment, or send the
CLI a Ctrl-C.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tools.pulumi_cli.install import REPO, TEST_PASSPHRASE, cli_env, pulumi_binary
from tools.pulumi_cli.results import EngineResult, Operation, read_events, result_from_events
from tools.pulumi_cli.runner import RunRequest

# Stack config keys whose values are secrets (set with --secret, so encrypted in the stack file).
SECRET_CONFIG_KEYS = frozenset({"vault_token", "vault_role_id", "vault_secret_id"})


class CliError(RuntimeError):
    """A CLI command (other than an operation) failed; the message carries its output."""


def _descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (read from /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class EngineHandle:
    """A running operation (the runner process, the CLI under it, the plugins the CLI started)."""

    def __init__(self, operation: Operation, popen: subprocess.Popen[bytes], run_dir: Path, started_at: float) -> None:
        self.operation = operation
        self.popen = popen
        self.run_dir = run_dir
        self.started_at = started_at  # time.monotonic() as the runner was started (RunRequest.started_at)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        path = self.run_dir / "cli.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def cli_pid(self, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        path = self.run_dir / "cli.pid"
        while not path.exists() or not path.read_text().strip():
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise CliError("the CLI did not start:\n" + self.log())
            time.sleep(0.05)
        return int(path.read_text())

    def kill(self) -> None:
        """SIGKILL the whole run, as a crash of the machine running `pulumi up` would end it: the tree is
        frozen first (SIGSTOP), so nothing forks away, then killed."""
        root = self.popen.pid
        seen: set[int] = set()
        _signal([root], signal.SIGSTOP)
        while True:
            new = [p for p in _descendants(root) if p not in seen]
            if not new:
                break
            _signal(new, signal.SIGSTOP)
            seen.update(new)
        _signal([root, *seen], signal.SIGKILL)

    def interrupt(self, sig: int = signal.SIGINT) -> None:
        """Ctrl-C to the CLI only: it stops starting steps, lets running ones finish and saves them."""
        _signal([self.cli_pid()], sig)

    def wait(self, timeout: float | None = None) -> EngineResult:
        code = self.popen.wait(timeout=timeout)
        result_path = self.run_dir / "result.json"
        if result_path.exists():
            result = EngineResult.model_validate_json(result_path.read_text())
        else:  # killed, or the runner crashed: what the CLI logged before it ended
            result = result_from_events(self.operation, read_events(self.run_dir / "events.jsonl"),
                                        code if code else 1, self.log())
            result.ok = False
            runner_err = self.run_dir / "runner.err"
            if runner_err.exists():
                result.log += runner_err.read_text(errors="replace")
        shutil.rmtree(self.run_dir, ignore_errors=True)
        result.call_s = time.monotonic() - self.started_at
        return result


class Engine:
    """One stack of a project, run by the real CLI on a file backend. `config_overrides` are stack config
    (unnamespaced keys get the project's namespace); `env` is added to the CLI's environment (so to the
    program's and the providers'). `secrets_provider` is `passphrase` (with `passphrase`) or e.g.
    `hashivault://key` (with VAULT_ADDR and VAULT_TOKEN in `env`)."""

    def __init__(
        self,
        project_dir: str | os.PathLike[str],
        stack: str,
        backend_dir: str | os.PathLike[str],
        config_overrides: Mapping[str, Any] | None = None,
        passphrase: str | None = TEST_PASSPHRASE,
        env: Mapping[str, str] | None = None,
        secrets_provider: str = "passphrase",
        secret_keys: frozenset[str] = SECRET_CONFIG_KEYS,
    ) -> None:
        self.project_dir = Path(project_dir).resolve()
        self.project_doc = yaml.safe_load((self.project_dir / "Pulumi.yaml").read_text()) or {}
        self.project = str(self.project_doc["name"])
        self.stack = stack
        self.backend_dir = Path(backend_dir).resolve()
        self.config_overrides = dict(config_overrides or {})
        self.passphrase = passphrase
        self.env = dict(env or {})
        self.secrets_provider = secrets_provider
        self.secret_keys = secret_keys
        self.workspace_dir = self.backend_dir / ".workspaces" / stack
        self.pulumi_home = self.backend_dir / ".workspaces" / ".pulumi-home"
        self._initialised = False

    # -- the stack's workspace -------------------------------------------------------------------

    @property
    def backend_url(self) -> str:
        # metadata=skip: no `.attrs` sidecar per state file. The file backend writes a checkpoint by rename
        # (atomic) but its sidecar by truncate-and-write, so a run SIGKILLed in between left an empty
        # `<stack>.json.attrs` and every later command failed "failed to load checkpoint: EOF".
        return f"file://{self.backend_dir}?metadata=skip"

    @property
    def stack_file(self) -> Path:
        config_dir = str(self.project_doc.get("stackConfigDir") or "")
        return self.workspace_dir / config_dir / f"Pulumi.{self.stack}.yaml"

    def _env(self) -> dict[str, str]:
        extra = dict(self.env)
        if self.passphrase is not None:
            extra["PULUMI_CONFIG_PASSPHRASE"] = self.passphrase
        return cli_env(self.pulumi_home, self.backend_url, extra)

    def cli(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 300,
            with_stack: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `pulumi <args> [--stack <stack>]` in the workspace (for commands that run no program)."""
        self._ensure_workspace()
        cmd = [str(pulumi_binary()), *args, *(["--stack", self.stack] if with_stack else [])]
        proc = subprocess.run(cmd, cwd=self.workspace_dir, env=self._env(), input=stdin, text=True,
                              capture_output=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise CliError(f"`pulumi {' '.join(args)}` exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
        return proc

    def _key(self, key: str) -> str:
        return key if ":" in key else f"{self.project}:{key}"

    def _ensure_workspace(self) -> None:
        if (self.workspace_dir / "Pulumi.yaml").exists():
            return
        self.workspace_dir.mkdir(parents=True, exist_ok=True)
        self.workspace_dir.chmod(0o700)
        self.pulumi_home.mkdir(parents=True, exist_ok=True)
        project = dict(self.project_doc)
        project["main"] = str(self.project_dir / str(project.get("main") or "__main__.py"))
        (self.workspace_dir / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))

    def _ensure_stack(self) -> None:
        if self._initialised:
            return
        self._ensure_workspace()
        self.stack_file.parent.mkdir(parents=True, exist_ok=True)
        init = self.cli("stack", "init", self.stack, "--secrets-provider", self.secrets_provider,
                        "--non-interactive", check=False, with_stack=False)
        if init.returncode != 0 and "already exists" not in init.stdout + init.stderr:
            raise CliError(f"`pulumi stack init {self.stack}` failed:\n{init.stdout}{init.stderr}")
        self._initialised = True

    def _base_config(self) -> dict[str, Any]:
        config_dir = str(self.project_doc.get("stackConfigDir") or "")
        source = self.project_dir / config_dir / f"Pulumi.{self.stack}.yaml"
        if not source.exists():
            return {}
        return dict((yaml.safe_load(source.read_text()) or {}).get("config") or {})

    def apply_config(self) -> None:
        """Write the stack's config: the project's stack file's config and the overrides; secret keys are
        (re)encrypted only when their value changed (a digest of it is kept in the 0700 workspace)."""
        self._ensure_stack()
        doc = yaml.safe_load(self.stack_file.read_text()) if self.stack_file.exists() else None
        doc = doc or {}
        old = dict(doc.get("config") or {})
        plain: dict[str, Any] = {self._key(k): v for k, v in self._base_config().items()}
        secrets: dict[str, str] = {}
        for key, value in self.config_overrides.items():
            full = self._key(key)
            if full.split(":", 1)[1] in self.secret_keys:
                secrets[full] = str(value)
            else:
                plain[full] = value
        digests_path = self.workspace_dir / ".secret-digests.json"
        digests = json.loads(digests_path.read_text()) if digests_path.exists() else {}
        config = dict(plain)
        todo = {}
        for key, value in secrets.items():
            digest = hashlib.sha256((self.stack + key + value).encode()).hexdigest()
            if digests.get(key) == digest and isinstance(old.get(key), dict) and "secure" in old[key]:
                config[key] = old[key]
            else:
                todo[key] = (value, digest)
        doc["config"] = config
        self.stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        for key, (value, digest) in todo.items():
            self.cli("config", "set", "--secret", key, stdin=value)
            digests[key] = digest
        digests_path.write_text(json.dumps(digests))

    # -- operations ------------------------------------------------------------------------------

    def start(
        self,
        operation: Operation | str,
        targets: list[str] | None = None,
        expect_no_changes: bool = False,
        flags: list[str] | None = None,
        echo: bool = False,
        color: str = "never",
        preview_json: bool = True,
    ) -> EngineHandle:
        """Start `pulumi <operation>` (`up` previews first, as `pulumi up --yes` does); `flags` are further
        CLI flags, e.g. `--skip-preview`, `--continue-on-error`, `--clear-pending-creates`, `--refresh`."""
        operation = Operation(operation)
        self.apply_config()
        run_dir = Path(tempfile.mkdtemp(prefix=f"pulumi-{operation.value}-"))
        args = list(flags or [])
        if expect_no_changes:
            args.append("--expect-no-changes")
        for urn in targets or []:
            args += ["--target", urn]
        req = RunRequest(
            operation=operation, project_dir=self.project_dir, workspace_dir=self.workspace_dir,
            pulumi_home=self.pulumi_home, backend_url=self.backend_url, stack=self.stack, args=args,
            env={k: v for k, v in self._env().items() if k in self.env or k == "PULUMI_CONFIG_PASSPHRASE"},
            run_dir=run_dir, echo=echo, color=color, preview_json=preview_json, started_at=time.monotonic(),
        )
        request = run_dir / "request.json"
        request.write_text(req.model_dump_json())
        request.chmod(0o600)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
        err = open(run_dir / "runner.err", "wb")  # noqa: SIM115 - the child owns it
        try:
            popen = subprocess.Popen([sys.executable, "-m", "tools.pulumi_cli.runner", str(request)],
                                     env=env, cwd=self.project_dir, start_new_session=True,
                                     stdout=None if echo else subprocess.DEVNULL, stderr=err)
        finally:
            err.close()
        return EngineHandle(operation, popen, run_dir, req.started_at)

    def run(
        self,
        operation: Operation | str,
        targets: list[str] | None = None,
        timeout: float | None = None,
        expect_no_changes: bool = False,
        flags: list[str] | None = None,
        echo: bool = False,
        color: str = "never",
        preview_json: bool = True,
    ) -> EngineResult:
        """Run one operation to completion; `echo` also prints the CLI's output as it comes (the demo)."""
        handle = self.start(operation, targets, expect_no_changes, flags, echo=echo, color=color,
                            preview_json=preview_json)
        try:
            return handle.wait(timeout)
        except subprocess.TimeoutExpired:
            handle.kill()
            handle.popen.wait()
            raise

    def start_up(self, targets: list[str] | None = None, flags: list[str] | None = None) -> EngineHandle:
        return self.start(Operation.UP, targets, flags=flags)

    def preview(self, targets: list[str] | None = None, timeout: float | None = None,
                expect_no_changes: bool = False, flags: list[str] | None = None) -> EngineResult:
        return self.run(Operation.PREVIEW, targets, timeout, expect_no_changes, flags)

    def up(self, targets: list[str] | None = None, timeout: float | None = None,
           expect_no_changes: bool = False, flags: list[str] | None = None) -> EngineResult:
        return self.run(Operation.UP, targets, timeout, expect_no_changes, flags)

    def refresh(self, targets: list[str] | None = None, timeout: float | None = None,
                flags: list[str] | None = None, expect_no_changes: bool = False) -> EngineResult:
        return self.run(Operation.REFRESH, targets, timeout, expect_no_changes, flags)

    def destroy(self, targets: list[str] | None = None, timeout: float | None = None,
                flags: list[str] | None = None) -> EngineResult:
        return self.run(Operation.DESTROY, targets, timeout, flags=flags)

    # -- commands that run no program ------------------------------------------------------------

    def cancel(self) -> str:
        """`pulumi cancel --yes`: remove the lock a killed run left on the stack."""
        self._ensure_stack()
        proc = self.cli("cancel", "--yes")
        return (proc.stdout + proc.stderr).strip()

    def export(self, show_secrets: bool = False) -> dict[str, Any]:
        """`pulumi stack export`: the stack's deployment (secrets as ciphertext unless `show_secrets`)."""
        self._ensure_stack()
        proc = self.cli("stack", "export", *(["--show-secrets"] if show_secrets else []))
        return dict(json.loads(proc.stdout))

    def import_(self, deployment: Mapping[str, Any]) -> None:
        """`pulumi stack import`: replace the stack's deployment."""
        self._ensure_stack()
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=self.workspace_dir, delete=False) as f:
            json.dump(deployment, f)
        try:
            self.cli("stack", "import", "--file", f.name)
        finally:
            os.unlink(f.name)

    def resources(self, show_secrets: bool = False) -> dict[str, dict[str, Any]]:
        """URN -> resource of the stack's last checkpoint."""
        deployment = self.export(show_secrets).get("deployment") or {}
        return {r["urn"]: r for r in deployment.get("resources") or []}

    def outputs(self, show_secrets: bool = False) -> dict[str, Any]:
        """`pulumi stack output --json` (secrets as "[secret]" unless `show_secrets`)."""
        self._ensure_stack()
        proc = self.cli("stack", "output", "--json", *(["--show-secrets"] if show_secrets else []))
        return dict(json.loads(proc.stdout or "{}"))
