"""The pipeline as committed, run for real (issue 28, item 1): each job's `before_script` and `script` lines of
`.gitlab-ci.yml`, in order, in bash, against the embedded services (tests/cli/pipeline_world.py) — not a lint
of the YAML.

1. An operator creates every stack once (`gpuaas-infra stack init`, deploy identity): the stack files get their
   `encryptedkey` (Vault transit), as they would be committed.
2. A merge-request pipeline: `validate-environments` (matrix) and every preview job, each with its stack's
   read-only preview identity (transit decrypt only): AppRole login, `gpuaas-infra stack preview` with the
   executable policy pack, the note posted to (fake) GitLab. prod-control previews against site stacks that
   exist but never deployed.
3. The default branch: every deploy job in promotion order with the deploy identity.
4. A merge-request pipeline again: every preview shows no change.

`pulumi` resolves only through the jobs' own `export PATH=.../build/pulumi/bin` (the test's PATH has no CLI).
Jobs that run the project's own test suite, lint or build the CI image, or need a GPU are not run here; the
test names them, so a new job must be classified.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .pipeline_world import STACKS, PipelineWorld, jobs, matrix, run_job

pytestmark = pytest.mark.slow(seconds=160)

NOT_RUN = {
    "lint": "runs `make lint` / `make ci-lint`: the suite runs both itself (tests/project, tests/preview_note)",
    "unit-tests": "runs the test suite this test is part of",
    "lab-tests": "runs the lab tier (tests/lab)",
    "ci-image": "builds and pushes a container image (docker and a registry)",
    "gpu-smoke-dev": "needs a GPU and the enrolled dev-gpu-1 (nvidia-smi, ibv_devinfo)",
}
MR_JOBS = ["validate-environments", "preview-dev", "preview-staging", "preview-prod-sites", "preview-prod-control"]
DEPLOY_JOBS = ["deploy-dev", "deploy-staging", "deploy-prod-sites", "deploy-prod-control"]


@pytest.fixture(scope="module")
def world(policy_venv: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PipelineWorld]:
    # policy_venv: the copy links the checkout's .policy-venv, which a fresh clone makes on first use
    with PipelineWorld(tmp_path_factory.mktemp("pipeline")) as w:
        yield w


def _env_of(stack: str) -> str:
    return STACKS[stack]


def _run(world: PipelineWorld, name: str, source: str, home: Path) -> dict[str, Any]:
    """Every matrix row of job `name`; returns {row label: completed process}."""
    job = jobs(world.project)[name]
    out = {}
    for row in matrix(job):
        stack = row.get("STACK") or str((job.get("variables") or {}).get("STACK") or "")
        env = row.get("ENV") or (_env_of(stack) if stack else "dev")
        identity = "preview" if job.get("stage") == "preview" else "deploy"
        extra = {**world.variables(env, identity), **row}
        t0 = time.monotonic()
        proc = run_job(world, job, extra, source, home)
        label = f"{name}[{stack or row.get('ENV', '')}]"
        assert proc.returncode == 0, f"{label} failed ({time.monotonic() - t0:.0f} s):\n{proc.stdout[-3000:]}\n" \
                                     f"{proc.stderr[-5000:]}"
        out[label] = proc
    return out


def test_every_job_is_run_here_or_says_why_not(world: PipelineWorld) -> None:
    assert set(jobs(world.project)) == set(NOT_RUN) | set(MR_JOBS) | set(DEPLOY_JOBS)


def test_the_pipelines_jobs_run_against_the_embedded_services(world: PipelineWorld, tmp_path: Path) -> None:
    home = tmp_path / "pulumi-home"
    secrets = world.secret_values()
    logs: list[str] = []
    # 1. the operator creates each stack once, with the deploy identity: its encryptedkey is written (committed)
    for stack in STACKS:
        env = _env_of(stack)
        init = run_job(world, {"before_script": ['export PATH="$CI_PROJECT_DIR/build/pulumi/bin:$PATH"',
                                                 'eval "$(.venv/bin/python -m cli.main vault-login)"'],
                               "script": [f".venv/bin/python -m cli.main stack init {stack}"]},
                       world.variables(env, "deploy"), "push", home)
        assert init.returncode == 0, init.stderr[-3000:]
        key = (world.project / "stacks" / f"Pulumi.{stack}.yaml").read_text()
        assert "encryptedkey:" in key and f"secretsprovider: hashivault://gpuaas-{env}" in key
    # 2. a merge request: validation and every preview with the stacks' read-only identities, notes posted
    for name in MR_JOBS:
        logs += [p.stdout + p.stderr for p in _run(world, name, "merge_request_event", home).values()]
    assert world.gitlab is not None
    notes = {n["body"].split("key=")[1].split(" ")[0]: n["body"] for n in world.gitlab.state.notes[("4242", 7)]}
    assert set(notes) == set(STACKS), "one note per stack"
    first = json.loads((world.project / "preview-prod-control.json").read_text())
    assert first["changeSummary"].get("create", 0) > 0, "prod-control previews before its site stacks deployed"
    # 3. the default branch deploys, in promotion order, with the deploy identities
    for name in DEPLOY_JOBS:
        logs += [p.stdout + p.stderr for p in _run(world, name, "push", home).values()]
    prod = world.worlds["prod"]
    assert prod.maas is not None
    deployed = {m["hostname"]: m["status_name"] for m in prod.maas.admin.machines()}
    assert set(deployed.values()) == {"Deployed"} and len(deployed) == 5, deployed
    # 4. the next merge request: every stack previews with no change
    for name in MR_JOBS[1:]:
        _run(world, name, "merge_request_event", home)
    for stack in STACKS:
        doc = json.loads((world.project / f"preview-{stack}.json").read_text())
        changed = {k: v for k, v in doc["changeSummary"].items() if k != "same" and v}
        assert changed == {}, (stack, changed)
    text = "\n".join(logs)
    assert not [s[:4] for s in secrets if s and s in text], "a secret reached a job's output"
