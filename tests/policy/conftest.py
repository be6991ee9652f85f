"""Fixtures: the policy pack's own virtualenv and previews by the real Pulumi CLI with the pack.

The CLI (build/pulumi/bin) has no Python language host, so it can't start a pack directory's `runtime:
python`; it runs `policy/run-policy-pack` instead, as a binary analyzer plugin (`--policy-pack <that file>`),
which starts the same pack with `.policy-venv` (tests/policy/test_pack.py says more).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.policy.mutations import DYNAMIC, Resource
from tools.pulumi_cli.api import Engine
from tools.pulumi_cli.results import EngineResult

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "policy" / "run-policy-pack"
PROGRAM = REPO / "tests" / "policy" / "program"
TIMEOUT = 600


def judge(engine: Engine, operation: str = "preview") -> EngineResult:
    """`pulumi preview` (or `up --yes`) of the engine's stack with the policy pack."""
    result = engine.run(operation, flags=["--policy-pack", str(PACK)], timeout=TIMEOUT)
    assert result.policyPacks, f"the policy pack did not run:\n{result.log[-3000:]}"
    return result


def resources(result: EngineResult) -> list[Resource]:
    """The gpuaas resources of a preview, in the order the CLI's `--json` document lists them."""
    out = []
    for step in result.preview_digest().get("steps") or []:
        state: dict[str, Any] = step.get("newState") or {}
        if str(state.get("type", "")).startswith(DYNAMIC):
            inputs = {k: v for k, v in (state.get("inputs") or {}).items() if not k.startswith("__")}
            out.append(Resource(state["urn"], state["type"], inputs, bool(state.get("protect"))))
    return out


@pytest.fixture(scope="module")
def prod_baseline(policy_venv: None, tmp_path_factory: pytest.TempPathFactory) -> EngineResult:
    """The policy-test program's prod stack, previewed with the pack (every input known)."""
    engine = Engine(PROGRAM, "prod", tmp_path_factory.mktemp("prod-baseline"))
    return judge(engine)
