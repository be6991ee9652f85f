"""dev, staging and prod declare their sites, profiles, bundles and RoCE assignments (a `pulumi preview`:
check runs for real - templates render, RoCE tables are computed - and nothing is contacted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

PROJECT = Path(__file__).parent / "engine_project"
pytestmark = pytest.mark.slow(seconds=40)  # CLI runs: a subprocess per operation

EXPECTED = {
    "dev": {"bundle-lab-h200", "profile-lab-h200-lab", "roce-lab"},
    "staging": {"bundle-stg1-h200", "profile-stg1-h200-roce", "roce-stg1"},
    # sjc1 is an InfiniBand site: a profile and a bundle, no RoCE assignment
    "prod": {"bundle-dal1-h200", "bundle-sjc1-h200", "profile-dal1-h200-roce", "profile-sjc1-h200-ib", "roce-dal1"},
}


@pytest.mark.parametrize("stack", sorted(EXPECTED))
def test_stack_declares_its_sites(engine_factory: Any, tmp_path: Path, stack: str) -> None:
    engine = engine_factory(PROJECT, stack, config={"gpuaas-infra:environment": stack},
                            backend=tmp_path / "backend")
    preview = engine.preview(timeout=300)
    assert preview.ok, preview.errors()
    names = {urn.rsplit("::", 1)[-1]: op.value for urn, op in preview.ops().items() if "dynamic/gpuaas:" in urn}
    assert set(names) == EXPECTED[stack] and set(names.values()) == {"create"}
