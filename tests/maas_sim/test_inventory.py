"""Inventory files: seeding, racked-but-not-enlisted hardware, clear errors, and the state dump."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulators.maas import InventoryError, MaasSimulator, NodeStatus, SimInventory

from .conftest import connect, session

EXAMPLE = Path(__file__).resolve().parents[2] / "simulators" / "maas" / "inventories" / "example.yaml"


def test_example_inventory_seeds_statuses_and_rack(maas_sim_factory) -> None:
    sim = maas_sim_factory(inventory=EXAMPLE)
    machines = {m["hostname"]: m for m in sim.admin.machines()}
    assert machines["h200-a-01"]["status_name"] == "Ready"
    assert machines["h200-a-02"]["status_name"] == "Deployed"
    assert "h200-a-04" not in machines
    new = [m for m in machines.values() if m["status"] == NodeStatus.NEW]
    assert len(new) == 1 and new[0]["sku"] == "generic-small"  # enlisted without a hostname
    client = connect(sim)
    deployed = client.machines.list(hostnames=["h200-a-02"])[0]
    assert deployed.ip_addresses and deployed.ip_addresses[0].startswith("10.20.")
    # the racked H200 gets its hardware and site when created by its PXE MAC
    data = session(client).Machines.create(architecture="amd64", mac_addresses=["3c:ec:ef:00:00:04"],
                                           power_type="ipmi", power_parameters_power_address="10.21.0.4",
                                           hostname="h200-a-04")
    sim.admin.wait_for_status("h200-a-04", NodeStatus.READY)
    fresh = client.machines.get(system_id=data["system_id"])
    assert fresh.zone.name == "dc1-a" and len(fresh.interfaces) == 9 and fresh.boot_disk.model == "DELLBOSS VD"


def test_yaml_and_json_round_trip(tmp_path) -> None:
    inv = SimInventory.load(EXAMPLE)
    as_json = tmp_path / "inv.json"
    as_json.write_text(inv.model_dump_json())
    assert SimInventory.load(as_json) == inv


@pytest.mark.parametrize(("patch", "expected"), [
    ({"machines": [{"pxe_mac": "zz", "site": "dc1-a"}]}, "machines.0.pxe_mac"),
    ({"machines": [{"hostname": "x", "pxe_mac": "aa:aa:aa:aa:aa:aa", "site": "nowhere", "power_type": "manual"}]},
     "site 'nowhere' is not in sites"),
    ({"machines": [{"hostname": "x", "pxe_mac": "aa:aa:aa:aa:aa:aa", "site": "dc1-a", "sku": "b300",
                    "power_type": "manual"}]}, "unknown sku 'b300'; known: generic-small, h200"),
    ({"machines": [{"hostname": "x", "pxe_mac": "aa:aa:aa:aa:aa:aa", "site": "dc1-a", "status": "Deploying",
                    "power_type": "manual"}]}, "cannot be seeded"),
    ({"subnets": [{"cidr": "10.0.0.0/24", "fabric": "nope"}]}, "fabric 'nope' is not in fabrics"),
    ({"subnets": [{"cidr": "10.0.0.0/24", "fabric": "pxe-dc1-a", "role": "roce"}]}, "needs `rail`"),
])
def test_bad_inventory_names_file_path_and_fix(tmp_path, patch, expected) -> None:
    import yaml

    data = yaml.safe_load(EXAMPLE.read_text())
    data.update(patch)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InventoryError) as info:
        MaasSimulator(inventory=bad)
    message = str(info.value)
    assert str(bad) in message and expected in message


def test_unreadable_and_malformed_files(tmp_path) -> None:
    with pytest.raises(InventoryError, match="cannot read inventory"):
        SimInventory.load(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("machines: [\n")
    with pytest.raises(InventoryError, match="broken.yaml: not valid YAML"):
        SimInventory.load(broken)


def test_state_dump_is_json_and_hides_user_data(maas_sim, client) -> None:
    machine = client.machines.list(hostnames=["gpu-a-001"])[0]
    secret = b"#cloud-config\nwrite_files: [{path: /x, content: supersecret-token}]\n"
    machine.deploy(user_data=secret, wait=True, wait_interval=0.01)
    dump = maas_sim.admin.dump_state()
    text = json.dumps(dump)
    assert "supersecret" not in text
    entry = next(m for m in dump["machines"] if m["hostname"] == "gpu-a-001")
    assert entry["sim"]["user_data"]["length"] == len(secret) and entry["status_name"] == "Deployed"
    assert dump["zones"] == ["default", "site-a"] and len(dump["subnets"]) == 9
