"""What the SIGKILL-at-every-stage tests share (test_kill_first_up.py, test_kill_redeploy.py, one per file so the
two run on two pytest-xdist workers): a SIGKILL at every stage of an `up` of the `local` stack, then the documented
recovery (docs/recovery.md,
"A run was killed": `pulumi cancel`, `pulumi refresh --clear-pending-creates`, `pulumi up`), ends converged:
the next `preview --expect-no-changes` is clean, a refresh right after finds no drift, MAAS holds no
duplicate machine (hostname, system_id, MAC), every declared machine is Deployed and enrolled once on the
platform (one active node, the one the stack's outputs and MAAS owner data name), one Slurm instance.

A stage is one step start of the run: the run's event log (the CLI's `--event-log`, the EngineHandle's
`events.jsonl`) is watched and the whole run (runner, CLI, provider plugin) is SIGKILLed right after the
update's Nth `resourcePreEvent`, for N over the steps of a clean run of the same change (counted first) that
change a resource through the provider, the first step and the last of each run of steps that call no
provider (`stages`); each step that changes a resource through the provider is killed once more while it
is under way (the CLI saved it as pending: the provider call is going). The preview `pulumi up` runs first
is killed once, as it plans its first dynamic resource (its events are logged with `planning: true`, and
the log is truncated when the update starts). Two runs are staged:
- the first `up` of a fresh stack (a fresh world per stage: the simulators start in about a second);
- an `up` that redeploys the standalone machine (an update that releases and deploys it again), all stages
  in one world, the machine's deploy input toggled before each.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from clients.platform import models as pm
from tests.convergence.world import World
from tools.pulumi_cli.api import EngineHandle
from tools.pulumi_cli.results import StepOp

RUN_TIMEOUT_S = 300
ATTEMPTS = 3  # runs to catch a step under way (a quick one may be done before the checkpoint is read)


def _pre_events(path: Path, planning: bool = False) -> list[dict[str, Any]]:
    """The `resourcePreEvent` metadata logged so far, of the update (or, `planning`, of the preview `up`
    runs first: the CLI logs the preview's events with `planning: true`, then truncates the log when the
    update starts). A line still being written is left for later."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines(keepends=True):
        try:
            event = json.loads(line) if line.endswith("\n") else None
        except ValueError:  # read across the truncation at the update's start
            event = None
        if event is None:
            break
        pre = event.get("resourcePreEvent")
        if pre is not None and bool(pre.get("planning")) == planning:
            out.append(pre["metadata"])
    return out


def step_name(meta: dict[str, Any]) -> str:
    return f"{meta['op']} {meta['urn'].rsplit('::', 1)[-1]}"


def _finish(handle: EngineHandle) -> tuple[Any, list[dict[str, Any]]]:
    """Wait for a run to end; its result and the steps it started (read before the run dir goes)."""
    handle.popen.wait(timeout=RUN_TIMEOUT_S)
    steps = _pre_events(handle.run_dir / "events.jsonl")
    return handle.wait(timeout=30), steps


PENDING = {StepOp.CREATE: "creating", StepOp.CREATE_REPLACEMENT: "creating", StepOp.UPDATE: "updating",
           StepOp.DELETE: "deleting", StepOp.DELETE_REPLACED: "deleting"}


def in_flight(meta: dict[str, Any]) -> bool:
    """A step that changes a custom resource through the provider (the kind worth killing mid-call)."""
    return meta["op"] in PENDING and meta["type"].startswith("pulumi-python:dynamic/")


def _checkpoint_pending(world: World) -> set[tuple[str, str]]:
    """(type, urn) of the pending operations in the stack's checkpoint as the CLI last saved it (the file
    backend's `.pulumi/stacks/<project>/<stack>.json`, written by rename: never torn)."""
    engine = world.engine
    path = engine.backend_dir / ".pulumi" / "stacks" / engine.project / f"{engine.stack}.json"
    try:
        latest = json.loads(path.read_text())["checkpoint"]["latest"] or {}
    except (OSError, ValueError, KeyError):
        return set()
    return {(op["type"], op["resource"]["urn"]) for op in latest.get("pending_operations") or []}


