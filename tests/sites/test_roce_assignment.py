"""RoceAssignment provider against the MAAS simulator (demo inventory: 8 rail subnets 172.16.<r>.0/24)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
from pydantic import SecretStr

from clients.maas import MaasSiteClient
from clients.vault import VaultCredentials
from environments.coded import CodedError
from providers.roce_assignment import RoceAssignmentProvider
from providers.sites.failures import RoceFail
from providers.sites.roce import RoceSpec
from simulators.maas.enums import NodeStatus
from simulators.openbao import OpenBaoDevServer

from .conftest import KV

IFACES = [f"ens{r + 1}f0np0" for r in range(8)]
CIDRS = {f"172.16.{r}.0/24" for r in range(8)}


def machine(hostname: str, fabric: str = "roce", phase2: bool = True) -> dict[str, Any]:
    return {"hostname": hostname, "profile": "h200-lab", "fabric_mode": fabric, "enable_phase2_roce": phase2,
            "interfaces": IFACES}


@pytest.fixture
def world(openbao: OpenBaoDevServer, maas_sim: Any) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    openbao.put_secret(KV, f"t/{tag}/maas", {"api_key": maas_sim.api_key})
    props = {
        "site": "site-a",
        "pools": [{"site": "site-a", "rail": float(r), "subnet": f"172.16.{r}.0/24", "start": f"172.16.{r}.10",
                   "end": f"172.16.{r}.20", "mtu": 9000.0} for r in range(8)],
        "machines": [machine("gpu-a-001"), machine("gpu-a-002")],
        "maas": {"url": maas_sim.url, "api_key_path": f"t/{tag}/maas#api_key", "tls_verify": False},
        "vault": {"address": openbao.address, "kv_mount": KV, "auth_method": "token"},
    }
    p = RoceAssignmentProvider()
    p._credentials = VaultCredentials(token=SecretStr(openbao.root_token))
    maas = MaasSiteClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    return {"props": props, "p": p, "maas": maas, "sim": maas_sim}


def holdings(maas: MaasSiteClient) -> dict[tuple[str, str], str]:
    return {(h.hostname, h.interface): h.address for h in maas.static_holdings(CIDRS)}


def test_create_links_every_rail_statically_and_outputs_the_table(world: dict[str, Any]) -> None:
    p, props, maas = world["p"], world["props"], world["maas"]
    checked = p.check({}, props)
    assert [f.reason for f in checked.failures] == []
    res = p.create(checked.inputs)
    table = res.outs["table"]
    # the recorded table: addresses in rail order; interfaces, subnets and MTUs are the spec's
    assert table["gpu-a-001"] == [f"172.16.{r}.10" for r in range(8)]
    assert table["gpu-a-002"] == [f"172.16.{r}.11" for r in range(8)]
    links = RoceSpec.model_validate(props).links(table)
    assert links["gpu-a-001"][0] == {"interface": "ens1f0np0", "subnet": "172.16.0.0/24", "address": "172.16.0.10",
                                     "mtu": 9000}
    assert res.outs["link_status"] == {"gpu-a-001": "linked", "gpu-a-002": "linked"}
    assert p.read(res.id, res.outs).outs == res.outs  # the table lives in state
    held = holdings(maas)
    assert all(held[(h, r["interface"])] == r["address"] for h, rows in links.items() for r in rows)
    # check planned exactly the table the create applied (a preview shows it)
    assert checked.inputs["table"] == table
    # a second apply is a no-op: same table, no new links
    again = p.check(res.outs, props)
    assert not p.diff(res.id, res.outs, again.inputs).changes
    assert p.update(res.id, res.outs, again.inputs).outs["table"] == table
    assert holdings(maas) == held


def test_adding_and_removing_machines_never_renumbers(world: dict[str, Any]) -> None:
    p, props, maas = world["p"], world["props"], world["maas"]
    one = copy.deepcopy(props)
    one["machines"] = [machine("gpu-a-002")]
    outs = p.create(p.check({}, one).inputs).outs
    first = outs["table"]["gpu-a-002"]
    # add gpu-a-001 (sorts first) and a machine MAAS does not know yet
    more = copy.deepcopy(props)
    more["machines"] = [machine("gpu-a-001"), machine("gpu-a-002"), machine("gpu-a-099")]
    checked = p.check(outs, more).inputs
    outs2 = p.update("x", outs, checked).outs
    assert checked["table"] == outs2["table"]  # planned at check, applied by update
    assert outs2["table"]["gpu-a-002"] == first
    assert outs2["table"]["gpu-a-001"][0] == "172.16.0.11"
    assert outs2["link_status"]["gpu-a-099"].startswith("pending: not in MAAS")
    # remove gpu-a-001: its links go, the others stay
    fewer = copy.deepcopy(props)
    fewer["machines"] = [machine("gpu-a-002"), machine("gpu-a-099")]
    outs3 = p.update("x", outs2, p.check(outs2, fewer).inputs).outs
    assert outs3["table"]["gpu-a-002"] == first and outs3["table"]["gpu-a-099"] == outs2["table"]["gpu-a-099"]
    assert {h for h, _ in holdings(maas)} == {"gpu-a-002"}


def test_addresses_held_in_maas_are_skipped_and_maas_is_the_truth_of_what_is_applied(world: dict[str, Any]) -> None:
    p, props, maas = world["p"], world["props"], world["maas"]
    nics = maas.machine_nics(["gpu-a-002"])["gpu-a-002"]
    maas.link_static(nics.system_id, nics.nics["ens1f0np0"].id, "172.16.0.0/24", "172.16.0.10")
    one = copy.deepcopy(props)
    one["machines"] = [machine("gpu-a-001")]
    outs = p.create(p.check({}, one).inputs).outs
    assert outs["table"]["gpu-a-001"][0] == "172.16.0.11"  # .10 is held by gpu-a-002 in MAAS
    # a record that says gpu-a-001 holds .12 on rail 1, given to gpu-a-002 in MAAS: MAAS shows what gpu-a-001
    # really holds there (.10), which is kept; nothing is renumbered and nothing relinked
    maas.link_static(nics.system_id, nics.nics["ens2f0np0"].id, "172.16.1.0/24", "172.16.1.12")
    bad = copy.deepcopy(outs)
    bad["table"]["gpu-a-001"][1] = "172.16.1.12"
    before = holdings(maas)
    planned = p.check(bad, one).inputs
    assert planned["table"] == outs["table"]
    assert p.update("x", bad, planned).outs["table"] == outs["table"]
    assert holdings(maas) == before


def test_an_address_not_applied_yet_that_another_stack_linked_is_reoffered(world: dict[str, Any]) -> None:
    """Two stacks sharing a site's pools: this stack recorded an address for a machine MAAS does not know
    yet; the other stack's machine linked it first. The plan moves ours, never fails on it."""
    p, props, maas = world["p"], world["props"], world["maas"]
    mine = copy.deepcopy(props)
    mine["machines"] = [machine("gpu-a-099")]  # not in MAAS: its addresses are recorded, not applied
    outs = p.create(p.check({}, mine).inputs).outs
    assert outs["table"]["gpu-a-099"][0] == "172.16.0.10"
    other = maas.machine_nics(["gpu-a-002"])["gpu-a-002"]
    maas.link_static(other.system_id, other.nics["ens1f0np0"].id, "172.16.0.0/24", "172.16.0.10")
    planned = p.check(outs, mine).inputs
    assert planned["table"]["gpu-a-099"][0] == "172.16.0.11" and planned["table"]["gpu-a-099"][1:] == \
        outs["table"]["gpu-a-099"][1:]
    assert p.diff("x", outs, planned).changes
    assert p.update("x", outs, planned).outs["table"] == planned["table"]


