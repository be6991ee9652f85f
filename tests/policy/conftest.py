"""Fixtures: the policy pack's own virtualenv, a running analyzer per stack, the stacks' resources."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.policy.analyzer import POLICY_PYTHON, REPO, PolicyAnalyzer, Resource
from tests.policy.stacks import stack_resources


@pytest.fixture(scope="session")
def policy_venv() -> None:
    """`.policy-venv` (pulumi-policy, protobuf 5.29) via `make policy-venv`: created once, then a no-op."""
    proc = subprocess.run(["make", "-s", "policy-venv"], cwd=REPO, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not POLICY_PYTHON.exists():
        pytest.fail(f"make policy-venv failed ({proc.returncode}): {proc.stderr[-2000:]}")


@pytest.fixture(scope="module")
def prod_analyzer(policy_venv: None) -> Iterator[PolicyAnalyzer]:
    with PolicyAnalyzer("prod", {"gpuaas-infra:environment": "prod"}) as analyzer:
        yield analyzer


@pytest.fixture(scope="module")
def dev_analyzer(policy_venv: None) -> Iterator[PolicyAnalyzer]:
    with PolicyAnalyzer("dev", {"gpuaas-infra:environment": "dev"}) as analyzer:
        yield analyzer


@pytest.fixture(scope="module")
def prod_resources() -> tuple[list[Resource], str]:
    """The prod stack's resources (machines from a real preview; see tests/policy/stacks.py)."""
    return stack_resources("prod")
