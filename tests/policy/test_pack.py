"""The policy pack, started as the CLI starts it, judging the prod stack's resources.

Prod as declared passes; each mutation of its real inputs fails with exactly the expected policies.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.policy.analyzer import PolicyAnalyzer, Resource
from tests.policy.stacks import PreviewFailed, project_resources

POLICIES = {
    "no-control-plane-or-ci-on-worker",
    "no-control-plane-or-ci-on-gpu-machine",
    "app-control-plane-not-on-workers",
    "prod-machines-protected",
    "no-plaintext-secrets",
    "maas-tls-verify-outside-prod-only",
    "customer-handoff-never-erases",
    "customer-handoff-machines-never-erase",
    "no-node-ssh-credentials-in-apps",
}
Mutation = Callable[[list[Resource]], list[Resource]]


def _edit(
    kind: str, name: str | None, change: Callable[[dict[str, Any]], None], *, protect: bool | None = None
) -> Mutation:
    def mutate(resources: list[Resource]) -> list[Resource]:
        out, hit = [], False
        for r in resources:
            if r.type.endswith(":" + kind) and (name is None or r.name == name) and not hit:
                inputs = copy.deepcopy(r.inputs)
                change(inputs)
                r = Resource(r.urn, r.type, inputs, r.protect if protect is None else protect, r.parent)
                hit = True
            out.append(r)
        assert hit, f"no {kind} {name or ''} in the stack to mutate"
        return out

    return mutate


def _nothing(_: dict[str, Any]) -> None:
    pass


def _first_spec(inputs: dict[str, Any], **fields: Any) -> None:
    """Add fields to a pool's first machine spec (one JSON string per hostname)."""
    host = next(iter(inputs["machines"]))
    inputs["machines"][host] = json.dumps({**json.loads(inputs["machines"][host]), **fields})


def _members(inputs: dict[str, Any]) -> dict[str, Any]:
    """The AppInstance provider's `instance.members` (or a flat `members`)."""
    return inputs["instance"]["members"] if "instance" in inputs else inputs["members"]


def _profile_on(resources: list[Resource], site: str) -> str:
    return next(r.name for r in resources if r.type.endswith(":SiteProfile") and r.inputs["site"]["name"] == site)


def _app_with_member(resources: list[Resource], member: str) -> str:
    """The AppInstance declaring `member`; registration order is not stable, so never take the first."""
    return next(r.name for r in resources if r.type.endswith(":AppInstance") and member in _members(r.inputs))


def _first_pool_host(resources: list[Resource]) -> str:
    pool = next(r for r in resources if r.type.endswith(":MachinePool"))
    return str(next(iter(pool.inputs["machines"])))  # specs are keyed by hostname


def test_pack_describes_its_policies(prod_analyzer: PolicyAnalyzer) -> None:
    info = prod_analyzer.info()
    assert info.name == "gpuaas-policies"
    assert {p.name for p in info.policies} == POLICIES
    assert all(p.enforcementLevel == 1 for p in info.policies)  # MANDATORY


def test_prod_as_declared_passes(prod_analyzer: PolicyAnalyzer, prod_resources: tuple[list[Resource], str]) -> None:
    resources, source = prod_resources
    kinds = {r.type.rsplit(":", 1)[-1] for r in resources}
    assert {"MachinePool", "SiteProfile", "HostConvergence", "AppInstance"} <= kinds, (source, kinds)
    pools = [r for r in resources if r.type.endswith(":MachinePool")]
    assert sum(len(p.inputs["machines"]) for p in pools) == 72  # environments/prod.yaml: 48 dal1 + 24 sjc1
    assert prod_analyzer.check(resources) == []


def _worker_with_runner(resources: list[Resource], tmp: Path) -> Mutation:
    """prod's inventory plus one GPU machine as a worker_compute host that also runs a CI runner."""
    host = {
        "hostname": _first_pool_host(resources),
        "address": "100.88.160.31",
        "logical_role": "worker_compute",
        "roles": ["node_agent", "runner"],
    }
    return _edit("HostConvergence", None, lambda i: i.update(hosts=[*i["hosts"], host]))


