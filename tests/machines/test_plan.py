"""The machines plan (providers/machines/plan.py): one rule for what a changed spec does, read by the
MaasMachine and MachinePool adapters' diffs, the pool's plan, the lifecycle's redeploy trigger and the
merge-request note. Every spec field and every shared input is walked here and all of them must agree;
tests/stack/test_machine_changes.py checks what `up` then does in MAAS."""

from __future__ import annotations

from typing import Any

import pytest

from environments import load_environment
from preview_note.changes import Action, Change
from preview_note.kinds import Harm, destructive
from preview_note.machines import machine_change, pool_view
from preview_note.model import ResourceState
from providers.maas_machine import MaasMachineProvider
from providers.machine_pool import MachinePoolProvider
from providers.machines.plan import (
    FIELD_RULES,
    SHARED_INPUT_RULES,
    MachineRecord,
    checks_fingerprint,
    fingerprints,
    plan,
    redeploy_due,
    written_for,
)
from providers.machines.plan import Change as MC
from providers.machines.resource_io import MachineInputs, PoolInputs, wire_machines
from providers.machines.spec import MachineSpec, PowerType, TeardownMode
from simulators.localstack import machine_specs

SPECS = {h: MachineSpec.model_validate(s) for h, s in machine_specs(load_environment("local")).items()}
BASE = SPECS["local-gpu-2"]
CONNECTION = {"maas": {"site": "local", "maas_url": "http://127.0.0.1:1/MAAS/", "api_key_path": "a/b#k"},
              "platform": {"url": "http://127.0.0.1:2", "token_path": "a/p#t"},
              "vault": {"address": "http://127.0.0.1:3"}, "platform_site_id": "site-1", "platform_profile_id": "p-1"}
POLICY = {"batch_max_parallel": 2, "release_erase_mode": "quick"}


def _changed(spec: MachineSpec, field: str) -> MachineSpec:
    """`spec` with `field` changed to another valid value."""
    value: Any = {
        "hostname": spec.hostname + "x",
        "tags": (*spec.tags, "extra"),
        "power_type": PowerType.REDFISH,
        "power_user_path": "gpuaas/local/bmc/other#user",
        "teardown_mode": TeardownMode.DETACH,
        "retry_generation": spec.retry_generation + 1,
        "ipmi_address": "172.16.20.99",
        "pxe_mac": "b0:7b:25:20:00:99",
        "site": "other",
        "sku": "cpu-small",
        "profile": "other-profile",
        "pxe_interface": "eno9",
        "storage": spec.storage.model_copy(update={"root_size_gb": 123}),
        "roce_links": spec.roce_links[:-1],
        "deploy": spec.deploy.model_copy(update={"hwe_kernel": "ga-22.04"}),
    }[field]
    return spec.model_copy(update={field: value})


def _deployed(spec: MachineSpec, **extra: Any) -> MachineRecord:
    """The record a clean deploy of `spec` writes."""
    fields: dict[str, Any] = {"hostname": spec.hostname, "system_id": f"sid-{spec.hostname}", "status": "Deployed",
                              "outcome": "ready", "node_id": "n-1", "deploy_fingerprint": spec.deploy_fingerprint(),
                              "checks_fingerprint": checks_fingerprint(spec)}
    rec = MachineRecord.model_validate({**fields, **extra})
    return written_for(rec, spec)


def _machine_state(spec: MachineSpec, record: MachineRecord) -> dict[str, Any]:
    return {"machine": spec.model_dump(mode="json", exclude_none=True), "connection": CONNECTION, "policy": POLICY,
            **record.state(identity=False)}


def _pool_state(specs: list[MachineSpec], records: dict[str, MachineRecord]) -> dict[str, Any]:
    return {"pool": "local-h200", "connection": CONNECTION, "policy": POLICY,
            "machines_state": {h: r.state() for h, r in records.items()}}


def _note_change(kind: str, old: dict[str, Any], old_out: dict[str, Any], new: dict[str, Any],
                 action: Action = Action.UPDATE) -> Change:
    return Change(urn=f"urn:pulumi:s::p::x::{kind}", type=f"pulumi-python:dynamic/gpuaas:{kind}", kind=kind,
                  name=kind.lower(), action=action, old=ResourceState(inputs=old, outputs=old_out),
                  new=ResourceState(inputs=new))