def test_non_roce_profiles_are_refused(world: dict[str, Any]) -> None:
    p, props = world["p"], world["props"]
    ib = copy.deepcopy(props)
    ib["machines"] = [machine("gpu-a-001", fabric="ib", phase2=False)]
    failures = p.check({}, ib).failures
    assert failures and failures[0].reason.startswith("POL001") and "gpu-a-001" in failures[0].reason
    with pytest.raises(CodedError) as err:
        p.create(ib)
    assert err.value.code is RoceFail.NOT_ROCE and str(err.value).startswith("ROC001 RoCE assignment site site-a: ")
    assert "\n  POL001 site site-a: host gpu-a-001: " in str(err.value)
    assert holdings(world["maas"]) == {}


def test_exhausted_pool_fails_check_naming_pool_and_host(world: dict[str, Any]) -> None:
    p, props = world["p"], world["props"]
    small = copy.deepcopy(props)
    small["pools"][3]["end"] = "172.16.3.10"
    failures = p.check({}, small).failures
    assert failures and failures[0].reason.startswith("ROC006 pool site-a/rail3") and "gpu-a-002" in failures[0].reason


def test_delete_unlinks_everything(world: dict[str, Any]) -> None:
    p, props = world["p"], world["props"]
    res = p.create(p.check({}, props).inputs)
    assert holdings(world["maas"])
    p.delete(res.id, res.outs)
    assert holdings(world["maas"]) == {}


