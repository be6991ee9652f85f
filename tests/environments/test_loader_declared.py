"""Every declared environment validates, and matches the seeds' shape."""

from __future__ import annotations

import subprocess
import sys

import pytest

from environments import declared_environments, load_environment
from environments.findings import CATALOGUE, Code
from environments.loader import REPO_ROOT
from environments.model import HostRole, LogicalRole
from environments.vocabulary import FabricMode


def test_four_environments_declared() -> None:
    assert set(declared_environments()) >= {"local", "dev", "staging", "prod"}


@pytest.mark.parametrize("name", declared_environments())
def test_declared_environment_validates(name: str) -> None:
    env = load_environment(name)
    assert env.name == name
    assert env.blueprint == "gpu-fleet"  # one blueprint for every environment (seed 003)


def test_dev_is_the_seed_003_lab() -> None:
    env = load_environment("dev")
    got = {(h.hostname, str(h.address), h.logical_role) for h in env.hosts}
    assert got == {
        ("dev-control-1", "100.90.157.34", LogicalRole.PLATFORM_CONTROL),
        ("dev-lab-1", "100.69.173.30", LogicalRole.APP_CONTROL),
        ("dev-gpu-1", "100.88.227.60", LogicalRole.WORKER_COMPUTE),
    }
    assert [m.hostname for m in env.machines] == ["dev-gpu-1"]
    gpu = env.host("dev-gpu-1")
    assert gpu.machine == "dev-gpu-1"
    assert HostRole.WORKER_COMPUTE in gpu.roles
    # Seed 003's one exception: the GPU lane's runner, serving worker-compute and nothing else.
    assert HostRole.RUNNER in gpu.roles and [t.value for t in gpu.runner_tags] == ["worker-compute"]
    assert all("worker-compute" not in [t.value for t in h.runner_tags] for h in env.hosts if h is not gpu)
    assert HostRole.CONTROL_PLANE_K3S in env.host("dev-control-1").roles


def test_prod_is_a_realistic_fleet() -> None:
    env = load_environment("prod")
    control = [h.hostname for h in env.hosts if h.logical_role is LogicalRole.PLATFORM_CONTROL]
    assert len(control) == 2
    fabrics = {p.fabric_mode for s in env.sites for p in s.profiles}
    assert fabrics >= {FabricMode.ROCE, FabricMode.IB}
    assert len([m for m in env.machines if env.sku(m.sku).gpu_model == "H200"]) >= 64
    roce_site = next(s.name for s in env.sites if any(p.fabric_mode is FabricMode.ROCE for p in s.profiles))
    assert [p.rail for p in env.roce_pools_of(roce_site)] == list(range(8))
    assert all(m.pool for m in env.machines)  # prod onboards through pools


def test_environments_differ_only_in_inventory_and_config() -> None:
    """Same blueprint, same field set: no environment carries its own deployment logic."""
    envs = [load_environment(n) for n in ("local", "dev", "staging", "prod")]
    assert len({e.blueprint_model.model_dump_json() for e in envs}) == 1


def test_catalogue_codes_unique_and_complete() -> None:
    values = [c.value for c in Code]
    assert len(values) == len(set(values))
    assert set(CATALOGUE) == set(Code)
    titles = [t for t, _ in CATALOGUE.values()]
    assert len(titles) == len(set(titles))


def test_make_validate_summary() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "environments", "validate", "prod"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    for needle in ("environment prod", "dal1", "sjc1", "platform_control: prod-control-1", "machines (72)", "rail 7"):
        assert needle in proc.stdout
