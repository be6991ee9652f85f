"""The NSPAWN backend's commissioning protocol, without nspawn: the commissioning environment's runner
(simulators/maas/node/maas_run_scripts.py, taken from the user_data the simulator gives the node) runs as a
host process against the simulator's metadata API, as it runs inside a node (tests/node/test_commissioning_nodes.py
boots real ones). The scripts are the ones registered through the MAAS API, as a site profile registers them;
MAAS records what each really did (exit status, output) in `nodes/{system_id}/results/`."""

from __future__ import annotations

import base64
import io
import json
import secrets
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from clients.maas import MaasClient, MaasSiteClient, ScriptStatus
from lab.node import BootedNode
from providers.machines.script_failures import failed_scripts
from simulators.maas import EnrollBackend, MaasSimulator
from simulators.maas.enums import NodeStatus
from simulators.maas.nspawn import NspawnNodes

HOST = "gpu-a-001"  # demo inventory: Ready
INVENTORY = """#!/bin/bash
echo "gpus: 8"
echo "a warning" >&2
"""
FABRIC_OK = "#!/bin/bash\necho 'link mlx5_0/1 state ACTIVE'\n"
FABRIC_DOWN = """#!/bin/bash
echo "link mlx5_0/1 state DOWN"
echo "bmc password=hunter2" >&2
exit 3
"""


class HostLab:
    """NodeLab's surface for NspawnNodes, booting no node: `boot` writes the cloud.cfg.d drop-ins and runs
    the runner the user_data carries, as cloud-init's runcmd would, in a host process."""

    gateway = "127.0.0.1"

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.user_data: list[bytes] = []
        self.run_runner = True  # False: the node boots, its runner does not start (the test signals itself)
        self.roots: list[Path] = []

    def boot(self, hostname: str, user_data: bytes, knobs: dict[str, str] | None = None, data_disks: Any = (),
             disk_mb: int = 0, cloud_cfg: dict[str, str] | None = None) -> BootedNode:
        self.halt(hostname)
        self.user_data.append(user_data)
        root = self.tmp / f"{hostname}-{secrets.token_hex(3)}"
        (root / "cfg").mkdir(parents=True)
        for name, text in (cloud_cfg or {}).items():
            (root / "cfg" / name).write_text(text)
        doc = yaml.safe_load(user_data)
        runner = root / "runner.py"
        runner.write_bytes(base64.b64decode(doc["write_files"][0]["content"]))
        cmd = doc["runcmd"][0]
        config = root / "cfg" / Path(cmd[cmd.index("--config") + 1]).name
        console = root / "console.log"
        self.roots.append(root)
        if not self.run_runner:
            return BootedNode(hostname=hostname, root=root, instance_id=root.name, console=console)
        self.procs[hostname] = subprocess.Popen([sys.executable, str(runner), "--config", str(config)],
                                                stdout=console.open("wb"), stderr=subprocess.STDOUT,
                                                start_new_session=True)
        return BootedNode(hostname=hostname, root=root, instance_id=root.name, console=console)

    def halt(self, hostname: str) -> None:
        proc = self.procs.get(hostname)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def erase_disks(self, hostname: str) -> list[str]:
        return []


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[MaasSimulator, HostLab]]:
    lab = HostLab(tmp_path)
    nodes = NspawnNodes(lab, commission_timeout_s=60)  # type: ignore[arg-type]
    maas = MaasSimulator(time_scale=1e-4, enroll_backend=EnrollBackend.NSPAWN, nodes=nodes)
    maas.start()
    try:
        yield maas, lab
    finally:
        maas.stop()
        for hostname in list(lab.procs):
            lab.halt(hostname)


def _register(maas: MaasSimulator, testing: str, commissioning: str = INVENTORY) -> MaasSiteClient:
    site = MaasSiteClient(maas.url, maas.api_key)
    site.put_script("gpuaas-lab-inventory", "commissioning", commissioning.encode(), tags=("gpuaas", "lab"))
    site.put_script("gpuaas-lab-fabric-check", "testing", testing.encode(), tags=("gpuaas", "lab"))
    return site


