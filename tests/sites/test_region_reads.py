"""No region-wide MAAS reads in the steady state (issue 28, item 5), through the real client and the simulator:

- RoCE holdings come from each RoCE subnet's own address list (`Subnet.ip_addresses`), never from a read of
  every machine of the region, and find exactly what the machines' static links hold;
- the IPMI (power-address) lookup, which reads every machine's BMC parameters, runs only for a machine that
  neither its hostname nor its PXE MAC found, and hands back system_ids only;
- a bulk read's timeout grows with the answer it asks for: the same slow region that times a small read out
  answers a read of many machines in time.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from clients.maas import MaasClient, MaasError, MaasSiteClient, RetryBudget
from providers.machines.resolve import resolve_machines
from simulators.maas.faults import ApiFaults

CIDRS = {f"172.16.{r}.0/24" for r in range(8)}


def _counts(sim: Any) -> dict[str, int]:
    return {f"{h}.{op}": n for h, ops in sim.admin.request_counts().items() for op, n in ops.items()}


def _read_calls(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}


def test_roce_holdings_read_each_rail_subnet_never_the_regions_machines(maas_sim: Any) -> None:
    c = MaasSiteClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    nics = c.machine_nics(["gpu-a-001", "gpu-a-002"])
    held = {}
    for n, (host, m) in enumerate(sorted(nics.items())):
        for r in range(2):
            iface = sorted(m.nics.values(), key=lambda i: i.name)[1 + r]
            address = f"172.16.{r}.{10 + n}"
            c.link_static(m.system_id, iface.id, f"172.16.{r}.0/24", address)
            held[(host, iface.name)] = address
    before = _counts(maas_sim)
    found = c.static_holdings(CIDRS)
    calls = _read_calls(before, _counts(maas_sim))
    assert {(h.hostname, h.interface): h.address for h in found} == held
    assert all(h.system_id == nics[h.hostname].system_id and h.subnet.startswith("172.16.") for h in found)
    assert calls == {"SubnetsHandler.read": 1, "SubnetHandler.ip_addresses": len(CIDRS)}, calls
    # the boot NIC's AUTO address on the PXE subnet is not a static holding, and that subnet is not read
    assert c.static_holdings(set()) == []


def _spec(hostname: str, mac: str, ipmi: str) -> Any:
    return SimpleNamespace(hostname=hostname, pxe_mac=mac, ipmi_address=ipmi)


def test_the_power_lookup_runs_only_for_a_machine_no_filtered_key_found(maas_sim: Any) -> None:
    c = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    enlisted = c.create(hostname="pxe-enlisted-1", pxe_mac="02:00:00:00:0a:01", power_type="ipmi",
                        power_address="10.99.0.1", power_user="admin", power_pass="bmc-secret-1", commission=False)
    by_bmc = c.create(hostname="by-hand-2", pxe_mac="02:00:00:00:0a:02", power_type="ipmi",
                      power_address="10.99.0.2", power_user="admin", power_pass="bmc-secret-2", commission=False)
    power = "MachinesHandler.power_parameters"

    before = _counts(maas_sim)
    found = resolve_machines(c, [_spec("new-1", "02:00:00:00:0a:01", "10.99.0.1")], {})
    assert found["new-1"].system_id == enlisted.system_id
    assert power not in _read_calls(before, _counts(maas_sim)), "found by MAC: no region-wide BMC read"

    before = _counts(maas_sim)
    found = resolve_machines(c, [_spec("new-2", "02:00:00:00:0b:99", "10.99.0.2")], {})
    assert found["new-2"].system_id == by_bmc.system_id
    assert _read_calls(before, _counts(maas_sim))[power] == 1, "nothing else finds it: one lookup"
    # what leaves the lookup: the matching system_ids, never the region's BMC credentials
    matches = c.power_address_matches(["10.99.0.2"])
    assert matches == {"10.99.0.2": [by_bmc.system_id]} and "bmc-secret" not in repr(matches)


def test_a_bulk_reads_timeout_grows_with_the_machines_it_asks_for(maas_sim: Any) -> None:
    maas_sim.admin.set_api_faults(ApiFaults(latency_ms=700))
    budget = RetryBudget(attempts=1, total_s=0, request_timeout_s=0.3, machine_render_s=0.1)
    ids = [m["system_id"] for m in maas_sim.admin.machines()]
    c = MaasSiteClient(maas_sim.url, maas_sim.api_key, tls_verify=False, retry=budget)
    with pytest.raises(MaasError) as slow:  # the describe request (no answer size): 0.3 s, the region takes 0.7 s
        c.whoami()
    assert "0.3 s" in str(slow.value) or "unavailable" in str(slow.value)
    assert budget.timeout_for(answer := len(ids) * 3) == pytest.approx(0.3 + answer * 0.1)
    maas_sim.admin.set_api_faults(ApiFaults())
    c.whoami()  # connected (describe fetched) while the region is quick
    maas_sim.admin.set_api_faults(ApiFaults(latency_ms=700))
    with pytest.raises(MaasError):
        c.whoami()  # an answer of no expected size keeps the base timeout
    views = c.read_many(ids * 3)  # 9 machines asked for: 0.3 + 0.9 s
    assert {v.system_id for v in views} == set(ids)
