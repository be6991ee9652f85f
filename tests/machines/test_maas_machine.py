"""The MaasMachine adapter (providers/maas_machine.py) and its descriptor: every spec field is classified (the
pool's inputs too), diff never crashes on a preview's unknowns, and a value spelled differently (float, tuple, a
default left out) is no change. The MachinePool adapter's diff and check: tests/machines/test_machine_pool.py."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from environments import load_environment
from providers.kind import UNKNOWN, Change
from providers.maas_machine import MAAS_MACHINE, MaasMachineProvider
from providers.machine_pool import MACHINE_POOL
from providers.machines.plan import FIELD_RULES
from providers.machines.plan import Change as PlanChange
from providers.machines.spec import Connection, LifecyclePolicy, MachineSpec
from simulators.localstack import machine_specs

CONN = {
    "maas": {"site": "local", "maas_url": "http://127.0.0.1:1/MAAS/", "api_key_path": "a/b#k"},
    "platform": {"url": "http://127.0.0.1:2", "token_path": "a/p#t"},
    "vault": {"address": "http://127.0.0.1:3"},
    "platform_site_id": "site-1",
    "platform_profile_id": "p-1",
}


def _spec() -> dict[str, Any]:
    return machine_specs(load_environment("local"))["local-gpu-1"]


def _explicit(descriptor: Any, path: str) -> bool:
    rules = (*descriptor.identity, *descriptor.replaces, *descriptor.in_place, *descriptor.ignored)
    return any(path == r or path.startswith(r + ".") for r in rules)


def _leaves(model: type[BaseModel], prefix: str) -> list[str]:
    return [f"{prefix}.{name}" for name in model.model_fields]


def test_every_input_field_is_classified_explicitly() -> None:
    paths = _leaves(MachineSpec, "machine") + _leaves(Connection, "connection") + _leaves(LifecyclePolicy, "policy")
    assert [p for p in paths if not _explicit(MAAS_MACHINE, p)] == []
    assert [p for p in ("pool", "machines", "template", "connection", "policy") if not _explicit(MACHINE_POOL, p)] == []


def test_the_descriptor_is_the_plans_rule_as_pulumi_sees_it() -> None:
    """Other hardware (the plan's reidentify) replaces a MaasMachine; everything else updates it, redeploys
    included (tests/machines/test_plan.py walks what each does)."""
    for field, rule in FIELD_RULES.items():
        want = Change.REPLACE if rule.change is PlanChange.REIDENTIFY else Change.UPDATE
        assert MAAS_MACHINE.rule(f"machine.{field}") is want, field
        assert MAAS_MACHINE.rule(f"machine.{field}.x") is want, field
    for path in ("policy.batch_max_parallel", "connection.platform.url"):
        assert MAAS_MACHINE.rule(path) is Change.UPDATE, path
    assert MAAS_MACHINE.rule("connection.maas.site") is Change.REPLACE
    assert MAAS_MACHINE.delete_before_replace


def _machine_props(**machine: Any) -> dict[str, Any]:
    return {"machine": {**_spec(), **machine}, "connection": CONN, "policy": {"batch_max_parallel": 4}}


def test_maas_machine_diff_on_unknowns_after_refresh_is_an_update_not_a_crash() -> None:
    old = {**_machine_props(), "system_id": "abc", "status": "Deployed", "outcome": "ready"}
    new = {**_machine_props(), "policy": UNKNOWN, "connection": {**CONN, "platform_site_id": UNKNOWN}}
    d = MaasMachineProvider().diff("abc", old, new)
    assert d.changes and not d.replaces


def test_maas_machine_diff_power_and_deploy_are_updates_a_pxe_mac_is_a_replace() -> None:
    old = {**_machine_props(), "system_id": "abc", "status": "Deployed", "outcome": "ready"}
    power = MaasMachineProvider().diff("abc", old, _machine_props(ipmi_address="10.9.9.9", power_type="redfish"))
    assert power.changes and not power.replaces
    deploy = {**_spec()["deploy"], "bundle_digest": "f" * 64}
    redeploy = MaasMachineProvider().diff("abc", old, _machine_props(deploy=deploy))
    assert redeploy.changes and not redeploy.replaces
    other = MaasMachineProvider().diff("abc", old, _machine_props(pxe_mac="b0:7b:25:20:00:99"))
    assert other.replaces == ["machine.pxe_mac"] and other.delete_before_replace


def test_same_meaning_spelled_differently_is_no_change() -> None:
    old = {**_machine_props(), "system_id": "abc", "status": "Deployed", "outcome": "ready"}
    # Pulumi's floats, a default the older code left out (testing_scripts), tuples vs lists.
    new = _machine_props()
    new["policy"] = {"batch_max_parallel": 4.0, "testing_scripts": []}
    new["machine"] = {**new["machine"], "tags": tuple(new["machine"]["tags"])}
    assert not MaasMachineProvider().diff("abc", old, new).changes


def test_drift_recorded_by_refresh_makes_an_update() -> None:
    old = {**_machine_props(), "system_id": "abc", "status": "Ready", "outcome": "drifted"}
    d = MaasMachineProvider().diff("abc", old, _machine_props())
    assert d.changes and not d.replaces
