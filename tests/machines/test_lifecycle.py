"""The machine lifecycle against the MAAS simulator (python-libmaas over HTTP) and the platform
simulator: onboarding from a BMC address and a hostname to Deployed and enrolled, and back."""

from __future__ import annotations

from collections.abc import Callable

from clients.platform import PlatformClient
from environments.model import TeardownMode
from providers.machines.records import OWNER_FINGERPRINT
from providers.machines.scheduler import Scheduler
from providers.machines.status import MachineOutcome, Stage

from .conftest import World


def _by_host(results):
    return {r.hostname: r for r in results}


def _flat(counts: dict[str, dict[str, int]]) -> dict[str, int]:
    return {f"{h}.{a}": n for h, actions in counts.items() for a, n in actions.items()}


def test_onboard_creates_commissions_deploys_and_enrolls(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    maas = w.client()
    platform = PlatformClient(w.platform.url, w.platform.creds.platform_admin)
    results = _by_host(Scheduler(w.context(maas=maas)).onboard(list(w.specs.values())))
    assert {r.outcome for r in results.values()} == {MachineOutcome.READY}, [r.reason for r in results.values()]
    views = {v.hostname: v for v in maas.read_many([r.system_id for r in results.values()])}
    assert all(v.status.label == "Deployed" for v in views.values())
    # Every machine was created once, enrolled in the platform with its own single-use token.
    assert len(w.maas.admin.machines()) == len(w.specs)
    for hostname, r in results.items():
        assert r.node_id and views[hostname].owner_data[OWNER_FINGERPRINT] == w.specs[hostname].deploy_fingerprint()
        enrolls = [e for e in w.maas.admin.events(r.system_id) if e["type"] == "ENROLL"]
        assert len(enrolls) == 1 and "status=200" in enrolls[0]["description"]
        assert platform.get_node(r.node_id).status.value == "active"
    # RoCE links: STATIC addresses from the rail pools, on the rail NICs.
    detail = maas.detail(results["local-gpu-2"].system_id)
    linked = {i.name: [lk.get("ip_address") for lk in i.links] for i in detail.interfaces}
    for link in w.specs["local-gpu-2"].roce_links:
        assert link.address in linked[link.interface]
    # User data carries the bundle digest and the enrollment file; never returned to us in plaintext outputs.
    user_data = (w.maas.admin.user_data(results["local-gpu-1"].system_id) or b"").decode()
    assert w.specs["local-gpu-1"].deploy.bundle_digest in user_data and "/etc/gpuaas/enrollment.json" in user_data


def test_second_run_changes_nothing(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    specs = list(w.specs.values())
    first = Scheduler(w.context()).onboard(specs)
    known = {r.hostname: r.system_id for r in first}
    before = _flat(w.maas.admin.request_counts())
    second = Scheduler(w.context()).onboard(specs, known)
    after = _flat(w.maas.admin.request_counts())
    assert {r.outcome for r in second} == {MachineOutcome.READY}
    mutations = {
        k: after.get(k, 0) - before.get(k, 0)
        for k in after
        if after.get(k, 0) != before.get(k, 0) and not k.endswith((".read", ".power_parameters", ".query"))
    }
    assert mutations == {}, f"a converged fleet must see no MAAS mutation, got {mutations}"


def test_adopts_existing_machines_instead_of_duplicating(world_factory: Callable[..., World]) -> None:
    w = world_factory(enlisted=True)  # MAAS already knows the machines (New, enlisted by PXE)
    results = Scheduler(w.context()).onboard(list(w.specs.values()))
    assert {r.outcome for r in results} == {MachineOutcome.READY}
    assert all(r.adopted for r in results)
    assert len(w.maas.admin.machines()) == len(w.specs)


def test_teardown_releases_powers_off_and_never_deletes(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    specs = list(w.specs.values())
    up = {r.hostname: r for r in Scheduler(w.context()).onboard(specs)}
    modes = {
        "local-gpu-1": TeardownMode.REIMAGE,
        "local-gpu-2": TeardownMode.FULL_DECOMMISSION,
        "local-gpu-3": TeardownMode.DETACH,
        "local-gpu-4": TeardownMode.FULL_DECOMMISSION,
    }
    down = _by_host(
        Scheduler(w.context()).teardown(
            [(s, up[s.hostname].system_id, modes[s.hostname]) for s in specs], {h: r.node_id for h, r in up.items()}
        )
    )
    views = {v.hostname: v for v in w.client().read_many([r.system_id for r in up.values()])}
    assert len(views) == 4, "destroy never deletes a machine from MAAS"
    assert down["local-gpu-3"].outcome is MachineOutcome.DETACHED and views["local-gpu-3"].status.label == "Deployed"
    for h in ("local-gpu-1", "local-gpu-2", "local-gpu-4"):
        assert down[h].outcome is MachineOutcome.RELEASED and views[h].status.label == "Ready"
    # MAAS powers machines off on release anyway; full_decommission also asks for it explicitly (and
    # would on a machine left on), reimage does not.
    assert views["local-gpu-2"].power_state == "off"
    # Every mode, detach included, removes the platform's node record (GPUaaS-only cleanup).
    platform = PlatformClient(w.platform.url, w.platform.creds.platform_admin)
    for h, r in up.items():
        assert platform.get_node(r.node_id).status.value == "deleted", h


def test_peak_concurrency_never_exceeds_batch_max_parallel(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    Scheduler(w.context(batch_max_parallel=2)).onboard(list(w.specs.values()))
    peak = w.maas.admin.peak_concurrency()
    assert 1 <= max(site["busy"] for site in peak.values()) <= 2, peak


def test_changed_deploy_input_redeploys_only_that_machine(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    specs = dict(w.specs)
    first = {r.hostname: r for r in Scheduler(w.context()).onboard(list(specs.values()))}
    changed = specs["local-gpu-3"].model_copy(
        update={"deploy": specs["local-gpu-3"].deploy.model_copy(update={"bundle_digest": "1" * 64})}
    )
    specs["local-gpu-3"] = changed
    before = {h: len(w.maas.admin.events(r.system_id)) for h, r in first.items()}
    again = _by_host(Scheduler(w.context()).onboard(list(specs.values()), {h: r.system_id for h, r in first.items()}))
    assert {r.outcome for r in again.values()} == {MachineOutcome.READY}
    grew = {h for h, r in first.items() if len(w.maas.admin.events(r.system_id)) > before[h]}
    assert grew == {"local-gpu-3"}
    assert "1" * 64 in (w.maas.admin.user_data(first["local-gpu-3"].system_id) or b"").decode()


def test_machine_released_by_hand_is_redeployed(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    spec = w.specs["local-gpu-1"]
    r = Scheduler(w.context()).onboard([spec])[0]
    maas = w.client()
    maas.release(r.system_id, erase=False, secure_erase=False, quick_erase=False, force=False)
    again = Scheduler(w.context()).onboard([spec], {spec.hostname: r.system_id})[0]
    assert again.outcome is MachineOutcome.READY and again.system_id == r.system_id
    assert maas.read_many([r.system_id])[0].status.label == "Deployed"


def test_stage_is_recorded(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    r = Scheduler(w.context()).onboard([w.specs["local-gpu-1"]])[0]
    assert r.stage is Stage.READY
    assert {"await_commission", "await_deploy"} <= set(r.stage_seconds)


def test_in_place_tags_and_hostname_through_the_client(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    r = Scheduler(w.context()).onboard([w.specs["local-gpu-1"]])[0]
    maas = w.client()
    maas.set_tags(r.system_id, ["gpu", "rack-a"], remove=["lab"])
    maas.set_hostname(r.system_id, "local-gpu-1b")
    view = maas.read_many([r.system_id])[0]
    assert view.hostname == "local-gpu-1b" and view.status.label == "Deployed"
    tagged = {
        t
        for t in ("gpu", "rack-a", "lab")
        if r.system_id in [m["system_id"] for m in maas._call("Tag", "machines", read=True, name=t)]
    }
    assert tagged == {"gpu", "rack-a"}


def test_bmc_credentials_come_from_the_secret_source_at_create(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    password = "bmc-pw-" + "x7" * 8
    asked: list[str] = []

    def bmc(ref: str) -> tuple[str, str]:
        asked.append(ref)
        return "root", password

    spec = w.specs["local-gpu-2"].model_copy(update={"power_user_path": "local/bmc/local-gpu-2#credentials"})
    ctx = w.context()
    ctx.bmc_credentials = bmc
    r = Scheduler(ctx).onboard([spec])[0]
    assert r.outcome is MachineOutcome.READY and asked == ["local/bmc/local-gpu-2#credentials"]
    params = w.client()._call("Machines", "power_parameters", read=True)[r.system_id]
    assert params["power_user"] == "root" and params["power_pass"] == password
    assert password not in r.model_dump_json()


def test_bmc_credentials_unavailable_fails_that_machine_only(world_factory: Callable[..., World]) -> None:
    w = world_factory()

    def bmc(ref: str) -> tuple[str, str]:
        raise RuntimeError(f"Vault: {ref} not found; write it or fix power_user_path")

    specs = [w.specs["local-gpu-1"], w.specs["local-gpu-2"].model_copy(update={"power_user_path": "nope#creds"})]
    ctx = w.context()
    ctx.bmc_credentials = bmc
    results = _by_host(Scheduler(ctx).onboard(specs))
    assert results["local-gpu-1"].outcome is MachineOutcome.READY
    assert results["local-gpu-2"].outcome is MachineOutcome.FAILED and "nope#creds" in results["local-gpu-2"].reason


def test_a_roce_address_another_machine_holds_fails_naming_the_holder(world_factory: Callable[..., World]) -> None:
    """Two stacks sharing a site's RoCE pools: the other stack's machine linked the address first. The machine
    stops before deploying, with MCH027 naming the holder (host/interface, system_id) and the fix."""
    w = world_factory()
    first = _by_host(Scheduler(w.context()).onboard([w.specs["local-gpu-2"]]))
    holder = w.specs["local-gpu-2"].roce_links[0]
    spec = w.specs["local-gpu-3"]
    clash = spec.model_copy(update={"roce_links": (spec.roce_links[0].model_copy(update={"address": holder.address}),
                                                   *spec.roce_links[1:])})
    (result,) = Scheduler(w.context()).onboard([clash])
    assert result.outcome is MachineOutcome.FAILED
    assert result.reason.startswith("MCH027 "), result.reason
    assert f"RoCE address {holder.address}" in result.reason and "held in MAAS by local-gpu-2/" in result.reason
    assert first["local-gpu-2"].system_id in result.reason and "run `pulumi up` again" in result.reason
    view = w.client().read_many([result.system_id])[0]
    assert view.status.label != "Deployed"
