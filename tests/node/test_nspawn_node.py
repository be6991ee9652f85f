"""Real nodes (lab/node.py): systemd-nspawn machines from the lab's cached image with Debian's
cloud-init, whose NoCloud seed is exactly the deploy's user_data. Real cloud-init writes the files and
runs the launcher; the nodes fetch their bundle from moto's S3 server and enroll with the platform
simulator, both listening on the lab network's gateway address (the nodes' only route).

Like the lab tier (tests/lab/conftest.py): skipped, loudly, only where the machine cannot run nspawn
nodes at all (not root, packages missing); in CI that is a failure."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from clients.platform.models import NodeStatus
from environments import load_environment
from lab.lab import _Run
from lab.node import NodeLab, attached_loops, detach_stale_loops
from providers.machines.scheduler import Scheduler
from providers.machines.status import MachineOutcome
from simulators.localstack import NSPAWN_MACHINE_TIME_SCALE, maas_inventory
from simulators.maas import EnrollBackend, MaasSimulator
from simulators.maas import NodeStatus as MaasNodeStatus
from simulators.maas.nspawn import NspawnNodes
from tests.fixtures.lab_gate import require_lab
from tests.fixtures.maas_sim import TEST_TIME_SCALE as MAAS_SCALE
from tests.fixtures.platform_sim import platform_sim_factory  # noqa: F401
from tests.fixtures.processes import dead_pid

from .conftest import HOSTNAME, NodeWorld, world_at
from .test_lifecycle_nodes import HOSTS, context_for, specs_for_world

pytestmark = pytest.mark.slow(seconds=180)  # real nodes: make test starts the long files first

# What a lab node can run: no packages (no mirror), no MAAS hw-sync timer; data disks only when the
# test boots the node with them (`data_disks`, loop devices).
LAB_BUNDLE: dict[str, Any] = {"packages": False, "storage_layout_profile": "flat", "data_devices": (),
                              "require_hw_sync": False}


@pytest.fixture
def lab_world(tmp_path: Path, platform_sim_factory: Any) -> Callable[..., Any]:  # noqa: F811
    require_lab("nspawn nodes")

    @contextmanager
    def make(hostnames: list[str], **bundle: Any) -> Iterator[tuple[NodeLab, NodeWorld]]:
        with NodeLab(hostnames) as nodes:
            platform = platform_sim_factory(host=nodes.gateway)
            with world_at(tmp_path, platform, host=nodes.gateway, **{**LAB_BUNDLE, **bundle}) as world:
                yield nodes, world

    return make


def _steps(root: Path) -> dict[str, Any]:
    return {p.stem: json.loads(p.read_text()) for p in (root / "var/lib/gpuaas/steps").glob("*.json")}


HEALTH = Path(__file__).resolve().parents[2] / "providers/machines/node/gpuaas-node-health.sh"
RUNCMD_PART = {"cloud-init/40-lab-runcmd.yaml": (
    b"#cloud-config\nruncmd:\n  - [sh, -c, 'echo runcmd ran on $(hostname) >> /etc/gpuaas/runcmd.out']\n"
    b"users:\n  - {name: labpart, groups: adm, shell: /bin/bash, lock_passwd: true}\n")}


def test_cloud_init_runs_the_deploy_user_data_and_the_node_enrolls_itself(lab_world: Callable[..., Any]) -> None:
    with lab_world([HOSTNAME], extra_files=RUNCMD_PART) as (nodes, world):
        node_id, token, url, user_data = world.user_data()
        node = nodes.boot(HOSTNAME, user_data)
        nodes.wait_cloud_init(HOSTNAME)
        steps = _steps(node.root)
        failed = {k: s["output_tail"][-800:] for k, s in steps.items() if not s["ok"]}
        assert not failed, failed
        assert "enroll" in steps, node.console.read_text(errors="replace")[-3000:]
        record = world.admin.wait_for_node(node_id, timeout_s=20)
        assert record.status is NodeStatus.ACTIVE
        # the token was consumed by a request from the node itself (its lab address), not from the host
        assert world.platform.enroll_caller(node_id) == nodes.address(HOSTNAME) != nodes.gateway
        assert record.bootstrap is not None and record.bootstrap.bundle_digest == world.bundle_digest
        assert [s.step for s in record.bootstrap.steps][:3] == ["fetch", "packages", "cloud-init"]
        assert not (node.root / "etc/gpuaas/enrollment.json").exists(), "the token file is gone"
        # the node agent the enrollment answer named: installed, its unit enabled and running on the node
        assert [s.step for s in record.bootstrap.steps][-1] == "agent-install"
        for query in ("is-enabled", "is-active"):
            r = nodes.exec(HOSTNAME, ["systemctl", query, "gpuaas-node-agent.service"])
            assert r.stdout.strip() in ("enabled", "active"), (query, r.stdout, r.stderr)
        assert "version=0.0.1-lab" in (node.root / "var/lib/gpuaas-node-agent/running").read_text()
        # files holding user_data (the seed, cloud-init's copy) or the bundle URL are root-only
        instance = f"var/lib/cloud/instances/{node.instance_id}"
        for rel in ("var/lib/cloud/seed/nocloud/user-data", "etc/gpuaas/bundle.json",
                    "usr/local/sbin/gpuaas-bundle-launcher", f"{instance}/user-data.txt"):
            mode = stat.S_IMODE((node.root / rel).stat().st_mode)
            assert mode & 0o077 == 0, f"{rel} is {oct(mode)}"
        assert stat.S_IMODE((node.root / "var/lib/gpuaas/steps").stat().st_mode) == 0o700
        # every file the node wrote (its overlay's upper layer) that holds the token or the URL's signature
        signature = url.split("X-Amz-Signature=")[1].encode()
        upper = node.root.parent / "upper"

        def holds(p: Path) -> bool:
            data = p.read_bytes()
            return token.encode() in data or signature in data

        holders = {p.relative_to(upper).as_posix(): stat.S_IMODE(p.stat().st_mode)
                   for p in upper.rglob("*") if p.is_file() and not p.is_symlink() and holds(p)}
        assert holders and all(mode & 0o077 == 0 for mode in holders.values()), holders
        # named in docs/node-bootstrap.md; enrollment.json is gone: the (expiring) URL and cloud-init's copies
        expected = {"var/lib/cloud/seed/nocloud/user-data", "etc/gpuaas/bundle.json", f"{instance}/user-data.txt",
                    f"{instance}/user-data.txt.i", f"{instance}/cloud-config.txt"}
        assert set(holders) - {f"{instance}/obj.pkl"} == expected, sorted(holders)
        assert "GPUAAS_FABRIC_MODE=roce" in (node.root / "etc/gpuaas/fabric.env").read_text()
        # the bundle's cloud-init part, applied by the node's own cloud-init
        assert "GPUAAS_REQUIRE_HW_SYNC=false" in (node.root / "etc/gpuaas/hw-sync.env").read_text()
        # a part's runcmd: written by the node's cloud-init, run once; the deploy's own runcmd script is kept
        assert (node.root / "etc/gpuaas/runcmd.out").read_text() == f"runcmd ran on {HOSTNAME}\n"
        kept = (node.root / instance / "scripts/runcmd").read_text()
        assert "gpuaas-bundle-launcher" in kept and "runcmd.out" not in kept
        # a part's users: applied by the node's cloud-init (users_groups), not dropped
        user = nodes.exec(HOSTNAME, ["id", "-nG", "labpart"])
        assert "adm" in user.stdout.split(), (user.stdout, user.stderr, steps["cloud-init"]["output_tail"])
        # liveness: the node agent heartbeats; the platform saw it (that made the node active)
        assert record.agent is not None and record.agent.heartbeats >= 1 and record.agent.version == "0.0.1-lab"
        assert record.bootstrap.validation_bundle_digest == world.bundle_digest
        # the GPU lane's check (.gitlab-ci.yml gpu-smoke-dev) on this node, as an unprivileged user would run it
        assert_healthy(nodes, HOSTNAME, node.root, world.bundle_digest)


def assert_healthy(nodes: NodeLab, hostname: str, root: Path, digest: str) -> None:
    """providers/machines/node/gpuaas-node-health.sh passes on the node, run as a user without privileges."""
    shutil.copy(HEALTH, root / "usr/local/bin/gpuaas-node-health")
    r = nodes.exec(hostname, ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                              "/usr/local/bin/gpuaas-node-health"])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines())
    assert set(lines) == {"ok bootstrap", "ok token", "ok agent", "ok gpus"}, r.stdout
    assert f"bundle {digest[:12]}" in lines["ok bootstrap"] and "validation bundle" in lines["ok bootstrap"]
    assert "node active" in lines["ok agent"], r.stdout


def test_the_lifecycle_on_real_nodes_behind_maas_one_validation_failure(lab_world: Callable[..., Any]) -> None:
    """The MAAS simulator's NSPAWN backend boots a real node for each deploy from exactly the user_data it
    holds, and learns the outcome from the node's cloud-init (its reporting webhook), not from a timer:
    local-gpu-1 Deployed and ready; local-gpu-2 shows 7 GPUs, its launcher fails validation, cloud-init's
    final stage fails, MAAS says Failed deployment, and the lifecycle names the script from the node's report."""
    with lab_world(list(HOSTS)) as (nodes, world):
        backend = NspawnNodes(nodes, knobs={"local-gpu-2": {"gpus": "7"}})
        maas = MaasSimulator(maas_inventory(load_environment("local"), enlisted=False), time_scale=MAAS_SCALE,
                             enroll_backend=EnrollBackend.NSPAWN, nodes=backend)
        maas.start()
        try:
            assert maas.url.startswith(f"http://{nodes.gateway}:"), "the nodes reach MAAS on the lab gateway"
            scheduler = Scheduler(context_for(world, maas, NSPAWN_MACHINE_TIME_SCALE))
            results = {r.hostname: r for r in scheduler.onboard(specs_for_world(world))}
            machines = {m["hostname"]: m for m in maas.admin.machines()}
            events = {h: maas.admin.events(m["system_id"]) for h, m in machines.items() if h in HOSTS}
        finally:
            maas.stop()
        assert not backend.errors, backend.errors
        good, bad = results["local-gpu-1"], results["local-gpu-2"]
        assert good.outcome is MachineOutcome.READY, good.reason
        assert machines["local-gpu-1"]["status_name"] == "Deployed"
        deployed = [e["description"] for e in events["local-gpu-1"] if "-> Deployed" in e["description"]]
        assert deployed and "modules-final" in deployed[-1], "Deployed came from the node's cloud-init"
        assert any(e["description"].startswith("'cloudinit' running config-scripts-user")
                   for e in events["local-gpu-1"]), "cloud-init's events (the one running runcmd) reached MAAS"
        root = {h: backend.latest(h) for h in HOSTS}
        assert root["local-gpu-1"] is not None and root["local-gpu-2"] is not None
        assert not (root["local-gpu-1"].root / "etc/gpuaas/enrollment.json").exists()
        drop_in = root["local-gpu-1"].root / "etc/cloud/cloud.cfg.d/90_maas_reporting.cfg"
        assert stat.S_IMODE(drop_in.stat().st_mode) == 0o600, "it holds the node's MAAS key"
        seed = (root["local-gpu-1"].root / "var/lib/cloud/seed/nocloud/user-data").read_bytes()
        assert b"reporting" not in seed, "the reporting config is the image's, not part of the user's user_data"
        # the failing node: MAAS says Failed deployment with cloud-init's account; the lifecycle says why
        assert machines["local-gpu-2"]["status_name"] == "Failed deployment"
        assert "cloud-init reported modules-final/config-scripts-user" in machines["local-gpu-2"]["error_description"]
        assert bad.outcome is MachineOutcome.VALIDATION_FAILED, bad.reason
        assert bad.reason.startswith("MCH021") and "local-gpu-2" in bad.reason
        assert "validate-gpu-check" in bad.reason and "expected 8 GPUs, found 7" in bad.reason
        assert "run up again" in bad.reason
        assert (root["local-gpu-2"].root / "etc/gpuaas/enrollment.json").exists(), "no enrollment: the token stays"


