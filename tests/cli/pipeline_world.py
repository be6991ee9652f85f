"""The world a pipeline job of `.gitlab-ci.yml` runs against, embedded: a copy of the project whose dev, staging
and prod environments point at embedded services (one LocalStack per environment: MAAS, platform, OpenBao with
AppRole and a transit key per stack, moto S3), one moto S3 bucket as the state backend, a fake GitLab for the
notes, and a runner for jobs: a job's `before_script` + `script` lines, in order, in bash, as a shell executor
runs them, with the CI/CD variables the pipeline's header names.

What the copy changes, and nothing else: endpoints (the embedded services' URLs instead of the sites'), the
fleets trimmed to two or three machines per site (the scripts are under test, not MAAS at scale), and the
stack files converge no hosts (hosts are no embedded service: the lab tier converges them through the CLI).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import yaml

from ci_lint.lint import resolve_jobs
from simulators.localstack import LocalStack
from simulators.s3 import MotoS3Server  # noqa: F401 - the state backend's type
from tests.preview_note.gitlab_server import FakeGitLab

REPO = Path(__file__).resolve().parents[2]
MAIN_BUILD = (REPO / "build" / "pulumi").resolve()
STACKS = {"dev": "dev", "staging": "staging", "prod-dal1": "prod", "prod-sjc1": "prod", "prod-control": "prod"}
KEEP = {  # machines kept per environment (app members' nodes first)
    "dev": ["dev-gpu-1"],
    "staging": ["stg-h200-001", "stg-h200-002"],
    "prod": ["dal1-h200-001", "dal1-h200-002", "dal1-h200-033", "sjc1-h200-001", "sjc1-h200-002"],
}
NOTES_TOKEN = "glpat-pipeline-notes-0123456789"
PROJECT, MR_IID = "4242", 7


def copy_project(dest: Path) -> Path:
    """The checkout as a fresh clone has it (git's files, the working tree's content), plus the set-up's
    products linked: the venvs and the pinned CLI (make setup finds them provided)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    _overlay_venv(REPO / ".venv", dest / ".venv")
    # the checkout's policy venv, or the one beside the venv it shares (a worktree of the main checkout)
    policy = next((p for p in (REPO / ".policy-venv", (REPO / ".venv").resolve().parent / ".policy-venv")
                   if (p / "bin" / "python").exists()), None)
    assert policy is not None, "no .policy-venv: run `make policy-venv` first"
    _overlay_venv(policy, dest / ".policy-venv")
    stamp = hashlib.sha256((dest / "pyproject.toml").read_bytes()).hexdigest()[:16]
    (dest / ".venv" / f".gpuaas-pip-{stamp}").touch()  # what `make setup` installed: the packages are there
    req = hashlib.sha256((dest / "policy" / "requirements.txt").read_bytes()).hexdigest()[:16]
    (dest / ".policy-venv" / f".req-{req}").touch()
    (dest / "build").mkdir(exist_ok=True)
    (dest / "build" / "pulumi").symlink_to(MAIN_BUILD)
    (dest / ".stamps").mkdir(exist_ok=True)
    return dest


