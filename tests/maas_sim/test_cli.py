"""`python -m simulators.maas`: prints its URL and API key, serves python-libmaas, stops on SIGTERM."""

from __future__ import annotations

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