def test_a_real_node_restarted_mid_launcher_resumes_through_its_unit(lab_world: Callable[..., Any]) -> None:
    """Power lost during validation (the GPU stand-in hangs once); on the next boot cloud-init does not
    rerun runcmd, the launcher's unit resumes: no step recorded ok runs again, the node enrolls."""
    with lab_world([HOSTNAME]) as (nodes, world):
        node_id, _token, _url, user_data = world.user_data()
        node = nodes.boot(HOSTNAME, user_data, {"hang-once": "1"})
        hung = node.root / "var/lib/gpuaas-lab/hung"
        deadline = time.monotonic() + 120
        while not hung.exists():
            assert time.monotonic() < deadline, node.console.read_text(errors="replace")[-2000:]
            time.sleep(0.2)  # poll interval for a file the node writes
        before = _steps(node.root)
        assert "mounts" in before and "validate-gpu-check" not in before and "enroll" not in before
        nodes.restart(HOSTNAME)
        done = node.root / "var/lib/gpuaas/steps/report.json"  # the last step: the final report
        deadline = time.monotonic() + 120
        while not done.exists():
            assert time.monotonic() < deadline, (node.root / "var/log/gpuaas-launcher.log").read_text()[-3000:]
            time.sleep(0.2)  # poll interval for a file the node writes
        after = _steps(node.root)
        assert all(s["ok"] for s in after.values()), after
        for step, result in before.items():
            assert after[step]["finished_at"] == result["finished_at"], f"{step} ran again"
        log = (node.root / "var/log/gpuaas-launcher.log").read_text()
        assert all(f"step {step}: recorded ok earlier, skipped" in log for step in before)
        assert world.admin.wait_for_node(node_id, timeout_s=20).status is NodeStatus.ACTIVE
        assert not (node.root / "etc/gpuaas/enrollment.json").exists()


