"""The MachinePool adapter (providers/machine_pool.py): diff on a preview's unknowns, drifted records and specs
spelled differently; check names the machine and its field. Its descriptor's classification is checked with
MaasMachine's in tests/machines/test_maas_machine.py."""

from __future__ import annotations

import json

from providers.kind import UNKNOWN
from providers.machine_pool import MachinePoolProvider
from providers.machines.resource_io import wire_machines
from providers.machines.spec import MachineSpec

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
