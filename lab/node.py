"""Real nodes for the node side (issue 15): systemd-nspawn machines booted from the lab's cached image
plus Debian's cloud-init, whose NoCloud seed is exactly a deploy's user_data, so real cloud-init writes
its files and runs the launcher. Each node lives in its own network namespace of a lab network
(`lab/net.py`); the servers it talks to (artifact store, platform) listen on the lab's gateway address.

    with NodeLab(["lab-node-1"]) as nodes:           # network up; nothing booted yet
        nodes.gateway                                # 10.77.N.1: bind the simulators here
        node = nodes.boot("lab-node-1", user_data)   # overlay clone, seed, lab stand-ins, nspawn -b
        nodes.wait_cloud_init("lab-node-1")          # until cloud-init's boot-finished (or its failure)
        node.root / "var/lib/gpuaas/steps"           # the node's disk, read from the host

The MAAS simulator's NSPAWN backend (simulators/maas/nspawn.py) boots one node per deploy and one
ephemeral node per commission (its user_data: MAAS's script runner, which runs the registered
commissioning and testing scripts; simulators/maas/commissioning.py), each with the same `boot`.

The node image (`.lab/node-image-<key>/tree`) is the lab image with `cloud-init` and `locales` installed
from the Debian mirror once, cached; cloud-init is configured for NoCloud only, with networking left to
the lab (the namespace already has its address). The lab stand-ins of lab/node_standins (GPU and fabric
tools) are copied to /usr/local/bin of each node.

Data disks: `boot(..., data_disks=("nvme1n1", "nvme2n1"))` gives the node one sparse image file per
name (under the node's run directory), attached to a loop device on the host (`losetup --partscan`)
and bound into the node under that name (`--bind=/dev/loopN:/dev/nvme1n1`): the names are the storage
layout's `data_devices`, which the bundle's storage step formats. A node runs no udev, so the lab's
`udevadm` stand-in (and its unit, at every boot) makes the partition nodes and /dev/disk/by-label links
udev would. Data disks belong to the machine, not the boot: the images live under the run's
`disks/<hostname>/` and stay attached across the hostname's boots (a redeploy boots a fresh root only;
the data on them stays, as on real hardware), until `erase_disks(hostname)` (what a MAAS release with
disk erase does) drops them: the next boot attaches zeroed images. The loop devices are detached at
`stop`, always; `start` detaches those a killed run left behind. nspawn runs unregistered (`--register=no
--keep-unit`: no scope, so no device cgroup policy): the node can open the device nodes it has, which
are its own disks' and their partitions'.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from pydantic import BaseModel, ConfigDict

from . import net
from .image import MIRROR, SUITE, ImageBuildError, cache_key, ensure_image, failure_reason
from .lab import LAB_DIR, _Run, _undo, stale_run

NODE_PACKAGES = ("cloud-init", "locales")
NODE_REVISION = 2  # 2: en_US.UTF-8 generated (cloud-init's locale module failed on every boot)
STANDINS = Path(__file__).resolve().parent / "node_standins"
UDEV_STANDIN_UNIT = "gpuaas-lab-udev.service"
DATA_DISK_MB = 64
CLOUD_CFG = """# gpuaas lab node: the deploy's user_data comes from the NoCloud seed; the lab configured the network.
datasource_list: [ NoCloud, None ]
network: {config: disabled}
"""


def node_image_key() -> str:
    spec = f"{cache_key()}/{','.join(NODE_PACKAGES)}/{NODE_REVISION}"
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


def ensure_node_image(lab_dir: Path = LAB_DIR) -> Path:
    """The node tree, built once from the lab image (under a lock: concurrent runs build once)."""
    final = lab_dir / f"node-image-{node_image_key()}"
    lab_dir.mkdir(parents=True, exist_ok=True)
    with (lab_dir / "image.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / "READY").exists():
            return final / "tree"
    base = ensure_image(lab_dir).tree
    with (lab_dir / "image.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (final / "READY").exists():
            work = lab_dir / f"node-image-{node_image_key()}.building"
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            _build(base, work / "tree", work / "build.log")
            (work / "READY").write_text(node_image_key() + "\n")
            shutil.rmtree(final, ignore_errors=True)
            work.rename(final)
    return final / "tree"


def _build(base: Path, tree: Path, log: Path) -> None:
    subprocess.run(["cp", "-a", str(base), str(tree)], check=True)
    shutil.copy("/etc/resolv.conf", tree / "etc/resolv.conf")
    (tree / "etc/apt/sources.list").write_text(f"deb {MIRROR} {SUITE} main\n")
    for cmd in (["apt-get", "update", "-qq"],
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *NODE_PACKAGES]):
        _chroot(tree, cmd, log)
    # cloud-init's locale module sets LANG=en_US.UTF-8; Debian's update-locale refuses a locale that was
    # never generated, which failed modules-config on every boot (MAAS then says Failed deployment)
    gen = tree / "etc/locale.gen"
    gen.write_text(gen.read_text().replace("# en_US.UTF-8 UTF-8", "en_US.UTF-8 UTF-8"))
    _chroot(tree, ["locale-gen"], log)
    (tree / "etc/apt/sources.list").write_text("")  # lab nodes have no route out
    for p in (tree / "var/lib/apt/lists").glob("*_*"):
        p.unlink()
    (tree / "etc/resolv.conf").unlink()
    (tree / "etc/cloud/cloud.cfg.d/90-gpuaas-lab.cfg").write_text(CLOUD_CFG)


def _chroot(tree: Path, cmd: list[str], log: Path) -> None:
    """One build command in the tree; a failure names the tool and the line that says why (ImageBuildError)."""
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        start = out.tell()
        proc = subprocess.run(["chroot", str(tree), *cmd], stdout=out, stderr=subprocess.STDOUT,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if proc.returncode != 0:
        raise ImageBuildError(cmd[0], failure_reason(log, start), log)


class BootedNode(BaseModel):
    model_config = ConfigDict(frozen=True)
    hostname: str
    root: Path
    """The node's disk (its overlay, merged), readable from the host."""
    instance_id: str
    console: Path
    data_disks: dict[str, str] = {}
    """The node's data disks: name in the node (a layout's data device) -> the host's loop device."""


