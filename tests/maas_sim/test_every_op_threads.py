"""Every op of the machine lifecycle through python-libmaas, once from the main thread and
concurrently from ThreadPoolExecutor workers (each with its own client and event loop, as in
Pulumi's provider server); every status change recorded must be one MAAS makes."""

from __future__ import annotations

import base64
import io
import re
from concurrent.futures import ThreadPoolExecutor

from maas.client.enum import LinkMode, PowerState

from simulators.maas import MachineFaults, NodeStatus, demo_inventory
from simulators.maas.enums import TRANSITIONS

from .conftest import connect, session

WAIT = {"wait": True, "wait_interval": 0.01}


def exercise(sim, n: int) -> list[str]:
    """Drive every op on a fresh machine `op-n`; return the ops done, in order."""
    client = connect(sim)
    raw, done = session(client), []
    name, mac = f"op-{n}", f"aa:10:00:00:00:{n:02x}"
    created = raw.Machines.create(architecture="amd64/generic", mac_addresses=[mac], hostname=name,
                                  power_type="ipmi", power_parameters_power_address=f"10.77.0.{n}",
                                  power_parameters_power_user="root", commission=False)
    sid = created["system_id"]
    assert created["status_name"] == "New"
    raw.Machines.accept(machines=[sid])
    sim.admin.wait_for_status(sid, NodeStatus.READY)
    done += ["create", "accept"]
    m = client.machines.get(system_id=sid)
    raw.NodeScripts.create(name=f"check-{n}", type="testing", script=io.BytesIO(b"#!/bin/sh\ntrue\n"))
    assert f"check-{n}" in [s["name"] for s in raw.NodeScripts.read(type="testing")]
    m.commission(commissioning_scripts=["update_firmware"], testing_scripts=[f"check-{n}"], **WAIT)
    assert m.status == NodeStatus.READY
    done += ["scripts", "commission"]
    assert [x.system_id for x in client.machines.list(hostnames=[name])] == [sid]
    assert [x["system_id"] for x in raw.Machines.read(mac_address=[mac])] == [sid]
    assert [x["system_id"] for x in raw.Machines.read(id=[sid])] == [sid]
    m.hostname = f"{name}-r"
    m.save()
    assert m.get_power_parameters()["power_address"] == f"10.77.0.{n}"
    assert raw.Machines.power_parameters(id=[sid])[sid]["power_user"] == "root"
    done += ["list", "update", "power_parameters"]
    # network
    assert len(raw.Interfaces.read(system_id=sid)) == 2
    eno2 = m.interfaces.get_by_name("eno2")
    assert raw.Interface.read(system_id=sid, id=eno2.id)["name"] == "eno2"
    subnet = client.subnets.list()[0]
    static = eno2.links.create(LinkMode.STATIC, subnet=subnet)
    assert static.ip_address
    eno2 = client.machines.get(system_id=sid).interfaces.get_by_name("eno2")
    eno2.links[0].delete()
    eno2.links.create(LinkMode.AUTO, subnet=subnet)
    eno2.links.create(LinkMode.DHCP)
    eno2.links.create(LinkMode.LINK_UP, force=True)
    done += ["interfaces", "link_subnet", "unlink_subnet"]
    # storage
    disks = raw.BlockDevices.read(system_id=sid)
    assert raw.BlockDevice.read(system_id=sid, id=disks[0]["id"])["name"] == "sda"
    m.block_devices[0].set_as_boot_disk()
    raw.Machine.set_storage_layout(system_id=sid, storage_layout="lvm")
    done += ["block_devices", "set_boot_disk", "set_storage_layout"]
    # tags
    tag = client.tags.create(f"tag-{n}")
    m.refresh()
    m.tags.add(tag)
    assert [x["system_id"] for x in raw.Tag.machines(name=f"tag-{n}")] == [sid]
    done += ["tags"]
    # deploy with everything, power, owner data, release with erase
    user_data = f"#cloud-config\nhostname: {name}\n".encode()
    raw.Machine.deploy(system_id=sid, user_data=base64.b64encode(user_data).decode(), distro_series="jammy",
                       hwe_kernel="hwe-22.04", enable_hw_sync=True)
    sim.admin.wait_for_status(sid, NodeStatus.DEPLOYED)
    m.refresh()
    assert m._data["last_sync"] and sim.admin.user_data(sid) == user_data
    assert m.query_power_state() == PowerState.ON
    m.power_off()
    m.power_on()
    raw.Machine.set_owner_data(system_id=sid, owner="pulumi")
    assert client.machines.get(system_id=sid).owner_data == {"owner": "pulumi"}
    m.release(erase=True, quick_erase=True, **WAIT)
    assert m.status == NodeStatus.READY
    done += ["deploy", "power", "set_owner_data", "release"]
    # abort a deploy, release, break and fix, delete (the deploy stalls, so it is still going when the abort
    # arrives: at the suite's 1e-4 a 60 ms deploy ended first on a loaded host, run23's 409 "Cannot abort").
    # The fault is keyed by system_id: the machine was renamed above, and a fault keyed by its first hostname
    # never applied (run42's 409, the same race, two sessions after the stall was added).
    sim.admin.set_machine_faults(sid, MachineFaults(deploy_stalls=1))
    m.deploy()
    assert any("deploy stalled" in e["description"] for e in sim.admin.events(sid)), "the stall must apply"
    m.abort()
    assert m.status == NodeStatus.ALLOCATED
    m.release(**WAIT)
    m.mark_broken(comment="fan")
    m.mark_fixed(comment="fan replaced")
    assert m.status == NodeStatus.READY
    m.delete()
    done += ["abort", "mark_broken", "mark_fixed", "delete"]
    return done


def _all_transitions_legal(sim, sid: str) -> None:
    for e in sim.admin.events(sid):
        mo = re.match(r"(.+?) -> (.+?): ", e["description"]) if e["type"] == "STATUS" else None
        if mo:
            old, new = NodeStatus.from_label(mo.group(1)), NodeStatus.from_label(mo.group(2))
            assert new in TRANSITIONS[old], e


def test_every_op_main_thread_then_workers(maas_sim_factory) -> None:
    sim = maas_sim_factory(inventory=demo_inventory(h200_per_site=0, small_per_site=0))
    first = exercise(sim, 1)
    assert len(first) == 22
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda n: exercise(sim, n), range(2, 6)))
    assert results == [first] * 4
    counts = sim.admin.request_counts()
    assert counts["MachineHandler"]["delete"] == 5 and counts["MachinesHandler"]["accept"] == 5
    with sim.core.store.lock:
        ids = list(sim.core.deleted_events)
    assert len(ids) == 5
    for sid in ids:
        _all_transitions_legal(sim, sid)
