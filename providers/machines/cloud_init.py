"""The deploy user_data: cloud-init that enrolls the node and runs the site bundle launcher.

The node verifies the bundle's sha256 digest before running it; the enrollment token is single-use
and short-lived (the profile's TTL). The rendered document holds the token, so it is never an output:
outputs carry `user_data_digest`, the digest of the document with the token masked.
"""

from __future__ import annotations

import hashlib
import json

import yaml

from .spec import MachineSpec

ENROLLMENT_PATH = "/etc/gpuaas/enrollment.json"
BUNDLE_PATH = "/etc/gpuaas/bundle.json"
LAUNCHER = "/usr/local/sbin/gpuaas-bundle-launcher"
MASK = "<enrollment-token>"


def _document(spec: MachineSpec, platform_url: str, node_id: str, token: str) -> str:
    bundle = {
        "ref": spec.deploy.bundle_ref,
        "sha256": spec.deploy.bundle_digest,
        "launcher_url": spec.deploy.launcher_url,
        # the bundle's mount sets this machine installs (its pool's, its own); absent when none
        **({"mount_sets": list(spec.deploy.mount_sets)} if spec.deploy.mount_sets else {}),
    }
    enrollment = {"platform_url": platform_url, "node_id": node_id, "enrollment_token": token}
    doc = {
        "hostname": spec.hostname,
        "write_files": [
            {
                "path": ENROLLMENT_PATH,
                "permissions": "0600",
                "owner": "root:root",
                "content": json.dumps(enrollment, sort_keys=True),
            },
            {"path": BUNDLE_PATH, "permissions": "0644", "content": json.dumps(bundle, sort_keys=True)},
        ],
        # The launcher fetches the bundle by ref, refuses it unless sha256 matches, then runs it;
        # the bundle's first-boot unit enrolls the node with the token above and deletes it.
        "runcmd": [[LAUNCHER, "--bundle", BUNDLE_PATH, "--enrollment", ENROLLMENT_PATH]],
    }
    return "#cloud-config\n" + yaml.safe_dump(doc, sort_keys=True, width=1000)


def render_user_data(spec: MachineSpec, *, platform_url: str, node_id: str, token: str) -> bytes:
    return _document(spec, platform_url, node_id, token).encode()


def user_data_digest(spec: MachineSpec, platform_url: str) -> str:
    """Stable digest of the user_data with the per-attempt node id and token masked."""
    return hashlib.sha256(_document(spec, platform_url, "<node-id>", MASK).encode()).hexdigest()
