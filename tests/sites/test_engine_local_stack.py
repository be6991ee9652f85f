"""The sites area of the local stack run by the real Pulumi CLI (tools/pulumi_cli), against the embedded servers
(simulators/localstack.py: MAAS + platform simulators, OpenBao, moto S3)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulators.localstack import LocalStack
from tests.fixtures.backend import state_text

PROJECT = Path(__file__).parent / "engine_project"
pytestmark = pytest.mark.slow(seconds=150)  # CLI runs: a subprocess per operation
REPO_ENVS = Path(__file__).resolve().parents[2] / "environments"
TEMPLATES = Path(__file__).resolve().parents[2] / "providers" / "bundle_templates"

BUNDLE = "gpuaas-infra:index/bundle-local-h200"  # URN tails
AUX = "bundle-local-aux"
PROFILE = "profile-local-h200-lab"
ROCE = "roce-local"


@pytest.fixture
def world() -> Iterator[LocalStack]:
    with LocalStack("local", enlisted=True) as w:
        yield w


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    """The local environment plus a second bundle (template set `default`), as a file we may edit."""
    doc = yaml.safe_load((REPO_ENVS / "local.yaml").read_text())
    doc["bootstrap_bundles"].append({"name": "local-aux", "site": "local", "template_set": "default"})
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def ops(result: Any) -> dict[str, str]:
    """resource name -> op, for our dynamic resources."""
    return {urn.rsplit("::", 1)[-1]: op.value for urn, op in result.ops().items() if "dynamic/gpuaas:" in urn}


def roce_table(engine: Any) -> dict[str, list[str]]:
    """The RoceAssignment's recorded table (addresses in rail order): the stack output only counts links."""
    (res,) = [r for u, r in engine.resources().items() if u.endswith(f"::{ROCE}")]
    return dict(res["outputs"]["table"])


def make_engine(engine_factory: Any, world: LocalStack, tmp_path: Path, env_path: Path | None = None,
                templates: Path | None = None) -> Any:
    cfg = world.stack_config()
    if env_path is not None:
        cfg["gpuaas-infra:environment"] = str(env_path)
    if templates is not None:
        cfg["gpuaas-infra:bundle_templates_dir"] = str(templates)
    return engine_factory(PROJECT, "local", config=cfg, backend=tmp_path / "backend")


def test_up_creates_everything_second_up_changes_nothing_and_state_has_no_secret(
    engine_factory: Any, world: LocalStack, tmp_path: Path
) -> None:
    engine = make_engine(engine_factory, world, tmp_path)
    first = engine.up(timeout=300)
    assert first.ok, first.errors() or first.log[-2000:]
    assert ops(first) == {"bundle-local-h200": "create", PROFILE: "create", ROCE: "create"}
    site = first.outputs["sites"]["local"]
    assert site["profiles"]["h200-lab"]["profile_id"].startswith("prof")
    assert len(site["bundles"]["local-h200"]["digest"]) == 64
    assert site["roce"] == {"linked": 4, "pending": 0, "missing": 0}
    roce = roce_table(engine)
    assert sorted(roce) == ["local-gpu-1", "local-gpu-2", "local-gpu-3", "local-gpu-4"]
    assert all(len(rows) == 8 for rows in roce.values())
    addresses = [a for rows in roce.values() for a in rows]
    assert len(addresses) == len(set(addresses)) == 32
    second = engine.up(timeout=300)
    assert second.ok and set(ops(second).values()) == {"same"}, ops(second)
    # No secret value anywhere in the stack's state (checkpoint, backups, history) or the CLI's output.
    state = state_text(engine)
    secrets = world.secret_values()
    assert secrets and not [s for s in secrets if s in state or s in first.log or s in second.log]