MUTATIONS: dict[str, tuple[Callable[[list[Resource], Path], Mutation], set[str]]] = {
    "pool not protected": (
        lambda rs, tmp: _edit("MachinePool", "pool-dal1-h200-a", _nothing, protect=False),
        {"prod-machines-protected"},
    ),
    "MAAS TLS off": (
        lambda rs, tmp: _edit(
            "MachinePool", "pool-sjc1-h200", lambda i: i["connection"]["maas"].update(tls_verify=False)
        ),
        {"maas-tls-verify-outside-prod-only"},
    ),
    "site TLS off": (
        lambda rs, tmp: _edit("SiteProfile", None, lambda i: i["site"].update(tls_verify=False)),
        {"maas-tls-verify-outside-prod-only"},
    ),
    "token in plaintext": (
        lambda rs, tmp: _edit(
            "MachinePool",
            "pool-dal1-h200-b",
            lambda i: i["connection"]["platform"].update(token="glpat-abcdefghij0123456789"),
        ),
        {"no-plaintext-secrets"},
    ),
    "BMC password in plaintext": (
        lambda rs, tmp: _edit(
            "MachinePool", "pool-sjc1-h200", lambda i: _first_spec(i, power_password="calvin-root-2024")
        ),
        {"no-plaintext-secrets"},
    ),
    "runner on a worker host": (
        _worker_with_runner,
        {"no-control-plane-or-ci-on-worker", "no-control-plane-or-ci-on-gpu-machine"},
    ),
    "Slurm controller on a GPU node": (
        lambda rs, tmp: _edit(
            "AppInstance",
            _app_with_member(rs, "controller"),
            lambda i: _members(i)["controller"].update(nodes=[_first_pool_host(rs)]),
        ),
        {"app-control-plane-not-on-workers"},
    ),
    "node SSH key handed to an app": (
        lambda rs, tmp: _edit(
            "AppInstance", None, lambda i: i["instance"].setdefault("inputs", {}).update(
                node_access="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9dLab operator@prod-app-1")
        ),
        {"no-node-ssh-credentials-in-apps"},
    ),
    "customer-handoff site that erases": (
        lambda rs, tmp: _edit(
            "SiteProfile", _profile_on(rs, "sjc1"), lambda i: i["site"].update(customer_handoff=True)
        ),
        {"customer-handoff-never-erases", "customer-handoff-machines-never-erase"},
    ),
}


@pytest.mark.parametrize("order", ["registered", "reversed"])
@pytest.mark.parametrize("case", sorted(MUTATIONS))
def test_mutated_prod_fails_with_the_expected_policies(
    case: str,
    order: str,
    prod_analyzer: PolicyAnalyzer,
    prod_resources: tuple[list[Resource], str],
    tmp_path: Path,
) -> None:
    # Resources register concurrently, so their order differs between runs; a mutation must not depend on it.
    resources = prod_resources[0] if order == "registered" else prod_resources[0][::-1]
    make, expected = MUTATIONS[case]
    violations = prod_analyzer.check(make(resources, tmp_path)(resources))
    assert {v.policy for v in violations} == expected, violations
    assert all(v.enforcement == "mandatory" and v.urn for v in violations)
    for v in violations:
        assert "glpat-abcdefghij0123456789" not in v.message and "calvin-root-2024" not in v.message


def test_tls_off_is_allowed_outside_prod(
    dev_analyzer: PolicyAnalyzer, prod_resources: tuple[list[Resource], str]
) -> None:
    resources, _ = prod_resources
    site = next(r for r in resources if r.type.endswith(":SiteProfile"))
    lab = Resource(
        site.urn.replace("prod", "dev"),
        site.type,
        {**site.inputs, "tier": "dev", "site": {**site.inputs["site"], "tls_verify": False}},
    )
    assert dev_analyzer.analyze(lab) == []
    pool = next(r for r in resources if r.type.endswith(":MachinePool"))
    assert dev_analyzer.analyze(Resource(pool.urn, pool.type, pool.inputs, protect=False)) == []


def test_first_preview_of_prod_with_unknowns_is_judged_without_errors(prod_analyzer: PolicyAnalyzer) -> None:
    """The project's own prod preview: bundle digests and platform ids are unknown before the first up."""
    try:
        resources = project_resources("prod")
    except PreviewFailed as exc:
        pytest.fail(f"the project's prod preview fails: {exc.first_error}")
    assert resources, "the project's program declares no gpuaas resources for prod"
    violations = prod_analyzer.check(resources)
    assert [v for v in violations if v.enforcement == "mandatory"] == []


def test_violations_reach_the_preview_note(
    prod_analyzer: PolicyAnalyzer, prod_resources: tuple[list[Resource], str], tmp_path: Path
) -> None:
    """The analyzer's diagnostics, written as the CLI's `--event-log` policy events, show in the MR note."""
    from cli.main import main

    resources, _ = prod_resources
    mutated = _edit("MachinePool", "pool-dal1-h200-a", _nothing, protect=False)(resources)
    violations = prod_analyzer.check(mutated)
    assert violations
    log = tmp_path / "events.jsonl"
    log.write_text(
        "".join(
            json.dumps(
                {
                    "sequence": i,
                    "timestamp": 0,
                    "policyEvent": {
                        "resourceUrn": v.urn,
                        "message": v.message,
                        "color": "never",
                        "policyName": v.policy,
                        "policyPackName": "gpuaas-policies",
                        "policyPackVersion": "0.1.0",
                        "enforcementLevel": v.enforcement,
                    },
                }
            )
            + "\n"
            for i, v in enumerate(violations)
        )
    )
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"config": {"gpuaas-infra:environment": "prod"}, "steps": []}))
    note = tmp_path / "note.md"
    assert main(["preview-note", f"prod={preview}", "--event-log", f"prod={log}", "--out", str(note)]) == 0
    text = note.read_text()
    assert "**1 mandatory policy violation(s)**" in text
    assert "- **mandatory** `prod-machines-protected` (gpuaas-policies@0.1.0) on MachinePool `pool-dal1-h200-a`" in text
