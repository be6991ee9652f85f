"""An environment split into per-site stacks plus a control stack, run by the real Pulumi CLI. The stacks
share one `file://` backend, as they share the site's S3 backend in production, so the control stack's
`pulumi.StackReference` reads the site stacks' outputs the way the CLI always does.

- prod as `prod-dal1` + `prod-sjc1` + `prod-control` previews the same resources (qualified type and
  name) as the single `prod` stack; the control stack adds only its stack reference (and the CLI's
  built-in `pulumi` provider that reads it).
- a control stack whose site stack does not exist at all is refused by the CLI itself, naming the stack.
- the local stack as a site stack and a control stack, against the embedded simulators: the site stack
  deploys the machines and exports their node ids; the control stack binds the Slurm worker to the node
  id it reads through the StackReference (never a copied value); a second `up` of each changes nothing.
- an existing `all` stack moved into its site and control stacks with `pulumi state move` (README).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from providers.kind import UNKNOWN
from providers.machines.records import OWNER_RESOURCE
from simulators.localstack import LocalStack
from tests.fixtures.preview import planned
from tools.pulumi_cli.results import EngineResult, StepOp

REPO = Path(__file__).resolve().parents[2]
STACK_TYPE = "pulumi:pulumi:Stack"
STACK_REFERENCE_TYPE = "pulumi:pulumi:StackReference"
BUILTIN_PROVIDER = "pulumi:providers:pulumi"  # the CLI's own provider: it reads StackReferences
pytestmark = pytest.mark.slow(seconds=145)  # CLI runs: a subprocess per operation


def _declared(result: EngineResult) -> set[str]:
    """`<qualified type>::<name>` of every resource a run declares (the URN without stack and project),
    the stack itself and the dynamic-provider plugin's default provider left out."""
    assert result.ok, result.errors()
    types = {s.urn: s.urn.split("::")[2] for s in result.steps}
    return {urn.split("::", 2)[2] for urn, t in types.items()
            if t != STACK_TYPE and not t.startswith("pulumi:providers:pulumi-python")}


def test_prod_split_previews_the_same_resources_as_the_single_stack(engine_factory: Any, tmp_path: Path) -> None:
    backend = tmp_path / "backend"  # one backend for the four stacks, as prod's S3 backend is

    def preview(stack: str, part: str | None = None) -> EngineResult:
        config = {"gpuaas-infra:environment": "prod", **({"gpuaas-infra:part": part} if part else {})}
        return engine_factory(REPO, stack, config=config, backend=backend).preview(timeout=300)

    whole = _declared(preview("prod"))
    # The previews `pulumi stack init` the site stacks: they exist, nothing deployed, no outputs yet.
    dal1, sjc1 = _declared(preview("prod-dal1", "site:dal1")), _declared(preview("prod-sjc1", "site:sjc1"))
    control_run = preview("prod-control", "control")
    control = _declared(control_run)

    refs = {r for r in control if r.startswith(STACK_REFERENCE_TYPE)}
    assert refs == {f"{STACK_REFERENCE_TYPE}::prod-dal1"}, "only dal1's machines are app members"
    builtin = {r for r in control if r.startswith(BUILTIN_PROVIDER + "::")}
    assert builtin == {f"{BUILTIN_PROVIDER}::default"}, "the CLI's built-in provider reads the reference"
    assert not any(r.startswith(BUILTIN_PROVIDER + "::") for r in whole | dal1 | sjc1)
    assert dal1 | sjc1 | (control - refs - builtin) == whole
    assert not dal1 & sjc1 and not (dal1 | sjc1) & control, "each resource is declared by exactly one stack"
    assert any("::profile-dal1-" in r for r in dal1) and not any("sjc1" in r for r in dal1)
    assert not any("MachinePool" in r or "SiteProfile" in r for r in control)
    # A site stack that has not exported node ids yet: the preview shows them unknown, as the single stack does.
    slurm = planned(control_run, "::app-slurm-research")
    assert slurm["newState"]["inputs"]["placements"]["worker"] == UNKNOWN
    ref = planned(control_run, f"{STACK_REFERENCE_TYPE}::prod-dal1")
    assert (ref["op"], ref["newState"]["id"]) == ("read", "prod-dal1"), "the CLI reads the site stack during preview"