def _overlay_venv(source: Path, dest: Path) -> None:
    """A venv of its own for the copy (what `make setup` writes into a venv, e.g. the ast guard's .pth, lands
    here, never in the shared one) that sees the shared venv's packages through `site.addsitedir`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    real = subprocess.run([str(source / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    mine = subprocess.run([str(dest / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(mine, "shared-venv.pth").write_text(f"import site; site.addsitedir({real!r})\n")


def _trim(doc: dict[str, Any], env: str) -> None:
    keep = KEEP[env]
    doc["machines"] = [m for m in doc.get("machines", []) if m["hostname"] in keep]
    pools = {m.get("pool") for m in doc["machines"]}
    doc["machine_pools"] = [p for p in doc.get("machine_pools", []) if p["name"] in pools]
    for app in doc.get("app_instances", []):
        for member in app["members"].values():
            if member.get("nodes"):  # members bound to machines keep the machines kept
                member["nodes"] = [n for n in member["nodes"] if n in keep]
                member["count"] = len(member["nodes"])


def _point_at(doc: dict[str, Any], world: LocalStack) -> None:
    assert world.vault and world.platform and world.s3 and world.maas
    doc["vault"]["address"] = world.vault.address
    doc["platform"]["url"] = world.platform.url
    doc["artifact_store"]["endpoint_url"] = world.s3.endpoint_url
    for site in doc["sites"]:
        site["maas_url"] = world.maas.url
        site["tls_verify"] = False if doc["tier"] != "prod" else site.get("tls_verify", True)


class PipelineWorld:
    """Every embedded service the pipeline's jobs reach, per environment, and the project copy they run in."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = copy_project(root / "project")
        self.worlds: dict[str, LocalStack] = {}
        self.identities: dict[str, dict[str, tuple[str, str]]] = {}  # env -> "deploy"/"preview" -> (role, secret)
        self._stack = ExitStack()
        self.gitlab: FakeGitLab | None = None
        self.state: MotoS3Server | None = None

    def __enter__(self) -> PipelineWorld:
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _start(self) -> None:
        for env in ("dev", "staging", "prod"):
            source = self.project / "environments" / f"{env}.yaml"
            doc = yaml.safe_load(source.read_text())
            _trim(doc, env)
            source.write_text(yaml.safe_dump(doc, sort_keys=False))
            world = self._stack.enter_context(LocalStack(source, platform_time_scale=0.002))
            self.worlds[env] = world
            _point_at(doc, world)
            source.write_text(yaml.safe_dump(doc, sort_keys=False))  # the world already read its inventory
            self.identities[env] = self._vault_identities(env, world)
        for stack in STACKS:
            path = self.project / "stacks" / f"Pulumi.{stack}.yaml"
            doc = yaml.safe_load(path.read_text())
            doc["config"].pop("gpuaas-infra:hostRoles", None)
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
        # moto keeps one backend per process and each server's start resets it: every world's bucket is made
        # again once all are up, and the state bucket lives on the same (shared) backend.
        for world in self.worlds.values():
            assert world.s3 is not None
            world.s3.create_bucket(world.env.artifact_store.bucket, versioning=True)
        self.state = self.worlds["prod"].s3
        assert self.state is not None
        self.state.create_bucket("gpuaas-pulumi-state", versioning=True)
        self.gitlab = self._stack.enter_context(FakeGitLab())
        self.gitlab.state.tokens = {NOTES_TOKEN: "write"}
        self.gitlab.state.users = {NOTES_TOKEN: {"id": 4242001, "username": "project_4242_bot"}}
        self.gitlab.state.notes[(PROJECT, MR_IID)] = []

    @staticmethod
    def _vault_identities(env: str, world: LocalStack) -> dict[str, tuple[str, str]]:
        """Transit keys of the environment's stacks, and two AppRoles: the deploy identity (transit encrypt and
        decrypt, the environment's KV entries) and the read-only preview identity (transit decrypt only)."""
        assert world.vault is not None
        c = world.vault.client()
        c.sys.enable_secrets_engine("transit", path="transit")
        c.secrets.transit.create_key(name=f"gpuaas-{env}")
        c.sys.enable_auth_method("approle")
        kv = world.env.vault.kv_mount
        policies = {
            "deploy": [(f"transit/encrypt/gpuaas-{env}", ("update",)), (f"transit/decrypt/gpuaas-{env}", ("update",)),
                       (f"{kv}/data/*", ("read",)),
                       # the batch_max_parallel slot lease (docs/machines.md "The slot lease")
                       (f"{kv}/data/leases/*", ("create", "read", "update")), (f"{kv}/metadata/leases/*", ("read",))],
            "preview": [(f"transit/decrypt/gpuaas-{env}", ("update",))],
        }
        out = {}
        for who, grants in policies.items():
            policy = "\n".join(f'path "{p}" {{ capabilities = {list(caps)} }}'.replace("'", '"') for p, caps in grants)
            c.sys.create_or_update_policy(name=f"{env}-{who}", policy=policy)
            c.auth.approle.create_or_update_approle(f"{env}-{who}", token_policies=[f"{env}-{who}"], token_ttl="30m")
            role_id = c.auth.approle.read_role_id(f"{env}-{who}")["data"]["role_id"]
            out[who] = (role_id, c.auth.approle.generate_secret_id(f"{env}-{who}")["data"]["secret_id"])
        return out

    def variables(self, env: str, identity: str) -> dict[str, str]:
        """The CI/CD variables a job of `env` gets (scoped to the environment, or to preview/<stack>)."""
        assert self.state and self.gitlab
        world = self.worlds[env]
        assert world.vault is not None
        role_id, secret_id = self.identities[env][identity]
        return {
            "PULUMI_BACKEND_URL": f"s3://gpuaas-pulumi-state?endpoint={self.state.endpoint_url.split('://')[1]}"
                                  "&s3ForcePathStyle=true&region=us-east-1&disableSSL=true",
            "AWS_ACCESS_KEY_ID": "pipeline-state", "AWS_SECRET_ACCESS_KEY": "pipeline-state-secret",
            "VAULT_ADDR": world.vault.address, "VAULT_ROLE_ID": role_id, "VAULT_SECRET_ID": secret_id,
            "GPUAAS_NOTES_TOKEN": NOTES_TOKEN,
        }

    def secret_values(self) -> list[str]:
        return [v for w in self.worlds.values() for v in w.secret_values()] + [
            s for ids in self.identities.values() for pair in ids.values() for s in pair] + [NOTES_TOKEN]


