"""`python -m simulators.maas`: prints its URL and API key, serves python-libmaas, stops on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from .conftest import connect_url

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "simulators" / "maas" / "inventories" / "example.yaml"


def test_cli_serves_the_inventory_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "simulators.maas", "--port", "0", "--inventory", str(EXAMPLE),
                             "--time-scale", "0.0001"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip().removeprefix("MAAS_URL=")
        key = proc.stdout.readline().strip().removeprefix("MAAS_API_KEY=")
        assert url.startswith("http://127.0.0.1:") and url.endswith("/MAAS/") and key.count(":") == 2
        client = connect_url(url, key)
        hostnames = {m.hostname for m in client.machines.list()}
        assert {"h200-a-01", "h200-a-02"} <= hostnames and len(hostnames) == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_cli_rejects_a_bad_inventory_with_its_path(tmp_path) -> None:
    bad = tmp_path / "inv.yaml"
    bad.write_text("machines: [{pxe_mac: nope, site: x}]\n")
    done = subprocess.run([sys.executable, "-m", "simulators.maas", "--inventory", str(bad)], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and str(bad) in done.stderr and "pxe_mac" in done.stderr



def test_cli_loads_faults_at_start(tmp_path) -> None:
    import httpx

    faults = tmp_path / "faults.yaml"
    faults.write_text("machines: {deploy_failures: 1}\n"
                      "api: {errors: [{status: 500, count: 1, handler: MachinesHandler, op: read}]}\n")
    proc = subprocess.Popen([sys.executable, "-m", "simulators.maas", "--faults", str(faults)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip().removeprefix("MAAS_URL=")
        key = proc.stdout.readline().strip().removeprefix("MAAS_API_KEY=")
        live = httpx.get(url.replace("/MAAS/", "/_sim/faults")).json()
        assert live["machines"]["deploy_failures"] == 1 and live["api"]["errors"][0]["status"] == 500
        client = connect_url(url, key)
        try:
            client.machines.list()
        except Exception as exc:  # the injected 500 reaches python-libmaas
            assert "500" in str(exc)
        else:
            raise AssertionError("the 500 burst from the faults file did not fire")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


def test_the_metadata_status_endpoint_refuses_without_node_keys(maas_sim_factory) -> None:
    """The FAST backend boots no node and mints no node key: cloud-init status posts are refused."""
    import httpx

    sim = maas_sim_factory()
    sid = sim.admin.machines()[0]["system_id"]
    event = {"event_type": "finish", "origin": "cloudinit", "name": "modules-final", "description": "x",
             "result": "SUCCESS"}
    refused = httpx.post(f"{sim.root_url}/MAAS/metadata/status/{sid}", json=event)
    assert refused.status_code == 401
    assert httpx.post(f"{sim.root_url}/MAAS/metadata/nothing-here", json=event).status_code == 404
    assert sim.admin.machines()[0]["status_name"] != "Deployed"


def test_cli_nspawn_backend_listens_on_the_lab_gateway_and_cleans_up() -> None:
    """`--machine-backend nspawn`: a lab network comes up, MAAS listens on its gateway, SIGTERM removes it."""
    from lab import net
    from tests.fixtures.lab_gate import require_lab

    require_lab("the MAAS simulator's nspawn backend (CLI)")
    mine: set[str] = set()
    proc = subprocess.Popen([sys.executable, "-m", "simulators.maas", "--machine-backend", "nspawn",
                             "--inventory", str(EXAMPLE)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        gateway = proc.stdout.readline().strip().removeprefix("LAB_GATEWAY=")
        url = proc.stdout.readline().strip().removeprefix("MAAS_URL=")
        key = proc.stdout.readline().strip().removeprefix("MAAS_API_KEY=")
        assert gateway.startswith("10.77.") and url.startswith(f"http://{gateway}:"), (gateway, url)
        # Its own lab, by the root-side veth `gpl<run>` that holds the gateway (other workers' labs come and go
        # meanwhile: a before/after diff of the machine's namespaces counted one of theirs, run9); the lab
        # namespace is gpl-<run>, the machines' gpl-<run>-<i>.
        addrs = json.loads(subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True, text=True,
                                          check=True).stdout)
        (veth,) = [a["ifname"] for a in addrs for i in a.get("addr_info", []) if i.get("local") == gateway]
        lab_ns = "gpl-" + veth.removeprefix("gpl")
        mine = {n for n in net.netns_names() if n == lab_ns or n.startswith(lab_ns + "-")}
        assert len(mine) == 4, "the lab namespace and one per machine"
        assert len({m.hostname for m in connect_url(url, key).machines.list()}) == 3
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert not mine & set(net.netns_names()), "the lab network is gone"