def test_every_spec_field_and_shared_input_has_one_rule() -> None:
    assert set(FIELD_RULES) == set(MachineSpec.model_fields)
    assert set(SHARED_INPUT_RULES) == (set(PoolInputs.model_fields) | set(MachineInputs.model_fields)) - {
        "machines", "template", "machine"}


@pytest.mark.parametrize("field", sorted(FIELD_RULES))
def test_a_changed_field_means_the_same_everywhere(field: str) -> None:
    """The rule, the pool's plan, both adapters' diffs, the lifecycle's trigger and the note agree."""
    expected = FIELD_RULES[field].change
    new = _changed(BASE, field)
    record = _deployed(BASE)

    # The rule, from the record alone (a pool) and with the old spec (a MaasMachine, the note).
    from providers.machines.plan import change, changed_fields
    assert change(record, new, BASE) is expected
    assert change(record, new) is expected
    assert changed_fields(record, new, BASE) == {field: expected}

    # The pool's plan (a renamed machine is rekeyed by the adapter first: see the rename test).
    if field != "hostname":
        kinds = {"stay": MC.STAY, "in_place": MC.IN_PLACE, "redeploy": MC.REDEPLOY, "reidentify": MC.REIDENTIFY}
        got = {k for k, hosts in plan({BASE.hostname: record}, [new]).as_dict().items() if hosts}
        assert got == {next(k for k, v in kinds.items() if v is expected)}

    # The lifecycle's trigger: MAAS owner data of the last deploy says a redeploy is due exactly for REDEPLOY.
    assert bool(redeploy_due(fingerprints(BASE), new)) is (expected is MC.REDEPLOY)

    # MaasMachine's diff: a replace exactly for other hardware; an update for everything else.
    old_state = _machine_state(BASE, record)
    news = {"machine": new.model_dump(mode="json", exclude_none=True), "connection": CONNECTION, "policy": POLICY}
    d = MaasMachineProvider().diff(record.system_id or "", old_state, news)
    assert d.changes
    assert bool(d.replaces) is (expected is MC.REIDENTIFY), d.replaces
    assert d.delete_before_replace

    # MachinePool's diff: always an update of the pool.
    pool_news = {"pool": "local-h200", "machines": wire_machines([new]), "connection": CONNECTION, "policy": POLICY}
    pd = MachinePoolProvider().diff("pool-1", _pool_state([BASE], {BASE.hostname: record}), pool_news)
    assert pd.changes and not pd.replaces

    # The note: the pool's per-machine view and the MaasMachine's destructive line say the same.
    if field != "hostname":
        view = pool_view(_note_change("MachinePool", {"machines": wire_machines([BASE]), "pool": "local-h200"},
                                      _pool_state([BASE], {BASE.hostname: record}), pool_news))
        listed = {MC.REIDENTIFY: [h for h, _ in view.reidentifies], MC.REDEPLOY: [h for h, _ in view.redeploys],
                  MC.IN_PLACE: [h for h, _ in view.updates]}
        assert listed[expected] == [BASE.hostname], view
        assert all(not hosts for c, hosts in listed.items() if c is not expected), view
    action = Action.REPLACE if expected is MC.REIDENTIFY else Action.UPDATE
    machine = _note_change("MaasMachine", {k: old_state[k] for k in ("machine", "connection", "policy")},
                           old_state, news, action)
    assert machine_change(machine)[0] is expected
    harms = destructive(machine, "local")
    assert bool(harms) is (expected in (MC.REDEPLOY, MC.REIDENTIFY))
    assert all(h.harm is Harm.REDEPLOY for h in harms)
    if expected is MC.REDEPLOY:
        assert "data disks erased (quick erase); rolling, at most 2 at once" in harms[0].text


