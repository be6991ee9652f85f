"""The node side, for real: the launcher the deploy user_data carries, run with bash against a temporary
root (GPUAAS_ROOT), fetching its bundle from moto's S3 server through a presigned URL and enrolling with
the platform simulator, both on 127.0.0.1.

A "node" here is what cloud-init would have made of the user_data: its write_files written with their
permissions under the root, the launcher's pinned sha256 checked, the launcher run. Tools of a node OS
(apt-get, cloud-init, disks, systemd) are test doubles (tests/node/fake_os, each call logged); GPU and
fabric tools are the lab stand-ins (lab/node_standins).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from clients.platform import PlatformClient, models
from clients.s3 import ArtifactStore, S3Credentials, S3Location
from providers.machines.cloud_init import LAUNCHER, render_user_data
from providers.machines.runtime import bundle_presigner
from providers.machines.spec import BundlePin, MachineSpec
from providers.sites.bundle import BundleProfile, BundleSite, BundleSpec, Packages, digest, pack, render_bundle
from simulators.localstack import LAB_NODE_PROFILE
from simulators.s3 import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, MotoS3Server
from tests.fixtures.platform_sim import RunningSim, platform_sim_factory  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
FAKE_OS = Path(__file__).resolve().parent / "fake_os"
STANDINS = REPO / "lab" / "node_standins"
BUCKET = "gpuaas-bundles"
DEVICES = tuple(f"nvme{i}n1" for i in range(8))
# The profile's enrollment token TTL for nodes in these tests, in the platform simulator's time (100x fast): the
# policy's default 3600 s are 36 real seconds, and a node booting under the suite's load on a slower host can take
# longer than that from mint to enrollment (CI stop 36: the WEKA test's node). 18000 s are 180 real seconds.
NODE_TOKEN_TTL_S: int = LAB_NODE_PROFILE["enrollment_token_ttl_seconds"]
HOSTNAME, SYSTEM_ID = "lab-gpu-1", "abcd12"


def bundle_spec(packages: bool = True, **profile: Any) -> BundleSpec:
    """`packages=False`: empty package lists (an nspawn node has no mirror)."""
    lists = {"driver": ["nvidia-driver-550"], "runtime": ["nvidia-container-toolkit"], "fabric": ["rdma-core"]}
    return BundleSpec(
        name="lab-h200",
        site="lab",
        template_set="h200",
        packages=Packages(**(lists if packages else {})),
        site_context=BundleSite(name="lab"),
        profile=BundleProfile(**{"fabric_mode": "roce", "storage_layout_profile": "h200-boss-flat",
                                 "data_devices": DEVICES, **profile}),
        store={"endpoint_url": "http://127.0.0.1:1", "bucket": BUCKET, "credentials_path": "x/y#z"},
        vault={"address": "http://127.0.0.1:2"},
    )


def machine_spec(bundle_ref: str, bundle_digest: str, launcher_url: str,
                 validation: BundlePin | None = None) -> MachineSpec:
    spec = MachineSpec.model_validate({
        "hostname": HOSTNAME, "ipmi_address": "10.0.0.10", "pxe_mac": "aa:bb:cc:dd:ee:01", "sku": "h200",
        "site": "lab", "profile": "h200", "pxe_interface": "eno8303",
        "storage": {"layout_profile": "h200-boss-flat", "maas_layout": "flat", "boot_disk_hint": {}},
        "deploy": {"bundle_ref": bundle_ref, "bundle_digest": bundle_digest, "launcher_url": launcher_url},
    })
    if validation is None:
        return spec
    return spec.model_copy(update={"deploy": spec.deploy.model_copy(update={"validation_bundle": validation})})


@dataclass
class Node:
    """A deployed node's root directory and what the test knows about its deploy (never printed)."""

    root: Path
    node_id: str
    token: str
    url: str
    user_data: bytes
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)

    def boot(self) -> None:
        """What cloud-init does with the user_data: write_files with their permissions, then the pin check."""
        doc = yaml.safe_load(self.user_data)
        for f in doc["write_files"]:
            path = self.root / f["path"].lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f["content"])
            path.chmod(int(f["permissions"], 8))
        pinned = re.search(r'echo "([0-9a-f]{64})  ' + re.escape(LAUNCHER), doc["runcmd"][-1][2])
        assert pinned, "the runcmd pins the launcher's sha256"
        written = subprocess.run(["sha256sum", str(self.launcher)], capture_output=True, text=True, check=True)
        assert written.stdout.split()[0] == pinned.group(1), "the written launcher is the pinned one"

    @property
    def launcher(self) -> Path:
        return self.root / LAUNCHER.lstrip("/")

    def run(self, **env: str) -> subprocess.CompletedProcess[str]:
        path = f"{FAKE_OS}:{STANDINS}:{os.environ['PATH']}"
        full = {**os.environ, "PATH": path, "GPUAAS_ROOT": str(self.root), **env}
        # its own session: a fake tool may kill the whole group (a node losing power mid-launcher)
        proc = subprocess.run(["bash", str(self.launcher)], capture_output=True, text=True, env=full, timeout=120,
                              start_new_session=True)
        self.runs.append(proc)
        return proc

    def steps(self) -> dict[str, dict[str, Any]]:
        out = {}
        for p in sorted((self.root / "var/lib/gpuaas/steps").glob("*.json")):
            out[p.stem] = json.loads(p.read_text())
        return out

    def calls(self) -> list[str]:
        log = self.root / "var/log/fake-os-calls.log"
        return log.read_text().splitlines() if log.exists() else []


