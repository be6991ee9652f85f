"""Bundle rendering and deterministic packing (pure; no servers)."""

from __future__ import annotations

import gzip
import io
import shutil
import tarfile
from pathlib import Path

import pytest

from environments import load_environment
from providers.sites.bundle import TEMPLATES_ROOT, BundleSpec, TemplateError, digest, pack, render_bundle
from providers.sites.bundle_checks import APPLIED

STORE = {"endpoint_url": "http://127.0.0.1:1", "bucket": "b-1", "credentials_path": "x/y#z"}
VAULT = {"address": "http://127.0.0.1:2"}


def spec(**over: object) -> BundleSpec:
    base: dict[str, object] = {
        "name": "lab-h200", "site": "lab", "template_set": "h200",
        "packages": {"driver": ["nvidia-driver-550-server"], "runtime": ["lambda-stack-cuda"], "fabric": ["doca-ofed"]},
        "site_context": {"name": "lab"},
        "profile": {"fabric_mode": "roce", "storage_layout_profile": "h200-boss-flat", "require_hw_sync": True},
        "store": STORE, "vault": VAULT,
    }
    base.update(over)
    return BundleSpec.model_validate(base)


def test_renders_every_part_of_the_h200_set() -> None:
    files = render_bundle(spec())
    assert {"steps/30-storage.sh", "cloud-init/10-packages.yaml", "commissioning/50-gpuaas-inventory.sh",
            "validation/10-gpu-check.sh", "packages/driver.txt", "manifest.json"} <= set(files)
    assert b"nvidia-driver-550-server" in files["packages/driver.txt"]
    assert b"doca-ofed" in files["cloud-init/10-packages.yaml"]  # roce site: fabric stack installed
    assert b"GPUAAS_REQUIRE_HW_SYNC=true" in files["cloud-init/30-hw-sync.yaml"]
    assert b"INTERVAL" not in files["cloud-init/30-hw-sync.yaml"] + files["steps/50-hw-sync.sh"], \
        "the interval is MAAS's setting: no bundle pins it"
    assert b"name: gpuaas-lab-h200-inventory" in files["commissioning/50-gpuaas-inventory.sh"]


def test_ethernet_profile_leaves_fabric_packages_out() -> None:
    prof = {"fabric_mode": "ethernet", "storage_layout_profile": "flat", "require_hw_sync": False}
    files = render_bundle(spec(profile=prof))
    assert b"doca-ofed" not in files["cloud-init/10-packages.yaml"]


def test_same_inputs_same_bytes_and_digest() -> None:
    a, b = pack(render_bundle(spec())), pack(render_bundle(spec()))
    assert a == b and digest(a) == digest(b) and len(digest(a)) == 64


def test_packed_archive_is_normalised() -> None:
    data = pack(render_bundle(spec()))
    assert data[4:8] == b"\0\0\0\0"  # gzip header mtime
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.uname == "" and m.gname == "" for m in members)
    modes = {m.name: m.mode for m in members}
    assert modes["steps/30-storage.sh"] == 0o755 and modes["manifest.json"] == 0o644


def test_any_input_change_changes_the_digest() -> None:
    base = digest(pack(render_bundle(spec())))
    assert digest(pack(render_bundle(spec(values={"expected_gpus": 4})))) != base
    assert digest(pack(render_bundle(spec(packages={"driver": ["other"]})))) != base


def test_undefined_variable_names_template_line_and_variable(tmp_path: Path) -> None:
    root = tmp_path / "templates"
    shutil.copytree(TEMPLATES_ROOT, root)
    bad = root / "h200" / "cloud-init" / "30-hw-sync.yaml.j2"
    bad.write_text(bad.read_text() + "# mirror: {{ values.mirror_url }}\n")
    with pytest.raises(TemplateError) as err:
        render_bundle(spec(), root)
    msg = str(err.value)
    assert "h200/cloud-init/30-hw-sync.yaml.j2" in msg and "'values.mirror_url' at line 9" in msg
    # Supplying the value fixes it.
    assert b"# mirror: http://mirror" in render_bundle(spec(values={"mirror_url": "http://mirror"}), root)[
        "cloud-init/30-hw-sync.yaml"]


