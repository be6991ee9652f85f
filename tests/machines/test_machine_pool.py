"""The MachinePool adapter (providers/machine_pool.py): diff on a preview's unknowns, drifted records and specs
spelled differently; check names the machine and its field. Its descriptor's classification is checked with
MaasMachine's in tests/machines/test_maas_machine.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.kind import UNKNOWN
from providers.machine_pool import MachinePoolProvider, _result
from providers.machines.plan import MachineRecord, parse_records
from providers.machines.resource_io import PoolInputs, expand_specs, pool_machines, spec_delta, wire_machines
from providers.machines.spec import MachineSpec
from providers.machines.status import MachineOutcome

from .test_maas_machine import CONN, _spec


def test_pool_diff_unknown_machines_and_drifted_records() -> None:
    spec = _spec()
    base = {"pool": "p", "machines": wire_machines([spec]), "connection": CONN, "policy": {}}
    ok = {"hostname": spec["hostname"], "system_id": "abc", "status": "Deployed", "outcome": "ready",
          "spec_fingerprint": MachineSpec.model_validate(spec).spec_fingerprint()}
    old = {**base, "machines_state": {spec["hostname"]: ok}}
    assert not MachinePoolProvider().diff("pool-x", old, base).changes
    unknown = MachinePoolProvider().diff("pool-x", old, {**base, "machines": UNKNOWN})
    assert unknown.changes and not unknown.replaces
    one_unknown = MachinePoolProvider().diff("pool-x", old, {**base, "machines": {spec["hostname"]: UNKNOWN}})
    assert one_unknown.changes and not one_unknown.replaces
    # The spec's own spelling (key order, defaults written out) is not a change: it is compared by meaning.
    spelled = {spec["hostname"]: json.dumps(dict(reversed(list(spec.items()))), indent=1)}
    assert not MachinePoolProvider().diff("pool-x", old, {**base, "machines": spelled}).changes
    edited = {**spec, "deploy": {**spec["deploy"], "hwe_kernel": "hwe-22.04"}}
    assert MachinePoolProvider().diff("pool-x", old, {**base, "machines": wire_machines([edited])}).changes
    drifted = {**base, "machines_state": {spec["hostname"]: {**ok, "status": "Missing", "outcome": "drifted"}}}
    assert MachinePoolProvider().diff("pool-x", drifted, base).changes


def test_pool_check_names_the_machine_and_its_field() -> None:
    spec = _spec()
    bad = {spec["hostname"]: json.dumps({**spec, "pxe_mac": 7})}
    props = {"pool": "p", "machines": bad, "connection": CONN, "policy": {}}
    failures = MachinePoolProvider().check({}, props).failures
    assert failures and f"machines.{spec['hostname']}.pxe_mac" in failures[0].reason, failures
    wrong_key = {"other-host": MachineSpec.model_validate(spec).wire()}
    failures = MachinePoolProvider().check({}, {"pool": "p", "machines": wrong_key, "connection": CONN,
                                                "policy": {}}).failures
    assert failures and "key each spec by its hostname" in failures[0].reason, failures


_VARIANTS = st.fixed_dictionaries({}, optional={
    "hostname": st.sampled_from(["local-gpu-7", "gpu-a-001"]),
    "tags": st.lists(st.sampled_from(["lab", "gpu", "walked"]), unique=True).map(tuple),
    "hwe_kernel": st.sampled_from([None, "ga-22.04", "hwe-22.04"]),
    "launcher_url": st.sampled_from(["", "http://store/launcher?versionId=2"]),
    "teardown_mode": st.sampled_from(["full_decommission", "reimage"]),
    "retry_generation": st.integers(0, 3),
    "address_shift": st.integers(1, 40),
    "mtu": st.sampled_from([9000, 4200]),
    "links": st.integers(0, 8),
})


def _variant(base: dict[str, Any], v: dict[str, Any]) -> MachineSpec:
    spec = json.loads(json.dumps(base))
    for key in ("hostname", "tags", "teardown_mode", "retry_generation"):
        if key in v:
            spec[key] = v[key]
    for key in ("hwe_kernel", "launcher_url"):
        if key in v:
            spec["deploy"][key] = v[key]
    links = spec.get("roce_links") or []
    if "address_shift" in v:
        links = [{**lk, "address": f"10.99.{i}.{v['address_shift']}"} for i, lk in enumerate(links)]
    if "mtu" in v and links:
        links[-1] = {**links[-1], "mtu": v["mtu"]}
    spec["roce_links"] = links[: v.get("links", len(links))]
    return MachineSpec.model_validate(spec)


@settings(max_examples=200, deadline=None)
@given(template_v=_VARIANTS, machine_vs=st.lists(_VARIANTS, min_size=1, max_size=4))
def test_a_pool_written_against_its_template_reads_back_exactly(template_v: dict[str, Any],
                                                                machine_vs: list[dict[str, Any]]) -> None:
    """Issue 29: every machine's entry holds only what differs from the pool's template, and reading it back
    (PoolInputs, the pool's diff, the note's reader) gives exactly the spec written, whatever differs."""
    base = _spec()
    template = _variant(base, template_v)
    specs = {}
    for i, v in enumerate(machine_vs):
        spec = _variant(base, {**v, "hostname": f"gpu-{i}"})
        specs[spec.hostname] = spec
    entries = {h: spec_delta(s, template) for h, s in specs.items()}
    whole = expand_specs(entries, template.wire())
    assert {h: MachineSpec.model_validate(v) for h, v in whole.items()} == specs
    assert {h: MachineSpec.model_validate(v) for h, v in pool_machines(entries, template.wire()).items()} == specs
    inputs = PoolInputs.model_validate({"pool": "p", "machines": entries, "template": template.wire(),
                                        "connection": CONN, "policy": {}})
    assert dict(zip(inputs.machines, inputs.specs, strict=True)) == specs


def test_a_pool_written_whole_before_diffs_clean_against_the_template_form() -> None:
    """State written before the template (each entry the whole spec) and this version's inputs (entries against
    the template) describe the same machines: no change, and the entries are a fraction of the whole specs."""
    spec = MachineSpec.model_validate(_spec())
    others = [MachineSpec.model_validate({**_spec(), "hostname": f"local-gpu-{i}", "pxe_mac": f"b0:7b:25:20:00:{i}",
                                          "ipmi_address": f"172.16.20.{i}"}) for i in range(10, 20)]
    old_base = {"pool": "p", "machines": wire_machines([spec, *others]), "connection": CONN, "policy": {}}
    records = {s.hostname: {"hostname": s.hostname, "system_id": f"id{i}", "status": "Deployed", "outcome": "ready",
                            "spec_fingerprint": s.spec_fingerprint()} for i, s in enumerate([spec, *others])}
    old = {**old_base, "machines_state": records}
    new = {**old_base, "machines": {s.hostname: spec_delta(s, spec) for s in [spec, *others]},
           "template": spec.wire()}
    assert not MachinePoolProvider().diff("pool-x", old, new).changes
    edited = others[3].model_copy(update={"tags": ("walked",)})
    new["machines"][edited.hostname] = spec_delta(edited, spec)
    assert MachinePoolProvider().diff("pool-x", old, new).changes
    whole = sum(len(v) for v in old_base["machines"].values())
    assert sum(len(v) for v in new["machines"].values()) < whole / 3, (whole, new["machines"])


def test_a_pools_diff_reads_the_specs_its_check_read_and_only_those(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: the engine diffs the inputs a check returned; the diff takes the specs that check read instead of
    reading 1,024 strings again, whatever order the entries come in, and only for exactly those entries: an edited
    entry is read and planned afresh."""
    import providers.machine_pool as mp

    spec = MachineSpec.model_validate(_spec())
    others = [MachineSpec.model_validate({**_spec(), "hostname": f"local-gpu-{i}", "pxe_mac": f"b0:7b:25:20:00:{i}",
                                          "ipmi_address": f"172.16.20.{i}"}) for i in range(10, 14)]
    records = {s.hostname: {"hostname": s.hostname, "system_id": f"id{i}", "status": "Deployed", "outcome": "ready",
                            "spec_fingerprint": s.spec_fingerprint()} for i, s in enumerate([spec, *others])}
    base = {"pool": "p", "machines": {s.hostname: spec_delta(s, spec) for s in [spec, *others]},
            "template": spec.wire(), "connection": CONN, "policy": {}}
    old = {**base, "machines_state": records}
    edited = {**base, "machines": {**base["machines"],
                                   others[1].hostname: spec_delta(others[1].model_copy(update={"tags": ("t",)}), spec)}}
    p = MachinePoolProvider()
    checked, checked_edit = p.check(old, base).inputs, p.check(old, edited).inputs
    read = mp.expand_specs
    monkeypatch.setattr(mp, "expand_specs", lambda *a: pytest.fail("read again: the check's specs were not used"))
    assert not p.diff("pool-x", old, checked).changes
    # the CLI hands the diff the entries in another order than the check had them (seen in every real pass)
    assert not p.diff("pool-x", old, {**checked, "machines": dict(reversed(list(checked["machines"].items())))}).changes
    assert p.diff("pool-x", old, checked_edit).changes
    monkeypatch.setattr(mp, "expand_specs", read)
    unchecked = {**base, "machines": {**base["machines"],
                                      others[2].hostname: spec_delta(others[2].model_copy(update={"tags": ("u",)}),
                                                                     spec)}}
    assert p.diff("pool-x", old, unchecked).changes  # never checked: read and planned here
    assert p.diff("pool-x", old, {**checked, "template": others[0].wire()}).changes  # same entries, other template