@dataclass
class NodeWorld:
    s3: MotoS3Server
    platform: RunningSim
    admin: PlatformClient
    site_id: str
    profile_id: str
    store: ArtifactStore
    bundle_digest: str
    bundle_ref: str
    launcher_url: str
    tmp: Path

    def publish(self, name: str, **values: Any) -> BundlePin:
        """Another bundle (template set h200, rendered with `values`) in the store: e.g. a profile's
        post-deploy validation bundle."""
        spec = bundle_spec(True).model_copy(update={"name": name, "values": values})
        blob = pack(render_bundle(spec))
        d = digest(blob)
        obj = self.store.put(spec.key(d), blob, {"digest": d})
        return BundlePin(ref=f"s3://{BUCKET}/{obj.key}", digest=d,
                         url=f"{self.s3.endpoint_url}/{BUCKET}/{obj.key}?versionId={obj.version_id}")

    def user_data(self, *, pinned_digest: str | None = None, url_ttl: int = 900,
                  validation: BundlePin | None = None) -> tuple[str, str, str, bytes]:
        """What the lifecycle's deploy does: mint a token, presign the bundle (and the validation bundle
        `validation`, when given), render the user_data. Returns (node id, token, presigned URL, user_data)."""
        grant = self.admin.mint_enrollment_token(
            self.site_id,
            models.EnrollmentTokenRequest(profile_id=self.profile_id, hostname=HOSTNAME, system_id=SYSTEM_ID),
        )
        spec = machine_spec(self.bundle_ref, pinned_digest or self.bundle_digest, self.launcher_url, validation)
        url = bundle_presigner(self.store)(spec, url_ttl)
        vurl = bundle_presigner(self.store)(spec, url_ttl, validation) if validation else ""
        token = grant.enrollment_token.get_secret_value()
        user_data = render_user_data(spec, platform_url=self.platform.url, node_id=grant.node_id, token=token,
                                     system_id=SYSTEM_ID, bundle_url=url, validation_url=vurl)
        return grant.node_id, token, url, user_data

    def deploy(self, *, pinned_digest: str | None = None, url_ttl: int = 900,
               validation: BundlePin | None = None) -> Node:
        """A deploy onto a temporary root, booted as cloud-init would (not yet run)."""
        node_id, token, url, user_data = self.user_data(pinned_digest=pinned_digest, url_ttl=url_ttl,
                                                        validation=validation)
        root = self.tmp / f"node-{node_id}"
        root.mkdir()
        node = Node(root=root, node_id=node_id, token=token, url=url, user_data=user_data)
        node.boot()
        return node

    def node_record(self, node_id: str) -> models.Node:
        return self.admin.get_node(node_id)


@contextmanager
def world_at(
    tmp_path: Path, platform: RunningSim, host: str = "127.0.0.1", packages: bool = True,
    extra_files: dict[str, bytes] | None = None, **bundle_profile: Any
) -> Iterator[NodeWorld]:
    """The artifact store (moto, private bucket) on `host` with the bundle published, and the platform's
    site and profile. `host`: 127.0.0.1, or a lab network's gateway for nspawn nodes. `extra_files`: added
    to the rendered bundle (e.g. a cloud-init part with a runcmd)."""
    admin = PlatformClient(platform.url, platform.creds.platform_admin)
    site = admin.create_site(models.MaasSiteCreate(
        name="lab", maas_url="http://127.0.0.1:9/MAAS", credential_ref=models.VaultCredentialRef(path="lab/maas")))
    policy = models.SiteProfilePolicy(enrollment_token_ttl_seconds=NODE_TOKEN_TTL_S)
    profile = admin.create_profile(site.site_id, models.SiteProfileCreate(name="h200", policy=policy))
    with MotoS3Server(private=True, host=host) as s3:
        s3.create_bucket(BUCKET)
        store = ArtifactStore(
            S3Location(endpoint_url=s3.endpoint_url, bucket=BUCKET),
            S3Credentials(access_key_id=FAKE_ACCESS_KEY_ID, secret_access_key=FAKE_SECRET_ACCESS_KEY),
        )
        spec = bundle_spec(packages, **bundle_profile)
        blob = pack({**render_bundle(spec), **(extra_files or {})})
        d = digest(blob)
        obj = store.put(spec.key(d), blob, {"digest": d})
        yield NodeWorld(
            s3=s3, platform=platform, admin=admin, site_id=site.site_id, profile_id=profile.profile_id,
            store=store, bundle_digest=d, bundle_ref=f"s3://{BUCKET}/{obj.key}",
            launcher_url=f"{s3.endpoint_url}/{BUCKET}/{obj.key}?versionId={obj.version_id}", tmp=tmp_path,
        )
        admin.close()


@pytest.fixture
def node_world(tmp_path: Path, platform_sim_factory: Any) -> Iterator[NodeWorld]:  # noqa: F811
    with world_at(tmp_path, platform_sim_factory()) as world:
        yield world
