"""`make demo`: the `local` stack against the embedded simulators, end to end.

Starts the MAAS and platform simulators, OpenBao and an S3 server (simulators/localstack.py), then
runs the stack: with the real Pulumi CLI when it is installed (a throwaway local backend), otherwise
with the CLI-free engine (engine, which runs the same program against the SDK's real dynamic
provider server). It previews, brings the stack up, shows what was built, proves a second `up`
changes nothing, and destroys it again.

Where the machine allows it (root, systemd-nspawn, the lab's node image buildable: `lab.preflight`),
every machine MAAS deploys boots as a real systemd-nspawn node (simulators/maas/nspawn.py): its
cloud-init runs the deploy's user_data, the launcher fetches the site bundle, runs its steps and
validation and enrolls, and MAAS learns Deployed from the node's cloud-init; the demo prints each
node's step results. Elsewhere it says why in one line and uses the fast backend (the simulator
enrolls each machine itself). `--nodes fast|nspawn|auto` (make demo NODES=...) chooses.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cli.table import render_table
from environments import EnvironmentInvalid, load_environment
from environments.summary import render_summary
from simulators.localstack import LocalStack, write_lab_environment
from simulators.maas import MachineBackend
from tools.tables import render_outputs

REPO = Path(__file__).resolve().parent.parent


def _banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def _engine_run(op: str, stack: str, state: Path, config: dict[str, str], passphrase: str) -> dict[str, Any]:
    from engine.api import Engine

    engine = Engine(REPO, stack, state, config_overrides=config, passphrase=passphrase)
    started = time.monotonic()
    result = getattr(engine, op)()
    took = time.monotonic() - started
    summary = {k: v for k, v in (result.changeSummary or {}).items() if v}
    print(f"{op}: {'ok' if result.ok else 'FAILED'} in {took:.1f}s — {summary}")
    for d in result.diagnostics:
        if d.severity in ("error", "warning") and "PULUMI_CONFIG_PASSPHRASE" not in d.message:
            print(f"  {d.severity}: {d.message}")
    if not result.ok:
        raise SystemExit(f"demo: {op} failed (see the messages above)")
    return {"outputs": result.outputs, "summary": summary, "log": result.log}


def _show_apps(world: LocalStack) -> None:
    """App instances as the platform reports them (public API, a project service account): members, last ops."""
    from clients.platform import PlatformClient
    from clients.platform.models import Role

    assert world.platform is not None
    for app in world.env.app_instances:
        token = world.platform.issue_token(Role.SERVICE_ACCOUNT, project_id=app.project_id, name="demo-viewer")
        with PlatformClient(world.platform.url, token) as api:
            for inst in api.list_instances(app.project_id, name=app.name):
                print(f"{inst.name} ({inst.instance_id}): {inst.status.value}, "
                      f"{inst.app_type.value} {inst.app_version}")
                ops = {o.operation_id: o for o in api.list_operations(app.project_id, inst.instance_id)}
                rows = []
                for mem in api.list_members(app.project_id, inst.instance_id):
                    op = ops.get(mem.last_operation_id or "")
                    rows.append((mem.component_key, mem.member_id, mem.status.value,
                                 mem.node.hostname if mem.node else "-",
                                 f"{op.kind.value} {op.status.value}" if op else "-", mem.last_correlation_id or "-"))
                heads = ("component", "member id", "status", "node", "last operation", "correlation id")
                print("\n".join("  " + line for line in render_table(heads, rows)))


def choose_backend(choice: str) -> MachineBackend:
    """NSPAWN when asked or (auto) when this machine can boot lab nodes; otherwise one line saying why."""
    if choice == "fast":
        return MachineBackend.FAST
    from lab import preflight

    why = preflight()
    if why is None:
        from lab.node import ensure_node_image

        try:
            ensure_node_image()  # cached after the first build (~20 s)
        except Exception as exc:  # noqa: BLE001 - any failure to build the image means: no real nodes here
            why = f"the lab node image cannot be built ({type(exc).__name__}: {str(exc)[:200]})"
    if why is None:
        return MachineBackend.NSPAWN
    if choice == "nspawn":
        raise SystemExit(f"demo: real nodes cannot run on this machine: {why}")
    print(f"real nodes: not on this machine ({why}); using the fast machine backend (MAAS enrolls each machine itself)")
    return MachineBackend.FAST


def _show_node_steps(world: LocalStack) -> None:
    """Each real node's launcher steps, read from the node's own disk (/var/lib/gpuaas/steps)."""
    assert world.nodes is not None
    rows: list[tuple[str, str, str, str]] = []
    for machine in world.env.machines:
        node = world.nodes.latest(machine.hostname)
        if node is None:
            rows.append((machine.hostname, "(no node booted)", "-", "-"))
            continue
        # in the order they ran: each record is written when its step ends (mtime in ns; finished_at is in s)
        files = sorted((node.root / "var/lib/gpuaas/steps").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for step in (json.loads(p.read_text()) for p in files):
            rows.append((machine.hostname, str(step["step"]), "ok" if step["ok"] else "FAILED",
                         f"{float(step.get('duration_s', 0)):.2f}s"))
    print("\n".join("  " + line for line in render_table(("node", "step", "ok", "duration"), rows)))


def run_with_engine(stack: str, world: LocalStack, keep: bool) -> None:
    state_dir = REPO / ".state"
    state_dir.mkdir(exist_ok=True)
    state = state_dir / f"{stack}.json"
    state.unlink(missing_ok=True)  # fresh simulators each run: old state would name machines that don't exist
    passphrase = os.environ.get("PULUMI_CONFIG_PASSPHRASE", "gpuaas-infra-demo")
    config = world.stack_config()
    _banner("preview (CLI-free engine; the real CLI is not installed here)")
    _engine_run("preview", stack, state, config, passphrase)
    _banner("up")
    up = _engine_run("up", stack, state, config, passphrase)
    # The real CLI shows provider output live; the engine's Python API hands it over at the end.
    print("\n".join(line.removeprefix("[provider] ") for line in str(up["log"]).splitlines()
                    if line.removeprefix("[provider] ").startswith("progress ")))
    if world.nodes is not None:
        _banner("real nodes: each machine's launcher steps (from the node's own disk)")
        _show_node_steps(world)
    _banner("what was built (from the state)")
    print(render_outputs(up["outputs"], str(up["log"]).splitlines()))
    _banner("app instances, members and their last operations (as the platform reports them)")
    _show_apps(world)
    _banner("second up: must change nothing")
    again = _engine_run("up", stack, state, config, passphrase)
    changed = {k: v for k, v in again["summary"].items() if k != "same"}
    print("no changes" if not changed else f"UNEXPECTED changes: {changed}")
    if not keep:
        _banner("destroy (machines are released per their teardown mode, never deleted from MAAS)")
        _engine_run("destroy", stack, state, config, passphrase)
        assert world.maas is not None
        statuses: dict[str, int] = {}
        for m in world.maas.admin.machines():
            statuses[m["status_name"]] = statuses.get(m["status_name"], 0) + 1
        print(f"MAAS machines after destroy: {statuses}")
    if changed:
        raise SystemExit("demo: the second up was not a no-op")


def run_with_cli(stack: str, world: LocalStack) -> None:
    backend = Path(tempfile.mkdtemp(prefix="gpuaas-demo-backend-"))
    env = {
        **os.environ,
        "PULUMI_BACKEND_URL": f"file://{backend}",
        "PULUMI_CONFIG_PASSPHRASE": os.environ.get("PULUMI_CONFIG_PASSPHRASE", "gpuaas-infra-demo"),
    }
    try:
        subprocess.run(["pulumi", "stack", "select", "--create", stack], cwd=REPO, env=env, check=True)
        for key, value in world.stack_config().items():
            secret = ["--secret"] if "token" in key else []
            subprocess.run(
                ["pulumi", "config", "set", *secret, key, value, "--stack", stack],
                cwd=REPO,
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
        subprocess.run(["pulumi", "preview", "--diff", "--stack", stack], cwd=REPO, env=env, check=True)
        subprocess.run(["pulumi", "up", "--yes", "--stack", stack], cwd=REPO, env=env, check=True)
        subprocess.run(
            ["pulumi", "up", "--yes", "--expect-no-changes", "--stack", stack], cwd=REPO, env=env, check=True
        )
        subprocess.run(["pulumi", "destroy", "--yes", "--stack", stack], cwd=REPO, env=env, check=True)
    finally:
        shutil.rmtree(backend, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.demo")
    ap.add_argument("--stack", default="local")
    ap.add_argument("--keep", action="store_true", help="leave the stack up (skip destroy)")
    ap.add_argument("--engine", action="store_true", help="use the CLI-free engine even if pulumi is installed")
    ap.add_argument("--nodes", choices=("auto", "nspawn", "fast"), default="auto",
                    help="machines as real nspawn nodes (auto: when this machine can boot them) or the fast backend")
    args = ap.parse_args(argv)
    _banner(f"validate environment for stack {args.stack}")
    try:
        env = load_environment(args.stack)
    except EnvironmentInvalid as invalid:
        print(invalid, file=sys.stderr)
        return 1
    print(render_summary(env))
    _banner("start the embedded simulators (MAAS, platform API, OpenBao, S3)")
    backend = choose_backend(args.nodes)
    source: str | Path = env.name
    work = Path(tempfile.mkdtemp(prefix="gpuaas-demo-env-"))
    if backend is MachineBackend.NSPAWN:  # what a lab node can run: no packages, no hw-sync timer; real data disks
        # the profile's batch_max_parallel (2) stays: four nodes booting at once on two cores took longer
        source = write_lab_environment(REPO / "environments" / f"{env.name}.yaml", work / f"{env.name}.yaml")
    with LocalStack(source, machine_backend=backend) as world:
        assert world.maas and world.platform and world.vault and world.s3
        print(
            f"MAAS {world.maas.url} | platform {world.platform.url} | OpenBao {world.vault.address} | "
            f"S3 {world.s3.endpoint_url}"
        )
        if world.lab is not None:
            print(f"real nodes: each deployed machine boots a systemd-nspawn node on lab network "
                  f"{world.lab.gateway}/24 (no packages, no hw-sync timer; loop-device data disks: lab/node.py)")
        if shutil.which("pulumi") and not args.engine:
            run_with_cli(args.stack, world)
        else:
            run_with_engine(args.stack, world, args.keep)
    shutil.rmtree(work, ignore_errors=True)
    print("\ndemo finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
