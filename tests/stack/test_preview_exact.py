"""The preview says exactly what `up` will do (issue 25): machines joining a pool of the local stack, under the
real CLI. The site's RoCE table is planned at check (providers/sites/roce.py `plan`), so the preview knows the
joiners' addresses and every other machine's spec stays known and equal: the merge-request note lists the
joiners only (nothing "may redeploy", nothing updated), and `up` then deploys exactly them, with exactly the
addresses the preview showed, and changes nothing else in MAAS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from preview_note import StackPreview, parse_preview, render_note
from simulators.localstack import LocalStack
from tests.fixtures.maas_counts import deploy_counts, machines_by_host

REPO = Path(__file__).resolve().parents[2]
JOINERS = ({"hostname": "local-gpu-5", "ipmi_address": "172.16.20.15", "pxe_mac": "b0:7b:25:20:00:15"},
           {"hostname": "local-gpu-6", "ipmi_address": "172.16.20.16", "pxe_mac": "b0:7b:25:20:00:16"})
ROCE = "roce-local"
pytestmark = pytest.mark.slow(seconds=35)  # CLI runs


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[LocalStack, Path, dict[str, Any]]]:
    declared = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    joiners = [{**j, "sku": "h200", "site": "local", "profile": "h200-lab", "pool": "local-h200"} for j in JOINERS]
    (tmp_path / "racked.yaml").write_text(yaml.safe_dump({**declared, "machines": declared["machines"] + joiners},
                                                         sort_keys=False))
    env_file = tmp_path / "local.yaml"
    env_file.write_text(yaml.safe_dump(declared, sort_keys=False))
    with LocalStack(str(tmp_path / "racked.yaml")) as w:
        yield w, env_file, {**declared, "machines": declared["machines"] + joiners}


def _deploys(world: LocalStack) -> dict[str, int]:
    assert world.maas is not None
    return deploy_counts(world.maas, "hostname")


def _links(world: LocalStack) -> dict[str, set[str]]:
    """hostname -> its static addresses in MAAS."""
    assert world.maas is not None
    return {h: {lk["ip_address"] for i in m["interface_set"] for lk in i.get("links", ()) if lk.get("ip_address")}
            for h, m in machines_by_host(world.maas).items()}


def _planned_table(preview: dict[str, Any]) -> dict[str, list[str]]:
    (step,) = [s for s in preview["steps"] if s["urn"].endswith(f"::{ROCE}")]
    assert step["op"] == "update", step["op"]
    return dict(step["newState"]["inputs"]["table"])


def test_machines_joining_a_pool_are_all_the_preview_shows_and_all_up_does(
        engine_factory: Any, world: tuple[LocalStack, Path, dict[str, Any]], tmp_path: Path) -> None:
    stack, env_file, with_joiners = world
    cfg = {**stack.stack_config(), "gpuaas-infra:environment": str(env_file)}
    engine = engine_factory(REPO, "local", config=cfg, backend=tmp_path / "backend")
    first = engine.up()
    assert first.ok, first.errors()
    before_deploys, before_links = _deploys(stack), _links(stack)

    env_file.write_text(yaml.safe_dump(with_joiners, sort_keys=False))
    preview = engine.preview()
    assert preview.ok, preview.errors()
    changed = {u.rsplit("::", 1)[-1]: op.value for u, op in preview.ops().items() if op.value != "same"}
    assert changed == {"pool-local-h200": "update", ROCE: "update"}, changed
    planned = _planned_table(preview.preview)
    assert sorted(planned) == [f"local-gpu-{i}" for i in range(1, 7)], planned
    note = render_note([StackPreview(stack="local", digest=parse_preview(json.dumps(preview.preview), "preview"))])
    assert "  - joins (2): `local-gpu-5`, `local-gpu-6`" in note, note
    assert "  - no machine redeploys or leaves" in note and "  - unchanged machines: 3" in note, note
    for wolf in ("may redeploy", "  - redeploys (", "  - updated in place (", "  - leaves (", "known after apply"):
        assert wolf not in note, (wolf, note)

    up = engine.up()
    assert up.ok, up.errors()
    after_deploys, after_links = _deploys(stack), _links(stack)
    assert {h for h in after_deploys if after_deploys[h] > before_deploys.get(h, 0)} == {"local-gpu-5", "local-gpu-6"}
    assert {h: a for h, a in after_links.items() if h not in ("local-gpu-5", "local-gpu-6")} == before_links
    for host in ("local-gpu-5", "local-gpu-6"):  # linked with exactly the addresses the preview showed
        assert after_links[host] >= set(planned[host]), (host, after_links[host], planned[host])
    assert engine.preview(expect_no_changes=True).ok
