"""Seed 003's lab lanes: the pipeline's jobs run on shell runners, naming no image (ci-lint CI081), and its
GPU smoke job checks the real enrollment result on the GPU host, manual and serialized; the CI image can be built
and published by digest; every host ships its journal to the platform_control host by role label."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from ci_lint.lint import lint
from environments import load_environment
from environments.model import LogicalRole

REPO = Path(__file__).resolve().parents[2]
CI_FILE = REPO / ".gitlab-ci.yml"


def _lint_with(tmp_path: Path, old: str, new: str) -> list[str]:
    text = CI_FILE.read_text()
    assert old in text
    path = tmp_path / ".gitlab-ci.yml"
    path.write_text(text.replace(old, new, 1))
    return lint(path)


def test_jobs_name_no_image_on_shell_runners_and_an_image_is_refused(tmp_path: Path) -> None:
    """The runners are shell executors (ansible/roles/runner): a job's image would be ignored, so the committed
    pipeline names none; one named anyway is refused (CI081 beside the runner role, CI080 for a tag elsewhere)."""
    assert lint(CI_FILE) == []
    doc = yaml.safe_load(CI_FILE.read_text())
    assert "image" not in (doc.get("default") or {}) and "image" not in doc
    assert not [name for name, job in doc.items() if isinstance(job, dict) and "image" in job]
    job_image = _lint_with(tmp_path, "unit-tests:\n  stage: test\n",
                           "unit-tests:\n  image: python:3.11\n  stage: test\n")
    # linted outside the checkout (no runner role beside it): the image is judged as a container's, a tag
    # (CI080); tests/preview_note/test_ci_lint.py lints beside the role (CI081)
    assert [p for p in job_image if p.startswith("CI080 ") and "unit-tests.image" in p], job_image


def test_the_gpu_smoke_job_checks_a_healthy_node_manually_and_serialized() -> None:
    """It runs the node health check (tested against a real node that bootstrapped: tests/node), not a check of
    the enrollment file, which a successful bootstrap deletes."""
    job = yaml.safe_load(CI_FILE.read_text())["gpu-smoke-dev"]
    script = "\n".join(job["script"])
    assert "providers/machines/node/gpuaas-node-health.sh" in script
    assert (REPO / "providers/machines/node/gpuaas-node-health.sh").stat().st_mode & 0o111
    assert "test -f /etc/gpuaas/enrollment.json" not in script
    assert job["tags"] == ["worker-compute"] and job["resource_group"] == "gpu-lane"
    assert all(r.get("when") == "manual" for r in job["rules"])


def test_the_worker_compute_runner_is_on_the_gpu_host() -> None:
    for name in ("dev", "local"):
        env = load_environment(name)
        serving = [h for h in env.hosts if "worker-compute" in [t.value for t in h.runner_tags]]
        assert [h.logical_role for h in serving] == [LogicalRole.WORKER_COMPUTE], name


def test_the_ci_image_build_publishes_by_digest() -> None:
    build = REPO / "build" / "ci-image" / "build.sh"
    assert (REPO / "build" / "ci-image" / "Dockerfile").is_file() and build.stat().st_mode & 0o111
    subprocess.run(["bash", "-n", str(build)], check=True)
    text = build.read_text()
    assert "RepoDigests" in text and "@sha256:" in text and "--pin" in text
    proc = subprocess.run([str(build)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0 and "CI_REGISTRY_IMAGE" in proc.stderr  # says what it needs, builds nothing


def test_every_host_ships_its_journal_to_platform_control_by_role() -> None:
    site = yaml.safe_load((REPO / "ansible" / "playbooks" / "site.yml").read_text())
    roles = [r["role"] for r in site[0]["roles"]]
    assert "journal_shipping" in roles
    assert not [r for r in site[0]["roles"] if r["role"] == "journal_shipping" and "when" in r], "every host"
    role = REPO / "ansible" / "roles" / "journal_shipping"
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    labels = defaults["journal_shipping_labels"]
    assert set(labels) == {r.value for r in LogicalRole}
    assert {v["label"] for v in labels.values()} == {"control", "lab", "gpu"}  # seed 003's labels
    assert len({v["port"] for v in labels.values()}) == 3
    assert "platform_control" in defaults["journal_shipping_collector"]
    tasks = (role / "tasks" / "main.yml").read_text()
    assert "systemd-journal-remote" in tasks and "systemd-journal-upload" in tasks
    assert "--split-mode=host" in (role / "templates" / "journal-remote.service.j2").read_text()
