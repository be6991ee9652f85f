"""``python -m engine {preview,up,refresh,destroy}``: the CLI-free engine for tests and for
machines without the Pulumi CLI. Users run the real ``pulumi`` CLI; this mirrors its behaviour."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from engine.config import ConfigError, parse_overrides
from engine.deployment import Deployment
from engine.locks import cancel
from engine.model import Diagnostic, EngineResult, Operation, Severity, StepOp
from engine.runner import EXIT_USAGE, RunOptions, run_operation
from engine.values import UNKNOWN

# The Python API passes config overrides in a file named here rather than on argv (argv is visible to
# every user) or in the environment itself (one environment string is capped at 128 KiB by Linux, and a
# fleet's machine specs are larger).
CONFIG_ENV = "GPUAAS_ENGINE_CONFIG_FILE"


def read_config_file() -> dict[str, str]:
    """The overrides the Python API wrote (see CONFIG_ENV); empty when none were passed."""
    path = os.environ.get(CONFIG_ENV)
    return json.loads(Path(path).read_text()) if path else {}

_VERB = {
    StepOp.CREATE: "created",
    StepOp.UPDATE: "updated",
    StepOp.REPLACE: "replaced",
    StepOp.DELETE: "deleted",
    StepOp.SAME: "unchanged",
    StepOp.READ: "read",
}
_PREVIEW_VERB = {
    StepOp.CREATE: "to create",
    StepOp.UPDATE: "to update",
    StepOp.REPLACE: "to replace",
    StepOp.DELETE: "to delete",
    StepOp.SAME: "unchanged",
    StepOp.READ: "to read",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    p.add_argument("operation", choices=[*(o.value for o in Operation), "cancel"])
    p.add_argument("--cwd", default=".", help="the Pulumi project directory (holds Pulumi.yaml)")
    p.add_argument("--stack", "-s", required=True)
    p.add_argument("--state", required=True, help="JSON state file (created if missing)")
    p.add_argument(
        "--config",
        "-c",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a stack config value (repeatable)",
    )
    p.add_argument("--target", "-t", action="append", default=[], metavar="URN")
    p.add_argument(
        "--stack-state",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="the state file of a stack this one references (pulumi:pulumi:StackReference; repeatable)",
    )
    p.add_argument("--json", "-j", action="store_true", help="machine-readable output on stdout")
    p.add_argument("--show-sames", action="store_true", help="preview --json: include unchanged resources")
    p.add_argument(
        "--show-replacement-steps",
        action="store_true",
        help="preview --json: include the create-replacement/delete-replaced halves of replacements",
    )
    p.add_argument("--expect-no-changes", action="store_true", help="fail (exit 1) if any resource changes")
    p.add_argument(
        "--continue-on-error",
        action="store_true",
        help="up/destroy: keep going after a failed step (independent resources only), as the CLI's flag does",
    )
    p.add_argument("--skip-preview", action="store_true", help="up: do not run the preview first")
    p.add_argument(
        "--clear-pending-creates", action="store_true", help="refresh: drop pending creates left by a killed run"
    )
    p.add_argument(
        "--import-pending-creates",
        nargs="*",
        metavar="URN ID",
        help="refused: dynamic providers cannot import; use --clear-pending-creates (see docs/engine.md)",
    )
    p.add_argument("--result-file", help=argparse.SUPPRESS)
    return p


def _stack_states(items: list[str]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"--stack-state {item!r}: expected NAME=PATH (the referenced stack's state file)")
        out[name] = Path(path).resolve()
    return out


def _preview_first(args: argparse.Namespace, overrides: dict[str, str], out: TextIO) -> EngineResult:
    """``pulumi up`` without --skip-preview runs a whole preview first (so Check and Diff run twice) and
    stops if it fails. The preview runs as its own engine process, as the CLI runs it as its own operation."""
    with tempfile.TemporaryDirectory(prefix="engine-preview-") as tmp:
        result_file = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "engine", "preview", "--cwd", args.cwd, "--stack", args.stack]
        cmd += ["--state", args.state, "--json", "--result-file", str(result_file)]
        for urn in args.target:
            cmd += ["--target", urn]
        for item in args.stack_state:
            cmd += ["--stack-state", item]
        config_file = Path(tmp) / "config.json"
        config_file.write_text(json.dumps(overrides))
        config_file.chmod(0o600)
        env = {**os.environ, CONFIG_ENV: str(config_file)}
        out.write("Previewing update:\n")
        out.flush()
        proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=out, check=False)
        if result_file.exists():
            return EngineResult.model_validate_json(result_file.read_text())
        return EngineResult(
            operation=Operation.PREVIEW,
            ok=False,
            exitCode=proc.returncode or 1,
            diagnostics=[Diagnostic(message=f"the preview exited with {proc.returncode}", severity=Severity.ERROR)],
        )


def human_summary(result: EngineResult) -> str:
    verbs = _PREVIEW_VERB if result.operation is Operation.PREVIEW else _VERB
    lines = []
    # Provider output was already shown live; the summary repeats only what the engine itself reported.
    shown = [d for d in result.diagnostics if d.urn or d.severity not in (Severity.INFO, Severity.INFO_ERR)]
    if shown:
        lines.append("Diagnostics:")
        for d in shown:
            lines.append(f"  {d.severity.value}: {d.urn + ': ' if d.urn else ''}{d.message}")
    if result.outputs:
        lines.append("Outputs:")
        for key, value in sorted(result.outputs.items()):
            lines.append(f"    {key}: {json.dumps(value).replace(UNKNOWN, '[unknown]')}")
    lines.append("Resources:")
    for op, n in sorted(result.changeSummary.items()):
        label = verbs.get(StepOp(op), op) if op in StepOp._value2member_map_ else op
        lines.append(f"    {n} {label}")
    lines.append("" if result.ok else f"{result.operation.value} failed ({len(result.failed)} resource(s))")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    # size: argument handling, the pre-up preview, signal wiring and output, read top to bottom
    args = build_parser().parse_args(argv)
    if args.operation == "cancel":
        print(cancel(Path(args.state).resolve()))
        return 0
    if args.import_pending_creates is not None:
        print(
            "error: --import-pending-creates is not supported: a Python dynamic provider's Read returns no inputs, "
            "so the import would fail under the real CLI too. Use `refresh --clear-pending-creates`; the next `up` "
            "creates the resource again and every provider here adopts the object it finds (docs/engine.md)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        overrides = read_config_file()
        overrides.update(parse_overrides(args.config))
        stack_states = _stack_states(args.stack_state)
    except (ConfigError, json.JSONDecodeError) as exn:
        print(f"error: {exn}", file=sys.stderr)
        return EXIT_USAGE
    out = sys.stderr if args.json else sys.stdout

    def emit(line: str) -> None:
        out.write(line)
        out.flush()

    operation = Operation(args.operation)
    if operation is Operation.UP and not args.skip_preview:
        preview = _preview_first(args, overrides, out)
        if not preview.ok:
            preview.operation = Operation.UP
            return _finish(args, preview)
        emit("Updating:\n")
    opts = RunOptions(
        operation=operation,
        project_dir=Path(args.cwd).resolve(),
        stack=args.stack,
        state_path=Path(args.state).resolve(),
        config_overrides=overrides,
        targets=args.target,
        expect_no_changes=args.expect_no_changes,
        continue_on_error=args.continue_on_error,
        clear_pending_creates=args.clear_pending_creates,
        stack_states=stack_states,
    )

    def on_deployment(dep: Deployment) -> None:
        def interrupt(signum: int, _frame: object) -> None:
            if dep.cancelled.is_set():  # a second signal: stop now, as the CLI does
                os._exit(128 + signum)
            dep.cancelled.set()
            emit(
                f"interrupted ({signal.Signals(signum).name}): finishing the steps in progress; signal again to abort\n"
            )

        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, interrupt)

    return _finish(args, run_operation(opts, emit, on_deployment))


def _finish(args: argparse.Namespace, result: EngineResult) -> int:
    if args.result_file:
        Path(args.result_file).write_text(result.model_dump_json())
    if args.json:
        doc = (
            result.preview_digest(args.show_sames, args.show_replacement_steps)
            if result.operation is Operation.PREVIEW
            else result.model_dump(mode="json", exclude={"log"}, exclude_none=True)
        )
        sys.stdout.write(json.dumps(doc, indent=4) + "\n")
    else:
        sys.stdout.write(human_summary(result))
    sys.stdout.flush()
    return result.exitCode
