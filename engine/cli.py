"""``python -m engine {preview,up,refresh,destroy}``: the CLI-free engine for tests and for
machines without the Pulumi CLI. Users run the real ``pulumi`` CLI; this mirrors its behaviour."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from engine.config import ConfigError, parse_overrides
from engine.deployment import Deployment
from engine.model import EngineResult, Operation, StepOp
from engine.runner import EXIT_USAGE, RunOptions, run_operation
from engine.values import UNKNOWN

# The Python API passes config overrides here rather than on argv (argv is visible to every user).
CONFIG_ENV = "GPUAAS_ENGINE_CONFIG"

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
    p.add_argument("operation", choices=[o.value for o in Operation])
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
    p.add_argument("--json", "-j", action="store_true", help="machine-readable output on stdout")
    p.add_argument("--show-sames", action="store_true", help="preview --json: include unchanged resources")
    p.add_argument(
        "--show-replacement-steps",
        action="store_true",
        help="preview --json: include the create-replacement/delete-replaced halves of replacements",
    )
    p.add_argument("--expect-no-changes", action="store_true", help="fail (exit 1) if any resource changes")
    p.add_argument("--result-file", help=argparse.SUPPRESS)
    return p


def human_summary(result: EngineResult) -> str:
    verbs = _PREVIEW_VERB if result.operation is Operation.PREVIEW else _VERB
    lines = []
    if result.diagnostics:
        lines.append("Diagnostics:")
        for d in result.diagnostics:
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
    args = build_parser().parse_args(argv)
    try:
        overrides = json.loads(os.environ.get(CONFIG_ENV, "{}"))
        overrides.update(parse_overrides(args.config))
    except (ConfigError, json.JSONDecodeError) as exn:
        print(f"error: {exn}", file=sys.stderr)
        return EXIT_USAGE
    out = sys.stderr if args.json else sys.stdout

    def emit(line: str) -> None:
        out.write(line)
        out.flush()

    opts = RunOptions(
        operation=Operation(args.operation),
        project_dir=Path(args.cwd).resolve(),
        stack=args.stack,
        state_path=Path(args.state).resolve(),
        config_overrides=overrides,
        targets=args.target,
        expect_no_changes=args.expect_no_changes,
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

    result = run_operation(opts, emit, on_deployment)
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
