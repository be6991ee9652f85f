"""Malformed environments: each is rejected with the expected code and path, all findings together,
and no traceback. Each case mutates a copy of a declared environment document."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from environments import validate_environment
from environments.findings import Code
from environments.loader import ENVIRONMENTS_DIR, REPO_ROOT

Doc = dict[str, Any]


def _load(name: str) -> Doc:
    return yaml.safe_load((ENVIRONMENTS_DIR / f"{name}.yaml").read_text())


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    """Mutation setting a dotted path like 'sites.0.profiles.0.batch_max_parallel'."""

    def apply(doc: Doc) -> None:
        *parents, leaf = path.split(".")
        node: Any = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        node[int(leaf) if leaf.isdigit() else leaf] = value

    return apply


def _del(path: str) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        *parents, leaf = path.split(".")
        node: Any = doc
        for p in parents:
            node = node[int(p)] if p.isdigit() else node[p]
        del node[int(leaf) if leaf.isdigit() else leaf]

    return apply


def _do(fn: Callable[[Doc], None]) -> Callable[[Doc], None]:
    return fn


# (id, base environment, mutation, expected code, expected path)
CASES: list[tuple[str, str, Callable[[Doc], None], Code, str]] = [
    # --- schema
    (
        "unknown-field",
        "dev",
        _set("sites.0.profiles.0.batch_parallel", 4),
        Code.UNKNOWN_FIELD,
        "sites[0].profiles[0].batch_parallel",
    ),
    ("missing-maas-url", "dev", _del("sites.0.maas_url"), Code.MISSING_FIELD, "sites[0].maas_url"),
    (
        "batch-too-high",
        "dev",
        _set("sites.0.profiles.0.batch_max_parallel", 500),
        Code.OUT_OF_RANGE,
        "sites[0].profiles[0].batch_max_parallel",
    ),
    (
        "batch-zero",
        "prod",
        _set("sites.1.profiles.0.batch_max_parallel", 0),
        Code.OUT_OF_RANGE,
        "sites[1].profiles[0].batch_max_parallel",
    ),
    (
        "ttl-too-short",
        "dev",
        _set("sites.0.profiles.0.enrollment_token_ttl_seconds", 10),
        Code.OUT_OF_RANGE,
        "sites[0].profiles[0].enrollment_token_ttl_seconds",
    ),
    (
        "retry-attempts-range",
        "dev",
        _set("sites.0.profiles.0.max_deploy_retry_attempts", 99),
        Code.OUT_OF_RANGE,
        "sites[0].profiles[0].max_deploy_retry_attempts",
    ),
    (
        "hw-sync-interval-type",
        "dev",
        _set("sites.0.profiles.0.hardware_sync_interval", "often"),
        Code.INVALID_VALUE,
        "sites[0].profiles[0].hardware_sync_interval",
    ),
    (
        "fabric-mode-enum",
        "dev",
        _set("sites.0.profiles.0.fabric_mode", "omnipath"),
        Code.INVALID_VALUE,
        "sites[0].profiles[0].fabric_mode",
    ),
    ("bad-ip", "dev", _set("hosts.1.address", "100.69.173.300"), Code.INVALID_VALUE, "hosts[1].address"),
    ("bad-mac", "dev", _set("machines.0.pxe_mac", "b0:7b:25:10:00"), Code.INVALID_VALUE, "machines[0].pxe_mac"),
    (
        "secret-instead-of-vault-ref",
        "dev",
        _set("sites.0.maas_api_key_path", "AbCdEf:GhIjK:LmNoP"),
        Code.INVALID_VALUE,
        "sites[0].maas_api_key_path",
    ),
    ("bad-logical-role", "dev", _set("hosts.0.logical_role", "control"), Code.INVALID_VALUE, "hosts[0].logical_role"),
    ("roles-written-by-hand", "dev", _set("hosts.0.roles", ["common"]), Code.INVALID_VALUE, "hosts"),
    # --- names and addresses
    (
        "duplicate-hostname",
        "dev",
        _set("hosts.1.hostname", "dev-control-1"),
        Code.DUPLICATE_HOSTNAME,
        "hosts[1].hostname",
    ),
    (
        "duplicate-machine",
        "prod",
        _set("machines.5.hostname", "dal1-h200-001"),
        Code.DUPLICATE_HOSTNAME,
        "machines[5].hostname",
    ),
    ("duplicate-host-ip", "dev", _set("hosts.2.address", "100.90.157.34"), Code.DUPLICATE_ADDRESS, "hosts[2].address"),
    (
        "duplicate-ipmi",
        "prod",
        _set("machines.3.ipmi_address", "10.41.0.11"),
        Code.DUPLICATE_ADDRESS,
        "machines[3].ipmi_address",
    ),
    (
        "duplicate-mac",
        "prod",
        _set("machines.60.pxe_mac", "b0:7b:25:41:00:01"),
        Code.DUPLICATE_MAC,
        "machines[60].pxe_mac",
    ),
    (
        "host-outside-network",
        "dev",
        _set("hosts.0.address", "192.0.2.10"),
        Code.ADDRESS_OUTSIDE_NETWORK,
        "hosts[0].address",
    ),
    (
        "ipmi-outside-bmc-network",
        "prod",
        _set("machines.50.ipmi_address", "10.41.0.250"),
        Code.ADDRESS_OUTSIDE_NETWORK,
        "machines[50].ipmi_address",
    ),
    ("duplicate-site", "prod", _set("sites.1.name", "dal1"), Code.DUPLICATE_NAME, "sites[1].name"),
    # --- RoCE pools
    (
        "pool-overlap",
        "dev",
        _set("roce_pools.3.subnet", "10.224.2.0/23"),
        Code.ROCE_POOL_OVERLAP,
        "roce_pools[3].subnet",
    ),
    (
        "pool-range-outside",
        "dev",
        _set("roce_pools.0.range.end", "10.224.9.250"),
        Code.ROCE_RANGE_INVALID,
        "roce_pools[0].range",
    ),
    (
        "pool-range-reversed",
        "dev",
        _set("roce_pools.1.range", {"start": "10.224.1.200", "end": "10.224.1.10"}),
        Code.ROCE_RANGE_INVALID,
        "roce_pools[1].range",
    ),
    (
        "pool-too-small",
        "prod",
        _set("roce_pools.4.range", {"start": "10.141.4.10", "end": "10.141.4.40"}),
        Code.ROCE_POOL_TOO_SMALL,
        "roce_pools[4].range",
    ),
    ("rail-missing", "dev", _do(lambda d: d["roce_pools"].pop(7)), Code.ROCE_RAIL_MISSING, "machines[0]"),
    (
        "pool-on-ib-site",
        "prod",
        _do(
            lambda d: d["roce_pools"].append(
                {
                    "site": "sjc1",
                    "rail": 0,
                    "subnet": "10.151.0.0/24",
                    "range": {"start": "10.151.0.10", "end": "10.151.0.20"},
                }
            )
        ),
        Code.ROCE_POOL_WITHOUT_ROCE_SITE,
        "roce_pools[8].site",
    ),
    # --- references
    ("machine-unknown-site", "dev", _set("machines.0.site", "atlantis"), Code.UNKNOWN_SITE, "machines[0].site"),
    (
        "machine-unknown-profile",
        "prod",
        _set("machines.10.profile", "h100-roce"),
        Code.UNKNOWN_PROFILE,
        "machines[10].profile",
    ),
    ("machine-unknown-bundle", "dev", _set("machines.0.bundle", "nope"), Code.UNKNOWN_BUNDLE, "machines[0].bundle"),
    (
        "profile-unknown-bundle",
        "dev",
        _set("sites.0.profiles.0.site_bootstrap_bundle_ref", "gone"),
        Code.UNKNOWN_BUNDLE,
        "sites[0].profiles[0].site_bootstrap_bundle_ref",
    ),
    (
        "bundle-of-other-site",
        "prod",
        _set("sites.1.profiles.0.site_bootstrap_bundle_ref", "dal1-h200"),
        Code.BUNDLE_SITE_MISMATCH,
        "sites[1].profiles[0].site_bootstrap_bundle_ref",
    ),
    ("unknown-sku", "dev", _set("machines.0.sku", "b300"), Code.UNKNOWN_SKU, "machines[0].sku"),
    (
        "unknown-storage-layout",
        "dev",
        _set("sites.0.profiles.0.storage_layout_profile", "raid-everything"),
        Code.UNKNOWN_STORAGE_LAYOUT,
        "sites[0].profiles[0].storage_layout_profile",
    ),
    ("unknown-pool", "prod", _set("machines.2.pool", "dal1-h200-z"), Code.UNKNOWN_POOL, "machines[2].pool"),
    ("pool-mismatch", "prod", _set("machines.2.pool", "sjc1-h200"), Code.POOL_MISMATCH, "machines[2].pool"),
    ("host-unknown-machine", "dev", _set("hosts.2.machine", "dev-gpu-9"), Code.UNKNOWN_MACHINE, "hosts[2].machine"),
    # --- seed 003 role rules
    (
        "k3s-on-worker",
        "dev",
        _set("hosts.2.extra_roles", ["control_plane_k3s"]),
        Code.ROLE_ON_WORKER,
        "hosts[2].extra_roles[0]",
    ),
    (
        "runner-on-worker",  # the GPU lane's runner serving another tag too
        "dev",
        _set("hosts.2.runner_tags", ["sim", "worker-compute"]),
        Code.ROLE_ON_WORKER,
        "hosts[2].extra_roles[0]",
    ),
    (
        "runner-tags-without-runner",
        "dev",
        _set("hosts.2.extra_roles", []),
        Code.RUNNER_TAGS_WITHOUT_RUNNER,
        "hosts[2].runner_tags",
    ),
    (
        "gpu-tag-off-worker",
        "dev",
        _set("hosts.1.runner_tags", ["app-control", "worker-compute"]),
        Code.GPU_TAG_OFF_WORKER,
        "hosts[1].runner_tags",
    ),
    (
        "controller-on-worker",
        "dev",
        _set("app_instances.0.members.controller.nodes", ["dev-gpu-1"]),
        Code.APP_CONTROL_PLANE_ON_WORKER,
        "app_instances[0].members.controller.nodes[0]",
    ),
    (
        "controller-on-maas-machine",
        "prod",
        _set("app_instances.0.members.controller.nodes", ["dal1-h200-040"]),
        Code.APP_CONTROL_PLANE_ON_WORKER,
        "app_instances[0].members.controller.nodes[0]",
    ),
    ("no-platform-control", "dev", _set("hosts.0.logical_role", "app_control"), Code.NO_PLATFORM_CONTROL, "hosts"),
    # --- policy combinations
    (
        "roce-on-ib-fabric",
        "prod",
        _set("sites.1.profiles.0.enable_phase2_roce", True),
        Code.ROCE_NEEDS_ROCE_FABRIC,
        "sites[1].profiles[0].enable_phase2_roce",
    ),
    ("tls-off-in-prod", "prod", _set("sites.0.tls_verify", False), Code.TLS_OFF_IN_PROD, "sites[0].tls_verify"),
    (
        "handoff-site-erases",
        "prod",
        _set("sites.1.customer_handoff", True),
        Code.HANDOFF_SITE_ERASES,
        "sites[1].profiles[0].release_erase_mode",
    ),
    (
        "hw-sync-interval-differs-within-a-site",
        "prod",
        _do(lambda d: d["sites"][0]["profiles"].append(
            {**d["sites"][0]["profiles"][0], "name": "h200-slow-sync", "hardware_sync_interval": 1800})),
        Code.HW_SYNC_INTERVAL_DIFFERS,
        "sites[0].profiles[1].hardware_sync_interval",
    ),
    # --- app instances
    (
        "member-nodes-exceed-count",
        "dev",
        _set("app_instances.1.members.agent.count", 0),
        Code.MEMBER_NODES_EXCEED_COUNT,
        "app_instances[1].members.agent.nodes",
    ),
    (
        "unknown-component-key",
        "dev",
        _set("app_instances.0.members.login", {"count": 1}),
        Code.UNKNOWN_COMPONENT_KEY,
        "app_instances[0].members.login",
    ),
    (
        "two-controllers",
        "dev",
        _set("app_instances.0.members.controller.count", 2),
        Code.MEMBER_COUNT_OUT_OF_BOUNDS,
        "app_instances[0].members.controller.count",
    ),
    (
        "runtime-pair-invalid",
        "dev",
        _set("app_instances.0.runtime.tenant_boundary_mode", "shared_nodes"),
        Code.RUNTIME_PAIR_INVALID,
        "app_instances[0].runtime",
    ),
    (
        "member-unknown-node",
        "dev",
        _set("app_instances.0.members.worker.nodes", ["dev-gpu-7"]),
        Code.UNKNOWN_NODE,
        "app_instances[0].members.worker.nodes[0]",
    ),
]


def _write(tmp_path: Path, base: str, mutate: Callable[[Doc], None]) -> Path:
    doc = copy.deepcopy(_load(base))
    mutate(doc)
    path = tmp_path / f"{base}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_enough_cases() -> None:
    assert len(CASES) >= 25
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("case", "base", "mutate", "code", "path"), CASES, ids=[c[0] for c in CASES])
def test_malformed_is_rejected_with_code_and_path(
    tmp_path: Path, case: str, base: str, mutate: Callable[[Doc], None], code: Code, path: str
) -> None:
    doc_path = _write(tmp_path, base, mutate)
    env, found = validate_environment(doc_path)
    assert env is None, f"{case}: the environment should be invalid"
    hits = [f for f in found if f.code is code and f.path == path]
    assert hits, f"{case}: expected {code.value} at {path}, got " + "; ".join(f"{f.code.value}@{f.path}" for f in found)
    f = hits[0]
    assert f.file.endswith(f"{base}.yaml")
    assert f.hint and f.message


def test_all_findings_come_out_together(tmp_path: Path) -> None:
    def several(doc: Doc) -> None:
        doc["sites"][0]["profiles"][0]["batch_max_parallel"] = 0
        doc["hosts"][2]["extra_roles"] = ["gitlab"]
        doc["machines"][0]["sku"] = "b300"

    env, found = validate_environment(_write(tmp_path, "dev", several))
    assert env is None
    # Schema errors stop semantic rules (they need a typed model), so check schema + a separate semantic pair.
    assert {f.code for f in found} >= {Code.OUT_OF_RANGE}

    def semantic(doc: Doc) -> None:
        doc["hosts"][2]["extra_roles"] = ["gitlab"]
        doc["machines"][0]["sku"] = "b300"
        doc["roce_pools"][3]["subnet"] = "10.224.2.0/23"

    env, found = validate_environment(_write(tmp_path, "dev", semantic))
    assert {f.code for f in found} >= {Code.ROLE_ON_WORKER, Code.UNKNOWN_SKU, Code.ROCE_POOL_OVERLAP}


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    p = tmp_path / "broken.yaml"
    p.write_text("name: broken\nsites:\n  - name: [unclosed\n")
    env, found = validate_environment(p)
    assert env is None and found[0].code is Code.YAML_SYNTAX
    assert found[0].path.startswith("line ")


def test_missing_environment_file(tmp_path: Path) -> None:
    env, found = validate_environment(tmp_path / "nope.yaml")
    assert env is None and found[0].code is Code.NO_SUCH_DOCUMENT


def test_cli_reports_without_traceback_and_hides_secret_like_values(tmp_path: Path) -> None:
    secret = "AbCdEf:GhIjKlMn:OpQrStUv"
    doc_path = _write(tmp_path, "dev", _set("sites.0.maas_api_key_path", secret))
    proc = subprocess.run(
        [sys.executable, "-m", "environments", "validate", str(doc_path)], capture_output=True, text=True, cwd=REPO_ROOT
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "Traceback" not in out
    assert "ENV004" in out and "sites[0].maas_api_key_path" in out and "fix:" in out
    assert secret not in out