def test_refresh_finds_a_link_removed_by_hand_and_update_restores_it(world: dict[str, Any]) -> None:
    p, props, maas = world["p"], world["props"], world["maas"]
    res = p.create(p.check({}, props).inputs)
    assert not p.diff(res.id, p.read(res.id, res.outs).outs, p.check(res.outs, props).inputs).changes
    m = maas.machine_nics(["gpu-a-001"])["gpu-a-001"]
    nic = m.nics["ens3f0np0"]
    maas.unlink(m.system_id, nic.id, nic.links[0][0])
    refreshed = p.read(res.id, res.outs).outs
    assert refreshed["link_status"]["gpu-a-001"] == "missing 1 link(s): ens3f0np0"
    assert refreshed["link_status"]["gpu-a-002"] == "linked"
    d = p.diff(res.id, refreshed, p.check(refreshed, props).inputs)
    assert d.changes and not d.replaces
    repaired = p.update(res.id, refreshed, p.check(refreshed, props).inputs).outs
    assert repaired["table"] == res.outs["table"]
    assert holdings(maas)[("gpu-a-001", "ens3f0np0")] == "172.16.2.10"
    assert p.read(res.id, repaired).outs["link_status"]["gpu-a-001"] == "linked"


def _links_made(sim: Any) -> int:
    return int(sim.admin.request_counts().get("InterfaceHandler", {}).get("link_subnet", 0))


def test_refresh_reads_the_rails_address_lists_not_the_machines(world: dict[str, Any]) -> None:
    p, props, sim = world["p"], world["props"], world["sim"]
    res = p.create(p.check({}, props).inputs)
    sim.admin.reset_stats()
    assert set(p.read(res.id, res.outs).outs["link_status"].values()) == {"linked"}
    # one subnets read and one address list per rail, whatever the number of machines (issue 29)
    calls = sim.admin.request_counts()
    assert calls == {"SubnetsHandler": {"read": 1}, "SubnetHandler": {"ip_addresses": 8}}, calls


def _move_link(maas: MaasSiteClient, host: str, iface: str, address: str | None) -> None:
    """Unlink `host`'s RoCE link on `iface`; with `address`, link that address there instead."""
    m = maas.machine_nics([host])[host]
    link_id, _mode, cidr, _ip = next(lk for lk in m.nics[iface].links if lk[2] in CIDRS)
    maas.unlink(m.system_id, m.nics[iface].id, link_id)
    if address is not None:
        maas.link_static(m.system_id, m.nics[iface].id, str(cidr), address)


# (name, hand change, link status the refresh reports for gpu-a-001, links the next update makes)
HAND_CHANGES = [
    ("nothing", None, "linked", 0),
    ("unlinked", ("ens3f0np0", None), "missing 1 link(s): ens3f0np0", 1),
    # MAAS is the truth of what is applied: an address of the rail's pool on the interface is adopted
    ("another address on its interface", ("ens3f0np0", "172.16.2.19"), "missing 1 link(s): ens3f0np0",
     0),
]


@pytest.mark.parametrize(("change", "status", "links"), [c[1:] for c in HAND_CHANGES], ids=[c[0] for c in HAND_CHANGES])
def test_refresh_and_update_agree_on_what_is_linked(world: dict[str, Any], change: Any, status: str,
                                                    links: int) -> None:
    """What a refresh reports linked is what an update leaves alone; after a hand change, one update brings the
    table and MAAS together, and the next refresh reports every host linked with nothing to change."""
    p, props, maas, sim = world["p"], world["props"], world["maas"], world["sim"]
    res = p.create(p.check({}, props).inputs)
    if change is not None:
        _move_link(maas, "gpu-a-001", *change)
    refreshed = p.read(res.id, res.outs).outs
    assert refreshed["link_status"] == {"gpu-a-001": status, "gpu-a-002": "linked"}
    d = p.diff(res.id, refreshed, p.check(refreshed, props).inputs)
    assert bool(d.changes) == (status != "linked")
    sim.admin.reset_stats()
    updated = p.update(res.id, refreshed, p.check(refreshed, props).inputs).outs
    assert _links_made(sim) == links
    held = holdings(maas)
    assert all(held.get((h, IFACES[r])) == a for h, addrs in updated["table"].items() for r, a in enumerate(addrs))
    again = p.read(res.id, updated).outs
    assert set(again["link_status"].values()) == {"linked"}
    assert not p.diff(res.id, again, p.check(again, props).inputs).changes


