"""The local stack run by the real Pulumi CLI with real nodes behind the MAAS simulator (LocalStack,
MachineBackend.NSPAWN): each deploy boots a systemd-nspawn node from the user_data MAAS holds, the node's
cloud-init runs the launcher (fetch, steps, validation, enroll) and reports to MAAS's metadata status
endpoint, which is what makes the machine Deployed. Two machines (local-gpu-1 standalone, local-gpu-2 a
pool of one): the machine is shared with others (2 cores).

Behind the lab gate (tests/fixtures/lab_gate.py): skipped loudly where nspawn nodes cannot run, a
failure in CI."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from oauthlib import oauth1

from clients.maas import MaasClient
from lab.node import BootedNode, attached_loops
from simulators.localstack import LAB_NODE_PROFILE, LocalStack, write_lab_environment
from simulators.maas import MachineBackend
from tests.fixtures.lab_gate import require_lab
from tests.maas_sim.conftest import connect_url

pytestmark = pytest.mark.slow(seconds=290)  # minutes of real runs: make test starts files like this first

REPO = Path(__file__).resolve().parents[2]
MACHINES = ["local-gpu-1", "local-gpu-2"]
# the local profile's storage layout (h200-boss-flat) and the H200's non-boot block devices in MAAS
DATA_DEVICES = [f"nvme{i}n1" for i in range(8)]


@pytest.fixture
def lab_env(tmp_path: Path) -> Path:
    return write_lab_environment(REPO / "environments" / "local.yaml", tmp_path / "local.yaml", MACHINES)


@pytest.fixture
def real_world(lab_env: Path) -> Iterator[LocalStack]:
    require_lab("nspawn nodes behind the MAAS simulator")
    run_dir: Path | None = None
    with LocalStack(lab_env, machine_backend=MachineBackend.NSPAWN) as world:  # halts every node at the end
        try:
            yield world
        finally:
            if world.lab is not None:
                run_dir = world.lab.run_dir
    _assert_no_loop_left(run_dir)


def _engine(engine_factory: Any, world: LocalStack, lab_env: Path, tmp_path: Path) -> Any:
    cfg = world.stack_config()
    cfg["gpuaas-infra:environment"] = str(lab_env)
    return engine_factory(REPO, "local", config=cfg, backend=tmp_path / "backend")


def _deployed_digests(engine: Any) -> dict[str, str]:
    """hostname -> the bundle digest the stack's state (`pulumi stack export`) says each machine was
    deployed with."""
    state = engine.export()
    out: dict[str, str] = {}

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            deploy = value.get("deploy") if isinstance(value.get("deploy"), dict) else value  # the spec nests it
            if isinstance(value.get("hostname"), str) and isinstance(deploy.get("bundle_digest"), str):
                out[value["hostname"]] = deploy["bundle_digest"]
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str) and value.startswith("{"):
            walk(json.loads(value))  # a pool's spec: one JSON string per machine

    walk(state)
    return out


def _shares(world: LocalStack, hostname: str) -> dict[str, tuple[str, str]]:
    """/shareN mounted inside the running node: mount point -> (fstype, label), as findmnt shows them."""
    assert world.lab is not None
    out = world.lab.exec(hostname, ["findmnt", "-n", "-l", "-o", "TARGET,FSTYPE,LABEL"]).stdout
    shares = {}
    for line in out.splitlines():
        target, fstype, label = (line.split() + ["", "", ""])[:3]
        if target.startswith("/share"):
            shares[target] = (fstype, label)
    return shares


def _assert_no_loop_left(run_dir: Path | None) -> None:
    """No loop device still holds a data disk of the run (by image: the freed device names are any run's)."""
    assert run_dir is not None, "the run had no lab"
    left = attached_loops(run_dir)
    assert not left, f"loop devices left attached: {left}"


def _steps(node: BootedNode) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (node.root / "var/lib/gpuaas/steps").glob("*.json")}


