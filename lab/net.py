"""The lab's network: its own namespaces, never the host's routes to real machines.

Layout for run `<id>` on a free private /24 (10.77.N.0/24):
  root netns:  veth `gpl<id>`  10.77.N.1/24  (the controller side: ansible-runner and the lab's web
               server live here, so tests reach the hosts without entering any namespace)
  `gpl-<id>`:  bridge br0 joining `up0` (peer of `gpl<id>`) and one `h<i>` per host
  `gpl-<id>-<i>`: `host0` 10.77.N.(11+i)/24 — the netns systemd-nspawn boots host i in.
Deleting the namespaces deletes every veth with them (teardown is two commands, and idempotent).
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

LAB_SUPERNET = ipaddress.IPv4Network("10.77.0.0/16")
FIRST_HOST_OFFSET = 11


class LabNetwork(BaseModel):
    model_config = ConfigDict(frozen=True)
    run_id: str
    subnet: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address
    lab_netns: str
    root_veth: str
    host_netns: dict[str, str]
    host_addresses: dict[str, ipaddress.IPv4Address]


def _ip(*args: str) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def _used_networks() -> list[ipaddress.IPv4Network]:
    used: list[ipaddress.IPv4Network] = []
    for a in json.loads(_ip("-j", "-4", "addr")):
        for info in a.get("addr_info", []):
            used.append(ipaddress.IPv4Network(f"{info['local']}/{info['prefixlen']}", strict=False))
    for r in json.loads(_ip("-j", "-4", "route")):
        if r.get("dst", "default") != "default":
            used.append(ipaddress.IPv4Network(r["dst"], strict=False))
    return used


def netns_names() -> list[str]:
    out = _ip("-j", "netns", "list").strip()
    return [n["name"] for n in json.loads(out)] if out else []


def create(run_id: str, hostnames: Sequence[str], lock_dir: Path) -> LabNetwork:
    """Allocate a free /24 and build the namespaces. On any failure, what was built is removed."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    with (lock_dir / "net.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two concurrent labs must not pick the same /24
        used = _used_networks()
        subnet = next((s for s in LAB_SUPERNET.subnets(new_prefix=24)
                       if not any(s.overlaps(u) for u in used)), None)
        if subnet is None:
            raise RuntimeError(f"no free /24 left in {LAB_SUPERNET} for the lab network")
        hosts = list(subnet.hosts())
        net = LabNetwork(
            run_id=run_id, subnet=subnet, gateway=hosts[0], lab_netns=f"gpl-{run_id}", root_veth=f"gpl{run_id}",
            host_netns={h: f"gpl-{run_id}-{i}" for i, h in enumerate(hostnames)},
            host_addresses={h: hosts[FIRST_HOST_OFFSET - 1 + i] for i, h in enumerate(hostnames)},
        )
        try:
            _build(net)
        except Exception:
            destroy(net)
            raise
    return net


def _build(net: LabNetwork) -> None:
    ln = net.lab_netns
    _ip("netns", "add", ln)
    _ip("-n", ln, "link", "set", "lo", "up")
    _ip("-n", ln, "link", "add", "br0", "type", "bridge")
    _ip("-n", ln, "link", "set", "br0", "up")
    _ip("link", "add", net.root_veth, "type", "veth", "peer", "name", "up0", "netns", ln)
    _ip("addr", "add", f"{net.gateway}/{net.subnet.prefixlen}", "dev", net.root_veth)
    _ip("link", "set", net.root_veth, "up")
    _ip("-n", ln, "link", "set", "up0", "master", "br0", "up")
    for i, (host, ns) in enumerate(net.host_netns.items()):
        _ip("netns", "add", ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ln, "link", "add", f"h{i}", "type", "veth", "peer", "name", "host0", "netns", ns)
        _ip("-n", ln, "link", "set", f"h{i}", "master", "br0", "up")
        _ip("-n", ns, "addr", "add", f"{net.host_addresses[host]}/{net.subnet.prefixlen}", "dev", "host0")
        _ip("-n", ns, "link", "set", "host0", "up")
        _ip("-n", ns, "route", "add", "default", "via", str(net.gateway))
        # nspawn mounts /proc/sys read-only: set what the container runtime would otherwise write.
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)


def destroy(net: LabNetwork) -> None:
    """Idempotent: removes the namespaces (and with them every veth and the bridge)."""
    existing = set(netns_names())
    for ns in [*net.host_netns.values(), net.lab_netns]:
        if ns in existing:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    subprocess.run(["ip", "link", "del", net.root_veth], capture_output=True)
