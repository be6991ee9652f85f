"""A MAAS outage at the very first request of an `up` (issue 14 bug 5) through the real Pulumi CLI:
503s on python-libmaas's describe and on the first machine lookups are ridden out; the run succeeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulators.localstack import LocalStack
from simulators.maas import ApiErrorBurst, ApiFaults
from tests.stack.test_machines_engine import engine_for, env_file, maas_machines, world  # noqa: F401


def test_503s_on_the_first_requests_of_up_do_not_fail_the_run(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path  # noqa: F811
) -> None:
    assert world.maas is not None
    world.maas.admin.set_api_faults(
        ApiFaults(
            drop_connections=1,
            errors=[
                ApiErrorBurst(status=503, count=2, handler="DescribeHandler"),
                ApiErrorBurst(status=503, count=2, handler="MachinesHandler", op="read"),
            ],
        )
    )
    engine = engine_for(engine_factory, world, tmp_path, env_file)
    up = engine.up()
    assert up.ok, [d.message for d in up.diagnostics]
    assert sum(b.count for b in world.maas.admin.faults().api.errors) == 0, "every 503 was served"
    assert {m["status_name"] for m in maas_machines(world).values()} == {"Deployed"}