def test_up_of_the_local_stack_on_real_nodes_then_no_changes(
    engine_factory: Any, real_world: LocalStack, lab_env: Path, tmp_path: Path
) -> None:
    world = real_world
    assert world.maas is not None and world.platform is not None and world.nodes is not None
    engine = _engine(engine_factory, world, lab_env, tmp_path)
    up = engine.up()
    assert up.ok, [d.message for d in up.diagnostics if d.severity == "error"]
    assert not world.nodes.errors, world.nodes.errors
    machines = {m["hostname"]: m for m in world.maas.admin.machines()}
    assert {h: machines[h]["status_name"] for h in MACHINES} == {h: "Deployed" for h in MACHINES}
    digests = _deployed_digests(engine)
    assert set(digests) >= set(MACHINES), digests
    for hostname in MACHINES:
        node = world.nodes.latest(hostname)
        assert node is not None, f"{hostname}: no node booted"
        events = world.maas.admin.events(machines[hostname]["system_id"])
        assert any("modules-final" in e["description"] and "-> Deployed" in e["description"] for e in events), \
            f"{hostname}: Deployed did not come from the node's cloud-init"
        record = next(n for n in world.platform.store.nodes.values() if n.hostname == hostname)
        assert record.status.value == "active"
        # the token was consumed by a request from the node's own lab address
        assert world.lab is not None
        assert world.platform.enroll_caller(record.node_id) == world.lab.address(hostname) != world.lab.gateway
        # the digest the node ran is the one in the stack's state, and it says so in its own report
        steps = _steps(node)
        assert steps and all(s["ok"] for s in steps.values()), {k: s["output_tail"][-400:] for k, s in steps.items()}
        assert record.bootstrap is not None and record.bootstrap.runner.value == "launcher"
        assert record.bootstrap.bundle_digest == digests[hostname], (record.bootstrap.bundle_digest, digests)
        assert (node.root / "opt/gpuaas/bundle" / digests[hostname]).is_dir(), "the node unpacked that bundle"
        validated = [s for s in record.bootstrap.steps if s.step.startswith("validate-")]
        assert validated and all(s.ok for s in validated), "validation results are in the node record"
        assert not (node.root / "etc/gpuaas/enrollment.json").exists(), "the token file is gone"
        instance = f"var/lib/cloud/instances/{node.instance_id}"
        for rel in ("var/lib/cloud/seed/nocloud/user-data", f"{instance}/user-data.txt",
                    f"{instance}/user-data.txt.i", f"{instance}/cloud-config.txt", "etc/gpuaas/bundle.json",
                    "etc/cloud/cloud.cfg.d/90_maas_reporting.cfg"):
            mode = stat.S_IMODE((node.root / rel).stat().st_mode)
            assert mode & 0o077 == 0, f"{hostname}: {rel} is {oct(mode)}"
        # the node's MAAS key (its reporting drop-in) is only in root-only files: the drop-in, cloud-init's pickle
        drop_in = yaml.safe_load((node.root / "etc/cloud/cloud.cfg.d/90_maas_reporting.cfg").read_text())
        secret = drop_in["reporting"]["maas"]["token_secret"].encode()
        upper = node.root.parent / "upper"
        holders = {p.relative_to(upper).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in upper.rglob("*")
                   if p.is_file() and not p.is_symlink() and secret in p.read_bytes()}
        assert holders and all(mode & 0o077 == 0 for mode in holders.values()), holders
        # the profile's storage layout on the machine's data disks (its non-boot block devices in MAAS)
        assert set(node.data_disks) == set(DATA_DEVICES), node.data_disks
        assert _shares(world, hostname) == {f"/share{i}": ("ext4", f"share{i}") for i in range(len(DATA_DEVICES))}
    boots = len(world.nodes.boots)

    again = engine.up()
    assert again.ok, [d.message for d in again.diagnostics if d.severity == "error"]
    changed = {k: v for k, v in (again.changeSummary or {}).items() if k != "same" and v}
    assert not changed, changed
    assert len(world.nodes.boots) == boots, "the second up booted no node"
    quiet = engine.preview(expect_no_changes=True)
    assert quiet.ok, [d.message for d in quiet.diagnostics if d.severity == "error"]