def test_a_control_stack_whose_site_stack_does_not_exist_is_refused_naming_it(
    engine_factory: Any, tmp_path: Path
) -> None:
    backend = tmp_path / "backend"
    control = engine_factory(REPO, "prod-control", config={"gpuaas-infra:environment": "prod",
                                                           "gpuaas-infra:part": "control"}, backend=backend)
    refused = control.preview(timeout=300)
    assert not refused.ok
    assert 'unknown stack "prod-dal1"' in "\n".join(refused.errors()), refused.errors()
    # siteStacks may name the stack fully qualified, as `organization/<project>/<stack>` on a file/S3 backend
    engine_factory(REPO, "prod-dallas", config={"gpuaas-infra:environment": "prod", "gpuaas-infra:part": "site:dal1"},
                   backend=backend).apply_config()  # `pulumi stack init prod-dallas`
    named = engine_factory(REPO, "prod-control", backend=backend, config={
        "gpuaas-infra:environment": "prod", "gpuaas-infra:part": "control",
        "gpuaas-infra:siteStacks": '{"dal1": "organization/gpuaas-infra/prod-dallas"}'}).preview(timeout=300)
    assert named.ok, named.errors()
    ref = planned(named, f"{STACK_REFERENCE_TYPE}::organization/gpuaas-infra/prod-dallas")
    assert ref["op"] == "read" and ref["newState"]["inputs"] == {"name": "organization/gpuaas-infra/prod-dallas"}


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    """`local` trimmed to two machines (local-gpu-1 standalone, local-gpu-2 in the pool)."""
    doc = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    doc["machines"] = [m for m in doc["machines"] if m["hostname"] in ("local-gpu-1", "local-gpu-2")]
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def world() -> Iterator[LocalStack]:
    with LocalStack("local") as w:
        yield w


def _no_changes(result: EngineResult) -> None:
    assert result.ok, result.errors()
    assert {op for op in result.ops().values()} <= {StepOp.SAME, StepOp.READ}, result.changeSummary


def test_local_split_up_binds_members_through_the_reference(engine_factory: Any, world: LocalStack,
                                                             tmp_path: Path, env_file: Path) -> None:
    config = {**world.stack_config(), "gpuaas-infra:environment": str(env_file)}
    backend = tmp_path / "backend"  # both stacks on one backend: the reference reads the site stack's outputs
    site = engine_factory(REPO, "local-local", config={**config, "gpuaas-infra:part": "site:local"}, backend=backend)
    control = engine_factory(REPO, "local-control", config={**config, "gpuaas-infra:part": "control"},
                             backend=backend)

    site.apply_config()  # `pulumi stack init local-local`: it exists, nothing deployed yet: control must wait
    early = control.up(timeout=600)
    assert not early.ok and not any("AppInstance" in s.urn for s in early.steps if s.op is StepOp.CREATE)
    assert "run `pulumi up` of local-local first" in "\n".join(early.errors()) + early.log

    deployed = site.up(timeout=600)
    assert deployed.ok, deployed.errors()
    kinds = {urn.split("::")[-2].rsplit("/", 1)[-1] for urn in deployed.ops()}
    assert {"gpuaas:MaasMachine", "gpuaas:MachinePool", "gpuaas:SiteProfile"} <= kinds
    assert "gpuaas:AppInstance" not in kinds
    assert world.platform is not None
    node = next(n.node_id for n in world.platform.store.nodes.values() if n.hostname == "local-gpu-1")
    assert deployed.outputs["node_ids"]["local-gpu-1"] == node

    bound = control.up(timeout=600)
    assert bound.ok, bound.errors()
    ops = {urn.rsplit("::", 1)[-1]: op for urn, op in bound.ops().items()}
    assert ops["local-local"] is StepOp.READ and ops["app-slurm-local"] is StepOp.CREATE
    assert not any("MaasMachine" in urn or "SiteProfile" in urn for urn in bound.ops())
    app = next(s for s in bound.steps if s.urn.endswith("::app-slurm-local"))
    assert app.new is not None and app.new.inputs["placements"]["worker"] == [node]
    instance = next(i for i in world.platform.store.instances.values() if i.name == "slurm-local")
    members = [m for m in world.platform.store.members.values() if m.instance_id == instance.instance_id]
    bound_nodes = {m.node.node_id for m in members if m.node is not None}
    assert node in bound_nodes, "the worker runs on the node the site stack enrolled"

    _no_changes(site.up(timeout=600))
    _no_changes(control.up(timeout=600))


