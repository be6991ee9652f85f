"""A real node (lab/node.py): a systemd-nspawn machine from the lab's cached image with Debian's
cloud-init, whose NoCloud seed is exactly the deploy's user_data. Real cloud-init writes the files and
runs the launcher; the node fetches its bundle from moto's S3 server and enrolls with the platform
simulator, both listening on the lab network's gateway address (the node's only route).

Like the lab tier (tests/lab/conftest.py): skipped, loudly, only where the machine cannot run nspawn
nodes at all (not root, packages missing); in CI that is a failure."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from typing import Any

import pytest

from clients.platform.client import PlatformClient
from clients.platform.models import NodeStatus
from clients.platform.models import nodes as node_models
from clients.platform.models import sites as site_models
from clients.s3 import ArtifactStore, S3Credentials, S3Location
from lab import preflight
from lab.node import NodeLab
from providers.machines.cloud_init import render_user_data
from providers.machines.runtime import bundle_presigner
from providers.sites.bundle import BundleProfile, digest, pack, render_bundle
from simulators.s3 import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, MotoS3Server
from tests.fixtures.platform_sim import TEST_TIME_SCALE, RunningSim

from .conftest import BUCKET, SYSTEM_ID, bundle_spec, machine_spec

HOST = "lab-node-1"


@pytest.fixture
def node_lab() -> Iterator[NodeLab]:
    reason = preflight()
    if reason:
        if os.environ.get("CI") and not reason.startswith("disabled"):
            pytest.fail(f"nspawn nodes cannot run in CI: {reason}")
        pytest.skip(f"nspawn nodes cannot run on this machine: {reason}")
    with NodeLab([HOST]) as nodes:
        yield nodes


def _world(gateway: str) -> tuple[MotoS3Server, RunningSim]:
    s3 = MotoS3Server(private=True, host=gateway).start()
    platform = RunningSim(time_scale=TEST_TIME_SCALE, host=gateway).start()
    platform.creds = platform.bootstrap()
    return s3, platform


def test_cloud_init_runs_the_deploy_user_data_and_the_node_enrolls_itself(node_lab: NodeLab) -> None:
    # size: one scenario, end to end: servers, bundle, token, user_data, boot, what the node did
    s3, platform = _world(node_lab.gateway)
    try:
        admin = PlatformClient(platform.url, platform.creds.platform_admin)
        site = admin.create_site(site_models.MaasSiteCreate(
            name="lab", maas_url="http://127.0.0.1:9/MAAS", credential_ref=site_models.VaultCredentialRef(path="x")))
        profile = admin.create_profile(site.site_id, site_models.SiteProfileCreate(
            name="h200", policy=site_models.SiteProfilePolicy()))
        s3.create_bucket(BUCKET)
        creds = S3Credentials(access_key_id=FAKE_ACCESS_KEY_ID, secret_access_key=FAKE_SECRET_ACCESS_KEY)
        store = ArtifactStore(S3Location(endpoint_url=s3.endpoint_url, bucket=BUCKET), creds)
        # No packages (the node has no route to a mirror), no data disks yet, no MAAS hw-sync timer here.
        spec = bundle_spec().model_copy(update={
            "packages": bundle_spec().packages.model_copy(update={"driver": [], "runtime": [], "fabric": []}),
            "profile": BundleProfile(fabric_mode="roce", storage_layout_profile="flat", require_hw_sync=False)})
        blob = pack(render_bundle(spec))
        d = digest(blob)
        obj = store.put(spec.key(d), blob, {"digest": d})
        url = f"{s3.endpoint_url}/{BUCKET}/{obj.key}?versionId={obj.version_id}"
        machine = machine_spec(f"s3://{BUCKET}/{obj.key}", d, url)
        machine = machine.model_copy(update={"hostname": HOST})
        grant = admin.mint_enrollment_token(site.site_id, node_models.EnrollmentTokenRequest(
            profile_id=profile.profile_id, hostname=HOST, system_id=SYSTEM_ID))
        token = grant.enrollment_token.get_secret_value()
        user_data = render_user_data(machine, platform_url=platform.url, node_id=grant.node_id, token=token,
                                     system_id=SYSTEM_ID, bundle_url=bundle_presigner(store)(machine, 900))

        node = node_lab.boot(HOST, user_data)
        node_lab.wait_cloud_init(HOST)
        steps_dir = node.root / "var/lib/gpuaas/steps"
        steps: dict[str, Any] = {p.stem: json.loads(p.read_text()) for p in steps_dir.glob("*.json")}
        log = (node.root / "var/log/gpuaas-launcher.log")
        failed = {k: s["output_tail"][-800:] for k, s in steps.items() if not s["ok"]}
        assert not failed, failed
        assert steps.get("enroll", {}).get("ok"), (log.read_text() if log.exists() else "no launcher log",
                                                   node.console.read_text(errors="replace")[-3000:])
        record = admin.wait_for_node(grant.node_id, timeout_s=20)
        assert record.status is NodeStatus.ACTIVE
        assert record.bootstrap is not None and record.bootstrap.bundle_digest == d
        assert [s.step for s in record.bootstrap.steps][:2] == ["fetch", "packages"]
        assert not (node.root / "etc/gpuaas/enrollment.json").exists(), "the token file is gone"
        # files holding user_data (the seed, cloud-init's copy) or the bundle URL are root-only
        instance = f"var/lib/cloud/instances/{node.instance_id}"
        for rel in ("var/lib/cloud/seed/nocloud/user-data", "etc/gpuaas/bundle.json",
                    "usr/local/sbin/gpuaas-bundle-launcher", f"{instance}/user-data.txt"):
            mode = stat.S_IMODE((node.root / rel).stat().st_mode)
            assert mode & 0o077 == 0, f"{rel} is {oct(mode)}"
        assert stat.S_IMODE(steps_dir.stat().st_mode) == 0o700
        assert "GPUAAS_FABRIC_MODE=roce" in (node.root / "etc/gpuaas/fabric.env").read_text()
        # the bundle's cloud-init part, applied by the node's own cloud-init
        assert "GPUAAS_HW_SYNC_INTERVAL=" in (node.root / "etc/gpuaas/hw-sync.env").read_text()
        admin.close()
    finally:
        platform.stop()
        s3.stop()
