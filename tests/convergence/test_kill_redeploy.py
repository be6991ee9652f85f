"""A SIGKILL at every stage of an `up` that redeploys the standalone machine (all stages in one world, its deploy input
toggled before each), then the documented recovery: see tests/convergence/kill.py."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

from tests.convergence.kill import (
    Stage,
    converge,
    stage,
    staged,
    stages,
    toggle_deploy_input,
)
from tests.convergence.world import STANDALONE, World
from tools.pulumi_cli.results import StepOp

pytestmark = pytest.mark.slow(seconds=230)


def test_kill_at_every_step_of_a_redeploy(engine_factory: Any, tmp_path_factory: Any,
                                          report: list[tuple[str, float]]) -> None:
    with World.start(engine_factory, tmp_path_factory.mktemp("redeploy"), 0) as world:
        converge(world, "the first up")
        toggle_deploy_input(world, STANDALONE)
        steps = converge(world, f"a clean redeploy of {STANDALONE}")
        ops = Counter(m["op"] for m in steps)
        # A redeploy is the machine's update (same system_id): nothing is replaced, and the app instance
        # pinned to it reads outputs that do not change.
        assert ops[StepOp.UPDATE] == 1 and not ops[StepOp.DELETE_REPLACED] and not ops[StepOp.CREATE_REPLACEMENT], ops
        left: list[str] = []
        for at in stages(steps):
            began = time.monotonic()

            def attempt(at: Stage = at) -> tuple[str, list[str]] | None:
                toggle_deploy_input(world, STANDALONE)
                return stage(world, at, len(steps), f"redeploy of {STANDALONE}")

            label, more = staged(attempt, at)
            left += more
            report.append((label, time.monotonic() - began))
        # The stages caught the machine's update (release, deploy again) in flight.
        assert f"updating machine-{STANDALONE}" in left, left