def test_top_level_undefined_and_unknown_template_set(tmp_path: Path) -> None:
    root = tmp_path / "templates"
    (root / "mini").mkdir(parents=True)
    (root / "mini" / "a.txt.j2").write_text("{{ nonsense }}\n")
    with pytest.raises(TemplateError, match=r"mini/a.txt.j2: undefined variable 'nonsense' at line 1"):
        render_bundle(spec(template_set="mini"), root)
    with pytest.raises(TemplateError, match="template set 'nope' does not exist"):
        render_bundle(spec(template_set="nope"), root)


def test_every_declared_environment_bundle_renders() -> None:
    for name in ("local", "dev", "staging", "prod"):
        env = load_environment(name)
        for b in env.bootstrap_bundles:
            s = spec(name=b.name, site=b.site, template_set=b.template_set,
                     packages=b.vendor_packages.model_dump(), values=dict(b.values))
            assert render_bundle(s)


@pytest.mark.parametrize(
    ("path", "body", "expected"),
    [
        ("cloud-init/40-bad.yaml.j2", "#cloud-config\nruncmd: [a, b\n", "BND002 renders invalid YAML at rendered line"),
        ("cloud-init/41-plain.yaml.j2", "packages: [jq]\n",
         "BND001 renders a cloud-init part that does not start with `#cloud-config`"),
        ("cloud-init/42-list.yaml.j2", "#cloud-config\n- a\n- b\n",
         "BND003 renders a cloud-config that is a list, not a mapping of modules"),
        ("validation/30-nointerp.sh.j2", "# name: nointerp\nnvidia-smi\n",
         "BND005 renders a script without an interpreter line"),
        ("commissioning/70-nointerp.sh.j2", "echo hi\n", "BND005 renders a script without an interpreter line"),
        ("cloud-init/43-apt.yaml.j2", "#cloud-config\napt:\n  sources: {x: {source: 'deb http://x y z'}}\n",
         "BND004 uses the cloud-init key `apt`, which the bundle's cloud-init step does not apply"),
        ("cloud-init/44-bootcmd.yaml.j2", "#cloud-config\nwrite_files: []\nbootcmd: [[echo, hi]]\n",
         "BND004 uses the cloud-init key `bootcmd`"),
    ],
)
def test_a_rendered_part_a_node_could_not_run_is_refused_naming_the_template(
    tmp_path: Path, path: str, body: str, expected: str
) -> None:
    """Refused at render (so at the bundle's check, i.e. preview): the code, the bundle's template file, what."""
    root = tmp_path / "templates"
    shutil.copytree(TEMPLATES_ROOT, root)
    (root / "h200" / path).write_text(body)
    with pytest.raises(TemplateError) as err:
        render_bundle(spec(), root)
    code, what = expected.split(" ", 1)
    assert str(err.value).startswith(f"{code} template h200/{path}: {what}"), str(err.value)


def test_each_part_key_is_applied_or_refused_with_the_module_named(tmp_path: Path) -> None:
    """A part may use every key the cloud-init step applies (the step renders the same table); any other key is
    refused with BND004 and what to use instead (never dropped)."""
    root = tmp_path / "templates"
    shutil.copytree(TEMPLATES_ROOT, root)
    body = "#cloud-config\n" + "".join(f"{k}: []\n" for k in sorted(APPLIED))
    (root / "h200" / "cloud-init" / "45-all.yaml.j2").write_text(body)
    files = render_bundle(spec(), root)
    step = files["steps/20-cloud-init.sh"].decode()
    assert all(f"{k}: {m}" in step for k, m in APPLIED.items())
    for key, instead in (("apt", "apt_sources"), ("ssh_authorized_keys", "login_user"), ("chpasswd", "login_user")):
        (root / "h200" / "cloud-init" / "45-all.yaml.j2").write_text(body + f"{key}: {{}}\n")
        with pytest.raises(TemplateError) as err:
            render_bundle(spec(), root)
        assert "BND004" in str(err.value) and f"`{key}`" in str(err.value) and instead in str(err.value)


def test_the_shipped_template_sets_pass_the_checks() -> None:
    for name in ("h200", "default"):
        render_bundle(spec(template_set=name))