class NodeLab:
    """Lab network plus nodes booted on demand; `stop` (or the context's end) undoes everything."""

    def __init__(self, hostnames: list[str]) -> None:
        self.hostnames = hostnames
        self.run_id = secrets.token_hex(3)
        self.run_dir = LAB_DIR / "runs" / self.run_id
        self._run = _Run(owner_pid=os.getpid())
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.nodes: dict[str, BootedNode] = {}
        self.image: Path | None = None
        self._loops: dict[str, dict[str, str]] = {}  # hostname -> its attached data disks (name -> loop device)

    @property
    def gateway(self) -> str:
        assert self._run.network is not None
        return str(self._run.network.gateway)

    def address(self, hostname: str) -> str:
        """The node's address on the lab network (its namespace's only interface)."""
        assert self._run.network is not None
        return str(self._run.network.host_addresses[hostname])

    def _save(self) -> None:
        self._run.save(self.run_dir)

    def start(self) -> NodeLab:
        detach_stale_loops()
        self.image = ensure_node_image()
        self.run_dir.mkdir(parents=True)
        self._save()
        self._run.network = net.create(self.run_id, self.hostnames, LAB_DIR)
        self._save()
        return self

    def boot(self, hostname: str, user_data: bytes, knobs: dict[str, str] | None = None,
             data_disks: Sequence[str] = (), disk_mb: int = DATA_DISK_MB,
             cloud_cfg: dict[str, str] | None = None) -> BootedNode:
        """`knobs`: lab stand-in settings written to /etc/gpuaas-lab/<name> (e.g. {"gpus": "7"}).
        `data_disks`: names of the machine's data disks (sparse `disk_mb` MiB loop devices, empty the first
        time, kept across its boots until `erase_disks`) the node sees as /dev/<name>.
        `cloud_cfg`: drop-ins for /etc/cloud/cloud.cfg.d (name -> YAML, 0600 root), the configuration a
        deployed machine's image carries beside the user's user_data (MAAS: its datasource, the
        `reporting` webhook to its metadata status endpoint); never part of the user_data."""
        # size: one sequence (overlay, identity, seed, stand-ins, disks, nspawn); each line is one step of it
        assert self.image is not None and self._run.network is not None
        self.halt(hostname)  # a redeploy: the previous node on this machine goes first (a fresh disk follows)
        hdir = self.run_dir / f"{hostname}-{sum(1 for p in self.run_dir.glob(hostname + '-*'))}"
        upper, work, merged = hdir / "upper", hdir / "work", hdir / "merged"
        for d in (upper, work, merged):
            d.mkdir(parents=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={self.image},upperdir={upper},workdir={work}", str(merged)], check=True)
        self._run.merged.append(merged)
        self._save()
        (merged / "etc/hostname").write_text(hostname + "\n")
        (merged / "etc/hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {hostname}\n")
        iid = f"{hostname}-{secrets.token_hex(4)}"
        seed = merged / "var/lib/cloud/seed/nocloud"
        seed.mkdir(parents=True, mode=0o700)
        (seed / "meta-data").write_text(f"instance-id: {iid}\nlocal-hostname: {hostname}\n")
        (seed / "user-data").write_bytes(user_data)  # exactly what the deploy gave MAAS
        (seed / "user-data").chmod(0o600)
        (merged / "etc/gpuaas-lab").mkdir(exist_ok=True)
        for name, value in (knobs or {}).items():
            (merged / "etc/gpuaas-lab" / name).write_text(value + "\n")
        for name, text in (cloud_cfg or {}).items():
            fd = os.open(merged / "etc/cloud/cloud.cfg.d" / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as drop_in:  # created 0600: it may hold a credential (MAAS's node key)
                drop_in.write(text)
        for tool in STANDINS.iterdir():
            if tool.is_file() and os.access(tool, os.X_OK):
                shutil.copy(tool, merged / "usr/local/bin" / tool.name)
        disks = self._attach(hostname, data_disks, disk_mb)
        if disks:
            (merged / "etc/gpuaas-lab/data-disks").write_text("".join(f"{n} {d}\n" for n, d in disks.items()))
            unit = merged / "etc/systemd/system" / UDEV_STANDIN_UNIT
            shutil.copy(STANDINS / UDEV_STANDIN_UNIT, unit)
            (merged / "etc/systemd/system/sysinit.target.wants").mkdir(parents=True, exist_ok=True)
            (merged / "etc/systemd/system/sysinit.target.wants" / UDEV_STANDIN_UNIT).symlink_to(
                f"/etc/systemd/system/{UDEV_STANDIN_UNIT}")
        node = BootedNode(hostname=hostname, root=merged, instance_id=iid, console=hdir / "console.log",
                          data_disks=disks)
        self.nodes[hostname] = node
        self._start(node)
        return node

    def _start(self, node: BootedNode) -> None:
        assert self._run.network is not None
        self._procs[node.hostname] = subprocess.Popen(
            ["systemd-nspawn", "-b", "--register=no", "--keep-unit", "-q", "-D", str(node.root), "-M", node.hostname,
             f"--hostname={node.hostname}", "--kill-signal=SIGKILL",
             f"--network-namespace-path=/run/netns/{self._run.network.host_netns[node.hostname]}",
             *(f"--bind={loop}:/dev/{name}" for name, loop in node.data_disks.items())],
            stdin=subprocess.DEVNULL, stdout=node.console.open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True)

    def restart(self, hostname: str) -> BootedNode:
        """Power loss and power on: kill the node, boot the same disk again (cloud-init does not rerun
        runcmd for the same instance; what the node enabled, e.g. the launcher's unit, runs)."""
        self.halt(hostname)
        node = self.nodes[hostname]
        self._start(node)
        return node

    def wait_cloud_init(self, hostname: str, timeout_s: float = 180.0) -> None:
        """Until cloud-init wrote boot-finished for this instance; the console's tail if nspawn died."""
        node, proc = self.nodes[hostname], self._procs[hostname]
        done = node.root / "var/lib/cloud/instances" / node.instance_id / "boot-finished"
        deadline = time.monotonic() + timeout_s
        while not done.exists():
            if proc.poll() is not None:
                tail = node.console.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"node {hostname}: systemd-nspawn exited ({proc.returncode}):\n{tail}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {hostname}: cloud-init did not finish in {timeout_s:.0f}s")
            time.sleep(0.25)  # poll interval for a file the node writes, not a wait for an event

    def halt(self, hostname: str) -> None:
        proc = self._procs.get(hostname)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # nspawn passes --kill-signal (SIGKILL) to the node's PID 1
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def _attach(self, hostname: str, names: Sequence[str], disk_mb: int) -> dict[str, str]:
        """The machine's data disks for this boot: the attached ones when the names are the same (their data
        stays), else each image attached again (an existing image is kept, a missing one made sparse)."""
        attached = self._loops.get(hostname, {})
        if list(attached) == list(names):
            return dict(attached)
        self._detach(hostname)
        ddir = self.disk_dir(hostname)
        disks: dict[str, str] = {}
        for name in names:
            ddir.mkdir(parents=True, exist_ok=True)
            image = ddir / f"{name}.img"
            if not image.exists():
                with image.open("wb") as f:
                    f.truncate(disk_mb * 1024 * 1024)  # sparse: reads as zeros
            loop = subprocess.run(["losetup", "--find", "--show", "--partscan", str(image)], check=True,
                                  capture_output=True, text=True).stdout.strip()
            disks[name] = loop
            self._loops[hostname] = dict(disks)
        return disks

    def disk_dir(self, hostname: str) -> Path:
        """Where the machine's data-disk images live (one per name), across its boots."""
        return self.run_dir / "disks" / hostname

    def erase_disks(self, hostname: str) -> list[str]:
        """Wipe the machine's data disks (MAAS's release with disk erase): halt its node, detach the loop
        devices and drop the images; its next boot attaches zeroed ones. Returns the names erased."""
        self.halt(hostname)
        self._detach(hostname)
        erased = []
        for image in sorted(self.disk_dir(hostname).glob("*.img")):
            image.unlink()
            erased.append(image.stem)
        return erased

    def _detach(self, hostname: str) -> None:
        for loop in self._loops.pop(hostname, {}).values():
            subprocess.run(["losetup", "-d", loop], capture_output=True)

    def exec(self, hostname: str, argv: Sequence[str], timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run `argv` inside the running node (all its namespaces and root), as root; output captured."""
        leader = _leader(self._procs[hostname].pid)
        return subprocess.run(["nsenter", "-t", str(leader), "-m", "-u", "-i", "-n", "-p", "-r", "-w", "--",
                               *argv], capture_output=True, text=True, timeout=timeout_s)

    def stop(self) -> None:
        try:
            for hostname in list(self._procs):
                self.halt(hostname)
        finally:
            for hostname in list(self._loops):
                self._detach(hostname)
            if self.run_dir.exists():
                _undo(self.run_dir, self._run)
            self._procs.clear()

    def __enter__(self) -> NodeLab:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def _leader(nspawn_pid: int) -> int:
    """The node's PID 1 (as the host numbers it): the child of its systemd-nspawn that is 1 in its namespace."""
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = dict(ln.split(":", 1) for ln in (p / "status").read_text().splitlines() if ":" in ln)
            if int(status["PPid"]) == nspawn_pid and status["NSpid"].split()[-1] == "1":
                return int(p.name)
    raise RuntimeError(f"no running node under systemd-nspawn {nspawn_pid}")


def attached_loops(under: Path) -> dict[str, Path]:
    """The host's loop devices whose image lies under `under` (a run's directory, or all runs): device ->
    image. By image, not device name: another run frees and takes /dev/loopN at any moment."""
    out = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                         capture_output=True, text=True, check=True).stdout
    root, found = under.resolve(), {}
    for line in out.splitlines():
        name, _, back = line.strip().partition(" ")
        image = Path(back.strip().removesuffix(" (deleted)"))
        if image.is_relative_to(root):
            found[name] = image
    return found


def detach_stale_loops(lab_dir: Path = LAB_DIR) -> list[str]:
    """Detach loop devices whose image is a lab node's data disk of a run that is gone (a killed session)."""
    runs, detached = (lab_dir / "runs").resolve(), []
    for name, image in attached_loops(runs).items():
        run_dir = runs / image.relative_to(runs).parts[0]
        if (run_dir / "state.json").exists() and stale_run(run_dir) is None:
            continue  # its run is alive (or its record is not ours to judge)
        subprocess.run(["losetup", "-d", name], capture_output=True)
        detached.append(name)
    return detached
