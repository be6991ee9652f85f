"""`make demo`: the `local` stack against the embedded simulators, end to end.

Starts the MAAS and platform simulators, OpenBao and an S3 server (simulators/localstack.py), then
runs the stack with the real Pulumi CLI that set-up provides (build/pulumi/bin, a throwaway file
backend, tools/pulumi_cli): the CLI's own output first (`pulumi preview`, `pulumi up --yes` with
its live progress and `Resources:` summary), then the project's tables; a second `pulumi up
--expect-no-changes` proves nothing changes, and `pulumi destroy` leaves every machine Ready in MAAS.

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
from tools.pulumi_cli.api import Engine
from tools.pulumi_cli.install import pinned_version
from tools.pulumi_cli.results import EngineResult
from tools.tables import render_outputs

REPO = Path(__file__).resolve().parent.parent


def _banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def _cli_run(engine: Engine, op: str, **options: Any) -> EngineResult:
    """One `pulumi <op>`, its own output (live progress, diagnostics, `Resources:` summary) shown as it comes."""
    started = time.monotonic()
    result = engine.run(op, echo=True, color="always" if sys.stdout.isatty() else "never",
                        preview_json=False, **options)
    print(f"demo: pulumi {op} {'ok' if result.ok else 'FAILED'} in {time.monotonic() - started:.1f}s")
    if not result.ok:
        raise SystemExit(f"demo: pulumi {op} failed (the CLI's messages are above)")
    return result


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
        from lab.image import ImageBuildError
        from lab.node import ensure_node_image

        try:
            ensure_node_image()  # built once into the checkout's .lab (a few minutes), then cached
        except ImageBuildError as exc:  # what the failing tool said (apt's or debootstrap's E: line)
            why = f"the lab node image cannot be built: {exc}"
        except Exception as exc:  # noqa: BLE001 - any other failure to build the image means: no real nodes here
            why = f"the lab node image cannot be built ({type(exc).__name__}: {str(exc)[:300]})"
    if why is None:
        return MachineBackend.NSPAWN
    if choice == "nspawn":
        raise SystemExit(f"demo: real nodes cannot run on this machine: {why}")
    print(f"real nodes: not on this machine ({why}); using the fast machine backend (MAAS enrolls each machine itself)")
    return MachineBackend.FAST


def _show_node_steps(world: LocalStack) -> None:
    """Each real node's launcher steps, read from the node's own disk (/var/lib/gpuaas/steps), then one line
    saying how many machines ran on real nodes (or why a node did not boot)."""
    assert world.nodes is not None
    rows: list[tuple[str, str, str, str]] = []
    booted = 0
    for machine in world.env.machines:
        node = world.nodes.latest(machine.hostname)
        if node is None:
            rows.append((machine.hostname, "(no node booted)", "-", "-"))
            continue
        booted += 1
        # in the order they ran: each record is written when its step ends (mtime in ns; finished_at is in s)
        files = sorted((node.root / "var/lib/gpuaas/steps").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        for step in (json.loads(p.read_text()) for p in files):
            rows.append((machine.hostname, str(step["step"]), "ok" if step["ok"] else "FAILED",
                         f"{float(step.get('duration_s', 0)):.2f}s"))
    print("\n".join("  " + line for line in render_table(("node", "step", "ok", "duration"), rows)))
    total = len(world.env.machines)
    print(f"real nodes: {booted} of {total} machines deployed on real systemd-nspawn nodes"
          + (f"; node boots that failed: {'; '.join(world.nodes.errors)}" if world.nodes.errors else ""))


def _node_boot_errors(world: LocalStack) -> None:
    """A failed up on real nodes: the reason a node could not boot, when that is what happened."""
    if world.nodes is not None and world.nodes.errors:
        print(f"real nodes: a node could not boot: {world.nodes.errors[0]}"
              + (f" (and {len(world.nodes.errors) - 1} more)" if len(world.nodes.errors) > 1 else ""))


def run_stack(stack: str, world: LocalStack, keep: bool) -> None:
    """The stack under the real Pulumi CLI (build/pulumi/bin), on a throwaway file backend."""
    backend = Path(tempfile.mkdtemp(prefix="gpuaas-demo-backend-"))
    passphrase = os.environ.get("PULUMI_CONFIG_PASSPHRASE", "gpuaas-infra-demo")
    engine = Engine(REPO, stack, backend, config_overrides=world.stack_config(), passphrase=passphrase)
    try:
        # Outputs are shown as the project's tables below, so the CLI is asked not to print them too.
        _banner(f"pulumi preview (Pulumi CLI {pinned_version()}, backend {engine.backend_url})")
        _cli_run(engine, "preview", flags=["--suppress-outputs"])
        _banner("pulumi up --yes")
        try:
            up = _cli_run(engine, "up", flags=["--suppress-outputs"])
        except SystemExit:
            _node_boot_errors(world)
            raise
        if world.nodes is not None:
            _banner("real nodes: each machine's launcher steps (from the node's own disk)")
            _show_node_steps(world)
        _banner("what was built (stack outputs)")
        provider_lines = [line for d in up.diagnostics for line in d.message.splitlines()]
        print(render_outputs(engine.outputs(), provider_lines))
        _banner("app instances, members and their last operations (as the platform reports them)")
        _show_apps(world)
        _banner("second pulumi up --expect-no-changes: must change nothing")
        again = _cli_run(engine, "up", expect_no_changes=True, flags=["--suppress-outputs"])
        changed = {k: v for k, v in again.changeSummary.items() if k != "same" and v}
        print("no changes" if not changed else f"UNEXPECTED changes: {changed}")
        if not keep:
            _banner("pulumi destroy --yes (machines are released per their teardown mode, never deleted from MAAS)")
            _cli_run(engine, "destroy")
            assert world.maas is not None
            statuses: dict[str, int] = {}
            for m in world.maas.admin.machines():
                statuses[m["status_name"]] = statuses.get(m["status_name"], 0) + 1
            print(f"MAAS machines after destroy: {statuses}")
        if changed:
            raise SystemExit("demo: the second up was not a no-op")
    finally:
        if not keep:
            shutil.rmtree(backend, ignore_errors=True)
        else:
            print(f"stack kept: PULUMI_BACKEND_URL={engine.backend_url} (passphrase as PULUMI_CONFIG_PASSPHRASE)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.demo")
    ap.add_argument("--stack", default="local")
    ap.add_argument("--keep", action="store_true", help="leave the stack up (skip destroy)")
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
        run_stack(args.stack, world, args.keep)
    shutil.rmtree(work, ignore_errors=True)
    print("\ndemo finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