def kill_afterstep_name(handle: EngineHandle, n: int) -> str:
    """SIGKILL the run right after its Nth step started; the step's `op name`."""
    events = handle.run_dir / "events.jsonl"
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while len(started := _pre_events(events)) < n:
        if handle.popen.poll() is not None:
            handle.wait(timeout=30)
            pytest.fail(f"the run ended after {len(started)} steps, before step {n}: {[step_name(m) for m in started]}")
        assert time.monotonic() < deadline, f"step {n} never started"
        time.sleep(0.005)
    handle.kill()
    handle.wait(timeout=30)
    return step_name(started[n - 1])


def kill_under_way(world: World, handle: EngineHandle, step: dict[str, Any]) -> str | None:
    """SIGKILL the run while `step` (op and URN) is under way: it started and the CLI saved it as pending
    (the provider call is going). None: the step was done before it was seen pending (the run then ran to
    its end, which must be a success)."""
    events = handle.run_dir / "events.jsonl"
    want = (PENDING[step["op"]], step["urn"])
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        started = {(m["op"], m["urn"]) for m in _pre_events(events)}
        if (step["op"], step["urn"]) in started and want in _checkpoint_pending(world):
            break
        if handle.popen.poll() is not None:
            result = handle.wait(timeout=30)
            assert result.ok, f"the run failed: {result.errors()}\n{result.log[-3000:]}"
            world.outputs = dict(result.outputs or {})
            return None
        assert time.monotonic() < deadline, f"{step_name(step)} never got under way"
        time.sleep(0.005)
    handle.kill()
    handle.wait(timeout=30)
    return step_name(step)


def kill_in_preview(handle: EngineHandle) -> str:
    """SIGKILL the run in the preview `up` runs first, once it planned its first step on a dynamic resource
    (the provider's check and diff are going), before any step of the update started."""
    events = handle.run_dir / "events.jsonl"
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (planned := [m for m in _pre_events(events, planning=True)
                           if m["type"].startswith("pulumi-python:dynamic/")]):
        assert handle.popen.poll() is None, f"the run ended before its preview: {handle.log()[-2000:]}"
        assert time.monotonic() < deadline, "the preview never started"
        time.sleep(0.005)
    handle.kill()
    started = _pre_events(events)
    log = handle.log()
    handle.wait(timeout=30)
    assert not started and "Updating (" not in log, f"killed too late for a preview stage: {started}"
    return f"the preview, planning {step_name(planned[0])}"


def pending(world: World) -> list[str]:
    """The operations the killed run left pending in the stack's last checkpoint (`op name`)."""
    deployment = world.engine.export().get("deployment") or {}
    return [f"{op['type']} {op['resource']['urn'].rsplit('::', 1)[-1]}"
            for op in deployment.get("pending_operations") or []]


def recover_and_check(world: World, label: str) -> None:
    """The documented recovery, then the convergence checks."""
    world.recover()  # pulumi cancel; pulumi refresh --clear-pending-creates
    up = world.engine.up()
    assert up.ok, f"{label}: the recovering up failed: {up.errors()}\n{up.log[-3000:]}"
    world.outputs = dict(up.outputs or {})
    world.assert_clean_then_no_drift(label)
    world.check_invariants(label)
    enrolled_once(world, label)


def enrolled_once(world: World, label: str) -> None:
    """Each declared machine has exactly one active node on the platform: the one the stack's outputs name."""
    assert world.stack.platform is not None
    nodes = list(world.stack.platform.store.nodes.values())
    for hostname in world.declared():
        mine = [n for n in nodes if n.hostname == hostname]
        active = [n.node_id for n in mine if n.status is pm.NodeStatus.ACTIVE]
        assert active == [world.node_ids[hostname]], (
            f"{label}: {hostname} is not enrolled once: {Counter(n.status.value for n in mine)}, active {active}")


