"""Boot the dev environment's hosts as systemd-nspawn machines, each in its own network namespace
with sshd, and tear everything down again — processes, mounts, namespaces, veths — even on failure.

    with Lab(["dev-control-1", "dev-lab-1", "dev-gpu-1"]) as info:
        ...  # info.hosts[hostname] -> address inside the lab's private /24

Hosts are overlay clones of one cached image (lab/image.py), so a boot takes seconds.
The lab's web server (apt repository + stand-in artifacts) listens on the lab gateway only.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from pydantic import BaseModel, ConfigDict

from . import net
from .image import Image, ensure_image
from .pulumi_cli import pack_cli

REPO_ROOT = Path(__file__).resolve().parents[1]
LAB_DIR = Path(os.environ.get("GPUAAS_LAB_DIR", REPO_ROOT / ".lab"))
BOOT_DEADLINE_S = 90.0
STOP_DEADLINE_S = 20.0
_REQUIRED = {"systemd-nspawn": "systemd-container", "debootstrap": "debootstrap", "ssh": "openssh-client",
             "ssh-keygen": "openssh-client", "ip": "iproute2", "dpkg-deb": "dpkg", "chroot": "coreutils",
             "mount": "mount", "sysctl": "procps"}


class LabArtifact(BaseModel):
    model_config = ConfigDict(frozen=True)
    url: str
    sha256: str
    version: str = ""


class LabInfo(BaseModel):
    """What a running lab offers to tests and to the HostConvergence address override."""

    model_config = ConfigDict(frozen=True)
    run_id: str
    subnet: ipaddress.IPv4Network
    gateway: ipaddress.IPv4Address
    hosts: dict[str, ipaddress.IPv4Address]
    ssh_user: str
    ssh_key_file: Path
    web_url: str
    apt_source: str
    artifacts: dict[str, LabArtifact]
    image_built_now: bool
    boot_seconds: float

    def ssh(self, hostname: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run `command` on a lab host as root (sudo) over real SSH."""
        return subprocess.run(
            ["ssh", *_ssh_opts(self.ssh_key_file), f"{self.ssh_user}@{self.hosts[hostname]}",
             f"sudo -n sh -c {_quote(command)}"],
            capture_output=True, text=True, timeout=timeout)


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def _ssh_opts(key: Path) -> list[str]:
    return ["-i", str(key), "-o", "BatchMode=yes", "-o", "ConnectTimeout=2", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]


def preflight() -> str | None:
    """None when this machine can run the lab, else the reason it cannot (said loudly by callers)."""
    if os.environ.get("GPUAAS_LAB", "").lower() in ("0", "off", "no"):
        return "disabled by GPUAAS_LAB=off"
    if os.geteuid() != 0:
        return "needs root (systemd-nspawn, network namespaces, overlay mounts)"
    missing = sorted({pkg for cmd, pkg in _REQUIRED.items() if shutil.which(cmd) is None})
    if missing:
        return f"missing Debian packages {', '.join(missing)} (run `make setup` as root)"
    if "overlay" not in Path("/proc/filesystems").read_text():
        return "the kernel has no overlay filesystem (hosts are overlay clones of one image)"
    probe = f"gpl-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return "cannot create network namespaces here (ip netns add failed)"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _kill_rooted_at(root: Path) -> None:
    """SIGKILL every process whose root directory is `root` (a container left behind by a dead nspawn)."""
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(p / "root") == str(root):
                    os.kill(int(p.name), signal.SIGKILL)


class _Run(BaseModel):
    """On-disk record of a run, so `clean_stale()` can undo a run whose process died."""

    owner_pid: int
    network: net.LabNetwork | None = None
    merged: list[Path] = []

    def save(self, run_dir: Path) -> None:
        """Written whole (a temporary file renamed over it): other sessions' clean-ups read it at any moment,
        and a half-written record must never read as a run to undo."""
        tmp = run_dir / "state.json.tmp"
        tmp.write_text(self.model_dump_json())
        os.replace(tmp, run_dir / "state.json")


