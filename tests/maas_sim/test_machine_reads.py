"""Bulk machine reads decode only what the client reads (issue 29: a 1,024-machine answer is 34 MB of
JSON), through python-libmaas and the simulator over HTTP:

- every bulk read gives the views a whole-document decode gives, field for field (owner data, tags, PXE
  MAC, power state, status message), before and after a deploy;
- a poll decodes the whole answer only when it picks a machine, and a picked machine's detail is what a
  single machine read gives;
- an answer without what the client reads is a MaasError naming the request and where, never a crash
  and never the answer's values.
"""

from __future__ import annotations

from typing import Any

import pytest

import simulators.maas.handlers_machines as sim_handlers
from clients.maas import MaasClient, MaasError, MaasStatus
from clients.maas.parse import machine_view
from simulators.maas.enums import NodeStatus


def _whole(c: MaasClient, **params: Any) -> list[Any]:
    """The same read decoded as any JSON (no typed decoder): the reference."""
    return list(c._call("Machines", "read", read=True, **params))


def _deploy_one(sim: Any, c: MaasClient) -> str:
    sid = c.by_hostnames(["gpu-a-001"])[0].system_id
    c.set_tags(sid, ["gpuaas-bench"])
    c.deploy(sid, user_data=b"#cloud-config\n", distro_series="jammy", hwe_kernel=None, enable_hw_sync=True)
    sim.admin.wait_for_status(sid, NodeStatus.DEPLOYED)
    c.set_owner_data(sid, {"gpuaas/pool": "bench", "gpuaas/spec": "a1b2"})
    return sid


def test_every_bulk_read_gives_the_views_of_the_whole_document(maas_sim: Any) -> None:
    c = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    for deployed in (False, True):
        if deployed:
            _deploy_one(maas_sim, c)
        raw = _whole(c)
        assert len(raw) == 3
        whole = {r["system_id"]: machine_view(r) for r in raw}
        for r in raw:  # each field against the document itself, not through the client's own model
            v = whole[r["system_id"]]
            assert (v.hostname, v.status, v.status_message, v.power_state, v.pxe_mac, v.owner_data,
                    v.enable_hw_sync, v.tags) == (
                r["hostname"], MaasStatus(r["status"]), r["status_message"] or "", r["power_state"],
                r["boot_interface"]["mac_address"].lower(), r["owner_data"], bool(r["enable_hw_sync"]),
                tuple(r["tag_names"]))
        ids = sorted(whole)
        assert {v.system_id: v for v in c.read_many(ids)} == whole
        assert {v.system_id: v for v in c.by_hostnames([r["hostname"] for r in raw])} == whole
        macs = [r["boot_interface"]["mac_address"] for r in raw]
        assert {v.system_id: v for v in c.by_macs(macs)} == whole
        assert all(v.pxe_mac for v in whole.values()) and all(v.hostname for v in whole.values())
    tagged = c.with_tag("gpuaas-bench")
    assert [v.owner_data for v in tagged] == [{"gpuaas/pool": "bench", "gpuaas/spec": "a1b2"}]
    assert tagged[0].status is MaasStatus.DEPLOYED
    assert tagged[0].enable_hw_sync is True and "gpuaas-bench" in tagged[0].tags


def test_a_poll_decodes_details_only_for_the_machines_it_picks(maas_sim: Any) -> None:
    c = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    views = c.by_hostnames(["gpu-a-001", "gpu-a-002", "cpu-a-001"])
    ids = sorted(v.system_id for v in views)
    picked = ids[1]
    polled = c.poll_many(ids, detail_when=lambda v: v.system_id == picked)
    assert [v.system_id for v, _ in polled] == ids
    assert {v.system_id: d for v, d in polled if d is not None} == {picked: c.detail(picked)}
    detail = c.detail(picked)
    assert detail.interfaces and detail.block_devices  # a real detail, not an empty one
    assert all(d is None for _, d in c.poll_many(ids, detail_when=lambda v: False))


def test_an_answer_without_what_the_client_reads_is_a_maas_error(maas_sim: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    c = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    sid = _deploy_one(maas_sim, c)
    c.set_owner_data(sid, {"gpuaas/note": "value-never-in-an-error"})
    render = sim_handlers.machine_json

    def without_system_id(store: Any, m: Any) -> dict[str, Any]:
        data = dict(render(store, m))
        if m.system_id == sid:
            del data["system_id"]
        return data

    monkeypatch.setattr(sim_handlers, "machine_json", without_system_id)
    with pytest.raises(MaasError) as e:
        c.with_tag("gpuaas-bench")
    msg = str(e.value)
    assert msg.startswith("MAAS Machines.read: an answer this client cannot read (1 problem; first at [0.system_id]")
    assert "fix:" in msg and "value-never-in-an-error" not in msg
