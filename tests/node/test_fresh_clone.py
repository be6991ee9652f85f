"""`make demo` from a fresh clone (issue 27, item 8): a clone in a temporary directory, with no `.lab` anywhere, runs
the demo's path (`make demo` without its set-up: the clone borrows this checkout's `.venv` and Pulumi CLI, as a
worktree does; set-up itself would point the shared venv's start-up guard at the clone). As root on a machine
that can run nspawn nodes, the lab directory is made inside the clone, the node image is built there from the
Debian mirror (a few minutes), every machine deploys on a real node, and the demo says so. Where the image cannot
be built (here: a mirror nobody listens on), the one line it prints names the real reason, the failing tool's own
error, and the demo goes on with the fast backend."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.lab_gate import require_lab

pytestmark = pytest.mark.slow(seconds=200)  # minutes of real runs: make test starts files like this first

REPO = Path(__file__).resolve().parents[2]
DEMO_TIMEOUT_S = 1500  # the node image's first build (debootstrap + packages, ~1.5 min here) and the demo (~1 min)


def fresh_clone(tmp_path: Path) -> Path:
    """HEAD of this checkout, cloned; `.venv` and the Pulumi CLI linked as a worktree links them."""
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", head], check=True)
    (clone / ".venv").symlink_to(REPO / ".venv")
    (clone / "build").mkdir(exist_ok=True)  # build/ci-image/ is committed
    (clone / "build" / "pulumi").symlink_to((REPO / "build" / "pulumi").resolve())
    assert not (clone / ".lab").exists() and not (tmp_path / ".lab").exists()
    return clone


def make_demo(clone: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PULUMI_"))}
    return subprocess.run(["make", "-o", "setup", "demo", "NODES=auto"], cwd=clone, capture_output=True, text=True,
                          env={**clean, **env}, timeout=DEMO_TIMEOUT_S)


def _unmount_lab(clone: Path) -> None:
    """Whatever a failed run left mounted under the clone's lab, before its directory goes."""
    for line in reversed(Path("/proc/mounts").read_text().splitlines()):
        target = line.split()[1]
        if target.startswith(f"{clone}/.lab/"):
            subprocess.run(["umount", "-l", target], capture_output=True)


def test_a_fresh_clone_boots_real_nodes_and_says_so(tmp_path: Path) -> None:
    require_lab("make demo on real nodes from a fresh clone")
    clone = fresh_clone(tmp_path)
    try:
        run = make_demo(clone)
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-5000:]
        assert "demo finished" in out
        said = [ln for ln in out.splitlines() if ln.startswith("real nodes:")]
        assert said[0].startswith("real nodes: each deployed machine boots a systemd-nspawn node"), said
        assert "real nodes: 4 of 4 machines deployed on real systemd-nspawn nodes" in said, said
        assert not any("not on this machine" in ln for ln in said), said
        # the lab directory was made inside the clone (gitignored), never in its parent
        images = list((clone / ".lab").glob("node-image-*/READY"))
        assert images, sorted(p.name for p in (clone / ".lab").iterdir())
        assert not (tmp_path / ".lab").exists()
        status = subprocess.run(["git", "-C", str(clone), "status", "--porcelain", "--ignored", ".lab"],
                                capture_output=True, text=True).stdout
        assert status.strip() == "!! .lab/", status
        assert "no changes" in out, "the second up changed nothing"
    finally:
        _unmount_lab(clone)
        shutil.rmtree(clone / ".lab", ignore_errors=True)  # a node image is ~400 MB


def test_where_the_node_image_cannot_be_built_the_one_line_names_the_real_reason(tmp_path: Path) -> None:
    require_lab("make demo from a fresh clone")
    clone = fresh_clone(tmp_path)
    try:
        run = make_demo(clone, GPUAAS_LAB_MIRROR="http://127.0.0.1:9/debian")
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-5000:]
        said = [ln for ln in out.splitlines() if ln.startswith("real nodes:")]
        assert len(said) == 1, said
        line = said[0]
        assert line.startswith("real nodes: not on this machine (the lab node image cannot be built: debootstrap: ")
        assert "127.0.0.1:9" in line and "using the fast machine backend" in line, line
        assert f"(log: {clone}/.lab/image-" in line, line
        assert "demo finished" in out
    finally:
        _unmount_lab(clone)
        shutil.rmtree(clone / ".lab", ignore_errors=True)


@pytest.fixture(autouse=True)
def _no_lab_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUAAS_LAB_DIR", raising=False)
