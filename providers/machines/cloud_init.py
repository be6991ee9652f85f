"""The deploy user_data: cloud-init that writes the enrollment file, the bundle pointer and the bundle
launcher, and runs the launcher once its sha256 matches the one pinned here (docs/node-bootstrap.md).

Files it writes on the node, all 0600/0700 and root's (but `/etc/gpuaas/ca.pem`, 0644: the environment's private
CAs, public certificates, when it names any; node_trust.py): `/etc/gpuaas/enrollment.json` (the single-use
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
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from .node_trust import CA_PATH
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


@dataclass(frozen=True)
class DeployMaterial:
    """What one deploy attempt adds to the spec: the node's identity and token, presigned URLs, the CAs and
    what the deploy read from Vault for the login user. Never logged, never an output."""

    node_id: str
    token: str
    system_id: str = ""
    bundle_url: str = ""
    validation_url: str = ""
    ca_pem: str = ""
    apt_key_urls: Mapping[str, str] = field(default_factory=dict)
    """apt source name -> presigned GET URL of its signing key."""
    ssh_keys: tuple[str, ...] = ()
    """The login user's public keys (read from Vault), in the order of its ssh_key_refs."""
    password_hash: str = ""


def _masked(spec: MachineSpec) -> DeployMaterial:
    keys = spec.deploy.apt_keys or ()
    user = spec.deploy.login_user
    return DeployMaterial(
        node_id="<node-id>", token=MASK, system_id="<system-id>", bundle_url=URL_MASK, validation_url=URL_MASK,
        apt_key_urls={k.source: URL_MASK for k in keys},
        ssh_keys=tuple(f"<ssh-key {r}>" for r in (user.ssh_key_refs if user else ())),
        password_hash="<password-hash>" if user and user.password_hash_ref else "",
    )


def _document(spec: MachineSpec, platform_url: str, mat: DeployMaterial) -> str:
    pin = spec.deploy.validation_bundle
    keys = spec.deploy.apt_keys or ()
    bundle = {
        "ref": spec.deploy.bundle_ref,
        "sha256": spec.deploy.bundle_digest,
        "url": mat.bundle_url,
        # the bundle's mount sets this machine installs (its pool's, its own); absent when none
        **({"mount_sets": list(spec.deploy.mount_sets)} if spec.deploy.mount_sets else {}),
        # the post-deploy validation bundle (the profile's), whose validation scripts the node runs; absent
        # when the profile sets none (or names the machine's own bundle): the site bundle's run
        **({"validation": {"ref": pin.ref, "sha256": pin.digest, "url": mat.validation_url}} if pin else {}),
        # the signing keys of the profile's vendor apt sources (the packages step fetches and checks them)
        **({"apt_keys": {k.source: {"ref": k.ref, "fingerprint": k.fingerprint,
                                    "url": mat.apt_key_urls.get(k.source, "")} for k in keys}} if keys else {}),
    }
    enrollment = {
        "platform_url": platform_url,
        "node_id": mat.node_id,
        "enrollment_token": mat.token,
        "hostname": spec.hostname,
        "system_id": mat.system_id,
    }
    return _dump(spec.hostname, enrollment, bundle, mat.ca_pem, _users(spec, mat))


def _users(spec: MachineSpec, mat: DeployMaterial) -> list[object] | None:
    """cloud-init's `users` for the profile's login user (seed 001), after the image's default user (MAAS
    puts its own SSH keys there); None when the profile declares none."""
    user = spec.deploy.login_user
    if user is None:
        return None
    entry: dict[str, object] = {"name": user.name, "shell": user.shell, "lock_passwd": not mat.password_hash}
    if user.groups:
        entry["groups"] = ", ".join(user.groups)
    if mat.ssh_keys:
        entry["ssh_authorized_keys"] = list(mat.ssh_keys)
    if mat.password_hash:
        entry["hashed_passwd"] = mat.password_hash
        if user.password_expire:
            entry["gpuaas_expire"] = True  # not cloud-init's: _dump turns it into a `chage -d 0` before the launcher
    sudo = {"nopasswd": "ALL=(ALL) NOPASSWD:ALL", "password": "ALL=(ALL) ALL"}.get(user.sudo)
    if sudo:
        entry["sudo"] = sudo
    return ["default", entry]


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


def _dump(hostname: str, enrollment: Mapping[str, str], bundle: Mapping[str, object], ca_pem: str = "",
          users: list[object] | None = None) -> str:
    root = {"owner": "root:root"}
    # the private CAs (public certificates) the launcher trusts before its first https call; absent when none
    trust = [{"path": CA_PATH, "permissions": "0644", **root, "content": ca_pem}] if ca_pem else []
    doc: dict[str, Any] = {
        "hostname": hostname,
        "write_files": [
            *trust,
            {"path": ENROLLMENT_PATH, "permissions": "0600", **root, "content": json.dumps(enrollment, sort_keys=True)},
            {"path": BUNDLE_PATH, "permissions": "0600", **root, "content": json.dumps(bundle, sort_keys=True)},
            {"path": LAUNCHER, "permissions": "0700", **root, "content": launcher_text()},
            {"path": UNIT_PATH, "permissions": "0644", **root, "content": _unit()},
        ],
        "runcmd": [["systemctl", "enable", UNIT], ["/bin/sh", "-c", _pinned_run()]],
    }
    if users is not None:
        doc["users"] = users
        expire = [u["name"] for u in users if isinstance(u, dict) and u.pop("gpuaas_expire", False)]
        # a password to change at the first login (cloud-init's chpasswd.expire covers only its own list)
        doc["runcmd"] = [*(["chage", "-d", "0", name] for name in expire), *doc["runcmd"]]
    return "#cloud-config\n" + yaml.dump(doc, Dumper=_DUMPER, sort_keys=True, width=1000)


def render_user_data(
    spec: MachineSpec, *, platform_url: str, node_id: str, token: str, system_id: str = "", bundle_url: str = "",
    validation_url: str = "", ca_pem: str = "", apt_key_urls: Mapping[str, str] | None = None,
    ssh_keys: tuple[str, ...] = (), password_hash: str = "",
) -> bytes:
    """`ca_pem`: the private CAs the node trusts (node_trust.node_ca_bundle), written to /etc/gpuaas/ca.pem;
    `apt_key_urls`: presigned URLs of the vendor apt sources' signing keys; `ssh_keys`, `password_hash`: the
    login user's, read from Vault."""
    mat = DeployMaterial(node_id=node_id, token=token, system_id=system_id, bundle_url=bundle_url,
                         validation_url=validation_url, ca_pem=ca_pem, apt_key_urls=dict(apt_key_urls or {}),
                         ssh_keys=ssh_keys, password_hash=password_hash)
    return _document(spec, platform_url, mat).encode()


def user_data_digest(spec: MachineSpec, platform_url: str, ca_pem: str = "") -> str:
    """Stable digest of the user_data with the per-attempt node id, token, presigned URLs and Vault reads masked."""
    masked = _document(spec, platform_url, replace(_masked(spec), ca_pem=ca_pem))
    return hashlib.sha256(masked.encode()).hexdigest()