def _commission(maas: MaasSimulator, *wanted: NodeStatus) -> str:
    client = MaasClient(maas.url, maas.api_key)
    sid = next(m["system_id"] for m in maas.admin.machines() if m["hostname"] == HOST)
    client.commission(sid, ["gpuaas-lab-inventory"], ["gpuaas-lab-fabric-check"])
    maas.admin.wait_for_status(sid, *wanted, timeout=60, interval=0.1)
    return sid


def _results(maas: MaasSimulator, sid: str, kind: str) -> dict[str, dict[str, Any]]:
    raw = MaasClient(maas.url, maas.api_key)._call("NodeScriptResult", "read", read=True, system_id=sid,
                                                    id=f"current-{kind}", include_output="true")
    return {r["name"]: r for r in raw["results"]}


def _text(value: str) -> str:
    return base64.b64decode(value).decode()


def test_the_registered_scripts_run_and_maas_records_their_exit_status_and_output(sim: Any) -> None:
    maas, lab = sim
    _register(maas, FABRIC_OK)
    sid = _commission(maas, NodeStatus.READY)
    commissioning, testing = _results(maas, sid, "commissioning"), _results(maas, sid, "testing")
    inventory = commissioning["gpuaas-lab-inventory"]
    assert (inventory["status_name"], inventory["exit_status"]) == ("Passed", 0)
    assert _text(inventory["stdout"]) == "gpus: 8\n" and _text(inventory["stderr"]) == "a warning\n"
    assert sorted(_text(inventory["output"]).splitlines()) == ["a warning", "gpus: 8"]
    assert inventory["runtime"] == "0:00:00" and inventory["script_id"] is not None
    builtin = commissioning["20-maas-03-machine-resources"]  # MAAS's built-ins ran too (stand-ins, named so)
    assert builtin["exit_status"] == 0 and "MAAS simulator stand-in" in _text(builtin["output"])
    assert [(n, r["status_name"], r["exit_status"]) for n, r in testing.items()] == [
        ("gpuaas-lab-fabric-check", "Passed", 0)]
    assert _text(testing["gpuaas-lab-fabric-check"]["output"]) == "link mlx5_0/1 state ACTIVE\n"
    assert len(lab.user_data) == 1 and b"token_secret" not in lab.user_data[0], "the node key is not user_data"
    events = [e["description"] for e in maas.admin.events(sid)]
    assert any("-> Testing" in e for e in events) and any("Testing -> Ready: tests passed on the node" in e
                                                          for e in events)
    machine = MaasClient(maas.url, maas.api_key)._call("Machine", "read", read=True, system_id=sid)
    assert machine["power_state"] == "off" and lab.procs[HOST].wait(timeout=10) is not None


def test_a_failing_testing_script_fails_testing_with_its_real_exit_status_and_output(sim: Any) -> None:
    maas, _lab = sim
    _register(maas, FABRIC_DOWN)
    sid = _commission(maas, NodeStatus.FAILED_TESTING)
    machine = next(m for m in maas.admin.machines() if m["system_id"] == sid)
    assert machine["error_description"] == "1 test scripts failed to run", "the runner's error, as MAAS keeps it"
    fabric = _results(maas, sid, "testing")["gpuaas-lab-fabric-check"]
    assert (fabric["status"], fabric["exit_status"]) == (ScriptStatus.FAILED, 3)
    assert _text(fabric["stdout"]) == "link mlx5_0/1 state DOWN\n"
    assert _text(fabric["stderr"]) == "bmc password=hunter2\n"
    assert all(r["status_name"] == "Passed" for r in _results(maas, sid, "commissioning").values())
    # what the lifecycle says (handlers.handle_commission): the script, its exit status, its output, redacted
    text = failed_scripts(MaasClient(maas.url, maas.api_key), sid, "testing")
    assert text.startswith("MAAS testing results: gpuaas-lab-fabric-check: failed, exit 3, output: ")
    assert "link mlx5_0/1 state DOWN" in text and "bmc password=[redacted]" in text and "hunter2" not in text


