"""Real nodes (lab/node.py) at a site whose every service is behind https signed by a private CA the test
makes (tests/node/trusted_site.py): the artifact store, the platform (enrollment, reports, the node agent
package) and a vendor apt repository built here from small .deb files and signed with a test key.

The user_data is what the machine lifecycle's deploy makes (`handlers._user_data`): the node's CAs
(`/etc/gpuaas/ca.pem`), presigned URLs of the bundle and of the apt source's signing key, the login user.
A node with the right CA installs the vendor packages from the signed repository, creates and validates its
login user, enrolls and installs the node agent, all over https. A node given another CA stops at `fetch`
naming the store's host and the CA it has; a missing signing key and a package no source has stop the
`packages` step naming the source and the package."""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from clients.platform.models import NodeStatus
from lab.node import NodeLab
from providers.hosts.mounts import MountDecl, MountSet
from providers.machines.node_trust import node_ca_bundle
from providers.machines.spec import LoginUserSpec
from providers.sites.bundle import BundleSpec, Packages
from providers.sites.bundle_node import LoginUserCheck
from simulators.tls import PrivateCa
from tests.fixtures.lab_gate import require_lab
from tests.fixtures.platform_sim import platform_sim_factory  # noqa: F401

from .conftest import bundle_spec
from .test_nspawn_node import HEALTH
from .trusted_site import TrustedSite, trusted_site

REPO_PACKAGES = ("gpuaas-lab-driver", "gpuaas-lab-runtime")
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGpuYWFzLWxhYi1ocGNhZG1pbi10ZXN0LWtleS0wMDAwMDE hpcadmin@lab"


@pytest.fixture
def site_on_lab(tmp_path: Path, platform_sim_factory: Any) -> Callable[..., Any]:  # noqa: F811
    require_lab("nspawn nodes")

    @contextmanager
    def make(hostnames: list[str]) -> Iterator[tuple[NodeLab, TrustedSite]]:
        with NodeLab(hostnames) as nodes:
            platform = platform_sim_factory(host=nodes.gateway)
            with trusted_site(tmp_path, nodes.gateway, platform, REPO_PACKAGES) as site:
                yield nodes, site

    return make


def _bundle(site: TrustedSite, packages: tuple[str, ...] = REPO_PACKAGES, **profile: Any) -> BundleSpec:
    """The h200 set with the lab's limits (no data disks, no hw-sync timer) and the repository as its vendor
    apt source; `packages`: what the bundle installs (driver, runtime)."""
    spec = bundle_spec(False)
    prof = spec.profile.model_copy(update={"storage_layout_profile": "flat", "data_devices": (),
                                           "require_hw_sync": False, "apt_sources": (site.apt_source(packages),),
                                           **profile})
    return spec.model_copy(update={"packages": Packages(driver=list(packages[:1]), runtime=list(packages[1:])),
                                   "profile": prof})


def _steps(root: Path) -> dict[str, Any]:
    return {p.stem: json.loads(p.read_text()) for p in (root / "var/lib/gpuaas/steps").glob("*.json")}


