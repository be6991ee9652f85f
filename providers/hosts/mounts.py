"""WEKA POSIX mounts as systemd mount units (seed 000 §2: WEKAFS is the primary path, S3 the object path).

Pure rendering, shared by the two ways a node gets its mounts (docs/weka-mounts.md): the host roles
(lab hosts: `gpuaas_mounts` in the inventory, installed by the `common` role) and the node bundle (MAAS
machines: `mounts/<set>/` in the bundle, installed by the first-boot launcher through `install-mounts.sh`).
A unit mounts `<backend>[,<backend>...]/<fs>` with type `wekafs` and the options a WEKA client needs
(`_netdev`: a network filesystem, ordered after the network is up; `x-systemd.requires=weka-agent.service`:
the client container must run first; the [Unit] section says the same as Wants/After, which a native unit
file needs since only fstab's generator reads x-systemd options); the environment's own options follow.
Where a filesystem declares a lab stand-in (no WEKA cluster), a drop-in replaces What/Type/Options with the
stand-in (tmpfs) and says so; the unit itself stays the real one.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from providers.wire import LabStandIn, MountPurpose, Wire

WEKA_OPTIONS = ("_netdev", "x-systemd.requires=weka-agent.service", "x-systemd.after=network-online.target")
STAND_IN_NOTE = "lab stand-in: no WEKA cluster in the lab; the unit above is the one a real WEKA client mounts"
DROP_IN = "lab-stand-in.conf"


class MountDecl(Wire):
    """One mount as a node receives it (compiled from the environment's filesystems + storage_mounts)."""

    fs_name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    backends: tuple[str, ...] = Field(min_length=1)
    mount_point: str = Field(pattern=r"^/[A-Za-z0-9_./-]{1,200}$")
    purpose: MountPurpose
    options: tuple[str, ...] = ()
    read_only: bool = False
    stand_in: LabStandIn | None = None
    client_package: str | None = None
    """The WEKA client package a MAAS machine installs before mounting (from a vendor apt source); None for lab
    hosts and stand-ins. With it, the unit requires the client's `weka-agent.service` (not only wants it)."""


class MountUnit(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str  # e.g. mnt-weka-training.mount
    unit: str
    drop_in: str | None = None  # <name>.d/lab-stand-in.conf, only where a stand-in is declared


def unit_name(mount_point: str) -> str:
    """systemd's path escaping for the common case: `/mnt/weka/training` -> `mnt-weka-training.mount`."""
    parts = [p.replace("-", "\\x2d") for p in mount_point.strip("/").split("/") if p]
    return "-".join(parts) + ".mount"


def render_mount(*, fs_name: str, backends: list[str], mount_point: str, options: list[str], read_only: bool,
                 purpose: str, stand_in: str | None, client_package: str | None = None) -> MountUnit:
    opts = [*WEKA_OPTIONS, *(["ro"] if read_only else []), *options]
    # a machine that installs the client requires it: no mount attempt without the WEKA agent running
    requires = [f"# the WEKA client (package {client_package}) runs first", "Requires=weka-agent.service"] \
        if client_package else []
    unit = "\n".join([
        "[Unit]",
        f"Description=WEKA filesystem {fs_name} ({purpose}) at {mount_point}",
        "Wants=network-online.target weka-agent.service",
        *requires,
        "After=network-online.target weka-agent.service",
        "",
        "[Mount]",
        f"What={','.join(backends)}/{fs_name}",
        f"Where={mount_point}",
        "Type=wekafs",
        f"Options={','.join(opts)}",
        "",
        "[Install]",
        "WantedBy=remote-fs.target",
        "",
    ])
    drop_in = None
    if stand_in:
        drop_in = "\n".join([f"# {STAND_IN_NOTE}", "[Mount]", f"What={stand_in}", f"Type={stand_in}",
                             f"Options=mode=0755{',ro' if read_only else ''}", ""])
    return MountUnit(name=unit_name(mount_point), unit=unit, drop_in=drop_in)


def render(decl: MountDecl) -> MountUnit:
    return render_mount(fs_name=decl.fs_name, backends=list(decl.backends), mount_point=decl.mount_point,
                        options=list(decl.options), read_only=decl.read_only, purpose=decl.purpose.value,
                        stand_in=decl.stand_in.value if decl.stand_in else None,
                        client_package=decl.client_package if not decl.stand_in else None)


def unit_files(mounts: tuple[MountDecl, ...], prefix: str = "") -> dict[str, str]:
    """path -> text: `<unit>` and, for a stand-in, `<unit>.d/lab-stand-in.conf` (sorted by unit name)."""
    out: dict[str, str] = {}
    for u in sorted((render(m) for m in mounts), key=lambda u: u.name):
        out[f"{prefix}{u.name}"] = u.unit
        if u.drop_in is not None:
            out[f"{prefix}{u.name}.d/{DROP_IN}"] = u.drop_in
    return out


# --- the node bundle (MAAS machines) ------------------------------------------------------------

class MountSet(Wire):
    """The mounts of one pool (`pool-<name>`) or one standalone machine (`machine-<hostname>`) in a bundle.
    A machine installs the sets its `/etc/gpuaas/bundle.json` names (`mount_sets`, from its deploy spec)."""

    name: str = Field(pattern=r"^(pool|machine)-[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
    mounts: tuple[MountDecl, ...] = Field(min_length=1)


BUNDLE_DIR = "mounts"
INSTALLER = f"{BUNDLE_DIR}/install-mounts.sh"
_INSTALLER_TEXT = """#!/bin/bash
# Installs and starts this node's WEKA mount units (docs/weka-mounts.md). The bundle carries one
# directory per mount set (mounts/pool-<pool>/, mounts/machine-<hostname>/); the machine's deploy spec
# names its sets in /etc/gpuaas/bundle.json ("mount_sets"). A named set missing here is an error.
set -euo pipefail
BUNDLE_DIR="$(cd "$(dirname "$0")/.." && pwd)"
BUNDLE_JSON="${1:-/etc/gpuaas/bundle.json}"
UNIT_DIR="${GPUAAS_UNIT_DIR:-/etc/systemd/system}"
mapfile -t sets < <(python3 -c \\
  'import json,sys; print("\\n".join(json.load(open(sys.argv[1])).get("mount_sets", [])))' "$BUNDLE_JSON" | sed '/^$/d')
# the WEKA client first (its vendor apt source was added by the packages step): the units require its agent
clients=()
for s in "${sets[@]}"; do
  list="$BUNDLE_DIR/mounts/$s/client-packages"
  [ -f "$list" ] && mapfile -t -O "${#clients[@]}" clients < "$list"
done
if [ "${#clients[@]}" -gt 0 ]; then
  mapfile -t clients < <(printf '%s\\n' "${clients[@]}" | sed '/^$/d' | sort -u)
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${clients[@]}" || {
    echo "install-mounts: the WEKA client package(s) ${clients[*]} could not be installed (see apt above): check the" \\
      "filesystem's client.apt_source in the environment and that the profile names it" >&2
    exit 1
  }
  echo "install-mounts: WEKA client installed: ${clients[*]}"
fi
units=()
for s in "${sets[@]}"; do
  dir="$BUNDLE_DIR/mounts/$s"
  [ -d "$dir" ] || { echo "install-mounts: mount set $s is not in this bundle" >&2; exit 1; }
  for u in "$dir"/*.mount; do
    name="$(basename "$u")"
    install -D -m 0644 "$u" "$UNIT_DIR/$name"
    if [ -f "$dir/$name.d/lab-stand-in.conf" ]; then
      install -D -m 0644 "$dir/$name.d/lab-stand-in.conf" "$UNIT_DIR/$name.d/lab-stand-in.conf"
    fi
    units+=("$name")
  done
done
[ "${#units[@]}" -eq 0 ] && exit 0
systemctl daemon-reload
systemctl enable "${units[@]}"
failed=0
for u in "${units[@]}"; do
  systemctl start "$u" && continue
  failed=1
  what="$(systemctl show -p What --value "$u" 2>/dev/null || true)"
  echo "install-mounts: $u did not mount $what (a WEKA filesystem that does not exist on its backends," \\
    "or backends the client cannot reach); fix: check filesystems[].fs_name and backends in the environment;" \\
    "journal: $(journalctl -u "$u" -n 5 --no-pager 2>/dev/null | tr '\\n' ' ' || true)" >&2
done
exit "$failed"
"""


def bundle_files(sets: tuple[MountSet, ...]) -> dict[str, bytes]:
    """The bundle's `mounts/` tree: every set's units and the installer; nothing when no set mounts anything."""
    if not sets:
        return {}
    files = {p: t.encode() for s in sorted(sets, key=lambda s: s.name)
             for p, t in unit_files(s.mounts, f"{BUNDLE_DIR}/{s.name}/").items()}
    for s in sets:  # the WEKA client packages the set's real (not stand-in) mounts need, when any
        clients = sorted({m.client_package for m in s.mounts if m.client_package and not m.stand_in})
        if clients:
            files[f"{BUNDLE_DIR}/{s.name}/client-packages"] = ("\n".join(clients) + "\n").encode()
    return {**files, INSTALLER: _INSTALLER_TEXT.encode()}