def stale_run(run_dir: Path) -> _Run | None:
    """The run's record when its owning process is gone (a killed session): a run to undo. None when the owner
    lives, or the record does not parse (not ours to judge). A run without a record has nothing to undo."""
    try:
        run = _Run.model_validate_json((run_dir / "state.json").read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(run.owner_pid, 0)
    except ProcessLookupError:
        return run
    except PermissionError:
        pass  # alive, another user's
    return None


def _undo(run_dir: Path, run: _Run) -> None:
    for m in run.merged:
        _kill_rooted_at(m)
        if os.path.ismount(m):
            subprocess.run(["umount", "-l", str(m)], capture_output=True)
    if run.network is not None:
        net.destroy(run.network)
    shutil.rmtree(run_dir, ignore_errors=True)


def clean_stale() -> list[str]:
    """Undo runs whose owning process is gone (a killed test session). Returns their ids."""
    cleaned = []
    for state in (LAB_DIR / "runs").glob("*/state.json"):
        run = stale_run(state.parent)
        if run is not None:
            _undo(state.parent, run)
            cleaned.append(state.parent.name)
    return cleaned


class Lab:
    def __init__(self, hostnames: Sequence[str], ssh_user: str = "gpuaas") -> None:
        self.hostnames = list(hostnames)
        self.ssh_user = ssh_user
        self.run_id = secrets.token_hex(3)
        self.run_dir = LAB_DIR / "runs" / self.run_id
        self._run = _Run(owner_pid=os.getpid())
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._httpd: http.server.ThreadingHTTPServer | None = None

    def _save(self) -> None:
        self._run.save(self.run_dir)

    def __enter__(self) -> LabInfo:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> LabInfo:
        reason = preflight()
        if reason:
            raise RuntimeError(f"the lab cannot run here: {reason}")
        clean_stale()
        image = ensure_image(LAB_DIR)
        t0 = time.monotonic()
        self.run_dir.mkdir(parents=True, mode=0o700)
        self._save()
        key = self.run_dir / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gpuaas-lab-{self.run_id}",
                        "-f", str(key)], check=True)
        self._run.network = net.create(self.run_id, self.hostnames, LAB_DIR)
        self._save()
        cli = pack_cli(LAB_DIR)  # the runners' Pulumi CLI: the build the tests use (lab/pulumi_cli.py)
        web_url = self._serve(image, self._run.network.gateway, cli.path.parent)
        for h in self.hostnames:
            self._boot(h, image, key)
        self._wait_ready(key)
        artifacts = {k: LabArtifact(url=f"{web_url}/artifacts/{a.name}", sha256=a.sha256)
                     for k, a in image.artifacts.items()}
        artifacts["pulumi_cli"] = LabArtifact(url=f"{web_url}/pulumi/{cli.path.name}", sha256=cli.sha256,
                                              version=cli.version)
        return LabInfo(run_id=self.run_id, subnet=self._run.network.subnet, gateway=self._run.network.gateway,
                       hosts=dict(self._run.network.host_addresses), ssh_user=self.ssh_user, ssh_key_file=key,
                       web_url=web_url, apt_source=f"deb [trusted=yes] {web_url}/repo/ ./",
                       artifacts=artifacts, image_built_now=image.built_now,
                       boot_seconds=round(time.monotonic() - t0, 2))

    def _serve(self, image: Image, gateway: ipaddress.IPv4Address, cli_dir: Path) -> str:
        www = self.run_dir / "www"
        www.mkdir()
        (www / "repo").symlink_to(image.repo)
        (www / "artifacts").symlink_to(image.artifacts_dir)
        (www / "pulumi").symlink_to(cli_dir)

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib signature)
                pass

        handler = functools.partial(Quiet, directory=str(www))
        self._httpd = http.server.ThreadingHTTPServer((str(gateway), 0), handler)
        threading.Thread(target=self._httpd.serve_forever, name="lab-web", daemon=True).start()
        return f"http://{gateway}:{self._httpd.server_address[1]}"

    def _boot(self, hostname: str, image: Image, key: Path) -> None:
        assert self._run.network is not None
        hdir = self.run_dir / hostname
        upper, work, merged = hdir / "upper", hdir / "work", hdir / "merged"
        docker = hdir / "docker"  # dockerd's overlay2 cannot stack on the clone's overlayfs
        for d in (upper, work, merged, docker):
            d.mkdir(parents=True)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={image.tree},upperdir={upper},workdir={work}", str(merged)], check=True)
        self._run.merged.append(merged)
        self._save()
        (merged / "etc/hostname").write_text(hostname + "\n")
        (merged / "etc/hosts").write_text(f"127.0.0.1 localhost\n127.0.1.1 {hostname}\n")
        subprocess.run(["ssh-keygen", "-A", "-f", str(merged)], check=True, capture_output=True)
        home = "/root"
        if self.ssh_user != "root":
            home = f"/home/{self.ssh_user}"
            subprocess.run(["chroot", str(merged), "useradd", "-m", "-s", "/bin/bash", self.ssh_user], check=True)
            sudoers = merged / "etc/sudoers.d/gpuaas-lab"
            sudoers.write_text(f"{self.ssh_user} ALL=(ALL) NOPASSWD:ALL\n")
            sudoers.chmod(0o440)
        ssh_dir = merged / home.lstrip("/") / ".ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        (ssh_dir / "authorized_keys").write_text(key.with_suffix(".pub").read_text())
        subprocess.run(["chroot", str(merged), "chown", "-R", f"{self.ssh_user}:", f"{home}/.ssh"], check=True)
        console = (hdir / "console.log").open("wb")
        self._procs[hostname] = subprocess.Popen(
            ["systemd-nspawn", "-b", "--register=no", "--keep-unit", "-q", "-D", str(merged), "-M", hostname,
             f"--hostname={hostname}", f"--bind={docker}:/var/lib/docker",
             # The container runtime programs iptables in the host's own netns (not the machine's).
             "--capability=CAP_NET_ADMIN",
             # Lab hosts are disposable: on SIGTERM kill PID 1 (the kernel then ends the whole PID
             # namespace) instead of an orderly poweroff that takes ~20 s with the roles' services.
             "--kill-signal=SIGKILL",
             f"--network-namespace-path=/run/netns/{self._run.network.host_netns[hostname]}"],
            stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_ready(self, key: Path) -> None:
        assert self._run.network is not None
        pending = dict(self._run.network.host_addresses)
        deadline = time.monotonic() + BOOT_DEADLINE_S
        while pending:
            for h, addr in list(pending.items()):
                if self._procs[h].poll() is not None:
                    log = (self.run_dir / h / "console.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"lab host {h}: systemd-nspawn exited ({self._procs[h].returncode}):\n{log}")
                probe = subprocess.run(["ssh", *_ssh_opts(key), f"{self.ssh_user}@{addr}",
                                        "systemctl is-system-running --wait >/dev/null; true"],
                                       capture_output=True, timeout=60)
                if probe.returncode == 0:
                    del pending[h]
            if pending and time.monotonic() > deadline:
                raise RuntimeError(f"lab hosts {sorted(pending)} not reachable over SSH after {BOOT_DEADLINE_S:.0f}s")
            if pending:
                time.sleep(0.2)  # poll interval between SSH attempts, not a wait for an event

    def stop(self) -> None:
        """Idempotent teardown: containers, mounts, namespaces, web server, run directory."""
        for p in self._procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)  # nspawn passes --kill-signal to the container's PID 1
        deadline = time.monotonic() + STOP_DEADLINE_S
        for p in self._procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self.run_dir.exists():
            _undo(self.run_dir, self._run)
        self._procs.clear()


def describe(info: LabInfo) -> str:
    return json.dumps({"run_id": info.run_id, "hosts": {h: str(a) for h, a in info.hosts.items()},
                       "web_url": info.web_url, "ssh_user": info.ssh_user, "ssh_key_file": str(info.ssh_key_file),
                       "boot_seconds": info.boot_seconds}, indent=2)