def test_a_failing_commissioning_script_fails_commissioning_and_no_test_runs(sim: Any) -> None:
    maas, _lab = sim
    _register(maas, FABRIC_OK, commissioning="#!/bin/sh\necho 'no GPUs found' >&2\nexit 2\n")
    sid = _commission(maas, NodeStatus.FAILED_COMMISSIONING)
    machine = next(m for m in maas.admin.machines() if m["system_id"] == sid)
    assert machine["error_description"] == "1 commissioning scripts failed to run"
    inventory = _results(maas, sid, "commissioning")["gpuaas-lab-inventory"]
    assert (inventory["status_name"], inventory["exit_status"], _text(inventory["output"])) == (
        "Failed", 2, "no GPUs found\n")
    assert [r["status_name"] for r in _results(maas, sid, "testing").values()] == ["Aborted"]


def test_a_script_past_its_timeout_is_killed_and_recorded_timed_out(sim: Any) -> None:
    maas, _lab = sim
    site = _register(maas, FABRIC_OK)
    site.delete_script("gpuaas-lab-fabric-check")
    site._call("NodeScripts", "create", read=False, name="gpuaas-lab-fabric-check", type="testing", timeout="1",
               script=b"#!/bin/sh\necho waiting\nsleep 60\n")
    sid = _commission(maas, NodeStatus.FAILED_TESTING)
    fabric = _results(maas, sid, "testing")["gpuaas-lab-fabric-check"]
    assert (fabric["status_name"], fabric["exit_status"], _text(fabric["output"])) == ("Timed out", 124, "waiting\n")


def test_the_runner_endpoints_take_only_the_current_node_key(sim: Any) -> None:
    maas, _lab = sim
    url = f"{maas.root_url}/MAAS/metadata/latest/"
    assert httpx.get(url + "maas-scripts").status_code == 401
    admin = maas.api_key.split(":")
    header = (f'OAuth oauth_consumer_key="{admin[0]}", oauth_token="{admin[1]}", '
              f'oauth_signature_method="PLAINTEXT", oauth_signature="&{admin[2]}"')
    answer = httpx.post(url, headers={"Authorization": header}, data={"op": "signal", "status": "OK"})
    assert answer.status_code == 401, "the API key is not a node key"


def test_a_scripts_embedded_timeout_applies_when_the_upload_names_none(maas_sim: MaasSimulator) -> None:  # noqa: F811 - fixture
    site = MaasSiteClient(maas_sim.url, maas_sim.api_key)
    header = "#!/bin/sh\n# --- Start MAAS 1.0 script metadata ---\n# name: x\n# timeout: 00:05:00\n" \
             "# --- End MAAS 1.0 script metadata ---\ntrue\n"
    site.put_script("with-embedded", "testing", header.encode())
    site._call("NodeScripts", "create", read=False, name="form-wins", type="testing", timeout="7",
               script=header.encode())
    site.put_script("without", "testing", b"#!/bin/sh\ntrue\n")
    timeouts = {s["name"]: s["timeout"] for s in site._call("NodeScripts", "read", read=True)}
    assert (timeouts["with-embedded"], timeouts["form-wins"], timeouts["without"]) == ("0:05:00", "0:00:07",
                                                                                       "0:00:00")


def _node_key_header(root: Path) -> str:
    """The node key the simulator gave the node (its datasource drop-in), as an OAuth PLAINTEXT header."""
    ds = yaml.safe_load((root / "cfg" / "90_maas_datasource.cfg").read_text())["datasource"]["MAAS"]
    return (f'OAuth oauth_consumer_key="{ds["consumer_key"]}", oauth_token="{ds["token_key"]}", '
            f'oauth_signature_method="PLAINTEXT", oauth_signature="&{ds["token_secret"]}"')