DATA_DISKS = ("nvme1n1", "nvme2n1")
DEPLOY_TIMEOUT_S = 60.0  # the backend's wall clock for the node that never reports (the test waits for it)


def test_a_real_node_formats_and_mounts_its_data_disks_by_label(lab_world: Callable[..., Any]) -> None:
    """The storage step on real (loop-device) data disks named as the layout's data_devices: /share0 and
    /share1 are ext4 filesystems mounted by label through systemd mount units; a rerun of the step keeps
    the data (label exists); after a restart the units mount them again. Loop devices detached at the end."""
    with lab_world([HOSTNAME], storage_layout_profile="h200-boss-flat", data_devices=DATA_DISKS) as (nodes, world):
        node_id, _token, _url, user_data = world.user_data()
        node = nodes.boot(HOSTNAME, user_data, data_disks=DATA_DISKS)
        assert set(node.data_disks) == set(DATA_DISKS)
        assert all(d.startswith("/dev/loop") for d in node.data_disks.values())
        assert set(attached_loops(nodes.run_dir)) == set(node.data_disks.values()), "found by their images"
        nodes.wait_cloud_init(HOSTNAME)
        steps = _steps(node.root)
        assert steps["storage"]["ok"], steps["storage"]["output_tail"]
        assert "enroll" in steps, (node.root / "var/log/gpuaas-launcher.log").read_text()[-3000:]

        def mounts() -> dict[str, tuple[str, str]]:
            out = {}
            for share in ("/share0", "/share1"):
                r = nodes.exec(HOSTNAME, ["findmnt", "-n", "-o", "FSTYPE,LABEL", share])
                fstype, _, label = r.stdout.strip().partition(" ")
                out[share] = (fstype, label.strip())
            return out

        assert mounts() == {"/share0": ("ext4", "share0"), "/share1": ("ext4", "share1")}
        for i in (0, 1):
            state = nodes.exec(HOSTNAME, ["systemctl", "is-enabled", f"share{i}.mount"]).stdout.strip()
            assert state == "enabled", state
        # a rerun of the storage step: the labels exist, nothing is reformatted, the data stays
        assert nodes.exec(HOSTNAME, ["sh", "-c", "echo kept > /share0/marker"]).returncode == 0
        script = f"/opt/gpuaas/bundle/{world.bundle_digest}/steps/30-storage.sh"
        rerun = nodes.exec(HOSTNAME, ["bash", script])
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        assert "share0 exists: kept" in rerun.stdout and "formatted" not in rerun.stdout, rerun.stdout
        # persisted: after a restart the mount units mount the same filesystems (the launcher is done)
        nodes.restart(HOSTNAME)
        deadline = time.monotonic() + 90
        while True:
            with contextlib.suppress(RuntimeError):
                if mounts() == {"/share0": ("ext4", "share0"), "/share1": ("ext4", "share1")}:
                    break
            assert time.monotonic() < deadline, node.console.read_text(errors="replace")[-2000:]
            time.sleep(0.5)  # poll interval for the node's boot
        assert nodes.exec(HOSTNAME, ["cat", "/share0/marker"]).stdout.strip() == "kept"
        assert world.admin.wait_for_node(node_id, timeout_s=20).status is NodeStatus.ACTIVE
    left = attached_loops(nodes.run_dir)  # by image: the freed device names are any run's to take
    assert not left, f"loop devices left attached: {left}"


