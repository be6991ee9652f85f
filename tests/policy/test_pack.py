"""The policy pack under the real Pulumi CLI: `pulumi preview --policy-pack ...` of the committed stacks passes,
and a stack that breaks a mandatory policy fails with exactly the expected policies.

The CLI here has no Python language host, so it starts the pack through `policy/run-policy-pack` (a binary
analyzer plugin: the same pack, its own `.policy-venv`). Before a stack's first `up` the machines' and apps'
inputs are unknown to a preview, so the broken declarations are made on `tests/policy/program` (the real
components, those inputs known); the mutations (tests/policy/mutations.py) change one resource as it
registers. Mutated stacks are named `mutated` with `environment: prod` in their config: the pack knows it is
judging prod only from the stack config the CLI sends it (a pool's inputs carry no tier).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from simulators.localstack import LocalStack
from tests.policy.conftest import PROGRAM, REPO, judge, resources
from tests.policy.mutations import (
    MUTATIONS,
    MUTATIONS_KEY,
    OUTSIDE_PROD,
    PLAINTEXT_BMC_PASSWORD,
    PLAINTEXT_TOKEN,
    request,
)
from tools.pulumi_cli.api import Engine
from tools.pulumi_cli.results import EngineResult

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
STACK_POLICIES = {
    "no-control-plane-or-ci-on-gpu-machine",
    "app-control-plane-not-on-workers",
    "customer-handoff-machines-never-erase",
}
COMMITTED = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml")
                   for p in (REPO / "stacks").glob("Pulumi.*.yaml"))


def _mutated(tmp_path: Path, reqs: list[dict[str, object]], environment: str = "prod") -> EngineResult:
    engine = Engine(PROGRAM, "mutated", tempfile.mkdtemp(prefix="backend-", dir=tmp_path),
                    config_overrides={"environment": environment, MUTATIONS_KEY: json.dumps(reqs)})
    return judge(engine)


def _no_errors_but_the_verdict(result: EngineResult) -> list[str]:
    return [m for m in result.errors() if m.strip() != "preview failed"]


def test_prod_as_declared_passes(prod_baseline: EngineResult) -> None:
    result = prod_baseline
    assert result.ok, result.errors()
    assert result.policyViolations == []
    (pack, version), = result.policyPacks.items()
    assert pack.split("|")[0] == "gpuaas-policies" and version == "0.1.0"
    assert set(result.policiesRun) == POLICIES  # every policy judged this stack (resources and the stack)
    declared = resources(result)
    kinds = {r.kind for r in declared}
    assert {"MachinePool", "SiteProfile", "HostConvergence", "AppInstance"} <= kinds, kinds
    pools = [r for r in declared if r.kind == "MachinePool"]
    assert sum(len(p.inputs["machines"]) for p in pools) == 72  # environments/prod.yaml: 48 dal1 + 24 sjc1
    assert all(p.protect for p in pools)


@pytest.mark.parametrize("case", sorted(MUTATIONS))
def test_mutated_prod_fails_with_the_expected_policies(
    case: str, prod_baseline: EngineResult, tmp_path: Path
) -> None:
    """Each mutation on its target picked in registration order and in reverse (resources register
    concurrently, so a pick must not depend on which of a kind comes first): the CLI fails the preview
    with exactly the expected mandatory policies. Where the resource's own provider refuses the change
    at check, the engine still hands it to the pack, but stops the preview there: the stack policies,
    judged at its end, never run."""
    mutation = MUTATIONS[case]
    declared = resources(prod_baseline)
    reqs = {json.dumps(request(case, order), sort_keys=True) for order in (declared, declared[::-1])}
    for req in map(json.loads, sorted(reqs)):
        result = _mutated(tmp_path, [req])
        violations = result.policyViolations
        assert not result.ok and result.exitCode != 0, (req, result.log[-2000:])
        assert {v.policyName for v in violations} == mutation.expected, (req, violations, result.errors())
        assert all(v.enforcementLevel == "mandatory" and v.resourceUrn for v in violations), violations
        assert all(v.policyPackName == "gpuaas-policies" for v in violations)
        for v in violations:
            assert PLAINTEXT_TOKEN not in v.message and PLAINTEXT_BMC_PASSWORD not in v.message
        target = [d for d in result.diagnostics if (d.urn or "").endswith("::" + req["target"])]
        if mutation.refused:
            assert any(mutation.refused in d.message for d in target if d.severity == "error"), result.errors()
            assert not STACK_POLICIES & set(result.policiesRun)
        else:
            assert _no_errors_but_the_verdict(result) == [], result.errors()


def test_what_prod_refuses_passes_outside_prod(policy_venv: None, tmp_path: Path) -> None:
    """dev: MAAS TLS off and machines unprotected are allowed (its machine is unprotected as declared)."""
    base = judge(Engine(PROGRAM, "dev", tmp_path / "baseline"))
    assert base.ok and base.policyViolations == [], base.errors()
    machines = [r for r in resources(base) if r.kind == "MaasMachine"]
    assert machines and not any(m.protect for m in machines)
    result = _mutated(tmp_path, [request(f"outside prod: {k}", resources(base)) for k in OUTSIDE_PROD], "dev")
    assert result.ok, (result.errors(), result.policyViolations)
    assert result.policyViolations == []
    changed = {r.name: r for r in resources(result)}
    assert changed[machines[0].name].inputs["connection"]["maas"]["tls_verify"] is False  # the mutation applied


@pytest.mark.parametrize("stack", [s for s in COMMITTED if s != "local"])
def test_committed_stack_passes(stack: str, policy_venv: None, tmp_path: Path) -> None:
    """The project's own program, each committed stack file's config: a first preview (unknowns included,
    judged without errors) passes the pack. A control stack's site stacks come first (StackReference)."""
    backend = tmp_path / "backend"
    if stack.endswith("-control"):
        for site_stack in [s for s in COMMITTED if s.startswith(stack.removesuffix("control")) and s != stack]:
            assert judge(Engine(REPO, site_stack, backend)).ok
    result = judge(Engine(REPO, stack, backend))
    assert result.ok, (result.errors(), result.policyViolations)
    assert result.policyViolations == [] and result.errors() == []
    assert any(r.kind in ("SiteProfile", "AppInstance") for r in resources(result))