def test_signals_move_results_and_the_machine_as_maas_does(sim: Any) -> None:
    """The node's side played by the test: the tar lists what is left, WORKING marks a result Running, a result
    with files is stored with its exit status, an unknown status is refused, FAILED fails the machine and ends
    the node key's life."""
    maas, lab = sim
    lab.run_runner = False
    _register(maas, FABRIC_OK)
    client = MaasClient(maas.url, maas.api_key)
    sid = next(m["system_id"] for m in maas.admin.machines() if m["hostname"] == HOST)
    client.commission(sid, ["gpuaas-lab-inventory"], ["gpuaas-lab-fabric-check"])
    deadline = time.monotonic() + 30
    while not lab.roots:
        assert time.monotonic() < deadline, "no node booted"
        time.sleep(0.05)  # poll interval for the backend's boot worker
    auth = {"Authorization": _node_key_header(lab.roots[-1])}
    url = f"{maas.root_url}/MAAS/metadata/latest/"
    tar = httpx.get(url + "maas-scripts", headers=auth)
    assert tar.status_code == 200 and tar.headers["content-type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(tar.content)) as t:
        index = json.loads(t.extractfile("index.json").read())["1.0"]  # type: ignore[union-attr]
        assert t.extractfile("commissioning/gpuaas-lab-inventory").read() == INVENTORY.encode()  # type: ignore[union-attr]
    ids = {s["name"]: s["script_result_id"] for s in index["commissioning_scripts"] + index["testing_scripts"]}
    assert [s["name"] for s in index["testing_scripts"]] == ["gpuaas-lab-fabric-check"]
    assert "20-maas-03-machine-resources" in ids
    assert httpx.post(url, headers=auth, data={"op": "signal", "status": "BOGUS"}).status_code == 400
    rid = ids["gpuaas-lab-inventory"]
    assert httpx.post(url, headers=auth, data={"op": "signal", "status": "WORKING",
                                               "script_result_id": str(rid)}).status_code == 200
    assert _results(maas, sid, "commissioning")["gpuaas-lab-inventory"]["status_name"] == "Running"
    files = {"gpuaas-lab-inventory": ("gpuaas-lab-inventory", b"gpus: 0\n"),
             "gpuaas-lab-inventory.err": ("gpuaas-lab-inventory.err", b"gpus: 0\n")}
    answer = httpx.post(url, headers=auth, files=files, data={
        "op": "signal", "status": "WORKING", "script_result_id": str(rid), "exit_status": "7", "runtime": "1.5"})
    assert answer.status_code == 200
    inventory = _results(maas, sid, "commissioning")["gpuaas-lab-inventory"]
    assert (inventory["status_name"], inventory["exit_status"], inventory["runtime"]) == ("Failed", 7, "0:00:01")
    assert (_text(inventory["output"]), _text(inventory["stderr"]), _text(inventory["stdout"])) == (
        "gpus: 0\n", "gpus: 0\n", "")
    answer = httpx.post(url, headers=auth, data={"op": "signal", "status": "OK"})  # OK, but a script failed
    assert answer.status_code == 200
    assert maas.admin.status(sid) is NodeStatus.FAILED_COMMISSIONING
    error = next(m["error_description"] for m in maas.admin.machines() if m["system_id"] == sid)
    assert error == "Failed commissioning: gpuaas-lab-inventory (exit 7) failed", error
    left = _results(maas, sid, "commissioning")
    assert left["20-maas-03-machine-resources"]["status_name"] == "Aborted", "never ran: aborted"
    assert httpx.get(url + "maas-scripts", headers=auth).status_code == 401, "the node was powered off"
