"""Faults on the local stack run by the real Pulumi CLI: a failed member operation (clear error, then the next
up redoes only what is left), drift found by refresh, and the provider killed between two operations."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clients.platform import PlatformClient
from clients.platform import models as m
from simulators.localstack import LocalStack
from simulators.platform import FaultPlan, OperationFailure

from .conftest import REPO, edit, set_workers
from .test_engine import World, ok


def world_at(engine_factory: Any, tmp_path: Path, env_file: Path, **kw: Any) -> Iterator[World]:
    with LocalStack("local", **kw) as stack:
        cfg = stack.stack_config()
        cfg["gpuaas-infra:environment"] = str(env_file)
        yield World(stack, engine_factory(REPO, "local", config=cfg, backend=tmp_path / "backend"))


# These runs need no machine: the environment is reduced to its hosts and the app instance
# (test_engine.py covers members bound to enrolled machines).
@pytest.fixture
def env_file(bare_env_file: Path) -> Path:
    return bare_env_file


@pytest.fixture
def world(engine_factory: Any, tmp_path: Path, env_file: Path) -> Iterator[World]:
    yield from world_at(engine_factory, tmp_path, env_file)


@pytest.fixture
def slow_world(engine_factory: Any, tmp_path: Path, env_file: Path) -> Iterator[World]:
    # 0.2 real s per simulated s: a drain takes ~0.7 s, long enough to kill the run in the middle of it
    yield from world_at(engine_factory, tmp_path, env_file, platform_time_scale=0.2)


def test_failed_operation_then_retry_and_refresh_finds_a_member_removed_by_hand(
        world: World, env_file: Path) -> None:
    engine = world.engine
    ok(engine.up())
    world.sim.inject(FaultPlan(operation_failures=[OperationFailure(
        kind=m.OperationKind.MEMBER_ADD, code="slurmd_join_failed", message="node did not register")]))
    edit(env_file, set_workers(2, []))
    failed = engine.up()
    assert not failed.ok
    op = next(o for o in world.sim.operations() if o.status is m.OperationStatus.FAILED)
    error = "\n".join(failed.errors())
    assert "AIN003 app instance slurm-local (project " in error  # the coded line reaches the CLI as written
    assert "slurmd_join_failed: node did not register" in error
    assert f"correlation_id={op.correlation_id}" in error and f"operation_id={op.operation_id}" in error
    assert "; fix: run up again" in error

    ok(engine.up())
    assert world.member_ops() == ["member_add", "member_replace"], "only the failed member is redone"
    assert [x.status for x in world.members()] == [m.MemberStatus.ACTIVE] * 3

    # a worker removed out of band: refresh sees it, the next up puts one back
    token = world.sim.issue_token(m.Role.SERVICE_ACCOUNT, project_id=world.pid)
    iid = world.instance().instance_id
    victim = next(x for x in world.members() if x.component_key == "worker")
    with PlatformClient(world.sim.url, token) as api:
        api.wait_for_operation(world.pid, api.remove_member(world.pid, iid, victim.member_id).operation_id)
    assert world.app_op(ok(engine.preview())) == "same", "state alone cannot know"
    ok(engine.refresh())
    assert world.app_op(ok(engine.preview())) == "update", "refresh found the drift"
    ok(engine.up())
    assert world.member_ops()[2:] == ["member_remove", "member_add"]
    assert len([x for x in world.members() if x.component_key == "worker"]) == 2


def test_provider_killed_between_drain_and_remove_then_rerun(slow_world: World, env_file: Path) -> None:
    world, engine = slow_world, slow_world.engine
    # The bare environment has no machine to name (APP011): both workers are allocated by the platform.
    edit(env_file, set_workers(2, []))
    up = ok(engine.up())
    workers_before = {x["member_id"] for x in up.outputs["app_instances"]["slurm-local"]["members"]
                      if x["component_key"] == "worker"}
    edit(env_file, set_workers(1, []))
    handle = engine.start_up()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kinds = [o.kind for o in world.sim.operations()]
        if m.OperationKind.MEMBER_DRAIN in kinds:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the run never drained a member")
    handle.kill()
    handle.wait(timeout=30)
    assert m.OperationKind.MEMBER_REMOVE not in [o.kind for o in world.sim.operations()], "killed before the remove"
    drained = next(o.member_id for o in world.sim.operations() if o.kind is m.OperationKind.MEMBER_DRAIN)
    (kept,) = workers_before - {drained}

    # The operator's recovery (docs/operations.md): `pulumi cancel`, `pulumi refresh --clear-pending-creates`.
    locks = engine.backend_dir / ".pulumi" / "locks" / "organization" / engine.project / engine.stack
    assert [p for p in locks.iterdir()], "the killed run left its lock on the stack"
    assert "has been canceled" in engine.cancel()
    assert not [p for p in locks.iterdir()], "`pulumi cancel` removed the lock"
    ok(engine.refresh(flags=["--clear-pending-creates"]))
    ok(engine.up())
    assert world.member_ops() == ["member_drain", "member_remove"], "the drain is not repeated"
    workers = [x for x in world.members() if x.component_key == "worker"]
    assert [(x.member_id, x.status) for x in workers] == [(kept, m.MemberStatus.ACTIVE)], "the other worker stays"


def _remove_by_hand(world: World) -> str:
    token = world.sim.issue_token(m.Role.SERVICE_ACCOUNT, project_id=world.pid)
    iid = world.instance().instance_id
    victim = next(x for x in world.members() if x.component_key == "worker")
    with PlatformClient(world.sim.url, token) as api:
        api.wait_for_operation(world.pid, api.remove_member(world.pid, iid, victim.member_id).operation_id)
    return victim.member_id


def _our_adds(world: World) -> list[str]:
    """Idempotency keys of the member adds the platform accepted (a replayed answer is not a new add)."""
    adds = {o.idempotency_key for o in world.sim.operations() if o.kind is m.OperationKind.MEMBER_ADD}
    return [e.idempotency_key for e in world.sim.audit()
            if e.action == "member.operation" and e.outcome == "accepted" and e.idempotency_key in adds]


def test_a_member_removed_by_hand_twice_is_put_back_twice(world: World) -> None:
    """Issue 14 bug 2: the second re-add used the first re-add's key, so the platform replayed the old
    answer and `up` reported success with the member still missing."""
    engine = world.engine
    ok(engine.up())
    adds0 = _our_adds(world)
    for round_ in (1, 2):
        gone = _remove_by_hand(world)
        ok(engine.refresh())
        assert world.app_op(ok(engine.preview())) == "update", f"round {round_}: refresh found the drift"
        ok(engine.up())
        workers = [x for x in world.members() if x.component_key == "worker"]
        assert len(workers) == 1 and workers[0].member_id != gone, f"round {round_}: the worker is back"
        adds = _our_adds(world)
        assert len(adds) == len(adds0) + round_ and len(set(adds)) == len(adds), "a NEW add operation each time"
    assert world.app_op(ok(engine.preview())) == "same", "and then nothing is left to do"


def test_refresh_right_after_up_reports_no_drift(world: World) -> None:
    """read() returns the outputs create/update wrote, in the same shape: refresh + preview stay clean."""
    engine = world.engine
    ok(engine.up())

    def app_outputs() -> dict[str, Any]:
        """The app instance's outputs in the stack's checkpoint (`pulumi stack export`)."""
        return next(r["outputs"] for urn, r in engine.resources().items()
                    if urn.endswith(f"app-{world.instance().name}"))

    before = app_outputs()
    ok(engine.refresh())
    after = app_outputs()
    assert {k: v for k, v in after.items() if before.get(k) != v} == {}
    assert world.app_op(ok(engine.preview())) == "same"