record_strategy = st.builds(
    MachineRecord,
    hostname=st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True),
    system_id=st.none() | st.from_regex(r"[a-z0-9]{6}", fullmatch=True),
    status=st.none() | st.sampled_from(["Deployed", "Missing", "Ready"]),
    outcome=st.none() | st.sampled_from(list(MachineOutcome)),
    node_id=st.none() | st.text(max_size=8),
    deploy_fingerprint=st.none() | st.text(max_size=8),
    tags=st.lists(st.text(max_size=5), max_size=3).map(tuple),
    deploy_attempts=st.integers(0, 3),
    leaving=st.booleans(),
    drift=st.lists(st.sampled_from(["hostname", "tags"]), max_size=2, unique=True).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(record_strategy)
def test_a_pool_keeps_each_record_as_one_json_string_and_reads_older_mappings_the_same(rec: MachineRecord) -> None:
    """State keeps a record as `MachineRecord.wire` (one string: the SDK carries it as one leaf); state written
    before kept a mapping (`state()`): both read back as the same record, and a string no record can be read
    from is no record, never a crash."""
    written = _result({rec.hostname: rec})["machines_state"]
    assert written == {rec.hostname: rec.wire()} and isinstance(written[rec.hostname], str)
    assert parse_records(written) == parse_records({rec.hostname: rec.state()}) == {rec.hostname: rec}
    assert parse_records({rec.hostname: rec.wire()[:-1]}) == {} == parse_records({rec.hostname: "[1]"})
    assert parse_records({rec.hostname: "[" * 100_000}) == {}  # too deep for the decoder: no record, no crash