def converge(world: World, label: str) -> list[dict[str, Any]]:
    """A clean `up` (no kill): the steps it started, after the same checks as a recovery."""
    result, steps = _finish(world.engine.start_up())
    assert result.ok, f"{label}: {result.errors()}\n{result.log[-3000:]}"
    world.outputs = dict(result.outputs or {})
    preview = world.engine.preview(expect_no_changes=True)
    assert preview.ok, f"{label}: the next preview is not clean: {preview.changed()}"
    world.check_invariants(label)
    enrolled_once(world, label)
    return steps


def toggle_deploy_input(world: World, hostname: str) -> None:
    """Change one deploy input of one machine (its HWE kernel): the next up redeploys it."""
    doc = world.doc()
    (machine,) = [m for m in doc["machines"] if m["hostname"] == hostname]
    if machine.pop("hwe_kernel", None) is None:
        machine["hwe_kernel"] = "ga-22.04"
    world.save(doc)
    world.redeployed.add(hostname)


Stage = tuple[int | None, dict[str, Any] | None]  # (N, None): after step N started; (None, step): under way


def stage(world: World, at: Stage, steps: int, what: str) -> tuple[str, list[str]] | None:
    """Start an `up`, kill it at the stage (N: right after the Nth step started; a step: while it is under
    way; neither: in the preview), recover and check; the stage's label and the operations the kill left
    pending. None: a step to kill under way was over too soon (the caller tries the stage again)."""
    n, step = at
    handle = world.engine.start_up()
    if n is not None:
        where = f"after step {n}/{steps} started ({kill_afterstep_name(handle, n)})"
    elif step is not None:
        killed = kill_under_way(world, handle, step)
        if killed is None:
            return None
        where = f"with {killed} under way"
    else:
        where = f"in {kill_in_preview(handle)}"
    left = pending(world)
    label = f"{what}, killed {where}; pending: {', '.join(left) or 'none'}"
    world.note(label)
    recover_and_check(world, label)
    return label, left


def stages(steps: list[dict[str, Any]]) -> list[Stage]:
    """The preview; right after each step that changes a custom resource started, and once more while its
    provider call is going; right after the first step started, and after the last of each run of steps that
    call no provider (the stack, components, the default provider, `same` steps).

    Between a kill after one step of such a run and a kill after the next, no change through a provider
    starts (their checks and diffs ran as they registered, before their steps): the kills differ in which
    of the steps the CLI's own snapshot holds, and in how far a change already under way has got, which the
    kill while it is under way and the kill after the run's last step bracket. One kill per run (its last
    step: the most the run can have saved before the next change starts) covers them; a kill after each cost
    a whole stage (a fresh world, the killed run and the recovery's five CLI runs) for the CLI's snapshot
    logic, not the project's (the first up: 18 stages → 15; a redeploy: 13 → 6)."""
    out: list[Stage] = [(None, None)]
    for n, meta in enumerate(steps, 1):
        run_ends = n == len(steps) or in_flight(steps[n])  # steps[n] is step n + 1
        if n == 1 or in_flight(meta) or run_ends:
            out.append((n, None))
        if in_flight(meta):
            out.append((None, meta))
    return out


def staged(attempt: Callable[[], tuple[str, list[str]] | None], at: Stage) -> tuple[str, list[str]]:
    """One stage: `attempt` runs it (None: the step to kill under way was over too soon), tried ATTEMPTS times."""
    for _attempt in range(ATTEMPTS):
        done = attempt()
        if done is not None:
            return done
    pytest.fail(f"{step_name(at[1]) if at[1] else at} was never seen under way in {ATTEMPTS} runs")
