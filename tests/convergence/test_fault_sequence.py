"""The property's fault actions, each once, in one sequence (the random property may not draw them in a run):
a second stack on the same site and profile runs at the same time (first deploying its machines, later
redeploying one, after the shared bundle was tampered with), the profile's erase mode flips, the MAAS API key and
the platform tokens are rotated (new ones in Vault, the old ones revoked), the published bundle is tampered with
in the store (its pinned version deleted, other bytes put under its key with its metadata), and an enrollment is
lost to a platform 502 while a machine redeploys. After each, one `up --refresh` converges, the next preview is
clean, a refresh finds no drift, nothing is duplicated, MAAS never had more machines deploying at once than
batch_max_parallel, and every machine keeps its node unless it was redeployed (tests/convergence/world.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.convergence.world import (
    World,
    bundle_tamper,
    enroll_burst,
    erase_mode,
    neighbour,
    rotate_maas_key,
    rotate_platform_tokens,
)

pytestmark = pytest.mark.slow(seconds=170)


def test_erase_mode_tampered_bundle_and_a_lost_enrollment_each_converge_in_one_up(
        engine_factory: Any, tmp_path_factory: Any) -> None:
    with World.start(engine_factory, tmp_path_factory.mktemp("faults"), 7) as world:
        world.up_and_check("initial up")
        for action in (neighbour, erase_mode, rotate_maas_key, bundle_tamper, neighbour, rotate_platform_tokens,
                       enroll_burst):
            world.note(action.__name__)
            action(world)
            world.up_and_check(f"after {action.__name__}")