def test_a_runs_loop_devices_are_found_by_their_images_not_by_device_names(tmp_path: Path) -> None:
    """A device name freed by one run is the next `losetup --find`'s, any run's (CI's stop 47 failed the
    data-disk test on that: another xdist worker took /dev/loop8 the moment it was freed). A run's loop
    devices are those backed by its images: the device this run freed and another took is not this run's."""
    require_lab("loop devices")
    mine, other = tmp_path / "run-a", tmp_path / "run-b"
    images = []
    for d in (mine, other):
        d.mkdir()
        images.append(d / "nvme1n1.img")
        images[-1].write_bytes(b"\0" * (1 << 20))

    def attach(image: Path) -> str:
        return subprocess.run(["losetup", "--find", "--show", str(image)], check=True, capture_output=True,
                              text=True).stdout.strip()

    taken: list[str] = []
    try:
        taken.append(attach(images[0]))
        assert attached_loops(mine) == {taken[0]: images[0].resolve()} and attached_loops(other) == {}
        subprocess.run(["losetup", "-d", taken.pop()], check=True)
        taken.append(attach(images[1]))  # most often the name just freed
        assert attached_loops(mine) == {}, "the other run's device is not this run's, whatever its name"
        assert attached_loops(other) == {taken[0]: images[1].resolve()}
    finally:
        for loop in taken:
            subprocess.run(["losetup", "-d", loop], capture_output=True)