def _running_in(root: Path) -> list[int]:
    """Pids of the systemd-nspawn process booting the disk at `root` (it lives as long as the node)."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                argv = (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"systemd-nspawn") and str(root).encode() in argv:
                pids.append(int(p.name))
    return pids


def test_a_redeploy_reimages_the_node_fresh(
    engine_factory: Any, real_world: LocalStack, lab_env: Path, tmp_path: Path
) -> None:
    """A changed deploy input releases the machine and deploys it again: the previous node is halted and a
    fresh root disk boots, so a marker written on the old node's root is gone. The data disks are the
    machine's: released without erase they keep /share0's data (the storage step never reformats a
    labelled disk); the local profile's own erase mode (quick, the default: `release_erase_mode` unset)
    erases them on release, so after that redeploy /share0 is a fresh filesystem."""
    world = real_world
    assert world.maas is not None and world.nodes is not None and world.lab is not None
    _set_profile(lab_env, release_erase_mode="none")  # policy only: not a deploy input (nothing redeploys)
    engine = _engine(engine_factory, world, lab_env, tmp_path)
    first = engine.up()
    assert first.ok, [d.message for d in first.diagnostics if d.severity == "error"]
    old = world.nodes.latest("local-gpu-1")
    assert old is not None and _running_in(old.root), "the first node runs"
    (old.root / "root/reimage-marker").write_text("written before the redeploy\n")
    wrote = world.lab.exec("local-gpu-1", ["sh", "-c", "echo kept > /share0/data-marker && sync"])
    assert wrote.returncode == 0, wrote.stderr
    _set_machine(lab_env, "local-gpu-1", hwe_kernel="ga-22.04")
    second = engine.up()
    assert second.ok, [d.message for d in second.diagnostics if d.severity == "error"]
    assert not world.nodes.errors, world.nodes.errors
    new = world.nodes.latest("local-gpu-1")
    assert new is not None and new.instance_id != old.instance_id and new.root != old.root
    assert not _running_in(old.root), "the released machine's node was halted"
    assert _running_in(new.root), "the redeployed machine runs a new node"
    assert not (new.root / "root/reimage-marker").exists(), "the redeploy booted a fresh root disk"
    assert (new.root / "var/lib/gpuaas/steps/enroll.json").exists(), "the fresh node ran its bootstrap again"
    # released without erase: the same data disks, /share0 kept by the storage step, its data still there
    assert new.data_disks == old.data_disks, (new.data_disks, old.data_disks)
    storage = _steps(new)["storage"]
    assert storage["ok"] and "share0 exists: kept" in storage["output_tail"], storage["output_tail"][-400:]
    assert world.lab.exec("local-gpu-1", ["cat", "/share0/data-marker"]).stdout.strip() == "kept"
    machines = {m["hostname"]: m for m in world.maas.admin.machines()}
    assert machines["local-gpu-1"]["status_name"] == "Deployed"
    assert [b.hostname for b in world.nodes.boots].count("local-gpu-2") == 1, "the other machine was left alone"
    # the old node's MAAS key died with it: a status post signed with it is refused, and a late failure
    # signed by the current node does not undo Deployed (MAAS only decides while Deploying)
    sid = machines["local-gpu-1"]["system_id"]
    failed = {"event_type": "finish", "origin": "cloudinit", "name": "modules-final", "description": "late",
              "result": "FAIL"}
    assert _post_status(world, sid, old, failed).status_code == 401
    assert _post_status(world, sid, new, failed).status_code == 200
    assert {m["hostname"]: m for m in world.maas.admin.machines()}["local-gpu-1"]["status_name"] == "Deployed"
    # power actions reach the node: off halts it, on boots the same disk (the bootstrap does not run again)
    other = world.nodes.latest("local-gpu-2")
    assert other is not None
    enrolled = json.loads((other.root / "var/lib/gpuaas/steps/enroll.json").read_text())["finished_at"]
    sid2 = machines["local-gpu-2"]["system_id"]
    MaasClient(world.maas.url, world.maas.api_key).power_off(sid2)
    _until(lambda: not _running_in(other.root), "the powered-off node halts")
    connect_url(world.maas.url, world.maas.api_key).machines.get(system_id=sid2).power_on()
    _until(lambda: bool(_running_in(other.root)), "the powered-on node boots its disk again")
    assert (other.root / "root").is_dir() and world.nodes.latest("local-gpu-2") == other, "the same disk"
    assert json.loads((other.root / "var/lib/gpuaas/steps/enroll.json").read_text())["finished_at"] == enrolled

    # the local profile's own erase mode (quick) on the next redeploy: MAAS erases the disks on release, the
    # backend wipes the machine's data disks, the storage step formats /share0 afresh: the data is gone
    # (a redeploy is a delete-before-replace: its release reads the erase mode the state holds, so the policy
    # goes in first, in place, booting nothing)
    _set_profile(lab_env, release_erase_mode=None)
    boots = len(world.nodes.boots)
    policy = engine.up()
    assert policy.ok, [d.message for d in policy.diagnostics if d.severity == "error"]
    assert len(world.nodes.boots) == boots, "a policy change redeploys nothing"
    _set_machine(lab_env, "local-gpu-1", hwe_kernel=None)
    third = engine.up()
    assert third.ok, [d.message for d in third.diagnostics if d.severity == "error"]
    assert not world.nodes.errors, world.nodes.errors
    erased = world.nodes.latest("local-gpu-1")
    assert erased is not None and erased.instance_id != new.instance_id
    events = [e["description"] for e in world.maas.admin.events(sid)]
    assert any("release with quick disk erase" in d for d in events), events[-10:]
    storage = _steps(erased)["storage"]
    assert storage["ok"] and "formatted" in storage["output_tail"], storage["output_tail"][-400:]
    assert _shares(world, "local-gpu-1")["/share0"] == ("ext4", "share0")
    gone = world.lab.exec("local-gpu-1", ["cat", "/share0/data-marker"])
    assert gone.returncode != 0 and "No such file" in gone.stderr, (gone.stdout, gone.stderr)
    assert [b.hostname for b in world.nodes.boots].count("local-gpu-2") == 1, "the other machine was left alone"


def _set_profile(env_file: Path, **fields: Any) -> None:
    """Set (None: remove) fields on every site profile of the environment file."""
    doc = yaml.safe_load(env_file.read_text())
    for site in doc["sites"]:
        for profile in site["profiles"]:
            for k, v in fields.items():
                profile.pop(k, None) if v is None else profile.__setitem__(k, v)
    env_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def _set_machine(env_file: Path, hostname: str, **fields: Any) -> None:
    """Set (None: remove) fields on one machine of the environment file."""
    doc = yaml.safe_load(env_file.read_text())
    for m in doc["machines"]:
        if m["hostname"] == hostname:
            for k, v in fields.items():
                m.pop(k, None) if v is None else m.__setitem__(k, v)
    env_file.write_text(yaml.safe_dump(doc, sort_keys=False))


def _until(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.2)  # poll interval for a process the node's power action starts or stops


def _post_status(world: LocalStack, system_id: str, node: BootedNode, event: dict[str, str]) -> httpx.Response:
    """POST a cloud-init event to MAAS's status endpoint as the node would: OAuth PLAINTEXT, its drop-in's key."""
    assert world.maas is not None
    key = yaml.safe_load((node.root / "etc/cloud/cloud.cfg.d/90_maas_reporting.cfg").read_text())["reporting"]["maas"]
    client = oauth1.Client(key["consumer_key"], client_secret="", resource_owner_key=key["token_key"],
                           resource_owner_secret=key["token_secret"], signature_method=oauth1.SIGNATURE_PLAINTEXT)
    url = f"{world.maas.root_url}/MAAS/metadata/status/{system_id}"
    _, headers, _ = client.sign(url, http_method="POST", headers={"Content-Type": "application/json"})
    return httpx.post(url, content=json.dumps(event), headers=headers)


def test_a_node_failing_validation_fails_its_deployment_then_up_after_the_fix(
    engine_factory: Any, lab_env: Path, tmp_path: Path
) -> None:
    """local-gpu-2's node shows 7 GPUs: its launcher fails validation, runcmd exits non-zero, cloud-init's
    final stage reports FAIL, MAAS says Failed deployment; the up fails naming the machine, the script and
    what to do (MCH021, from the node's own report), and the other machine's node is untouched. With the
    GPU back, the next up releases the machine and deploys it on a fresh node."""
    require_lab("nspawn nodes behind the MAAS simulator")
    with LocalStack(lab_env, machine_backend=MachineBackend.NSPAWN,
                    node_knobs={"local-gpu-2": {"gpus": "7"}}) as world:
        assert world.maas is not None and world.nodes is not None
        engine = _engine(engine_factory, world, lab_env, tmp_path)
        failed = engine.up()
        assert not failed.ok
        errors = " ".join(d.message for d in failed.diagnostics if d.severity == "error")
        assert "MCH021" in errors and "local-gpu-2" in errors, errors
        assert "validate-gpu-check" in errors and "expected 8 GPUs, found 7" in errors, errors
        assert "fix the node or the validation script" in errors, errors  # what to do
        machines = {m["hostname"]: m for m in world.maas.admin.machines()}
        assert machines["local-gpu-2"]["status_name"] == "Failed deployment"
        assert "cloud-init reported modules-final/config-scripts-user" in machines["local-gpu-2"]["error_description"]
        good = world.nodes.latest("local-gpu-1")
        assert good is not None and (good.root / "var/lib/gpuaas/steps/enroll.json").exists(), \
            "the other machine's node bootstrapped regardless"
        assert machines["local-gpu-1"]["status_name"] == "Deployed"

        world.nodes.knobs.clear()  # the GPU is back
        fixed = engine.up()
        assert fixed.ok, [d.message for d in fixed.diagnostics if d.severity == "error"]
        machines = {m["hostname"]: m for m in world.maas.admin.machines()}
        assert {h: machines[h]["status_name"] for h in MACHINES} == {h: "Deployed" for h in MACHINES}
        assert [b.hostname for b in world.nodes.boots].count("local-gpu-2") == 2, "a fresh node for the redeploy"
        assert [b.hostname for b in world.nodes.boots].count("local-gpu-1") == 1


def test_a_node_that_cannot_fetch_its_bundle_fails_its_deployment(
    engine_factory: Any, lab_env: Path, tmp_path: Path
) -> None:
    """local-gpu-2's node boots after its presigned bundle URL expired (the S3 server sees that node's
    requests a TTL and a minute late): its launcher's fetch step fails, runcmd exits non-zero, cloud-init
    reports FAIL, MAAS says Failed deployment; the up fails naming the machine, the step (`fetch`) and what
    to do (MCH022, from the node's own report). The other machine's node deploys regardless."""
    require_lab("nspawn nodes behind the MAAS simulator")
    run_dir: Path | None = None
    with LocalStack(lab_env, machine_backend=MachineBackend.NSPAWN) as world:
        try:
            assert world.maas is not None and world.nodes is not None and world.lab is not None
            assert world.s3 is not None and world.platform is not None
            ttl = LAB_NODE_PROFILE["enrollment_token_ttl_seconds"]  # the URL lives as long as the token
            world.s3.client_skew_s[world.lab.address("local-gpu-2")] = ttl + 60
            engine = _engine(engine_factory, world, lab_env, tmp_path)
            failed = engine.up()
            assert not failed.ok
            errors = " ".join(d.message for d in failed.diagnostics if d.severity == "error")
            assert "MCH022" in errors and "local-gpu-2" in errors, errors
            assert "launcher step 'fetch' failed" in errors and "Request has expired" in errors, errors
            assert "presigned URL expired" in errors and " ... " not in errors, errors  # the whole reason
            assert "run up again (a redeploy presigns a fresh URL)" in errors, errors  # what to do
            assert "enrollment_token_ttl_seconds" in errors, errors
            assert "X-Amz-Signature" not in errors and "Signature=" not in errors, "no URL signature in the error"
            machines = {m["hostname"]: m for m in world.maas.admin.machines()}
            assert machines["local-gpu-2"]["status_name"] == "Failed deployment"
            assert "cloud-init reported modules-final" in machines["local-gpu-2"]["error_description"]
            bad = world.nodes.latest("local-gpu-2")
            assert bad is not None and _steps(bad)["fetch"]["ok"] is False
            assert "storage" not in _steps(bad), "no bundle step ran"
            record = next(n for n in world.platform.store.nodes.values() if n.hostname == "local-gpu-2")
            assert record.bootstrap is not None and record.bootstrap.failed_step == "fetch"
            assert machines["local-gpu-1"]["status_name"] == "Deployed"
            good = world.nodes.latest("local-gpu-1")
            assert good is not None and (good.root / "var/lib/gpuaas/steps/enroll.json").exists(), \
                "the other machine's node bootstrapped regardless"
            assert not world.nodes.errors, world.nodes.errors
        finally:
            if world.lab is not None:
                run_dir = world.lab.run_dir
    _assert_no_loop_left(run_dir)
