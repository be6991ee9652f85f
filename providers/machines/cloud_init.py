"""The deploy user_data: cloud-init that writes the enrollment file, the bundle pointer and the bundle
launcher, and runs the launcher once its sha256 matches the one pinned here (docs/node-bootstrap.md).

Files it writes on the node, all 0600/0700 and root's: `/etc/gpuaas/enrollment.json` (the single-use
enrollment token), `/etc/gpuaas/bundle.json` (the bundle ref, its sha256 and the short-lived presigned
URL: a credential while it lives), `/usr/local/sbin/gpuaas-bundle-launcher`. cloud-init itself keeps
the whole document under `/var/lib/cloud/instance/` (root-only: user-data.txt is 0600).

The rendered document holds the token and the URL, so it is never an output: outputs carry
`user_data_digest`, the digest of the document with both (and the per-attempt node id) masked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import yaml

from .spec import MachineSpec

ENROLLMENT_PATH = "/etc/gpuaas/enrollment.json"
BUNDLE_PATH = "/etc/gpuaas/bundle.json"
LAUNCHER = "/usr/local/sbin/gpuaas-bundle-launcher"
UNIT = "gpuaas-bundle-launcher.service"
UNIT_PATH = f"/etc/systemd/system/{UNIT}"
LAUNCHER_SOURCE = Path(__file__).resolve().parent / "node" / "gpuaas-bundle-launcher.sh"
MASK = "<enrollment-token>"
URL_MASK = "<presigned-bundle-url>"


@cache
def launcher_text() -> str:
    return LAUNCHER_SOURCE.read_text()


def launcher_digest() -> str:
    return hashlib.sha256(launcher_text().encode()).hexdigest()


def _document(spec: MachineSpec, platform_url: str, node_id: str, token: str, bundle_url: str, system_id: str,
              validation_url: str = "") -> str:
    pin = spec.deploy.validation_bundle
    bundle = {
        "ref": spec.deploy.bundle_ref,
        "sha256": spec.deploy.bundle_digest,
        "url": bundle_url,
        # the bundle's mount sets this machine installs (its pool's, its own); absent when none
        **({"mount_sets": list(spec.deploy.mount_sets)} if spec.deploy.mount_sets else {}),
        # the post-deploy validation bundle (the profile's), whose validation scripts the node runs; absent
        # when the profile sets none (or names the machine's own bundle): the site bundle's run
        **({"validation": {"ref": pin.ref, "sha256": pin.digest, "url": validation_url}} if pin else {}),
    }
    enrollment = {
        "platform_url": platform_url,
        "node_id": node_id,
        "enrollment_token": token,
        "hostname": spec.hostname,
        "system_id": system_id,
    }
    return _dump(spec.hostname, enrollment, bundle)


def _pinned_run() -> str:
    """Run the launcher only if it is byte for byte the one this user_data pins."""
    return (f'echo "{launcher_digest()}  {LAUNCHER}" | sha256sum -c --status && exec {LAUNCHER} '
            f'|| {{ echo "gpuaas: {LAUNCHER} does not match its pinned sha256" >&2; exit 1; }}')


def _unit() -> str:
    """Boots after the first: cloud-init runs runcmd once per instance, so a node restarted mid-launcher
    resumes through this unit until it has enrolled (the token file is gone then)."""
    return (
        "[Unit]\nDescription=GPUaaS bundle launcher (resumes a bootstrap a restart interrupted)\n"
        # not After=cloud-final.service: cloud-final is ordered after multi-user.target (an ordering cycle)
        "After=network-online.target\nWants=network-online.target\n"
        f"ConditionPathExists={ENROLLMENT_PATH}\n\n"
        f"[Service]\nType=oneshot\nExecStart=/bin/sh -c '{_pinned_run()}'\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


# libyaml's emitter when PyYAML has it (its wheels do): 0.5 ms instead of 11 ms per deploy's user_data,
# same document (only line folding differs).
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _dump(hostname: str, enrollment: Mapping[str, str], bundle: Mapping[str, object]) -> str:
    root = {"owner": "root:root"}
    doc = {
        "hostname": hostname,
        "write_files": [
            {"path": ENROLLMENT_PATH, "permissions": "0600", **root, "content": json.dumps(enrollment, sort_keys=True)},
            {"path": BUNDLE_PATH, "permissions": "0600", **root, "content": json.dumps(bundle, sort_keys=True)},
            {"path": LAUNCHER, "permissions": "0700", **root, "content": launcher_text()},
            {"path": UNIT_PATH, "permissions": "0644", **root, "content": _unit()},
        ],
        "runcmd": [["systemctl", "enable", UNIT], ["/bin/sh", "-c", _pinned_run()]],
    }
    return "#cloud-config\n" + yaml.dump(doc, Dumper=_DUMPER, sort_keys=True, width=1000)


def render_user_data(
    spec: MachineSpec, *, platform_url: str, node_id: str, token: str, system_id: str = "", bundle_url: str = "",
    validation_url: str = "",
) -> bytes:
    return _document(spec, platform_url, node_id, token, bundle_url, system_id, validation_url).encode()


def user_data_digest(spec: MachineSpec, platform_url: str) -> str:
    """Stable digest of the user_data with the per-attempt node id, token and presigned URL masked."""
    masked = _document(spec, platform_url, "<node-id>", MASK, URL_MASK, "<system-id>", URL_MASK)
    return hashlib.sha256(masked.encode()).hexdigest()
