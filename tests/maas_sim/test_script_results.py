"""Script results (MAAS >= 2.2, canonical/maas `maasserver/api/scriptresults.py`): every commissioning
and testing run records one result per script; `nodes/{system_id}/results/` lists the runs (filter
`type`), `nodes/{system_id}/results/current-testing/` is the newest testing run, read through
`clients.maas.MaasClient.script_results`."""

from __future__ import annotations

import pytest

from clients.maas import MaasClient, MaasError, ScriptStatus
from simulators.maas import MachineFaults

from .conftest import connect
from .test_faults import WAIT, _machine


def test_a_testing_failure_is_recorded_per_script_and_read_back(maas_sim) -> None:
    maas_sim.admin.set_machine_faults("gpu-a-002", MachineFaults(testing_failures=1))
    lib = connect(maas_sim)
    machine = _machine(lib, "gpu-a-002")
    with pytest.raises(Exception, match="failed testing"):
        machine.commission(testing_scripts=["fio", "smartctl-validate"], **WAIT)
    client = MaasClient(maas_sim.url, maas_sim.api_key)
    results = client.script_results(machine.system_id, "testing")
    assert [(r.name, r.status, r.exit_status, r.failed) for r in results] == [
        ("fio", ScriptStatus.FAILED, 1, True), ("smartctl-validate", ScriptStatus.PASSED, 0, False)]
    assert results[0].text() == "fio: failed, exit 1"
    commissioning = client.script_results(machine.system_id, "commissioning")
    assert commissioning and not any(r.failed for r in commissioning)
    # the raw list: one run per type, MAAS's fields
    runs = client._call("NodeScriptResults", "read", read=True, system_id=machine.system_id, type="testing")
    assert [(r["type"], r["type_name"]) for r in runs] == [(2, "Testing")]
    assert {"id", "name", "status", "status_name", "exit_status", "started", "ended", "runtime"} <= set(
        runs[0]["results"][0])


def test_unknown_result_ids_and_types_are_refused_as_maas_does(maas_sim) -> None:
    client = MaasClient(maas_sim.url, maas_sim.api_key)
    sid = next(m["system_id"] for m in maas_sim.admin.machines())
    assert client.script_results(sid, "testing") == []  # no run yet: MAAS answers 404, the client []
    with pytest.raises(MaasError, match="Unknown id"):
        client._call("NodeScriptResult", "read", read=True, system_id=sid, id="latest")
    with pytest.raises(MaasError, match="Unknown type"):
        client._call("NodeScriptResults", "read", read=True, system_id=sid, type="bogus")