def test_a_node_behind_a_private_ca_installs_vendor_packages_and_enrolls_over_https(
        site_on_lab: Callable[..., Any]) -> None:
    with site_on_lab(["lab-https-1"]) as (nodes, site):
        assert all(url.startswith(f"https://{nodes.gateway}:") for url in site.urls.values())
        site.secrets["lab/ssh/hpcadmin#public_key"] = SSH_KEY
        user = LoginUserSpec(name="hpcadmin", groups=("adm",), sudo="nopasswd",
                             ssh_key_refs=("lab/ssh/hpcadmin#public_key",))
        login = {"login_user": LoginUserCheck(name="hpcadmin", groups=("adm",), sudo="nopasswd", ssh_keys=1)}
        spec = site.spec("lab-https-1", "https01", _bundle(site, **login), login_user=user)
        node_id, user_data = site.user_data(site.context(), spec, "https01")
        node = nodes.boot("lab-https-1", user_data)
        nodes.wait_cloud_init("lab-https-1")
        steps = _steps(node.root)
        failed = {k: s["output_tail"][-900:] for k, s in steps.items() if not s["ok"]}
        assert not failed, failed
        assert {"fetch", "packages", "validate-login-user", "enroll", "agent-install", "report"} <= set(steps)
        # the CA reached the node in its user_data (public: 0644) and its trust store before the first https call
        ca = node.root / "etc/gpuaas/ca.pem"
        assert stat.S_IMODE(ca.stat().st_mode) == 0o644 and "# gpuaas-ca: " in ca.read_text()
        assert (node.root / "usr/local/share/ca-certificates/gpuaas/gpuaas-ca-0.crt").exists()
        assert "private CA certificate(s)" in steps["fetch"]["output_tail"]
        # the vendor packages came from the signed repository over https, through its own keyring
        for pkg in REPO_PACKAGES:
            r = nodes.exec("lab-https-1", ["dpkg-query", "-W", "-f", "${Status} ${Version}", pkg])
            assert r.stdout == "install ok installed 1.0", (pkg, r.stdout, r.stderr)
        sources = (node.root / "etc/apt/sources.list.d/gpuaas-lab.sources").read_text()
        assert f"URIs: {site.urls['repo']}/" in sources and "Signed-By: /etc/apt/keyrings/gpuaas-lab.asc" in sources
        assert (node.root / "etc/apt/keyrings/gpuaas-lab.asc").read_bytes() == site.repo.public_key
        assert f"key {site.repo.fingerprint} verified" in steps["packages"]["output_tail"]
        # the login user of the profile, made by the node's cloud-init, checked by the node's validation
        entry = nodes.exec("lab-https-1", ["getent", "passwd", "hpcadmin"]).stdout
        assert entry.rstrip().endswith(":/bin/bash")
        assert SSH_KEY in (node.root / "home/hpcadmin/.ssh/authorized_keys").read_text()
        assert "adm" in nodes.exec("lab-https-1", ["id", "-nG", "hpcadmin"]).stdout.split()
        assert "login user hpcadmin: as declared" in steps["validate-login-user"]["output_tail"]
        # enrolled over https from the node itself; the agent package came over https too
        record = site.admin.wait_for_node(node_id, timeout_s=20)
        assert record.status is NodeStatus.ACTIVE and record.bootstrap is not None
        # (the platform sees the TLS front as its caller: the front relays the node's connection)
        assert site.platform.enroll_caller(node_id) == nodes.gateway
        assert "platform: 200" in steps["enroll"]["output_tail"]
        assert nodes.exec("lab-https-1", ["systemctl", "is-active", "gpuaas-node-agent.service"]).stdout.strip() == \
            "active"


def test_another_ca_a_missing_key_and_an_unknown_package_each_stop_their_step_naming_it(
        site_on_lab: Callable[..., Any], tmp_path: Path) -> None:
    hosts = ["lab-wrong-ca", "lab-no-key", "lab-no-pkg"]
    with site_on_lab(hosts) as (nodes, site):
        (tmp_path / "other").mkdir()
        other = PrivateCa(tmp_path / "other", common_name="some other CA")
        wrong_ca = node_ca_bundle({"ca_bundles.s3": str(other.bundle)})
        cases = {
            "lab-wrong-ca": (site.context(node_ca=wrong_ca), site.spec("lab-wrong-ca", "wrong01", _bundle(site))),
            "lab-no-key": (site.context(), site.spec("lab-no-key", "nokey01", _bundle(site),
                                                     key_object="apt-keys/missing.asc")),
            "lab-no-pkg": (site.context(), site.spec("lab-no-pkg", "nopkg01",
                                                     _bundle(site, ("gpuaas-lab-driver", "gpuaas-lab-absent")))),
        }
        ids, booted = {}, {}
        for host, (ctx, spec) in cases.items():
            ids[host], user_data = site.user_data(ctx, spec, host.replace("lab-", "").replace("-", "") + "01")
            booted[host] = nodes.boot(host, user_data)
        for host in hosts:
            nodes.wait_cloud_init(host)
        tails = {h: {k: s["output_tail"] for k, s in _steps(n.root).items() if not s["ok"]} for h, n in booted.items()}
        s3_host = site.urls["s3"].removeprefix("https://")
        fetch = tails["lab-wrong-ca"]
        assert list(fetch) == ["fetch"], fetch
        assert f"the TLS certificate of {s3_host} is not trusted" in fetch["fetch"]
        assert "some other CA" in fetch["fetch"] and "ca_bundles.s3" in fetch["fetch"], fetch["fetch"]
        assert "X-Amz-Signature" not in fetch["fetch"]
        key = tails["lab-no-key"]
        assert list(key) == ["packages"], key
        assert "apt source lab (" in key["packages"] and "apt-keys/missing.asc is missing from the artifact store" \
            in key["packages"] and "packages that need it: gpuaas-lab-driver, gpuaas-lab-runtime" in key["packages"]
        pkg = tails["lab-no-pkg"]
        assert list(pkg) == ["packages"], pkg
        assert f"package gpuaas-lab-absent not found: apt source lab ({site.urls['repo']}/ lab main)" in pkg["packages"]
        # the node with the other CA cannot report either (the platform's certificate is the same CA's): its log says
        # so; the others reported their failure to the platform; none enrolled
        log = (booted["lab-wrong-ca"].root / "var/log/gpuaas-launcher.log").read_text()
        assert "reported to the platform: 0 tls-untrusted platform API: the TLS certificate of" in log, log[-1500:]
        assert site.admin.get_node(ids["lab-wrong-ca"]).bootstrap is None
        for host, step in (("lab-no-key", "packages"), ("lab-no-pkg", "packages")):
            record = site.admin.get_node(ids[host])
            assert record.bootstrap is not None and record.bootstrap.failed_step == step, (host, record.bootstrap)
            assert record.status is NodeStatus.BOOTSTRAP_ISSUED
        # the GPU lane's health check on a node that did not bootstrap: it says which step failed, and more
        shutil.copy(HEALTH, booted["lab-no-key"].root / "usr/local/bin/gpuaas-node-health")
        r = nodes.exec("lab-no-key", ["/usr/local/bin/gpuaas-node-health"])
        assert r.returncode == 1, r.stdout
        assert "FAIL bootstrap: outcome failed, failed step packages" in r.stdout
        assert "FAIL token: /etc/gpuaas/enrollment.json is still there" in r.stdout and "FAIL agent:" in r.stdout