def test_local_stack_passes(policy_venv: None, tmp_path: Path) -> None:
    """`local` (make demo) against the embedded simulators: a first preview passes the pack."""
    with LocalStack("local") as world:
        result = judge(Engine(REPO, "local", tmp_path / "backend", config_overrides=world.stack_config()))
    assert result.ok, (result.errors(), result.policyViolations)
    assert result.policyViolations == []
    assert {"SiteProfile", "MaasMachine"} <= {r.kind for r in resources(result)}


@pytest.mark.parametrize("as_secret", [True, False])
def test_a_vault_token_in_stack_config_passes_only_as_a_secret(as_secret: bool, policy_venv: None,
                                                               tmp_path: Path) -> None:
    """The dynamic provider's resource has the stack config as its inputs: `gpuaas-infra:vault_token` set with
    `--secret` reaches the pack marked secret and passes; set in plaintext, it fails `no-plaintext-secrets`."""
    token = "hvs.CAESIGpuaasInfraPolicyTestToken0123456789"
    engine = Engine(PROGRAM, "dev", tmp_path / "backend", config_overrides={"vault_token": token},
                    secret_keys=frozenset({"vault_token"}) if as_secret else frozenset())
    result = judge(engine)
    if as_secret:
        assert result.ok and result.policyViolations == [], (result.errors(), result.policyViolations)
        return
    assert not result.ok
    (v,) = result.policyViolations
    assert v.policyName == "no-plaintext-secrets" and v.enforcementLevel == "mandatory"
    assert "::pulumi:providers:pulumi-python::" in v.resourceUrn
    assert "gpuaas-infra:vault_token" in v.message and token not in v.message


def test_a_mandatory_violation_blocks_up(prod_baseline: EngineResult, tmp_path: Path) -> None:
    """`pulumi up --yes --policy-pack` (the deploy jobs): the preview it starts with fails, nothing is created."""
    engine = Engine(PROGRAM, "mutated", tmp_path / "backend", config_overrides={
        "environment": "prod", MUTATIONS_KEY: json.dumps([request("pool not protected", resources(prod_baseline))])})
    result = judge(engine, "up")
    assert not result.ok
    assert [v.policyName for v in result.policyViolations] == ["prod-machines-protected"]
    assert result.steps == [] and result.changed() == {}
    assert [r["type"] for r in engine.resources().values() if r["type"] != "pulumi:pulumi:Stack"] == []


def test_violations_reach_the_preview_note(prod_baseline: EngineResult, tmp_path: Path) -> None:
    """The CLI's preview document and its policy events (what `--event-log` holds) make the MR note."""
    from cli.main import main

    result = _mutated(tmp_path, [request("pool not protected", resources(prod_baseline))])
    assert result.policyViolations
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps({"sequence": i, "timestamp": 0, "policyEvent": v.model_dump()}) + "\n"
                           for i, v in enumerate(result.policyViolations)))
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps(result.preview_digest()))
    note = tmp_path / "note.md"
    assert main(["preview-note", f"prod={preview}", "--event-log", f"prod={log}", "--out", str(note)]) == 0
    text = note.read_text()
    assert "**1 mandatory policy violation(s)**" in text
    assert "- **mandatory** `prod-machines-protected` (gpuaas-policies@0.1.0) on MachinePool `pool-dal1-h200-a`" in text
