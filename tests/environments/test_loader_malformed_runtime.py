"""Malformed seed-000 declarations (RKE2, vLLM + OpenClaw, UI routes, WEKA mounts): each mutation of the
declared dev or prod environment is refused before anything runs, with a stable finding code, the file,
the path inside it and a fix hint."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from environments import validate_environment
from environments.findings import Code
from environments.loader import ENVIRONMENTS_DIR

Doc = dict[str, Any]
RKE2, SLURM = 1, 0  # dev's app_instances
VLLM, CLAW = 1, 2  # prod's app_instances


def _load(name: str) -> Doc:
    return yaml.safe_load((ENVIRONMENTS_DIR / f"{name}.yaml").read_text())


def _app(i: int, fn: Callable[[Doc], None]) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        fn(doc["app_instances"][i])
    return apply


def _route(**change: Any) -> Callable[[Doc], None]:
    return _app(CLAW, lambda a: a["ui_routes"][0].update(change))


def _mount(**change: Any) -> Callable[[Doc], None]:
    return lambda doc: doc["storage_mounts"][0].update(change)


def _set_members(**members: Any) -> Callable[[Doc], None]:
    return _app(RKE2, lambda a: a.update(members=members))


# (id, base, mutation, code, path)
CASES: list[tuple[str, str, Callable[[Doc], None], Code, str]] = [
    ("rke2-two-servers", "dev", _set_members(server={"count": 2}, agent={"count": 1}),
     Code.MEMBER_COUNT_NOT_ALLOWED, "app_instances[1].members.server.count"),
    # issue 28: a member on a host that is no MAAS machine cannot be placed there (the contract places by node id)
    ("rke2-server-on-app-control-host", "dev", _set_members(server={"count": 1, "nodes": ["dev-lab-1"]},
                                                            agent={"count": 1}),
     Code.MEMBER_ON_NON_NODE, "app_instances[1].members.server.nodes[0]"),
    # one machine named by its host's name in one instance and by its own in another is one node, bound twice
    ("machine-bound-twice-through-its-host-name", "dev",
     lambda doc: (doc["hosts"][2].update(hostname="gpu-host"),
                  doc["app_instances"][0]["members"].update(worker={"count": 1, "nodes": ["dev-gpu-1"]}),
                  doc["app_instances"][1]["members"].update(agent={"count": 1, "nodes": ["gpu-host"]})),
     Code.NODE_BOUND_TWICE, "app_instances[1].members.agent.nodes[0]"),
    ("runner-tags-on-a-host-without-a-runner", "dev", lambda doc: doc["hosts"][1].update(extra_roles=[]),
     Code.RUNNER_TAGS_WITHOUT_RUNNER, "hosts[1].runner_tags"),
    ("rke2-four-servers", "dev", _set_members(server={"count": 4}, agent={"count": 1}),
     Code.MEMBER_COUNT_OUT_OF_BOUNDS, "app_instances[1].members.server.count"),
    ("rke2-agent-without-server", "dev", _set_members(agent={"count": 2, "nodes": ["dev-gpu-1"]}),
     Code.COMPONENT_WITHOUT_REQUIRED, "app_instances[1].members.agent"),
    ("rke2-server-on-gpu-worker", "dev", _set_members(server={"count": 1, "nodes": ["dev-gpu-1"]},
                                                      agent={"count": 1}),
     Code.APP_CONTROL_PLANE_ON_WORKER, "app_instances[1].members.server.nodes[0]"),
    ("rke2-ssh-key-name-input", "dev", _app(RKE2, lambda a: a["inputs"].update(node_ssh_key="dev/ssh/lab-admin#k")),
     Code.SSH_MATERIAL_IN_APP_INPUT, "app_instances[1].inputs.node_ssh_key"),
    ("rke2-ssh-public-key-input", "dev",
     _app(RKE2, lambda a: a["inputs"].update(join_access="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9d ops@lab")),
     Code.SSH_MATERIAL_IN_APP_INPUT, "app_instances[1].inputs.join_access"),
    ("rke2-private-key-input", "dev",
     _app(RKE2, lambda a: a["inputs"].update(bootstrap="-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbg==\n")),
     Code.SSH_MATERIAL_IN_APP_INPUT, "app_instances[1].inputs.bootstrap"),
    ("app-input-token", "dev", _app(RKE2, lambda a: a["inputs"].update(join_token="K10f3c9a8e7d6b5a4f3e2d1c0b9a8")),
     Code.SECRET_IN_APP_INPUT, "app_instances[1].inputs.join_token"),
    ("openclaw-cpu-only-not-offered", "prod",
     _app(CLAW, lambda a: a["members"]["gateway"].update(allocation={"gpu_count": 0, "cpu_only": True})),
     Code.CPU_ONLY_NOT_OFFERED, "app_instances[2].members.gateway.allocation.cpu_only"),
    ("vllm-three-gpu-slice", "prod", _app(VLLM, lambda a: a["members"]["serve"]["allocation"].update(gpu_count=3)),
     Code.ALLOCATION_SHAPE_INVALID, "app_instances[1].members.serve.allocation.gpu_count"),
    ("cpu-only-with-gpus", "prod",
     _app(CLAW, lambda a: a["members"]["gateway"].update(allocation={"gpu_count": 1, "cpu_only": True})),
     Code.ALLOCATION_SHAPE_INVALID, "app_instances[2].members.gateway.allocation.gpu_count"),
    ("allocation-unknown-shape", "prod",
     _app(VLLM, lambda a: a["members"]["serve"]["allocation"].update(capacity_shape="half_node")),
     Code.INVALID_VALUE, "app_instances[1].members.serve.allocation.capacity_shape"),
    ("endpoint-of-undeclared-instance", "prod",
     _app(CLAW, lambda a: a["inputs"]["llm_endpoint"].update(instance="vllm-big")),
     Code.UNKNOWN_ENDPOINT, "app_instances[2].inputs.llm_endpoint.instance"),
    ("endpoint-not-published", "prod", _app(CLAW, lambda a: a["inputs"]["llm_endpoint"].update(endpoint="grpc")),
     Code.UNKNOWN_ENDPOINT, "app_instances[2].inputs.llm_endpoint.endpoint"),
    ("endpoint-of-another-project", "prod",
     _app(CLAW, lambda a: a["inputs"]["llm_endpoint"].update(instance="slurm-research")),
     Code.UNKNOWN_ENDPOINT, "app_instances[2].inputs.llm_endpoint.instance"),
    ("route-iframe", "prod", _route(frame_policy="iframe"), Code.ROUTE_PURE_IFRAME,
     "app_instances[2].ui_routes[0].frame_policy"),
    ("route-shared-cookies", "prod", _route(cookies="shared"), Code.ROUTE_SHARED_COOKIES,
     "app_instances[2].ui_routes[0].cookies"),
    ("route-link-out-without-reason", "prod", _route(frame_policy="link_out"), Code.LINK_OUT_WITHOUT_REASON,
     "app_instances[2].ui_routes[0].link_out_fallback"),
    ("route-empty-reason", "prod", _route(frame_policy="link_out", link_out_fallback={"reason": ""}),
     Code.INVALID_VALUE, "app_instances[2].ui_routes[0].link_out_fallback.reason"),
    ("route-unknown-component", "prod", _route(component="web"), Code.ROUTE_UNKNOWN_COMPONENT,
     "app_instances[2].ui_routes[0].component"),
    ("route-port-zero", "prod", _route(port=0), Code.OUT_OF_RANGE, "app_instances[2].ui_routes[0].port"),
    ("route-twice", "prod", _app(CLAW, lambda a: a["ui_routes"].append(dict(a["ui_routes"][0]))),
     Code.DUPLICATE_NAME, "app_instances[2].ui_routes[1].name"),
    ("training-mount-on-s3", "dev", _mount(via="s3"), Code.MOUNT_ON_S3, "storage_mounts[0].via"),
    ("mount-of-undeclared-filesystem", "dev", _mount(filesystem="lab-datasets"), Code.UNKNOWN_FILESYSTEM,
     "storage_mounts[0].filesystem"),
    ("mount-without-target", "dev", _mount(roles=[]), Code.MOUNT_WITHOUT_TARGET, "storage_mounts[0]"),
    ("mount-unknown-role", "dev", _mount(roles=["gpu_worker"]), Code.INVALID_VALUE, "storage_mounts[0].roles[0]"),
    ("mount-unknown-pool", "dev", _mount(pools=["lab-h100"]), Code.UNKNOWN_POOL, "storage_mounts[0].pools[0]"),
    ("mount-relative-path", "dev", _mount(mount_point="mnt/weka"), Code.INVALID_VALUE,
     "storage_mounts[0].mount_point"),
    ("mount-point-twice", "dev", lambda doc: doc["storage_mounts"].append(dict(doc["storage_mounts"][0])),
     Code.DUPLICATE_MOUNT_POINT, "storage_mounts[1].mount_point"),
    ("posix-not-offered", "dev", lambda doc: doc["filesystems"][0].update(paths=["s3"]), Code.PATH_NOT_OFFERED,
     "storage_mounts[0].via"),
    ("filesystem-twice", "dev", lambda doc: doc["filesystems"].append(dict(doc["filesystems"][0])),
     Code.DUPLICATE_NAME, "filesystems[1].name"),
    ("filesystem-without-backends", "dev", lambda doc: doc["filesystems"][0].update(backends=[]),
     Code.OUT_OF_RANGE, "filesystems[0].backends"),
]


def test_enough_cases() -> None:
    assert len(CASES) >= 15 and len({c[0] for c in CASES}) == len(CASES)
    assert len({c[3] for c in CASES}) >= 15, "the cases exercise many distinct codes"


@pytest.mark.parametrize(("case", "base", "mutate", "code", "path"), CASES, ids=[c[0] for c in CASES])
def test_malformed_runtime_is_rejected_with_code_path_and_hint(
    tmp_path: Path, case: str, base: str, mutate: Callable[[Doc], None], code: Code, path: str
) -> None:
    doc = copy.deepcopy(_load(base))
    mutate(doc)
    doc_path = tmp_path / f"{base}.yaml"
    doc_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env, found = validate_environment(doc_path)
    assert env is None, f"{case}: the environment should be invalid"
    hits = [f for f in found if f.code is code and f.path == path]
    assert hits, f"{case}: expected {code.value} at {path}, got " + "; ".join(f"{f.code.value}@{f.path}" for f in found)
    f = hits[0]
    assert f.file.endswith(f"{base}.yaml") and f.hint and f.message
    assert "AAAAC3NzaC1lZDI1NTE5" not in f.message and "b3Blbg==" not in f.message, "values are never echoed"
