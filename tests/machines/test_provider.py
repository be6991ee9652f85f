"""MachinesProvider (providers/machines/provider.py): the update sequence MaasMachine and MachinePool share,
in order: converge -> the machines' failures -> in place -> identity repair -> claim."""

from __future__ import annotations

from typing import Any, cast

import pytest

from environments import load_environment
from providers.machines import provider as mp
from providers.machines import reconciler as rc
from providers.machines.plan import MachineRecord
from providers.machines.spec import MachineSpec
from simulators.localstack import machine_specs

SPECS = [MachineSpec.model_validate(s) for s in machine_specs(load_environment("local")).values()][:3]


class _Ctx:
    ops = "ops"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []

    def converge(ctx: Any, specs: Any, prior: Any, leaving: Any = ()) -> rc.Converged:
        seen.append(("converge", [s.hostname for s in specs], dict(prior), list(leaving)))
        records = {s.hostname: MachineRecord(hostname=s.hostname, system_id=None if i == 2 else f"sid-{i}")
                   for i, s in enumerate(specs)}
        return rc.Converged(plan=cast(Any, None), records=records)

    def raise_failures(label: str, results: Any) -> None:
        seen.append(("failures", label))
        if label == "pool broken":
            raise rc.MachinesFailed(label)

    monkeypatch.setattr(rc, "converge", converge)
    monkeypatch.setattr(rc, "raise_failures", raise_failures)
    monkeypatch.setattr(rc, "apply_in_place",
                        lambda ctx, old, new, sid: seen.append(("in_place", old, new.hostname, sid)))
    monkeypatch.setattr(mp, "repair_identity",
                        lambda ops, items: seen.append(("repair", [(s.hostname, i) for s, i in items])))
    monkeypatch.setattr(rc, "claim", lambda ctx, ids: seen.append(("claim", ids)))
    return seen


def test_a_pool_update_edits_in_place_only_machines_it_had_and_repairs_every_machine_with_an_id(
        calls: list[tuple[Any, ...]]) -> None:
    a, b, c = SPECS
    old = {a.hostname: a.identity()}  # b joins; c has no system_id after converge
    mp.MachinesProvider.update_sequence(_Ctx(), "pool p", SPECS, {}, old, leaving=[("gone", None)], claim=True)
    assert calls == [
        ("converge", [a.hostname, b.hostname, c.hostname], {}, [("gone", None)]),
        ("failures", "pool p"),
        ("in_place", a.identity(), a.hostname, "sid-0"),
        ("repair", [(a.hostname, "sid-0"), (b.hostname, "sid-1")]),
        ("claim", ["sid-0", "sid-1"]),
    ]


def test_a_machine_update_uses_the_resource_id_and_claims_only_when_asked(calls: list[tuple[Any, ...]]) -> None:
    spec = SPECS[2]  # converge records no system_id for it: the resource id is used
    mp.MachinesProvider.update_sequence(_Ctx(), "machine x", [spec], {}, {spec.hostname: None},
                                        system_ids={spec.hostname: "sid-res"})
    assert calls[2:] == [("in_place", None, spec.hostname, "sid-res"), ("repair", [(spec.hostname, "sid-res")])]


def test_failed_machines_stop_the_sequence_before_any_edit(calls: list[tuple[Any, ...]]) -> None:
    with pytest.raises(rc.MachinesFailed):
        mp.MachinesProvider.update_sequence(_Ctx(), "pool broken", SPECS, {}, {s.hostname: s.identity() for s in SPECS},
                                            claim=True)
    assert [c[0] for c in calls] == ["converge", "failures"]
