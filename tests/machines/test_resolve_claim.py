"""auto_claim_single_new_machine (issue 14, machines item 6): exactly one New machine that the
declared IPMI address or PXE MAC matches is claimed (renamed to the declared hostname, power set)
before commissioning; with the flag off, or with several candidates, the machine stops with an error
listing their system_ids."""

from __future__ import annotations

from collections.abc import Callable

from clients.maas import MachineView
from providers.machines.records import Goal, LifecycleRecord
from providers.machines.resolve import resolve_records
from providers.machines.scheduler import Scheduler
from providers.machines.spec import MachineSpec
from providers.machines.status import MachineOutcome

from .conftest import World

OTHER_IPMI = "172.16.99.99"


def _enlist(w: World, hostname: str, mac: str, ipmi: str) -> MachineView:
    """A machine MAAS knows as New under another name (PXE-enlisted, or added by hand)."""
    return w.client().create(
        hostname=hostname, pxe_mac=mac, power_type="ipmi", power_address=ipmi,
        power_user=None, power_pass=None, commission=False,
    )


def _resolve(w: World, spec: MachineSpec) -> LifecycleRecord:
    rec = LifecycleRecord(spec=spec, goal=Goal.DEPLOYED)
    resolve_records(w.context(), [rec], {}, create_missing=False)
    return rec


def test_adopted_by_ipmi_address_alone(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    spec = w.specs["local-gpu-1"]
    found = _enlist(w, "enlisted-by-bmc", "02:00:00:00:00:01", spec.ipmi_address)
    rec = _resolve(w, spec)
    assert rec.system_id == found.system_id and rec.adopted and not rec.create_error


def test_claimed_by_mac_renamed_and_power_set_then_ready(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    spec = w.specs["local-gpu-1"]
    found = _enlist(w, "pxe-enlisted-7", spec.pxe_mac, OTHER_IPMI)
    assert _resolve(w, spec).system_id == found.system_id, "adopted by MAC alone"
    r = Scheduler(w.context(auto_claim_single_new_machine=True)).onboard([spec])[0]
    assert r.outcome is MachineOutcome.READY, r.reason
    assert r.system_id == found.system_id and r.adopted
    assert any("claimed New machine" in n for n in r.notes)
    view = w.client().read_many([found.system_id])[0]
    assert view.hostname == "local-gpu-1", "renamed to the declared hostname before enrollment"
    assert w.client().power_settings(found.system_id).power_address == spec.ipmi_address, "power set"
    assert len(w.maas.admin.machines()) == 1, "nothing created"
    creates = w.maas.admin.request_counts()["MachinesHandler"].get("create", 0)
    assert creates == 1, "only the test's own enlistment"


def test_flag_off_stops_with_the_system_id(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    spec = w.specs["local-gpu-1"]
    found = _enlist(w, "pxe-enlisted-7", spec.pxe_mac, spec.ipmi_address)
    r = Scheduler(w.context(auto_claim_single_new_machine=False)).onboard([spec])[0]
    assert r.outcome is MachineOutcome.FAILED and r.reason.startswith("MCH004"), r.reason
    assert found.system_id in r.reason and "auto_claim_single_new_machine" in r.reason
    view = w.client().read_many([found.system_id])[0]
    assert view.hostname == "pxe-enlisted-7" and view.status.label == "New", "not touched"


def test_two_candidates_stop_with_both_system_ids(world_factory: Callable[..., World]) -> None:
    """Two machines on the spec's BMC address (its MAC finds none: the power lookup runs) stop the machine."""
    w = world_factory()
    spec = w.specs["local-gpu-1"]
    by_mac = _enlist(w, "pxe-enlisted-7", "02:00:00:00:00:02", spec.ipmi_address)
    by_bmc = _enlist(w, "enlisted-by-bmc", "02:00:00:00:00:01", spec.ipmi_address)
    r = Scheduler(w.context(auto_claim_single_new_machine=True)).onboard([spec])[0]
    assert r.outcome is MachineOutcome.FAILED and r.reason.startswith("MCH020"), r.reason
    assert by_mac.system_id in r.reason and by_bmc.system_id in r.reason
    assert len(w.maas.admin.machines()) == 2, "no create, no claim"
    names = {v.hostname for v in w.client().read_many([by_mac.system_id, by_bmc.system_id])}
    assert names == {"pxe-enlisted-7", "enlisted-by-bmc"}
