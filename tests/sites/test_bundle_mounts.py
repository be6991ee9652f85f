"""WEKA mounts through the node bundle (seed 000 §2, MAAS machines): a bundle carries the mount units of
the pools and standalone machines that use it and mount a filesystem, deterministically; a machine's deploy
spec names the sets it installs; a bundle or machine that mounts nothing is byte-for-byte what it was."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import yaml

from components.machines import machine_spec
from components.settings import StackSettings
from components.site import bundle_spec
from environments import Environment, load_environment
from environments.loader import ENVIRONMENTS_DIR
from providers.hosts.mounts import INSTALLER, STAND_IN_NOTE
from providers.machines.cloud_init import render_user_data, user_data_digest
from providers.sites.bundle import BundleSpec, digest, pack, render_bundle

SETTINGS = StackSettings(stack="prod", environment="prod")
BUNDLE = {"ref": "s3://b/k", "digest": "0" * 64, "launcher_url": "http://s3/b/k"}
UNIT = "mounts/pool-dal1-h200-a/mnt-weka-training.mount"


def prod_with_mounts(tmp_path: Path, **extra: Any) -> Environment:
    """prod plus a WEKA filesystem mounted by pool dal1-h200-a (and `extra` mounts)."""
    doc = yaml.safe_load((ENVIRONMENTS_DIR / "prod.yaml").read_text())
    doc["filesystems"] = [{"name": "dal1-training", "fs_name": "training",
                           "backends": ["weka-dal1-1.prod.gpuaas.internal", "weka-dal1-2.prod.gpuaas.internal"],
                           "client": {"package": "weka-agent", "apt_source": "weka"}},
                          {"name": "lab-scratch", "fs_name": "scratch", "backends": ["w1"], "lab_stand_in": "tmpfs"}]
    doc["storage_mounts"] = [{"filesystem": "dal1-training", "mount_point": "/mnt/weka/training",
                              "purpose": "training", "pools": ["dal1-h200-a"], "options": ["readcache"]},
                             *extra.get("mounts", [])]
    path = tmp_path / "prod.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_environment(path)


def prod_without_mounts(tmp_path: Path) -> Environment:
    """prod as it would be without WEKA mounts (prod declares its own per pool)."""
    doc = yaml.safe_load((ENVIRONMENTS_DIR / "prod.yaml").read_text())
    doc["filesystems"], doc["storage_mounts"] = [], []
    (tmp_path / "plain").mkdir(exist_ok=True)
    path = tmp_path / "plain" / "prod.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_environment(path)


def spec_of(env: Environment, name: str) -> BundleSpec:
    return bundle_spec(env, SETTINGS, next(b for b in env.bootstrap_bundles if b.name == name))


def machine(env: Environment, hostname: str) -> Any:
    return machine_spec(env, next(m for m in env.machines if m.hostname == hostname), BUNDLE, [])


def test_the_bundle_of_a_pool_that_mounts_carries_its_units_and_the_installer(tmp_path: Path) -> None:
    env = prod_with_mounts(tmp_path)
    files = render_bundle(spec_of(env, "dal1-h200"))
    unit = files[UNIT].decode()
    assert "Type=wekafs" in unit
    assert "What=weka-dal1-1.prod.gpuaas.internal,weka-dal1-2.prod.gpuaas.internal/training" in unit
    assert ("Options=_netdev,x-systemd.requires=weka-agent.service,x-systemd.after=network-online.target,"
            "readcache") in unit
    assert f"{UNIT}.d/lab-stand-in.conf" not in files  # a real filesystem: no stand-in
    # its client: installed first by the mounts step (from the profile's weka apt source), required by the unit
    assert "\nRequires=weka-agent.service\n" in unit
    assert files["mounts/pool-dal1-h200-a/client-packages"] == b"weka-agent\n"
    assert INSTALLER in files
    step = files["steps/60-mounts.sh"].decode()  # a launcher step: every step runs before validation
    assert '"$BUNDLE_DIR/mounts/install-mounts.sh" "$GPUAAS_BUNDLE_JSON"' in step
    manifest = json.loads(files["manifest.json"])
    assert UNIT in manifest["files"] and INSTALLER in manifest["files"]  # content-addressed like the rest
    # deterministic: same environment, same bytes, same digest; the tar entry of the installer is executable
    a, b = pack(render_bundle(spec_of(env, "dal1-h200"))), pack(render_bundle(spec_of(env, "dal1-h200")))
    assert a == b and digest(a) == digest(b)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(a))) as tar:
        assert tar.getmember(INSTALLER).mode == 0o755 and tar.getmember(UNIT).mode == 0o644


def test_a_bundle_no_mounting_pool_uses_is_unchanged(tmp_path: Path) -> None:
    plain, env = prod_without_mounts(tmp_path), prod_with_mounts(tmp_path)
    before, after = render_bundle(spec_of(plain, "sjc1-h200")), render_bundle(spec_of(env, "sjc1-h200"))
    assert not any(p.startswith("mounts/") for p in after)
    assert "install-mounts" not in after["steps/60-mounts.sh"].decode()
    assert digest(pack(before)) == digest(pack(after))
    assert spec_of(env, "sjc1-h200").mounts == ()


def test_machines_name_the_sets_they_install_and_the_others_keep_their_fingerprint(tmp_path: Path) -> None:
    plain, env = prod_without_mounts(tmp_path), prod_with_mounts(tmp_path)
    mounting, other_pool, other_site = (machine(env, h) for h in ("dal1-h200-001", "dal1-h200-033", "sjc1-h200-001"))
    assert mounting.deploy.mount_sets == ("pool-dal1-h200-a",)
    user_data = yaml.safe_load(render_user_data(mounting, platform_url="https://p", node_id="n", token="t"))
    bundle_json = next(f for f in user_data["write_files"] if f["path"] == "/etc/gpuaas/bundle.json")
    assert json.loads(bundle_json["content"])["mount_sets"] == ["pool-dal1-h200-a"]
    assert mounting.deploy_fingerprint() != machine(plain, "dal1-h200-001").deploy_fingerprint()  # redeploys
    for spec, host in ((other_pool, "dal1-h200-033"), (other_site, "sjc1-h200-001")):
        # pool dal1-h200-b shares dal1's bundle (its digest changed: that is a bundle change) but installs nothing
        assert spec.deploy.mount_sets is None
        assert spec.deploy_fingerprint() == machine(plain, host).deploy_fingerprint()
        assert user_data_digest(spec, "https://p") == user_data_digest(machine(plain, host), "https://p")
        assert "mount_sets" not in spec.deploy.model_dump(mode="json", exclude_none=True)


def test_a_machine_named_by_a_mount_gets_its_own_set_with_the_lab_stand_in(tmp_path: Path) -> None:
    mnt = {"filesystem": "lab-scratch", "mount_point": "/scratch", "purpose": "scratch",
           "machines": ["dal1-h200-033"]}
    env = prod_with_mounts(tmp_path, mounts=[mnt])
    files = render_bundle(spec_of(env, "dal1-h200"))
    assert "mounts/machine-dal1-h200-033/scratch.mount" in files
    assert STAND_IN_NOTE in files["mounts/machine-dal1-h200-033/scratch.mount.d/lab-stand-in.conf"].decode()
    assert machine(env, "dal1-h200-033").deploy.mount_sets == ("machine-dal1-h200-033",)  # its pool mounts nothing


def test_the_installer_installs_and_starts_exactly_the_machines_sets(tmp_path: Path) -> None:
    """Run the bundle's installer as the first-boot launcher does, with systemctl recorded instead of run."""
    mnt = {"filesystem": "lab-scratch", "mount_point": "/scratch", "purpose": "scratch", "machines": ["dal1-h200-001"]}
    env = prod_with_mounts(tmp_path, mounts=[mnt])
    bundle = tmp_path / "bundle"
    for path, data in render_bundle(spec_of(env, "dal1-h200")).items():
        (bundle / path).parent.mkdir(parents=True, exist_ok=True)
        (bundle / path).write_bytes(data)
    installer = bundle / INSTALLER
    installer.chmod(installer.stat().st_mode | stat.S_IXUSR)
    bin_dir, units, calls = tmp_path / "bin", tmp_path / "units", tmp_path / "systemctl.log"
    bin_dir.mkdir()
    for tool in ("systemctl", "apt-get"):  # recorded, never run: this is the test host
        (bin_dir / tool).write_text(f'#!/bin/sh\necho "$(basename "$0") $*" >> {calls}\n')
        (bin_dir / tool).chmod(0o755)
    spec = machine(env, "dal1-h200-001")
    user_data = yaml.safe_load(render_user_data(spec, platform_url="https://p", node_id="n", token="t"))
    bundle_json = tmp_path / "bundle.json"
    bundle_json.write_text(next(f for f in user_data["write_files"] if f["path"].endswith("bundle.json"))["content"])
    env_vars = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUAAS_UNIT_DIR": str(units)}
    proc = subprocess.run([str(installer), str(bundle_json)], capture_output=True, text=True, env=env_vars, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.relative_to(units).as_posix() for p in units.rglob("*") if p.is_file()) == [
        "mnt-weka-training.mount", "scratch.mount", "scratch.mount.d/lab-stand-in.conf"]
    # the WEKA client first (the real filesystem's; the stand-in needs none), then the units
    assert calls.read_text().splitlines() == [
        "apt-get install -y -q --no-install-recommends weka-agent", "systemctl daemon-reload",
        "systemctl enable mnt-weka-training.mount scratch.mount", "systemctl start mnt-weka-training.mount",
        "systemctl start scratch.mount"]
    # a set the bundle does not carry is an error, not a silent no-op
    bundle_json.write_text(json.dumps({"mount_sets": ["pool-elsewhere"]}))
    proc = subprocess.run([str(installer), str(bundle_json)], capture_output=True, text=True, env=env_vars, timeout=30)
    assert proc.returncode == 1 and "mount set pool-elsewhere is not in this bundle" in proc.stderr


