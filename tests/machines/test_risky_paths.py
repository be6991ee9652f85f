"""Risky paths (issue 14, machines item 10): a failing PXE preflight stops before deploy; the boot
disk follows the SKU's hint (the BOSS) when MAAS's default is another disk; a create MAAS carried out
but whose response was lost is found again, never duplicated."""

from __future__ import annotations

from collections.abc import Callable

from providers.machines.scheduler import Scheduler
from providers.machines.status import MachineOutcome, Stage
from simulators.maas import ApiErrorBurst, ApiFaults
from simulators.maas.enums import NodeStatus

from .conftest import World


def _ready(w: World, hostname: str) -> str:
    """The machine created and commissioned to Ready by hand (MAAS knows it by its hostname)."""
    spec = w.specs[hostname]
    maas = w.client()
    sid = maas.create(
        hostname=spec.hostname, pxe_mac=spec.pxe_mac, power_type="ipmi", power_address=spec.ipmi_address,
        power_user=None, power_pass=None, commission=False,
    ).system_id
    maas.commission(sid, [], [])
    w.maas.admin.wait_for_status(sid, NodeStatus.READY)
    return sid


def _deploys(w: World) -> int:
    return w.maas.admin.request_counts()["MachineHandler"].get("deploy", 0)


def test_a_failing_pxe_preflight_stops_before_deploy(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    sid = _ready(w, "local-gpu-1")
    wrong = w.specs["local-gpu-1"].model_copy(update={"pxe_mac": "02:00:00:00:00:99"})
    r = Scheduler(w.context(strict_pxe_preflight=True)).onboard([wrong], {"local-gpu-1": sid})[0]
    assert r.outcome is MachineOutcome.FAILED and r.stage is Stage.FAILED
    assert r.reason.startswith("MCH005") and "PXE preflight failed" in r.reason
    assert "02:00:00:00:00:99" in r.reason and w.specs["local-gpu-1"].pxe_mac in r.reason, "both MACs named"
    assert _deploys(w) == 0, "nothing deployed"
    assert w.maas.admin.status(sid).label == "Ready"


def test_boot_disk_follows_the_hint_when_maas_defaults_to_another_disk(world_factory: Callable[..., World]) -> None:
    w = world_factory(roce=False)
    sid = _ready(w, "local-gpu-1")
    maas = w.client()
    disks = {b.name: b for b in maas.detail(sid).block_devices}
    boss = next(b for b in disks.values() if "BOSS" in b.model)
    other = next(b for b in disks.values() if b.id != boss.id)
    maas.set_boot_disk(sid, other.id)  # MAAS's boot disk is now a data NVMe, not the BOSS
    assert maas.detail(sid).boot_disk_id == other.id
    r = Scheduler(w.context()).onboard([w.specs["local-gpu-1"]], {"local-gpu-1": sid})[0]
    assert r.outcome is MachineOutcome.READY, r.reason
    assert maas.detail(sid).boot_disk_id == boss.id, "the SKU's hint (BOSS) won over MAAS's default"
    assert w.maas.admin.request_counts()["BlockDeviceHandler"]["set_boot_disk"] == 2, "ours, after the test's"


def test_a_create_whose_response_was_lost_is_not_duplicated(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    lost = ApiErrorBurst(status=503, count=1, handler="MachinesHandler", op="create", after_action=True)
    w.maas.admin.set_api_faults(ApiFaults(errors=[lost]))
    r = Scheduler(w.context()).onboard([w.specs["local-gpu-1"]])[0]
    assert r.outcome is MachineOutcome.READY, r.reason
    machines = w.maas.admin.machines()
    assert [m["hostname"] for m in machines] == ["local-gpu-1"], "exactly one machine"
    assert machines[0]["system_id"] == r.system_id
    assert w.maas.admin.request_counts()["MachinesHandler"]["create"] == 1, "found again, not created twice"
    assert sum(b.count for b in w.maas.admin.faults().api.errors) == 0, "the lost response did happen"