def test_a_killed_runs_loop_devices_are_detached_and_a_live_runs_kept(tmp_path: Path) -> None:
    """`detach_stale_loops` (each node lab's start) detaches the data disks of a run whose owner is gone,
    and of a run whose record is gone with it; a live run's stay attached, its record read whole."""
    require_lab("loop devices")
    runs = tmp_path / "runs"
    owners = {"live": os.getpid(), "killed": dead_pid(), "undone": None}
    loops: dict[str, str] = {}
    try:
        for run, owner in owners.items():
            (runs / run / "disks").mkdir(parents=True)
            if owner is not None:
                _Run(owner_pid=owner).save(runs / run)
            image = runs / run / "disks" / "nvme1n1.img"
            image.write_bytes(b"\0" * (1 << 20))
            loops[run] = subprocess.run(["losetup", "--find", "--show", str(image)], check=True,
                                        capture_output=True, text=True).stdout.strip()
        assert sorted(detach_stale_loops(tmp_path)) == sorted([loops["killed"], loops["undone"]])
        assert attached_loops(runs) == {loops["live"]: (runs / "live/disks/nvme1n1.img").resolve()}
    finally:
        for loop in loops.values():
            subprocess.run(["losetup", "-d", loop], capture_output=True)


def test_a_real_node_runs_the_separate_validation_bundles_scripts(lab_world: Callable[..., Any]) -> None:
    """The profile's post-deploy validation bundle (expects 6 GPUs; the site bundle expects 8): the node
    fetches it through its own presigned URL, verifies it and runs its validation; 6 GPUs shown, enrolled."""
    with lab_world([HOSTNAME]) as (nodes, world):
        pin = world.publish("lab-h200-validate", expected_gpus=6)
        node_id, _token, _url, user_data = world.user_data(validation=pin)
        node = nodes.boot(HOSTNAME, user_data, {"gpus": "6"})
        nodes.wait_cloud_init(HOSTNAME)
        steps = _steps(node.root)
        failed = {k: s["output_tail"][-800:] for k, s in steps.items() if not s["ok"]}
        assert not failed, failed
        assert pin.digest in steps["fetch-validation"]["output_tail"] and "validate-gpu-check" in steps
        assert (node.root / f"opt/gpuaas/bundle/{pin.digest}/validation").is_dir()
        assert world.admin.wait_for_node(node_id, timeout_s=20).status is NodeStatus.ACTIVE


