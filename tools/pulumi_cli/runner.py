"""One CLI operation on one stack: `python -m tools.pulumi_cli.runner REQUEST.json`.

This process serves the project's program to the CLI as an Automation API inline program (the SDK's
`LanguageServer` over `--client`), runs `pulumi <operation>` with the CLI's own flags, passes its output
through, and writes the result (tools/pulumi_cli/results.py) read from the CLI's engine-event log.
The program (`main` of the project's Pulumi.yaml) runs here, with the project directory as cwd and on
sys.path, as the language host would run it; the CLI starts the dynamic-provider plugin itself.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from tools.pulumi_cli.install import cli_env, pulumi_binary
from tools.pulumi_cli.results import EngineResult, Operation, read_events, result_from_events

# As the Automation API's own server: large property bags pass (a fleet's pool inputs are megabytes).
_GRPC_OPTIONS = [("grpc.max_receive_message_length", 2**31 - 1), ("grpc.max_send_message_length", 2**31 - 1)]


class RunRequest(BaseModel):
    operation: Operation
    project_dir: Path
    workspace_dir: Path  # holds the project's Pulumi.yaml and the stack's config file
    pulumi_home: Path
    backend_url: str
    stack: str
    args: list[str] = Field(default_factory=list)  # further CLI flags (--target, --expect-no-changes, ...)
    env: dict[str, str] = Field(default_factory=dict)
    run_dir: Path  # result.json, cli.log, events.jsonl, cli.pid
    echo: bool = False  # also print the CLI's output here (the demo)
    color: str = "never"
    preview_json: bool = True  # a preview prints the CLI's `--json` document (else its display)
    # the caller's time.monotonic() as it started this process: CLOCK_MONOTONIC is one clock for every process on
    # the host, so the runner can tell how long the caller waited until the CLI exited
    started_at: float


def _main_file(project_dir: Path) -> Path:
    doc = yaml.safe_load((project_dir / "Pulumi.yaml").read_text()) or {}
    main = project_dir / str(doc.get("main") or "__main__.py")
    return main / "__main__.py" if main.is_dir() else main


def _imported_modules(main: Path) -> list[str]:
    """The modules the program's own top-level import statements name, in order."""
    try:
        tree = ast.parse(main.read_text(), str(main))
    except (OSError, SyntaxError):
        return []  # the program's own run reports it
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def _warm_imports(main: Path) -> threading.Thread:
    """Import the program's modules while the CLI starts (it calls the program ~0.3 s later): the program's
    first run waits for this thread, then finds them loaded (one thread imports: no two importing at once).
    Only imports, which the program makes first anyway; a failure is left for the program's own run to
    report."""

    def warm() -> None:
        for name in _imported_modules(main):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - reported by the program's own import, with its traceback
                return

    thread = threading.Thread(target=warm, name="warm-imports", daemon=True)
    thread.start()
    return thread


def _program(project_dir: Path, clock: Any, runs: list[tuple[float, float]], warm: threading.Thread | None) -> Any:
    """The project's program; each run's (start, end) in seconds since the CLI started is kept in `runs`
    (`up` runs it twice: for its preview, then for the update); `warm`: its modules' warm-up."""
    main = _main_file(project_dir)

    def program() -> None:
        started = clock()
        if warm is not None:
            warm.join()
        try:
            runpy.run_path(str(main), run_name="__main__")
        finally:
            runs.append((started, clock()))

    return program


class _EventTail:
    """Reads the CLI's event log while it is written and notes when each event arrived (seconds since the
    CLI started): the log's own timestamps are whole seconds."""

    def __init__(self, path: Path, clock: Any) -> None:
        self.path, self.clock = path, clock
        self.times: list[float] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        buf, pos = b"", 0
        while True:
            finished = self._done.is_set()
            try:
                with open(self.path, "rb") as f:
                    f.seek(pos)
                    chunk = f.read()
            except FileNotFoundError:
                chunk = b""
            pos += len(chunk)
            buf += chunk
            *lines, buf = buf.split(b"\n")
            now = self.clock()
            self.times += [now] * sum(1 for line in lines if line.strip())
            if finished:
                return
            self._done.wait(0.05)

    def stop(self) -> list[float]:
        self._done.set()
        self._thread.join()
        return self.times


