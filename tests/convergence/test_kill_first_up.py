"""A SIGKILL at every stage of the first `up` of a fresh `local` stack (a fresh world per stage), then the documented
recovery: see tests/convergence/kill.py for the stages and the checks."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.convergence.kill import Stage, converge, stage, staged, stages, step_name
from tests.convergence.world import World

pytestmark = pytest.mark.slow(seconds=700)


def test_kill_at_every_step_of_a_first_up(engine_factory: Any, tmp_path_factory: Any,
                                          report: list[tuple[str, float]]) -> None:
    with World.start(engine_factory, tmp_path_factory.mktemp("first-clean"), 0) as world:
        steps = converge(world, "a clean first up")
    assert len(steps) >= 10, [step_name(m) for m in steps]
    left: list[str] = []
    for i, at in enumerate(stages(steps)):
        began = time.monotonic()

        def attempt(i: int = i, at: Stage = at) -> tuple[str, list[str]] | None:
            with World.start(engine_factory, tmp_path_factory.mktemp(f"first-{i}"), 0) as world:
                return stage(world, at, len(steps), "first up")

        label, ops = staged(attempt, at)
        left += ops
        report.append((label, time.monotonic() - began))
    # The stages caught creates in flight: the recovery had pending creates to clear.
    assert {"creating machine-local-gpu-1", "creating pool-local-h200", "creating app-slurm-local"} <= set(left), left
