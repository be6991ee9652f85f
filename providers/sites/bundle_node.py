"""The files a bundle carries for what its profile adds to a node beyond the templates (docs/node-bootstrap.md):
its vendor apt sources (`apt/sources.json` and the helper `apt/gpuaas-apt.py` the packages step runs) and the
check of its login user (`validation/05-login-user.sh`). Added only when the profile declares them, so a
bundle without either keeps its bytes (and its digest)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from pydantic import BaseModel, ConfigDict

APT_HELPER = Path(__file__).resolve().parent / "node" / "gpuaas-apt.py"


class AptSourceSpec(BaseModel):
    """One vendor apt source as a bundle carries it (no secret: the key is public, fetched on the node)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    url: str
    suite: str
    components: tuple[str, ...] = ()
    fingerprint: str
    key_ref: str
    """`s3://<bucket>/<object>` of the signing key (what the node's error names when it is missing)."""
    packages: tuple[str, ...] = ()


class LoginUserCheck(BaseModel):
    """What a node's validation checks of the profile's login user (no key, no hash: counts and modes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    groups: tuple[str, ...] = ()
    shell: str = "/bin/bash"
    sudo: str = "none"
    ssh_keys: int = 0
    password_locked: bool = True
    """Locked (SSH keys only), or a usable password (a hash the deploy read from Vault)."""


def _login_check(user: LoginUserCheck) -> str:
    q = shlex.quote
    groups = " ".join(q(g) for g in user.groups)
    return f"""#!/bin/bash
# --- Start MAAS 1.0 script metadata ---
# name: gpuaas-login-user
# title: GPUaaS login user {user.name}
# description: The profile's login user exists as declared (seed 001).
# script_type: testing
# --- End MAAS 1.0 script metadata ---
# Written by providers/sites/bundle_node.py from the profile's login_user ({user.name}).
set -u
user={q(user.name)}
fail() {{ echo "login user $user: $*"; exit 1; }}
entry=$(getent passwd "$user") || fail "does not exist"
shell=$(echo "$entry" | cut -d: -f7)
[ "$shell" = {q(user.shell)} ] || fail "shell is $shell, not {user.shell}"
for g in {groups}; do id -nG "$user" | tr ' ' '\\n' | grep -qx "$g" || fail "not in group $g"; done
home=$(echo "$entry" | cut -d: -f6)
keys=$(grep -c '^ssh-\\|^ecdsa-' "$home/.ssh/authorized_keys" 2>/dev/null || true)
[ "${{keys:-0}}" -ge {user.ssh_keys} ] || fail "has ${{keys:-0}} SSH key(s), the profile declares {user.ssh_keys}"
status=$(passwd -S "$user" | awk '{{print $2}}')
case {"locked" if user.password_locked else "hash"} in
  locked) [ "$status" = L ] || fail "password is usable ($status), the profile locks it" ;;
  hash) [ "$status" = P ] || fail "has no usable password ($status), the profile sets a hash" ;;
esac
case {q(user.sudo)} in
  nopasswd) sudo -n -l -U "$user" 2>/dev/null | grep -q 'NOPASSWD: ALL' || fail "may not sudo without a password" ;;
  password) sudo -n -l -U "$user" 2>/dev/null | grep -q '(ALL) ALL' || fail "may not sudo" ;;
  none) ! sudo -n -l -U "$user" 2>/dev/null | grep -q ' ALL$' || fail "may sudo, the profile gives no sudo" ;;
esac
echo "login user $user: as declared (groups: {', '.join(user.groups) or 'none'}, sudo {user.sudo}, \
{user.ssh_keys} key(s), password {"locked" if user.password_locked else "set"})"
"""


def node_files(sources: tuple[AptSourceSpec, ...], login_user: LoginUserCheck | None) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    if sources:
        doc = {"sources": [s.model_dump(mode="json") for s in sources]}
        files["apt/sources.json"] = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
        files["apt/gpuaas-apt.py"] = APT_HELPER.read_bytes()
    if login_user is not None:
        files["validation/05-login-user.sh"] = _login_check(login_user).encode()
    return files