def test_one_template_changes_one_bundle_and_its_dependents(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path
) -> None:
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    engine = make_engine(engine_factory, world, tmp_path, env_file, templates)
    first = engine.up(timeout=300)
    assert first.ok, first.errors() or first.log[-2000:]
    before = {b: v["digest"] for b, v in first.outputs["sites"]["local"]["bundles"].items()}
    # Edit one template of the h200 set: the local-h200 bundle (and the profile naming it) change.
    step = templates / "h200" / "steps" / "40-fabric.sh.j2"
    step.write_text(step.read_text().replace('# Step "fabric"', '# Step "fabric" (v2)'))
    preview = engine.preview(timeout=300)
    assert preview.ok, preview.errors()
    assert ops(preview) == {"bundle-local-h200": "update", AUX: "same", PROFILE: "update",
                                            ROCE: "same"}, ops(preview)
    second = engine.up(timeout=300)
    assert second.ok, second.errors()
    after = {b: v["digest"] for b, v in second.outputs["sites"]["local"]["bundles"].items()}
    assert after["local-aux"] == before["local-aux"] and after["local-h200"] != before["local-h200"]
    # An undefined variable fails at check, naming the template and the variable; nothing changes.
    (templates / "default" / "cloud-init" / "30-hw-sync.yaml.j2").write_text("x: {{ values.ntp_server }}\n")
    bad = engine.up(timeout=300)
    assert not bad.ok
    assert any("BND007 template default/cloud-init/30-hw-sync.yaml.j2: undefined variable 'values.ntp_server'" in e
               and "; fix: define it in the bundle's values" in e for e in bad.errors()), bad.errors()
    assert set(ops(bad).values()) <= {"same"}


def test_policy_field_change_is_an_in_place_update(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path
) -> None:
    engine = make_engine(engine_factory, world, tmp_path, env_file)
    first = engine.up(timeout=300)
    assert first.ok, first.errors() or first.log[-2000:]
    doc = yaml.safe_load(env_file.read_text())
    doc["sites"][0]["profiles"][0]["batch_max_parallel"] = 5
    env_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    second = engine.up(timeout=300)
    assert second.ok, second.errors()
    assert ops(second) == {"bundle-local-h200": "same", AUX: "same", PROFILE: "update", ROCE: "same"}, ops(second)
    assert second.outputs["sites"]["local"]["profiles"] == first.outputs["sites"]["local"]["profiles"]
    # an out-of-range value is rejected by the environment model before anything runs
    doc["sites"][0]["profiles"][0]["batch_max_parallel"] = 500
    env_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    bad = engine.preview(timeout=300)
    assert not bad.ok and any("ENV005" in e and "batch_max_parallel" in e for e in bad.errors()), bad.errors()


def test_adding_a_roce_machine_keeps_the_others_and_destroy_cleans_up(
    engine_factory: Any, world: LocalStack, tmp_path: Path, env_file: Path
) -> None:
    doc = yaml.safe_load(env_file.read_text())
    added = doc["machines"].pop(1)  # local-gpu-2 joins later
    env_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    engine = make_engine(engine_factory, world, tmp_path, env_file)
    first = engine.up(timeout=300)
    assert first.ok, first.errors() or first.log[-2000:]
    old = roce_table(engine)
    doc["machines"].insert(1, added)
    env_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    second = engine.up(timeout=300)
    assert second.ok and ops(second)[ROCE] == "update"
    new = roce_table(engine)
    assert all(new[h] == rows for h, rows in old.items())
    assert "local-gpu-2" in new
    gone = engine.destroy(timeout=300)
    assert gone.ok, gone.errors()


def test_refresh_right_after_up_reports_no_drift(engine_factory: Any, world: LocalStack, tmp_path: Path) -> None:
    """read() returns outputs in exactly the shape create/update wrote: refresh + preview stay clean."""
    engine = make_engine(engine_factory, world, tmp_path)
    first = engine.up(timeout=300)
    assert first.ok, first.errors() or first.log[-2000:]
    # `pulumi stack export --show-secrets`: secret values compared decrypted (each save re-encrypts them)
    before = {urn: r.get("outputs") for urn, r in engine.resources(show_secrets=True).items()}
    refreshed = engine.refresh(timeout=300)
    assert refreshed.ok, refreshed.errors()
    after = {urn: r.get("outputs") for urn, r in engine.resources(show_secrets=True).items()}
    changed = {u.rsplit("::", 1)[-1]: sorted(k for k in {*before[u], *after[u]} if before[u].get(k) != after[u].get(k))
               for u in before if before[u] != after.get(u)}
    detail = [d for u in before if before[u] != after.get(u) for d in _differences(before[u], after.get(u), u)]
    assert changed == {}, f"refresh rewrote outputs: {detail[:5]}"
    preview = engine.preview(timeout=300)
    assert preview.ok and set(ops(preview).values()) == {"same"}, ops(preview)


def _differences(a: Any, b: Any, path: str) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted({*a, *b}) for d in _differences(a.get(k, "<absent>"), b.get(k, "<absent>"),
                                                                     f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path.rsplit('::', 1)[-1]}: {a!r} -> {b!r}"]
