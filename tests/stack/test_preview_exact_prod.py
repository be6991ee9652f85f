"""The preview says exactly what `up` will do, on the prod environment's dal1 site stack (issue 25, item 6), under
the real CLI: 48 H200 machines in two RoCE pools sharing one eight-rail RoCE table, batch_max_parallel 16, secure
release erase.

1. Two machines racked into pool dal1-h200-b: the merge-request note lists the two joiners and nothing else (no
   machine "may redeploy", no other pool or resource changes, the RoCE table planned at preview with the joiners'
   addresses); `up` then deploys exactly those two, links exactly the previewed addresses and leaves the other
   48 machines' MAAS records (status, deploys, addresses) as they were.
2. A kernel change (hwe_kernel) on every machine of pool dal1-h200-b: the note names its 18 machines as
   redeploys, says their data disks are erased (secure erase) and that it rolls at most 16 at once; `up` then
   redeploys exactly those 18 in MAAS, never more than 16 at once, and dal1-h200-a's 32 are untouched.

The environment is environments/prod.yaml as committed, with only its endpoints pointed at the embedded
services (one LocalStack) and Vault reached with the dev server's token instead of AppRole (not under test here).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from preview_note import StackPreview, parse_preview, render_note
from simulators.localstack import LocalStack
from tests.fixtures.maas_counts import MaasSampler, deploy_counts, machines_by_host

REPO = Path(__file__).resolve().parents[2]
POOL_B, POOL_A = "dal1-h200-b", "dal1-h200-a"
JOINERS = ({"hostname": "dal1-h200-049", "ipmi_address": "10.41.0.59", "pxe_mac": "b0:7b:25:41:00:31"},
           {"hostname": "dal1-h200-050", "ipmi_address": "10.41.0.60", "pxe_mac": "b0:7b:25:41:00:32"})
JOINER_NAMES = {j["hostname"] for j in JOINERS}
DEPLOYING = {"Deploying", "Disk erasing", "Releasing"}  # the slot stages MAAS shows
pytestmark = pytest.mark.slow(seconds=40)  # CLI runs over a 48-machine site


def _point_at(doc: dict[str, Any], world: LocalStack) -> None:
    assert world.vault and world.platform and world.s3 and world.maas
    doc["vault"].update(address=world.vault.address, auth_method="token")
    doc["platform"]["url"] = world.platform.url
    doc["artifact_store"]["endpoint_url"] = world.s3.endpoint_url
    for site in doc["sites"]:
        site["maas_url"] = world.maas.url


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[LocalStack, Path, dict[str, Any], dict[str, Any]]]:
    declared = yaml.safe_load((REPO / "environments" / "prod.yaml").read_text())
    template = next(m for m in declared["machines"] if m.get("pool") == POOL_B)
    with_joiners = {**declared, "machines": declared["machines"] + [{**template, **j} for j in JOINERS]}
    racked = tmp_path / "racked.yaml"  # MAAS holds the joiners' hardware from the start (racked, not declared)
    racked.write_text(yaml.safe_dump(with_joiners, sort_keys=False))
    with LocalStack(str(racked), maas_time_scale=2e-4) as w:
        for doc in (declared, with_joiners):
            _point_at(doc, w)
        env_file = tmp_path / "prod.yaml"
        env_file.write_text(yaml.safe_dump(declared, sort_keys=False))
        yield w, env_file, declared, with_joiners


def _links(world: LocalStack) -> dict[str, set[str]]:
    """hostname -> its addresses in MAAS on the site's RoCE subnets (the PXE interface's address is MAAS's to
    pick at each deploy)."""
    assert world.maas is not None
    roce = [ipaddress.ip_network(p.subnet) for p in world.env.roce_pools if p.site == "dal1"]
    return {h: {lk["ip_address"] for i in m["interface_set"] for lk in i.get("links", ())
                if lk.get("ip_address") and any(ipaddress.ip_address(lk["ip_address"]) in net for net in roce)}
            for h, m in machines_by_host(world.maas).items()}


def _statuses(world: LocalStack) -> dict[str, str]:
    assert world.maas is not None
    return {h: m["status_name"] for h, m in machines_by_host(world.maas).items()}


def _note(preview: Any) -> str:
    return render_note([StackPreview(stack="prod-dal1", digest=parse_preview(json.dumps(preview.preview), "preview"))])


def _changed(preview: Any) -> dict[str, str]:
    return {u.rsplit("::", 1)[-1]: op.value for u, op in preview.ops().items() if op.value != "same"}


def test_prod_site_note_says_exactly_what_up_then_does_in_maas(
        engine_factory: Any, world: tuple[LocalStack, Path, dict[str, Any], dict[str, Any]], tmp_path: Path) -> None:
    stack, env_file, declared, with_joiners = world
    assert stack.maas is not None
    # Deadlines at 5e-3 of MAAS time (enrollment 9 s), not at the simulator's 2e-4 (0.36 s): the simulator's MAAS
    # phases shrink, its CPU work does not, and on a slower 2-core host under the suite's load a 0.36 s enrollment
    # deadline expired (MCH014) and the machine was deployed again (run20: "each redeployed once").
    cfg = {**stack.stack_config(machine_time_scale=5e-3), "gpuaas-infra:environment": str(env_file),
           "gpuaas-infra:part": "site:dal1"}
    engine = engine_factory(REPO, "prod-dal1", config=cfg, backend=tmp_path / "backend")
    first = engine.up(timeout=900)
    assert first.ok, first.errors()
    dal1 = {m["hostname"] for m in declared["machines"] if m["site"] == "dal1"}
    assert {h for h, s in _statuses(stack).items() if s == "Deployed"} == dal1
    before = (deploy_counts(stack.maas, "hostname"), _links(stack), _statuses(stack))

    # 1. two machines join pool b
    env_file.write_text(yaml.safe_dump(with_joiners, sort_keys=False))
    preview = engine.preview()
    assert preview.ok, preview.errors()
    assert _changed(preview) == {f"pool-{POOL_B}": "update", "roce-dal1": "update"}, _changed(preview)
    (roce,) = [s for s in preview.preview["steps"] if s["urn"].endswith("::roce-dal1")]
    planned = dict(roce["newState"]["inputs"]["table"])
    assert set(planned) == dal1 | JOINER_NAMES, sorted(set(planned) ^ (dal1 | JOINER_NAMES))
    note = _note(preview)
    assert "  - joins (2): `dal1-h200-049`, `dal1-h200-050`" in note, note
    assert "  - no machine redeploys or leaves" in note and "  - unchanged machines: 16" in note, note
    assert f"`{POOL_A}`" not in note, note  # the untouched pool is not in the note at all
    for wolf in ("may redeploy", "  - redeploys (", "  - updated in place (", "  - leaves (", "known after apply"):
        assert wolf not in note, (wolf, note)

    up = engine.up(timeout=600)
    assert up.ok, up.errors()
    deploys, links, statuses = deploy_counts(stack.maas, "hostname"), _links(stack), _statuses(stack)
    assert {h for h in deploys if deploys[h] > before[0].get(h, 0)} == JOINER_NAMES
    assert {h: a for h, a in links.items() if h not in JOINER_NAMES} == before[1], "no other machine's addresses moved"
    assert {h: s for h, s in statuses.items() if h not in JOINER_NAMES} == before[2]
    for host in JOINER_NAMES:  # linked with exactly the addresses the preview showed
        assert statuses[host] == "Deployed"
        assert len(planned[host]) == 8 and links[host] == set(planned[host]), (host, links[host], planned[host])
    assert engine.preview(expect_no_changes=True).ok

    # 2. a kernel change on pool b: its 18 machines redeploy, erased, rolling at 16
    pool_b = sorted(m["hostname"] for m in with_joiners["machines"] if m.get("pool") == POOL_B)
    assert len(pool_b) == 18
    for machine in with_joiners["machines"]:
        if machine.get("pool") == POOL_B:
            machine["hwe_kernel"] = "ga-22.04"
    env_file.write_text(yaml.safe_dump(with_joiners, sort_keys=False))
    preview = engine.preview()
    assert preview.ok, preview.errors()
    assert _changed(preview) == {f"pool-{POOL_B}": "update"}, _changed(preview)
    note = _note(preview)
    assert (f"  - redeploys (18, data disks erased (secure erase); rolling, at most 16 at once): "
            f"`{pool_b[0]}`–`{pool_b[-1]}` (deploy.hwe_kernel changed)") in note, note
    assert "may redeploy" not in note and f"`{POOL_A}`" not in note, note

    before = (deploy_counts(stack.maas, "hostname"), _links(stack), _statuses(stack))
    with MaasSampler(stack.maas, lambda ms: sum(m["status_name"] in DEPLOYING for m in ms.values()), 0.05) as sampler:
        up = engine.up(timeout=900)
    assert up.ok, up.errors()
    deploys = deploy_counts(stack.maas, "hostname")
    assert {h for h in deploys if deploys[h] > before[0].get(h, 0)} == set(pool_b)
    assert all(deploys[h] == before[0][h] + 1 for h in pool_b), "each redeployed once"
    assert 0 < max(sampler.samples) <= 16, max(sampler.samples)
    assert _links(stack) == before[1], "a redeploy keeps the machines' RoCE addresses"
    assert all(s == "Deployed" for h, s in _statuses(stack).items() if h in dal1 | JOINER_NAMES)
    assert engine.preview(expect_no_changes=True).ok