def test_a_filesystem_missing_on_the_cluster_fails_the_first_boot_naming_the_unit_and_the_fix(tmp_path: Path) -> None:
    """A declared filesystem the WEKA cluster does not have: only the node can find out (mount fails). The
    installer starts every unit, then fails naming each unit that did not mount, its source and the fix."""
    env = prod_with_mounts(tmp_path)
    bundle = tmp_path / "bundle"
    for path, data in render_bundle(spec_of(env, "dal1-h200")).items():
        (bundle / path).parent.mkdir(parents=True, exist_ok=True)
        (bundle / path).write_bytes(data)
    (bundle / INSTALLER).chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    what = "weka-dal1-1.prod.gpuaas.internal,weka-dal1-2.prod.gpuaas.internal/training"
    fake = {"systemctl": f'#!/bin/sh\ncase "$1" in start) exit 1;; show) echo "{what}";; esac\nexit 0\n',
            "journalctl": "#!/bin/sh\necho 'mount error: filesystem training not found'\n",
            "apt-get": "#!/bin/sh\nexit 0\n"}  # the client installs (never run on the test host)
    for name, text in fake.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    bundle_json = tmp_path / "bundle.json"
    bundle_json.write_text(json.dumps({"mount_sets": ["pool-dal1-h200-a"]}))
    proc = subprocess.run([str(bundle / INSTALLER), str(bundle_json)], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                               "GPUAAS_UNIT_DIR": str(tmp_path / "units")})
    assert proc.returncode == 1
    assert f"install-mounts: mnt-weka-training.mount did not mount {what}" in proc.stderr
    assert "fix: check filesystems[].fs_name and backends" in proc.stderr
    assert "filesystem training not found" in proc.stderr
