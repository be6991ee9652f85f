"""The lab's host image: ONE debootstrapped Debian 12 tree plus a local apt repository, built once
and cached under `.lab/` (gitignored), shared by every lab run and every host (hosts are overlay
clones of it, see `lab/lab.py`).

Why a local apt repository instead of the Debian mirror: the lab hosts live in their own network
namespaces with no route out, so the roles' `apt` tasks install from a flat repository the lab
serves inside its own network. The repository holds exactly the packages the roles ask for
(with their dependency closure), downloaded from the Debian mirror at build time. Nothing is
pre-installed in the tree beyond what SSH + Ansible need: the roles really install Slurm,
munge, the node exporter, Prometheus, docker.io and the registry on the hosts.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from .standins import Artifact, build_standins, build_standins_index

SUITE = "bookworm"
MIRROR = os.environ.get("GPUAAS_LAB_MIRROR", "http://deb.debian.org/debian")
# Just enough for systemd as PID 1, sshd, and Ansible's python + apt modules.
BASE_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "python3",
    "python3-apt",
    "sudo",
    "iproute2",
    "procps",
    "apt-utils",
)
# What the roles install (Debian packages). Keep in step with ansible/roles/*.
REPO_PACKAGES = (
    "ca-certificates",
    "curl",
    "jq",
    "rsync",
    "docker.io",
    "prometheus-node-exporter",
    "prometheus",
    "docker-registry",
    "munge",
    "slurmctld",
    "slurm-client",
    "slurmd",
    "systemd-journal-remote",  # journal_shipping: systemd-journal-upload and -remote
    "stunnel4",  # journal_shipping: the collector's TLS front (client certificates of the site CA)
)
# Bump when the build steps change (part of the cache key).
BUILD_REVISION = 3


class Image(BaseModel):
    """A built image: the tree to clone, the apt repository and the stand-in artifacts."""

    model_config = ConfigDict(frozen=True)
    tree: Path
    repo: Path
    artifacts_dir: Path
    artifacts: dict[str, Artifact]
    built_now: bool


def cache_key() -> str:
    spec = {"suite": SUITE, "base": BASE_PACKAGES, "repo": REPO_PACKAGES, "rev": BUILD_REVISION}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


class ImageBuildError(RuntimeError):
    """A lab image build step failed; `reason` is what the tool said (its last error line), `log` the full log."""

    def __init__(self, tool: str, reason: str, log: Path) -> None:
        self.tool, self.reason, self.log = tool, reason, log
        super().__init__(f"{tool}: {reason} (log: {log})")


def failure_reason(log: Path, since: int = 0) -> str:
    """The line of a build log that says why the last command failed: apt's and debootstrap's `E:` lines
    (e.g. `E: Failed getting release file http://...`), else the last non-empty line."""
    text = log.read_bytes()[since:].decode(errors="replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("E:", "W: Failure", "W: Failed"))]
    return (errors or lines or ["(no output)"])[-1][:300]


def _run(cmd: list[str], log: Path) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        start = out.tell()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tool = cmd[2] if cmd[0] == "chroot" and len(cmd) > 2 else cmd[0]
        raise ImageBuildError(tool, failure_reason(log, start), log)


def _build(work: Path, log: Path) -> None:
    tree, repo = work / "tree", work / "repo"
    _run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(BASE_PACKAGES)}",
            SUITE,
            str(tree),
            MIRROR,
        ],
        log,
    )
    shutil.copy("/etc/resolv.conf", tree / "etc" / "resolv.conf")
    cache = "/var/cache/gpuaas-lab-repo"
    (tree / cache.lstrip("/") / "partial").mkdir(parents=True)
    _run(["chroot", str(tree), "apt-get", "update", "-qq"], log)
    _run(
        [
            "chroot",
            str(tree),
            "apt-get",
            "install",
            "-y",
            "-qq",
            "--download-only",
            "--no-install-recommends",
            "-o",
            f"Dir::Cache::archives={cache}",
            *REPO_PACKAGES,
        ],
        log,
    )
    shutil.rmtree(tree / cache.lstrip("/") / "partial")
    script = f"cd {cache} && apt-ftparchive packages . > Packages && apt-ftparchive release . > Release"
    _run(["chroot", str(tree), "sh", "-c", script], log)
    shutil.move(tree / cache.lstrip("/"), repo)
    # The lab hosts have no route out: only the lab repository is a source (set by the common role).
    (tree / "etc/apt/sources.list").write_text("")
    for p in (tree / "etc/apt/sources.list.d").glob("*"):
        p.unlink()
    for p in (tree / "var/lib/apt/lists").glob("*_*"):
        p.unlink()
    (tree / "etc/resolv.conf").unlink()
    # Per-host identity is made per clone (host keys, machine id, hostname).
    for p in (tree / "etc/ssh").glob("ssh_host_*"):
        p.unlink()
    (tree / "etc/machine-id").write_text("")
    (tree / "etc/hostname").write_text("")


def ensure_image(lab_dir: Path) -> Image:
    """The cached image, building it first when missing (under a lock: concurrent runs build once)."""
    key = cache_key()
    final = lab_dir / f"image-{key}"
    lab_dir.mkdir(parents=True, exist_ok=True)
    built_now = False
    with (lab_dir / "image.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (final / "READY").exists():
            work = lab_dir / f"image-{key}.building"
            if work.exists():
                shutil.rmtree(work)
            work.mkdir()
            _build(work, work / "build.log")
            (work / "READY").write_text(key + "\n")
            if final.exists():
                shutil.rmtree(final)
            work.rename(final)
            built_now = True
        # Stand-ins are rebuilt when their source changes; a running lab keeps serving its own copy.
        from . import standins

        art_key = hashlib.sha256(Path(standins.__file__).read_bytes()).hexdigest()[:12]
        art_dir = final / f"artifacts-{art_key}"
        if not art_dir.exists():
            tmp = final / f"artifacts-{art_key}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            build_standins(tmp)
            tmp.rename(art_dir)
        artifacts = build_standins_index(art_dir)
    return Image(
        tree=final / "tree",
        repo=final / "repo",
        artifacts_dir=art_dir,
        artifacts=artifacts,
        built_now=built_now,
    )