def test_a_pending_machine_its_lifecycle_linked_is_reported_linked(world: dict[str, Any]) -> None:
    """A machine MAAS would not let the assignment link (deployed) is `pending`; once its lifecycle has put every
    address of the table on its interfaces, a refresh reports it linked, and an update agrees (it does not report
    it pending again, nor link anything): what the stack output counts is what MAAS has."""
    p, props, maas, sim = world["p"], world["props"], world["maas"], world["sim"]
    m = maas.machine_nics(["gpu-a-002"])["gpu-a-002"]
    deploy = {"user_data": b"#cloud-config\n", "distro_series": "jammy", "hwe_kernel": None, "enable_hw_sync": False}
    maas.deploy(m.system_id, **deploy)
    sim.admin.wait_for_status(m.system_id, NodeStatus.DEPLOYED)
    res = p.create(p.check({}, props).inputs)
    assert res.outs["link_status"] == {"gpu-a-001": "linked", "gpu-a-002": "pending: MAAS status DEPLOYED"}
    # the machine lifecycle (released, linked from the table, deployed again), one rail short at first
    maas.release(m.system_id, erase=False, secure_erase=False, quick_erase=False, force=False)
    sim.admin.wait_for_status(m.system_id, NodeStatus.READY)
    addresses = res.outs["table"]["gpu-a-002"]
    for r in range(7):
        maas.link_static(m.system_id, m.nics[IFACES[r]].id, f"172.16.{r}.0/24", addresses[r])
    assert p.read(res.id, res.outs).outs["link_status"]["gpu-a-002"] == "pending: MAAS status DEPLOYED"
    maas.link_static(m.system_id, m.nics[IFACES[7]].id, "172.16.7.0/24", addresses[7])
    maas.deploy(m.system_id, **deploy)
    sim.admin.wait_for_status(m.system_id, NodeStatus.DEPLOYED)
    refreshed = p.read(res.id, res.outs).outs
    assert refreshed["link_status"] == {"gpu-a-001": "linked", "gpu-a-002": "linked"}
    checked = p.check(refreshed, props).inputs
    assert not p.diff(res.id, refreshed, checked).changes
    sim.admin.reset_stats()
    updated = p.update(res.id, refreshed, checked).outs
    assert updated["link_status"] == refreshed["link_status"]
    assert _links_made(sim) == 0


def test_an_interface_missing_in_maas_fails_before_any_link(world: dict[str, Any]) -> None:
    p, props = world["p"], world["props"]
    wrong = copy.deepcopy(props)
    wrong["machines"][1]["interfaces"] = IFACES[:7] + ["ens9f0np0"]  # gpu-a-002: no such NIC
    with pytest.raises(CodedError, match=r"^ROC007 RoCE assignment site site-a: host gpu-a-002 \(\w+\) has no "
                       r"interface ens9f0np0.*nothing was changed; fix: commission the machine"):
        p.create(p.check({}, wrong).inputs)
    assert holdings(world["maas"]) == {}  # not even gpu-a-001 was linked