def _command(req: RunRequest, port: int, events: Path) -> list[str]:
    verb = {
        Operation.PREVIEW: ["preview", "--json"] if req.preview_json else ["preview"],
        Operation.UP: ["up", "--yes"],
        Operation.REFRESH: ["refresh", "--yes"],
        Operation.DESTROY: ["destroy", "--yes"],
    }[req.operation]
    return [
        str(pulumi_binary()), *verb, "--stack", req.stack, "--non-interactive", "--color", req.color,
        f"--client=127.0.0.1:{port}", "--exec-kind", "inline", "--event-log", str(events), *req.args,
    ]


def _run_cli(req: RunRequest, port: int, clock: Any) -> tuple[int, str, list[float], float]:
    """Run the CLI, its output passed through to cli.log (and here when echoing); (exit code, its stdout,
    each event's arrival time, its wall time)."""
    events = req.run_dir / "events.jsonl"
    env = cli_env(req.pulumi_home, req.backend_url, req.env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(req.project_dir), env.get("PYTHONPATH", "")) if p)
    stdout_chunks: list[str] = []
    lock = threading.Lock()
    with open(req.run_dir / "cli.log", "w") as log:
        proc = subprocess.Popen(_command(req, port, events), cwd=req.workspace_dir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        (req.run_dir / "cli.pid").write_text(str(proc.pid))
        tail = _EventTail(events, clock)

        def pump(stream: Any, keep: bool) -> None:
            for line in stream:
                with lock:
                    log.write(line)
                    log.flush()
                    if keep:
                        stdout_chunks.append(line)
                    if req.echo:
                        sys.stdout.write(line)
                        sys.stdout.flush()

        threads = [threading.Thread(target=pump, args=(proc.stdout, True), daemon=True),
                   threading.Thread(target=pump, args=(proc.stderr, False), daemon=True)]
        for t in threads:
            t.start()
        code = proc.wait()
        for t in threads:
            t.join()
        return code, "".join(stdout_chunks), tail.stop(), clock()


def run(req: RunRequest) -> EngineResult:
    # Imported here: the SDK's gRPC server is only needed in this process.
    import grpc
    from pulumi.automation._server import LanguageServer
    from pulumi.runtime.proto import language_pb2_grpc

    req = req.model_copy(update={"project_dir": req.project_dir.resolve()})
    sys.path.insert(0, str(req.project_dir))
    os.chdir(req.project_dir)
    t0 = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t0

    program_runs: list[tuple[float, float]] = []
    # refresh and destroy run no program
    warm = _warm_imports(_main_file(req.project_dir)) if req.operation in (Operation.PREVIEW, Operation.UP) else None
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=_GRPC_OPTIONS)
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(
        LanguageServer(_program(req.project_dir, clock, program_runs, warm)), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        code, stdout, times, wall = _run_cli(req, port, clock)
        until_cli_exit = time.monotonic() - req.started_at
    finally:
        server.stop(0)
    preview = None
    if req.operation is Operation.PREVIEW and req.preview_json:
        try:
            preview = json.loads(stdout)
        except ValueError:
            preview = None  # the CLI failed before it could print its document; the log says why
    log = (req.run_dir / "cli.log").read_text(errors="replace")
    result = result_from_events(req.operation, read_events(req.run_dir / "events.jsonl"), code, log, preview, times)
    result.wall_s = wall
    result.until_cli_exit_s = until_cli_exit
    result.program_runs = program_runs
    return result


def main(argv: list[str]) -> int:
    # A terminal's Ctrl-C reaches the CLI too, which cancels gracefully; this process must keep serving
    # the program until the CLI is done.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    req = RunRequest.model_validate_json(Path(argv[0]).read_text())
    result = run(req)
    tmp = req.run_dir / "result.json.tmp"
    tmp.write_text(result.model_dump_json())
    tmp.replace(req.run_dir / "result.json")
    return result.exitCode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