def test_an_all_stack_moves_into_its_site_and_control_stacks_with_pulumi_state_move(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path
) -> None:
    """README, "Splitting an environment": an existing `all` stack is split with `pulumi state move
    --include-parents` (the site's URNs, then the rest); nothing is recreated: the site stack's next `up`
    takes its machines over in MAAS owner data (in place; its RoCE assignment's `stack` input too) and then
    changes nothing, the control stack's
    updates its app instance in place once (its `stack` input names
    the stack) without a platform operation, and then nothing is left to do."""
    config = {**world.stack_config(), "gpuaas-infra:environment": str(env_file)}
    backend = tmp_path / "backend"
    whole = engine_factory(REPO, "local", config=config, backend=backend)
    site = engine_factory(REPO, "local-local", config={**config, "gpuaas-infra:part": "site:local"}, backend=backend)
    control = engine_factory(REPO, "local-control", config={**config, "gpuaas-infra:part": "control"},
                             backend=backend)
    deployed = whole.up(timeout=600)
    assert deployed.ok, deployed.errors()
    site.apply_config()
    control.apply_config()
    # the site's URNs: what the (empty) site stack's own preview plans, found in the `all` stack's state
    planned_names = {urn.split("::", 2)[2] for urn in _ok(site.preview(timeout=600)).ops()
                     if urn.split("::")[2] != STACK_TYPE}
    urns = list(whole.resources())
    site_urns = [u for u in urns if u.split("::", 2)[2] in planned_names]
    assert len(site_urns) == len(planned_names), "every resource the site stack declares is in the all stack"

    def move(dest: str, moved: list[str]) -> None:
        done = whole.cli("state", "move", "--source", "local", "--dest", dest, "--include-parents", "--yes", *moved,
                         with_stack=False)
        assert "Successfully moved resources" in done.stdout + done.stderr

    move("local-local", site_urns)
    rest = [u for u in whole.resources() if u.split("::")[2] != STACK_TYPE and "::pulumi:providers:" not in u]
    assert any("AppInstance" in u for u in rest) and not any("MaasMachine" in u for u in rest)
    move("local-control", rest)
    assert [u.split("::")[2] for u in whole.resources() if "::pulumi:providers:" not in u] == [STACK_TYPE]

    # The machines record their managing resource in MAAS owner data (`<stack>/<name>`): the site stack's
    # first up takes them over in place (owner data only: no MAAS lifecycle operation), then nothing is left.
    assert world.maas is not None
    lifecycle_before = _maas_lifecycle_calls(world)
    taken = _ok(site.up(timeout=600))
    # The RoCE assignment's `stack` input (whose machines MAAS owner data names as ours) follows the same move.
    expected = {"machine-local-gpu-1": {"owner"}, "pool-local-h200": {"owner"}, "roce-local": {"stack"}}
    assert {urn.rsplit("::", 1)[-1] for urn, op in taken.changed().items() if op is StepOp.UPDATE} == set(
        expected), taken.changed()
    assert set(taken.changed().values()) == {StepOp.UPDATE}, taken.changed()
    for step in (s for s in taken.steps if s.op is StepOp.UPDATE and "::pulumi:providers:" not in s.urn):
        assert step.old is not None and step.new is not None
        olds, news = step.old.inputs, step.new.inputs
        changed = {k for k in {*olds, *news} if olds.get(k) != news.get(k)}
        assert changed == expected[step.urn.rsplit("::", 1)[-1]], (step.urn, changed)
    owners = {m["hostname"]: m["owner_data"].get(OWNER_RESOURCE) for m in world.maas.admin.dump_state()["machines"]}
    assert owners["local-gpu-1"] == "local-local/machine-local-gpu-1", owners
    assert {o for h, o in owners.items() if h != "local-gpu-1"} == {"local-local/pool-local-h200"}, owners
    assert _maas_lifecycle_calls(world) == lifecycle_before, "taking the machines over costs no MAAS lifecycle call"
    _no_changes(site.up(timeout=600))
    assert world.platform is not None
    before = len(world.platform.operations())
    first = _ok(control.up(timeout=600))
    assert {urn.rsplit("::", 1)[-1]: op for urn, op in first.changed().items()} == {"app-slurm-local": StepOp.UPDATE}
    [step] = [s for s in first.steps if s.urn.endswith("::app-slurm-local")]
    assert step.old is not None and step.new is not None
    olds, news = step.old.inputs, step.new.inputs
    assert {k for k in {*olds, *news} if olds.get(k) != news.get(k)} == {"stack"}
    assert (olds["stack"], news["stack"]) == ("local", "local-control")
    assert len(world.platform.operations()) == before, "the move costs no platform operation"
    _no_changes(control.up(timeout=600))


def _maas_lifecycle_calls(world: LocalStack) -> dict[str, int]:
    assert world.maas is not None
    counts = world.maas.admin.request_counts()
    return {f"{h}.{a}": n for h, acts in counts.items() for a, n in acts.items()
            if a in ("create", "commission", "deploy", "release", "delete")}


def _ok(result: EngineResult) -> EngineResult:
    assert result.ok, result.errors()
    return result