def test_the_weka_client_comes_from_the_vendor_repository_and_the_mounts_require_it(
        site_on_lab: Callable[..., Any]) -> None:
    """A pool's WEKA mounts (no lab stand-in: a real `Type=wekafs` unit) on a node whose profile names the vendor
    source of the client: the mounts step installs `weka-agent` from the signed repository first, the unit requires
    its agent, and the mount comes up (the client package here is a LAB STAND-IN whose mount helper mounts a
    tmpfs). A set whose client package the repository lacks stops the mounts step naming the package."""
    decl = {"fs_name": "training", "backends": ["weka-lab-01.gpuaas.internal"], "mount_point": "/mnt/weka/training",
            "purpose": "training"}
    with site_on_lab(["lab-weka-1", "lab-weka-2"]) as (nodes, site):
        good = MountSet(name="pool-lab", mounts=(MountDecl(**decl, client_package="weka-agent"),))
        bad = MountSet(name="pool-lab", mounts=(MountDecl(**decl, client_package="weka-client-absent"),))
        booted = {}
        for host, sets in (("lab-weka-1", (good,)), ("lab-weka-2", (bad,))):
            bundle = _bundle(site).model_copy(update={"mounts": sets})
            spec = site.spec(host, host.replace("-", ""), bundle)
            _, user_data = site.user_data(site.context(), spec, host.replace("-", ""))
            booted[host] = nodes.boot(host, user_data)
        for host in booted:
            nodes.wait_cloud_init(host)
        steps = _steps(booted["lab-weka-1"].root)
        failed = {k: (s["exit_code"], s["duration_s"], s["output_tail"][-1500:])
                  for k, s in steps.items() if not s["ok"]}
        assert not failed, failed
        assert "WEKA client installed: weka-agent" in steps["mounts"]["output_tail"]
        show = nodes.exec("lab-weka-1", ["systemctl", "show", "-p", "Requires", "-p", "ActiveState",
                                         "mnt-weka-training.mount"]).stdout
        assert "weka-agent.service" in show.split("Requires=")[1].splitlines()[0] and "ActiveState=active" in show
        assert nodes.exec("lab-weka-1", ["systemctl", "is-active", "weka-agent.service"]).stdout.strip() == "active"
        assert nodes.exec("lab-weka-1", ["findmnt", "-n", "-o", "FSTYPE", "/mnt/weka/training"]).stdout.strip() \
            == "tmpfs"
        failed = {k: s["output_tail"] for k, s in _steps(booted["lab-weka-2"].root).items() if not s["ok"]}
        assert list(failed) == ["mounts"], failed
        assert "the WEKA client package(s) weka-client-absent could not be installed" in failed["mounts"]