@pytest.mark.parametrize("shared", sorted(SHARED_INPUT_RULES))
def test_a_changed_shared_input_touches_no_machine(shared: str) -> None:
    record = _deployed(BASE)
    value = {"pool": "renamed-pool", "connection": {**CONNECTION, "platform_site_id": "site-2"},
             "policy": {**POLICY, "batch_max_parallel": 4}, "owner": "local/pool-renamed"}[shared]
    pool_news = {"pool": "local-h200", "machines": wire_machines([BASE]), "connection": CONNECTION, "policy": POLICY,
                 shared: value}
    old = _pool_state([BASE], {BASE.hostname: record})
    pd = MachinePoolProvider().diff("pool-1", old, pool_news)
    assert SHARED_INPUT_RULES[shared].change is MC.IN_PLACE
    assert pd.changes and not pd.replaces  # the pool records the new value; its machines stay
    view = pool_view(_note_change("MachinePool", {**old, "machines": wire_machines([BASE])}, old, pool_news))
    assert view.unchanged == 1 and not (view.redeploys or view.reidentifies or view.updates)


def test_the_plan_of_a_pool() -> None:
    prior = {"local-gpu-2": _deployed(SPECS["local-gpu-2"]), "local-gpu-3": _deployed(SPECS["local-gpu-3"]),
             "local-gpu-4": _deployed(SPECS["local-gpu-4"], status="Ready", outcome="drifted"),
             "local-gpu-1": _deployed(SPECS["local-gpu-1"]),
             "gone-1": _deployed(SPECS["local-gpu-2"]).model_copy(update={"hostname": "gone-1"})}
    new = [SPECS["local-gpu-2"], _changed(SPECS["local-gpu-3"], "deploy"), SPECS["local-gpu-4"],
           _changed(SPECS["local-gpu-1"], "pxe_mac"), SPECS["local-gpu-5"] if "local-gpu-5" in SPECS else
           _changed(SPECS["local-gpu-4"], "hostname")]
    new[0] = _changed(SPECS["local-gpu-2"], "tags")
    p = plan(prior, new)
    assert p.as_dict() == {"join": [new[-1].hostname], "reidentify": ["local-gpu-1"], "redeploy": ["local-gpu-3"],
                           "repair": ["local-gpu-4"], "in_place": ["local-gpu-2"], "stay": [], "leave": ["gone-1"]}


def test_a_field_the_last_deploy_did_not_record_is_only_recorded() -> None:
    """A machine deployed before its check fingerprint existed (no `checks` in state or owner data): an SKU
    change cannot be seen by the lifecycle, so the plan says in place (recorded), never a redeploy it would
    not do; the next deploy records it."""
    old = _deployed(BASE).model_copy(update={"checks_fingerprint": None})
    new = _changed(BASE, "sku")
    from providers.machines.plan import change
    assert change(old, new, BASE) is MC.IN_PLACE and change(old, new) is MC.IN_PLACE
    assert not redeploy_due({"deploy": BASE.deploy_fingerprint(), "checks": None}, new)


def test_an_unknown_spec_in_a_preview_is_an_update_that_may_redeploy() -> None:
    record = _deployed(BASE)
    from providers.kind import UNKNOWN
    d = MaasMachineProvider().diff("sid-1", _machine_state(BASE, record),
                                   {"machine": UNKNOWN, "connection": CONNECTION, "policy": POLICY})
    assert d.changes and not d.replaces
    change = _note_change("MaasMachine", _machine_state(BASE, record), _machine_state(BASE, record),
                          {"machine": UNKNOWN, "connection": CONNECTION, "policy": POLICY})
    assert machine_change(change) == (None, {})
    assert "may redeploy" in destructive(change, "local")[0].text


def test_v1_records_parse_and_shrink() -> None:
    from clients.maas import MaasStatus  # noqa: F401  (the record keeps MAAS's label, not the enum)
    from providers.machines.status import Stage

    v1 = {"hostname": "local-gpu-2", "system_id": "x", "status": "Deployed", "stage": "ready", "outcome": "ready",
          "node_id": "n", "deploy_attempts": 1.0, "notes": ["a"] * 40, "stage_seconds": {"deploy": 1.5}}
    rec = MachineRecord.parse("local-gpu-2", v1)
    assert rec is not None and rec.stage is Stage.READY and not rec.needs_attention
    assert "notes" not in rec.state() and "stage_seconds" not in rec.state()
