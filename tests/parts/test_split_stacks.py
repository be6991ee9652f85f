"""An environment split into per-site stacks plus a control stack, through the CLI-free engine.

- prod as `prod-dal1` + `prod-sjc1` + `prod-control` previews the same resources (qualified type and
  name) as the single `prod` stack; the control stack adds only its stack reference.
- the local stack as a site stack and a control stack, against the embedded simulators: the site stack
  deploys the machines and exports their node ids; the control stack binds the Slurm worker to the node
  id it reads through the StackReference (never a copied value); a second `up` of each changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine import EngineResult, StepOp
from engine.crypto import TEST_PASSPHRASE
from engine.stackrefs import STACK_REFERENCE_TYPE
from engine.state import StateStore
from providers.common import UNKNOWN
from simulators.localstack import LocalStack

REPO = Path(__file__).resolve().parents[2]
STACK_TYPE = "pulumi:pulumi:Stack"
pytestmark = pytest.mark.slow  # engine runs: a subprocess per operation


def _declared(result: EngineResult) -> set[str]:
    """`<qualified type>::<name>` of every resource a run declares (the URN without stack and project)."""
    assert result.ok, result.errors()
    return {s.urn.split("::", 2)[2] for s in result.steps if s.urn.split("::")[2] != STACK_TYPE}


def _stack_init(path: Path, stack: str) -> None:
    """`pulumi stack init`: the stack exists and has no resources or outputs yet (never deployed)."""
    StateStore(path, TEST_PASSPHRASE, "gpuaas-infra", stack).save([], [], {})


def test_prod_split_previews_the_same_resources_as_the_single_stack(engine_factory: Any, tmp_path: Path) -> None:
    def preview(stack: str, part: str | None = None, states: dict[str, Path] | None = None) -> EngineResult:
        config = {"gpuaas-infra:environment": "prod", **({"gpuaas-infra:part": part} if part else {})}
        engine = engine_factory(REPO, stack, config=config, state_path=tmp_path / f"{stack}.json",
                                stack_states=states)
        return engine.preview(timeout=300)

    whole = _declared(preview("prod"))
    dal1, sjc1 = _declared(preview("prod-dal1", "site:dal1")), _declared(preview("prod-sjc1", "site:sjc1"))
    states = {s: tmp_path / f"{s}.json" for s in ("prod-dal1", "prod-sjc1")}
    for stack, path in states.items():
        _stack_init(path, stack)
    control_run = preview("prod-control", "control", states)
    control = _declared(control_run)

    refs = {r for r in control if r.startswith(STACK_REFERENCE_TYPE)}
    assert refs == {f"{STACK_REFERENCE_TYPE}::prod-dal1"}, "only dal1's machines are app members"
    assert dal1 | sjc1 | (control - refs) == whole
    assert not dal1 & sjc1 and not (dal1 | sjc1) & control, "each resource is declared by exactly one stack"
    assert any("::profile-dal1-" in r for r in dal1) and not any("sjc1" in r for r in dal1)
    assert not any("MachinePool" in r or "SiteProfile" in r for r in control)
    # A site stack that has not exported node ids yet: the preview shows them unknown, as the single stack does.
    slurm = next(s for s in control_run.steps if s.urn.endswith("::app-slurm-research"))
    assert (slurm.newState or {})["inputs"]["placements"]["worker"] == UNKNOWN


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
    site_state = tmp_path / "local-local.json"
    site = engine_factory(REPO, "local-local", config={**config, "gpuaas-infra:part": "site:local"},
                          state_path=site_state)
    control = engine_factory(REPO, "local-control", config={**config, "gpuaas-infra:part": "control"},
                             state_path=tmp_path / "local-control.json", stack_states={"local-local": site_state})

    _stack_init(site_state, "local-local")  # the site stack exists, nothing deployed yet: control must wait
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
    assert (app.newState or {})["inputs"]["placements"]["worker"] == [node]
    instance = next(i for i in world.platform.store.instances.values() if i.name == "slurm-local")
    members = [m for m in world.platform.store.members.values() if m.instance_id == instance.instance_id]
    bound_nodes = {m.node.node_id for m in members if m.node is not None}
    assert node in bound_nodes, "the worker runs on the node the site stack enrolled"

    _no_changes(site.up(timeout=600))
    _no_changes(control.up(timeout=600))
