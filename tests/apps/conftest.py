"""Fixtures of the apps area: a real OpenBao, the platform simulator, enrolled nodes, and specs.

`Lab` holds one platform simulator with four enrolled, active GPU nodes (gpu-1..gpu-4), the
project's service-account token stored in OpenBao, and builds `AppInstanceSpec`s / reconcilers the
way the component and provider do, so the direct tests exercise the real client over HTTP.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clients.platform import PlatformClient
from clients.platform import models as m
from clients.vault import VaultCredentials
from environments import load_environment
from providers.apps.reconciler import AppInstanceReconciler
from providers.apps.spec import AppInstanceSpec
from simulators.openbao import OpenBaoDevServer
from tests.fixtures.engine import engine_factory  # noqa: F401
from tests.fixtures.platform_sim import RunningSim, enroll_alive, platform_sim_factory  # noqa: F401

KV = "gpuaas"
TOKEN_REF = "t/platform/sa-slurm#token"
GPUS = ("gpu-1", "gpu-2", "gpu-3", "gpu-4")


@pytest.fixture(scope="session")
def openbao() -> Iterator[OpenBaoDevServer]:
    with OpenBaoDevServer() as server:
        server.ensure_kv_mount(KV)
        yield server


class Lab:
    def __init__(self, sim: RunningSim, vault: OpenBaoDevServer) -> None:
        self.sim, self.vault = sim, vault
        self.pid = sim.creds.project_id
        self.admin = PlatformClient(sim.url, sim.creds.platform_admin)
        self.api = PlatformClient(sim.url, sim.creds.service_account)
        vault.put_secret(KV, TOKEN_REF.split("#")[0], {"token": sim.creds.service_account})
        self.nodes = self._enroll(GPUS)
        env = load_environment("local")
        self.blueprint = {"name": env.blueprint_model.name,
                          "app": env.blueprint_model.apps["slurm"].model_dump(mode="json"),
                          "runtime_combinations": [c.model_dump(mode="json")
                                                   for c in env.blueprint_model.runtime_combinations]}

    def _enroll(self, hostnames: tuple[str, ...]) -> dict[str, str]:
        site = self.admin.create_site(m.MaasSiteCreate(name="lab", maas_url="http://maas.lab:5240/MAAS",
                                                       credential_ref=m.VaultCredentialRef(path="t/maas/lab")))
        profile = self.admin.create_profile(site.site_id, m.SiteProfileCreate(
            name="h200", policy=m.SiteProfilePolicy(site_bootstrap_bundle_ref="s3://b/lab@sha256:00")))
        out = {}
        for i, h in enumerate(hostnames):
            grant = self.admin.mint_enrollment_token(site.site_id, m.EnrollmentTokenRequest(
                profile_id=profile.profile_id, hostname=h, system_id=f"sys{i:03d}"))
            enroll_alive(self.sim.url, m.EnrollmentRequest(
                node_id=grant.node_id, enrollment_token=grant.enrollment_token, hostname=h, system_id=f"sys{i:03d}"))
            out[h] = grant.node_id
        for node_id in out.values():
            self.admin.wait_for_node(node_id, timeout_s=10)
        return out

    def spec(self, workers: int = 1, worker_nodes: tuple[str, ...] = ("gpu-1",), version: str = "23.11.10",
             controller_host: str = "lab-1", max_parallel: int = 4, **extra: Any) -> AppInstanceSpec:
        topology = {"lab-1": "app_control", "lab-2": "app_control", **{g: "gpu_node" for g in GPUS}}
        return AppInstanceSpec.model_validate({
            "stack": "t",
            "instance": {
                "name": "slurm-t", "project_id": self.pid, "app": {"slug": "slurm", "version": version},
                "runtime": {"operating_mode": "tenant_dedicated", "control_plane_scope": "project",
                            "runtime_backend": "slurm", "tenant_boundary_mode": "dedicated_nodes"},
                "service_account_token_path": TOKEN_REF,
                "members": {"controller": {"count": 1, "nodes": [controller_host]},
                            "worker": {"count": workers, "nodes": list(worker_nodes)}},
            },
            "blueprint": self.blueprint,
            "topology": topology,
            "placements": {"controller": [None], "worker": [self.nodes[n] for n in worker_nodes]},
            "platform_url": self.sim.url,
            "vault": {"address": self.vault.address, "kv_mount": KV},
            "max_parallel": max_parallel,
            "operation_timeout_s": 30,
            **extra,
        })

    def app_spec(self, slug: str, members: dict[str, dict[str, Any]], *, name: str | None = None,
                 version: str = "1.0.0", backend: str = "kubernetes", **extra: Any) -> AppInstanceSpec:
        """Any blueprint app (rke2, vllm, openclaw ...): members {key: {count, nodes, allocation}}; nodes name
        the lab's hosts (lab-1, lab-2: app_control) or GPU nodes (gpu-1..gpu-4, pinned by node id)."""
        env = load_environment("local")
        topology = {"lab-1": "app_control", "lab-2": "app_control", **{g: "gpu_node" for g in GPUS}}
        instance = {"name": name or f"{slug}-t", "project_id": self.pid, "app": {"slug": slug, "version": version},
                    "runtime": {"operating_mode": "tenant_dedicated", "control_plane_scope": "project",
                                "runtime_backend": backend, "tenant_boundary_mode": "dedicated_nodes"},
                    "service_account_token_path": TOKEN_REF, "members": members,
                    **{k: extra.pop(k) for k in ("inputs", "ui_routes") if k in extra}}
        placements = {k: [self.nodes.get(n) for n in m.get("nodes", [])] for k, m in members.items()}
        return AppInstanceSpec.model_validate({
            "stack": "t", "instance": instance,
            "blueprint": {"name": env.blueprint_model.name,
                          "app": env.blueprint_model.apps[slug].model_dump(mode="json"),
                          "runtime_combinations": [c.model_dump(mode="json")
                                                   for c in env.blueprint_model.runtime_combinations]},
            "topology": topology, "placements": placements, "platform_url": self.sim.url,
            "vault": {"address": self.vault.address, "kv_mount": KV}, "operation_timeout_s": 30, **extra})

    def rec(self, spec: AppInstanceSpec) -> AppInstanceReconciler:
        return AppInstanceReconciler(spec, VaultCredentials(token=self.vault.root_token))

    def member_ops(self) -> list[tuple[str, str | None]]:
        """(operation kind, member id) of every member operation the platform ran, in order."""
        return [(o.kind.value, o.member_id) for o in self.sim.operations() if o.kind.value.startswith("member_")]

    def audit_actions(self) -> list[str]:
        return [e.action for e in self.sim.audit() if e.outcome == "accepted"]