def jobs(project: Path) -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load((project / ".gitlab-ci.yml").read_text())
    resolved, problems = resolve_jobs(doc)
    assert not problems, problems
    default = doc.get("default") or {}
    for job in resolved.values():
        job.setdefault("before_script", default.get("before_script") or [])
    return resolved


def matrix(job: dict[str, Any]) -> Iterator[dict[str, str]]:
    rows = ((job.get("parallel") or {}).get("matrix") or [{}]) if isinstance(job.get("parallel"), dict) else [{}]
    for row in rows:
        keys = list(row)
        if not keys:
            yield {}
            continue
        (key,) = keys
        for value in row[key]:
            yield {key: str(value)}


def run_job(world: PipelineWorld, job: dict[str, Any], extra: dict[str, str], source: str,
            home: Path) -> subprocess.CompletedProcess[str]:
    """One job (one matrix row): its before_script then script lines, in order, in one bash with `set -eo
    pipefail` (GitLab's shell executor), in the project copy."""
    assert world.gitlab is not None
    lines = [str(x) for part in (job["before_script"], job["script"]) for x in part]
    body = "set -eo pipefail\n" + "\n".join(lines) + "\n"
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if "build/pulumi" not in p]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULUMI_", "VAULT_", "AWS_", "GPUAAS_"))}
    env |= {
        "PATH": os.pathsep.join(path), "CI": "true", "CI_PROJECT_DIR": str(world.project),
        "CI_PIPELINE_SOURCE": source, "CI_DEFAULT_BRANCH": "main", "CI_API_V4_URL": world.gitlab.url,
        "CI_PROJECT_ID": PROJECT, "CI_MERGE_REQUEST_IID": str(MR_IID), "PULUMI_HOME": str(home),
        "PULUMI_SKIP_UPDATE_CHECK": "true", "PIP_CACHE_DIR": str(world.project / ".cache" / "pip"),
        **{k: str(v) for k, v in (job.get("variables") or {}).items()}, **extra,
    }
    return subprocess.run(["bash", "-c", body], cwd=world.project, env=env, capture_output=True, text=True,
                          timeout=900)