def test_a_node_that_never_reports_fails_its_deployment_on_the_wall_clock(lab_world: Callable[..., Any]) -> None:
    """No timer says Deployed on the NSPAWN backend: a machine whose node never reports (here: the lab has no
    slot for it, so it cannot boot) fails its deployment after the backend's wall-clock timeout, in MAAS's
    words, and the lifecycle says so; the other machine deploys from its node's report. local-gpu-2 is in MAAS,
    commissioned, before the run (Ready): a commission would need a node too (test_commissioning_nodes.py)."""
    inventory = maas_inventory(load_environment("local"), enlisted=False)
    inventory = inventory.model_copy(update={"machines": [
        m.model_copy(update={"enlisted": True, "status": MaasNodeStatus.READY}) if m.hostname == "local-gpu-2" else m
        for m in inventory.machines]})
    with lab_world(["local-gpu-1"]) as (nodes, world):
        # a real node deploys in 5-8 s on an idle fast host; CI's slower host under the suite's load took over 20 s
        backend = NspawnNodes(nodes, deploy_timeout_s=DEPLOY_TIMEOUT_S)
        maas = MaasSimulator(inventory, time_scale=MAAS_SCALE, enroll_backend=EnrollBackend.NSPAWN, nodes=backend)
        maas.start()
        try:
            scheduler = Scheduler(context_for(world, maas, NSPAWN_MACHINE_TIME_SCALE))
            results = {r.hostname: r for r in scheduler.onboard(specs_for_world(world))}
            machines = {m["hostname"]: m for m in maas.admin.machines()}
        finally:
            maas.stop()
        assert results["local-gpu-1"].outcome is MachineOutcome.READY, results["local-gpu-1"].reason
        lost = results["local-gpu-2"]
        assert lost.outcome is MachineOutcome.FAILED and lost.reason.startswith("MCH008"), lost.reason
        assert machines["local-gpu-2"]["status_name"] == "Failed deployment"
        assert machines["local-gpu-2"]["error_description"] == \
            f"Node operation 'Deploying' timed out after {DEPLOY_TIMEOUT_S:.0f} seconds."
        assert any(e.startswith("local-gpu-2: ") for e in backend.errors), backend.errors