def test_vault_unreachable_links_nothing(world: dict[str, Any]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    props = copy.deepcopy(world["props"])
    props["vault"]["address"] = dead
    # a preview without Vault (or MAAS) plans from the record alone; the create that needs MAAS fails
    checked = world["p"].check({}, props)
    assert checked.inputs["table"]["gpu-a-001"] == [f"172.16.{r}.10" for r in range(8)]
    with pytest.raises(CodedError) as err:
        world["p"].create(checked.inputs)
    assert err.value.code is RoceFail.VAULT and str(err.value).startswith("ROC008 RoCE assignment site site-a: Vault "
                                                                         "unreachable: ")
    assert "; fix: check the Vault address" in str(err.value)
    assert holdings(world["maas"]) == {}


def test_a_machine_renamed_by_hand_keeps_its_addresses_another_stacks_does_not(world: dict[str, Any]) -> None:
    """MAAS holdings name the holder by its MAAS hostname. A machine of this stack renamed by hand (owner data
    `gpuaas_resource` = <this stack>/...) still holds our addresses: nothing is renumbered. Another stack's
    machine holding a recorded address that was never applied to us: ours moves. (MAAS as a stand-in here:
    owner data needs an acquired machine; tests/stack/test_machines_drift.py renames a deployed one for real.)"""
    from types import SimpleNamespace

    from clients.maas import StaticHolding
    from providers.sites.roce import RoceReconciler, RoceSpec

    spec = RoceSpec.model_validate({**world["props"], "stack": "local"})
    table = {"gpu-a-001": [f"172.16.{r}.10" for r in range(8)], "gpu-a-002": [f"172.16.{r}.11" for r in range(8)]}
    held = [StaticHolding(address=f"172.16.{r}.10", subnet=f"172.16.{r}.0/24", hostname="gpu-a-001-renamed",
                          system_id="abc123", interface=i) for r, i in enumerate(IFACES)]
    for owner, kept in (("local/pool-a", True), ("other/pool-b", False)):
        maas = SimpleNamespace(static_holdings=lambda _c: held, read_many=lambda sids, o=owner: [
            SimpleNamespace(system_id=s, owner_data={"gpuaas_resource": o}) for s in sids])
        entries, _applied = RoceReconciler(spec, None)._allocate(maas, table)  # type: ignore[arg-type]
        got = [entries[("gpu-a-001", i)].address for i in IFACES]
        assert (got == table["gpu-a-001"]) is kept, (owner, got)
        if not kept:
            assert not set(got) & set(table["gpu-a-001"]), got


def test_a_maas_address_that_does_not_parse_is_not_ours_and_holds_nothing(world: dict[str, Any]) -> None:
    """MAAS's holdings are read as they come: a holding whose address does not parse is nobody's address in a
    pool (not applied to us, not in the way of an allocation), and the plan goes on."""
    from types import SimpleNamespace

    from clients.maas import StaticHolding
    from providers.sites.roce import RoceReconciler, RoceSpec

    spec = RoceSpec.model_validate({**world["props"], "stack": "local"})
    table = {"gpu-a-001": [f"172.16.{r}.10" for r in range(8)]}
    held = [StaticHolding(address="172.16.0.x", subnet="172.16.0.0/24", hostname="gpu-a-001", system_id="abc123",
                          interface=IFACES[0])]
    maas = SimpleNamespace(static_holdings=lambda _c: held, read_many=lambda sids: [])
    entries, applied = RoceReconciler(spec, None)._allocate(maas, table)  # type: ignore[arg-type]
    assert [entries[("gpu-a-001", i)].address for i in IFACES] == table["gpu-a-001"]
    assert not applied


def test_a_declared_rename_keeps_the_machines_addresses(world: dict[str, Any]) -> None:
    """A machine is the hardware its PXE MAC names: renamed in the environment (an in-place change the machine
    pool applies after this resource), it keeps its addresses, so its RoCE links and its deploy do not change.
    Until the pool renames it, MAAS shows it under the old name holding them: linked, and never unlinked."""
    p, props, maas = world["p"], world["props"], world["maas"]
    macs = {"gpu-a-001": "b0:7b:25:00:00:01", "gpu-a-002": "b0:7b:25:00:00:02"}
    first = copy.deepcopy(props)
    first["machines"] = [{**machine(h), "pxe_mac": macs[h]} for h in sorted(macs)]
    first["stack"] = "local"
    outs = p.create(p.check({}, first).inputs).outs
    before = holdings(maas)
    sid = maas.machine_nics(["gpu-a-001"])["gpu-a-001"].system_id
    maas.deploy(sid, user_data=b"#cloud-config\n", distro_series="jammy", hwe_kernel=None, enable_hw_sync=False)
    world["sim"].admin.wait_for_status(sid, NodeStatus.DEPLOYED)
    maas.set_owner_data(sid, {"gpuaas_resource": "local/pool-a"})  # the pool's machine
    renamed = copy.deepcopy(first)
    renamed["machines"] = [{**machine("gpu-a-101"), "pxe_mac": macs["gpu-a-001"]},
                           {**machine("gpu-a-002"), "pxe_mac": macs["gpu-a-002"]}]
    checked = p.check(outs, renamed).inputs
    assert checked["table"]["gpu-a-101"] == outs["table"]["gpu-a-001"], "planned: the same addresses"
    assert "gpu-a-001" not in checked["table"]
    outs2 = p.update("x", outs, checked).outs
    assert outs2["table"] == checked["table"]
    assert outs2["link_status"]["gpu-a-101"] == "linked"
    assert holdings(maas) == before, "nothing unlinked or relinked"
    maas.set_hostname(sid, "gpu-a-101")  # the pool's in-place rename
    again = p.check(outs2, renamed).inputs
    assert again["table"] == outs2["table"] and not p.diff("x", outs2, again).changes
    assert p.read("x", outs2).outs["link_status"]["gpu-a-101"] == "linked"
