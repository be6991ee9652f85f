"""batch_max_parallel per profile through the real Pulumi CLI (issue 14, machines item 7): two pools
and a standalone machine of one profile, limit 1, run in one `up` (the provider server runs their
provider calls at once): MAAS never sees two machines of the profile busy at the same time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulators.localstack import LocalStack
from tests.stack.test_machines_engine import edit, engine_for, env_file, maas_machines, world  # noqa: F401


def test_two_pools_and_a_machine_of_one_profile_at_limit_1(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path  # noqa: F811
) -> None:
    def split(doc: dict[str, Any]) -> None:
        doc["sites"][0]["profiles"][0]["batch_max_parallel"] = 1
        doc["machine_pools"].append({"name": "local-h200-b", "site": "local", "profile": "h200-lab"})
        for m in doc["machines"]:
            if m["hostname"] in ("local-gpu-3", "local-gpu-4"):
                m["pool"] = "local-h200-b"

    edit(env_file, split)
    assert world.maas is not None
    world.maas.admin.reset_stats()
    up = engine_for(engine_factory, world, tmp_path, env_file).up()
    assert up.ok, [d.message for d in up.diagnostics]
    assert {m["status_name"] for m in maas_machines(world).values()} == {"Deployed"}
    peak = world.maas.admin.peak_concurrency()
    assert max(site["busy"] for site in peak.values()) == 1, peak
