"""WEKA POSIX mounts as systemd mount units (seed 000 §2: WEKAFS is the primary path, S3 the object path).

Pure rendering, shared by the two ways a node gets its mounts: host roles (lab hosts) and the node bundle
(MAAS machines; wiring still to do, see docs/weka-mounts.md). A unit mounts `<backend>[,<backend>...]/<fs>`
with type `wekafs` and the options a WEKA client needs (`_netdev`: a network filesystem, ordered after the
network is up; `x-systemd.requires=weka-agent.service`: the client container must run first); the
environment's own options follow. In the lab, which has no WEKA cluster, a drop-in replaces What/Type with
the disclosed stand-in (tmpfs) and says so; the unit itself stays the real one.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

WEKA_OPTIONS = ("_netdev", "x-systemd.requires=weka-agent.service", "x-systemd.after=network-online.target")
STAND_IN_NOTE = "lab stand-in: no WEKA cluster in the lab; the unit above is the one a real WEKA client mounts"


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
                 purpose: str, stand_in: str | None) -> MountUnit:
    opts = [*WEKA_OPTIONS, *(["ro"] if read_only else []), *options]
    unit = "\n".join([
        "[Unit]",
        f"Description=WEKA filesystem {fs_name} ({purpose}) at {mount_point}",
        "Wants=network-online.target",
        "After=network-online.target",
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