def _lab(sim: RunningSim, openbao: OpenBaoDevServer) -> Iterator[Lab]:
    lab = Lab(sim, openbao)
    yield lab
    lab.admin.close()
    lab.api.close()


@pytest.fixture
def lab(platform_sim_factory: Any, openbao: OpenBaoDevServer) -> Iterator[Lab]:  # noqa: F811
    yield from _lab(platform_sim_factory(), openbao)


@pytest.fixture
def slow_lab(platform_sim_factory: Any, openbao: OpenBaoDevServer) -> Iterator[Lab]:  # noqa: F811
    """Ten times slower (a member add takes ~0.45 s): for tests that must act while an operation runs."""
    yield from _lab(platform_sim_factory(time_scale=0.1), openbao)


# --- the local stack through the engine ---------------------------------------------------------
REPO = Path(__file__).resolve().parents[2]


def trim(doc: dict[str, Any]) -> None:
    doc["machines"] = [x for x in doc["machines"] if x["hostname"] in ("local-gpu-1", "local-gpu-2")]


def edit(path: Path, fn: Any) -> None:
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def set_workers(count: int, nodes: list[str]) -> Any:
    def fn(doc: dict[str, Any]) -> None:
        doc["app_instances"][0]["members"]["worker"] = {"count": count, "nodes": nodes}
    return fn


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    """A copy of environments/local.yaml trimmed to two MAAS machines (local-gpu-1, local-gpu-2 in the pool)."""
    path = tmp_path / "local.yaml"
    path.write_text((REPO / "environments" / "local.yaml").read_text())
    edit(path, trim)
    return path


def bare(doc: dict[str, Any]) -> None:
    """Only the hosts and the app instance: no site, bundle, RoCE or machine (the platform places every member)."""
    for key in ("sites", "machines", "machine_pools", "roce_pools", "bootstrap_bundles"):
        doc.pop(key, None)
    for host in doc["hosts"]:
        host.pop("machine", None)
    for app in doc.get("app_instances", []):  # no machine is left to name: members are allocated (APP011)
        for member in app["members"].values():
            member.pop("nodes", None)


@pytest.fixture
def bare_env_file(tmp_path: Path) -> Path:
    """A copy of environments/local.yaml with the app instance and hosts only (fast CLI runs)."""
    path = tmp_path / "local-bare.yaml"
    path.write_text((REPO / "environments" / "local.yaml").read_text())
    edit(path, bare)
    return path
