"""The non-machine kinds as state contracts (issue 12): one descriptor per kind that classifies every
input, provider input models of their own (no environment document classes), old (v1) state still
accepted, and the import direction of the layers."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import environments.model as env_model
from providers import app_instance, bootstrap_bundle, host_convergence, roce_assignment, site_profile, wire
from providers.apps.spec import AppInstanceSpec, InstanceInputs
from providers.kind import REGISTRY, KindDescriptor
from providers.sites import bundle as bundle_spec
from providers.sites import profile as profile_spec
from providers.sites import roce as roce_spec
from tests.project.test_layers import ALLOWED

REPO = Path(__file__).resolve().parents[2]
V1_STATE = REPO / "tests" / "compat" / "state_v1" / "state.json"
KINDS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "SiteProfile": (site_profile, site_profile.INPUTS),
    "BootstrapBundle": (bootstrap_bundle, bootstrap_bundle.INPUTS),
    "RoceAssignment": (roce_assignment, roce_assignment.INPUTS),
    "AppInstance": (app_instance, app_instance.INPUT_KEYS),
    "HostConvergence": (host_convergence, host_convergence.INPUTS),
}


# Inputs older state holds under another name, which the spec still reads (RoceAssignment listed every machine;
# it now records them by group).
LEGACY_INPUTS: dict[str, tuple[str, ...]] = {"RoceAssignment": ("machines",)}


def _covered(d: KindDescriptor, key: str) -> bool:
    rules = (*d.identity, *d.replaces, *d.in_place, *d.ignored)
    return any(r == key or r.startswith(key + ".") or key.startswith(r + ".") for r in rules)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_registers_one_descriptor_that_classifies_every_input(kind: str) -> None:
    module, inputs = KINDS[kind]
    assert REGISTRY[kind] is module.DESCRIPTOR
    unclassified = [k for k in inputs if not _covered(module.DESCRIPTOR, k)]
    assert unclassified == [], f"{kind}: inputs no rule classifies (they would replace): {unclassified}"


def test_identity_changes_replace_and_policy_changes_update() -> None:
    d = site_profile.DESCRIPTOR
    old = {"site": {"name": "a"}, "profile": {"name": "p", "batch_max_parallel": 2}}
    assert d.diff(old, {**old, "site": {"name": "b"}}).replaces == ("site.name",)
    new = {**old, "profile": {"name": "p", "batch_max_parallel": 5}}
    assert d.diff(old, new).updates == ("profile.batch_max_parallel",) and not d.diff(old, new).replaces
    a = app_instance.DESCRIPTOR
    inst = {"instance": {"name": "s", "app": {"slug": "slurm", "version": "1"}}}
    assert a.diff(inst, {"instance": {"name": "s", "app": {"slug": "slurm", "version": "2"}}}).updates
    assert a.diff(inst, {"instance": {"name": "s", "app": {"slug": "ray", "version": "1"}}}).replaces


@pytest.mark.parametrize("mine", wire.MIRRORED, ids=lambda e: e.__name__)
def test_wire_enums_keep_the_environment_models_values(mine: Any) -> None:
    theirs = getattr(env_model, mine.__name__)
    assert {e.value for e in mine} == {e.value for e in theirs}


@pytest.mark.parametrize(("mine", "theirs", "minus", "plus"), [
    # the node's own fields reach nodes through bundles and deploys (components/site.py, components/machines.py)
    (profile_spec.ProfileInputs, env_model.SiteProfile, {"apt_sources", "login_user"}, set()),
    (profile_spec.SiteInputs, env_model.Site, {"profiles"}, {"maas_ca_bundle"}),  # + the env's ca_bundles.maas
    (InstanceInputs, env_model.AppInstance, set(), set()),
])
def test_provider_models_carry_the_environment_fields(mine: Any, theirs: Any, minus: set[str], plus: set[str]) -> None:
    """The component dumps the environment's object into the provider's model: same fields, or it fails."""
    assert set(mine.model_fields) == (set(theirs.model_fields) - minus) | plus


def _v1_resources() -> dict[str, dict[str, Any]]:
    doc = json.loads(V1_STATE.read_text())
    return {r["type"].rsplit(":", 1)[-1]: r for r in doc["resources"] if "dynamic/gpuaas:" in r["type"]}


@pytest.mark.parametrize(("kind", "model"), [
    ("SiteProfile", profile_spec.SiteProfileSpec), ("BootstrapBundle", bundle_spec.BundleSpec),
    ("RoceAssignment", roce_spec.RoceSpec), ("AppInstance", AppInstanceSpec),
])
def test_v1_state_validates_and_diffs_clean_against_itself(kind: str, model: Any) -> None:
    from providers.common import plain

    res = _v1_resources()[kind]
    inputs, outputs = res["inputs"], res["outputs"]
    keys = (*KINDS[kind][1], *LEGACY_INPUTS.get(kind, ()))
    model.model_validate({k: v for k, v in plain(inputs).items() if k in keys})
    model.model_validate({k: v for k, v in plain(outputs).items() if k in keys})
    provider = getattr(KINDS[kind][0], f"{kind}Provider")()
    d = provider.diff(res["id"], outputs, inputs)
    assert not d.changes and not d.replaces, f"{kind}: v1 inputs against v1 outputs must be no change"


# --- the import direction ------------------------------------------------------------------------------
def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


MINE = ["providers/common.py", "providers/site_profile.py", "providers/bootstrap_bundle.py",
        "providers/roce_assignment.py", "providers/app_instance.py", "providers/apps/spec.py",
        "providers/apps/plan.py", "providers/apps/reconciler.py", "providers/host_convergence.py",
        "providers/wire.py", "providers/sites/bundle.py", "providers/sites/profile.py", "providers/sites/roce.py",
        "providers/hosts/convergence.py"]


@pytest.mark.parametrize("rel", ["providers/sites/bundle.py", "providers/sites/profile.py", "providers/sites/roce.py",
                                 "providers/apps/reconciler.py", "providers/apps/plan.py", "providers/apps/spec.py",
                                 "providers/hosts/convergence.py"])
def test_reconcilers_do_not_import_pulumi(rel: str) -> None:
    assert not {m for m in _imports(REPO / rel) if m.split(".")[0] == "pulumi"}


@pytest.mark.parametrize("rel", MINE)
def test_providers_use_only_rule_functions_of_environments(rel: str) -> None:
    mods = {m for m in _imports(REPO / rel) if m == "environments" or m.startswith("environments.")}
    # The pure rule functions, each from the module that defines it: the list the layer test allows providers.
    assert mods <= {m for m in ALLOWED["providers"] if m.startswith("environments.")}, mods
    text = (REPO / rel).read_text()
    assert "from environments import" not in text  # the package's names are loading and validating
    assert "SimpleNamespace" not in text


@pytest.mark.parametrize("rel", ["clients/vault.py", "clients/ansible.py"])
def test_clients_are_leaves(rel: str) -> None:
    ours = {"environments", "providers", "components", "tools", "simulators", "tests"}
    assert not {m.split(".")[0] for m in _imports(REPO / rel)} & ours


@pytest.mark.parametrize("kind", ["SiteProfile", "BootstrapBundle", "RoceAssignment"])
def test_the_docs_table_says_what_the_descriptor_says(kind: str) -> None:
    doc = (REPO / "docs" / "sites-bundles-roce.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith(f"| {kind} |"))
    identity, in_place = row.split("|")[2], row.split("|")[3]
    d = REGISTRY[kind]
    assert all(f"`{p}`" in identity for p in d.identity), row
    assert [p.strip() for p in in_place.split(",") if p.strip()] and all(
        p.split(".")[0] in in_place for p in d.in_place), row
    assert ("delete first" in identity) == d.delete_before_replace, row
