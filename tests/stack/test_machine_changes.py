"""Every field of a machine's spec, changed in the local environment, under the real CLI: the preview's step
(MaasMachine replace or update; the pool an update), the merge-request note, and what `up` then does in
MAAS agree with the machines plan's rule (providers/machines/plan.py), for the standalone MaasMachine
(local-gpu-1) and a pool machine (local-gpu-3) alike. tests/machines/test_plan.py walks the same fields
through the rule, both adapters' diffs, the lifecycle's trigger and the note without a stack.

Not walked here, each for a reason: `site` (another MAAS region: the local world has one; the rule makes
it other hardware), `hostname` of the standalone machine (its resource name is `machine-<hostname>`, a new
Pulumi resource; a pool machine's rename is walked: it keeps its RoCE addresses, the hardware being named by
its PXE MAC, so nothing redeploys), `profile` of a pool machine (a pool
holds one profile: validation refuses the mix), `sku` (the only other SKU, cpu-small, fails an H200's
preflight) and `pxe_interface` and `storage` on their own (they follow the SKU and the profile)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clients.maas import MaasClient, MaasSiteClient
from preview_note import StackPreview, parse_preview, render_note
from providers.machines.plan import FIELD_RULES, Change
from simulators.localstack import LocalStack
from tests.fixtures.maas_counts import deploy_counts, machines_by_host

pytestmark = pytest.mark.slow(seconds=200)  # minutes of real runs: make test starts files like this first

REPO = Path(__file__).resolve().parents[2]
IPMI = {"local-gpu-1": "172.16.20.41", "local-gpu-3": "172.16.20.43"}
BMC_REF = "local/bmc/walk#credentials"
SPARES = ({"hostname": "spare-a", "ipmi_address": "172.16.20.31", "pxe_mac": "b0:7b:25:20:00:31"},
          {"hostname": "spare-b", "ipmi_address": "172.16.20.32", "pxe_mac": "b0:7b:25:20:00:32"})
Doc = dict[str, Any]


def _declared() -> Doc:
    return dict(yaml.safe_load((REPO / "environments" / "local.yaml").read_text()))


def _other_profile(doc: Doc, hostname: str) -> None:
    """A second profile of the site (another storage layout), and the machine moved to it."""
    if not any(p["name"] == "h200-lab-b" for p in doc["sites"][0]["profiles"]):
        profile_b = {**doc["sites"][0]["profiles"][0], "name": "h200-lab-b", "storage_layout_profile": "flat"}
        doc["sites"][0]["profiles"].append(profile_b)
    _machine(doc, hostname)["profile"] = "h200-lab-b"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[LocalStack, Path]]:
    declared = _declared()
    racked = {**declared, "machines": declared["machines"] + [
        {**s, "sku": "h200", "site": "local", "profile": "h200-lab"} for s in SPARES]}
    (tmp_path / "racked.yaml").write_text(yaml.safe_dump(racked, sort_keys=False))
    env_file = tmp_path / "local.yaml"
    env_file.write_text(yaml.safe_dump(declared, sort_keys=False))
    with LocalStack(str(tmp_path / "racked.yaml")) as w:
        yield w, env_file


def _machine(doc: Doc, hostname: str) -> Doc:
    return next(m for m in doc["machines"] if m["hostname"] == hostname)


def _set(**fields: Any) -> Callable[[Doc, str], None]:
    def edit(doc: Doc, hostname: str) -> None:
        _machine(doc, hostname).update(fields)
    return edit


def _spare(doc: Doc, hostname: str) -> None:
    """New hardware under the same name: the spare's PXE MAC and BMC."""
    spare = SPARES[0] if hostname == "local-gpu-1" else SPARES[1]
    _machine(doc, hostname).update(pxe_mac=spare["pxe_mac"], ipmi_address=spare["ipmi_address"])


def _ipmi(doc: Doc, hostname: str) -> None:
    _machine(doc, hostname)["ipmi_address"] = IPMI[hostname]


def _teardown(doc: Doc, hostname: str) -> None:
    """Another teardown mode that still releases (detach would leave the old hardware holding its name)."""
    _machine(doc, hostname)["teardown_mode"] = "full_decommission" if hostname == "local-gpu-1" else "reimage"


def _rail_mtu(doc: Doc, _hostname: str) -> None:
    """Rail 7's MTU: every RoCE machine's link on that rail changes (addresses are never renumbered)."""
    next(p for p in doc["roce_pools"] if p["rail"] == 7)["mtu"] = 4200


# field -> (edit, the machines it applies to). One `up` per field, in this order (later ones build on earlier).
WALK: list[tuple[str, Callable[[Doc, str], None], tuple[str, ...]]] = [
    ("tags", _set(tags=["lab", "gpu", "walked"]), ("local-gpu-1", "local-gpu-3")),
    ("teardown_mode", _teardown, ("local-gpu-1", "local-gpu-3")),
    ("retry_generation", _set(retry_generation=1), ("local-gpu-1", "local-gpu-3")),
    ("ipmi_address", _ipmi, ("local-gpu-1", "local-gpu-3")),
    ("power_user_path", _set(power_user_path=BMC_REF), ("local-gpu-1", "local-gpu-3")),
    ("deploy", _set(hwe_kernel="ga-22.04"), ("local-gpu-1", "local-gpu-3")),
    ("profile", _other_profile, ("local-gpu-1",)),
    ("roce_links", _rail_mtu, ("local-gpu-1", "local-gpu-2", "local-gpu-3", "local-gpu-4")),
    ("pxe_mac", _spare, ("local-gpu-1", "local-gpu-3")),
    ("power_type", _set(power_type="manual"), ("local-gpu-1", "local-gpu-3")),
    ("hostname", _set(hostname="local-gpu-3r"), ("local-gpu-3",)),  # last: the steps above name local-gpu-3
]


def _maas(world: LocalStack) -> dict[str, Doc]:
    assert world.maas is not None
    return machines_by_host(world.maas)


def _deploys(world: LocalStack) -> dict[str, int]:
    """system_id -> how often MAAS started deploying it."""
    assert world.maas is not None
    return deploy_counts(world.maas)


def _ops(result: Any) -> dict[str, str]:
    return {urn.rsplit("::", 1)[-1]: op.value for urn, op in result.ops().items()
            if "MaasMachine" in urn or "MachinePool" in urn}


def test_every_field_does_what_the_plan_says(engine_factory: Any, world: tuple[LocalStack, Path],
                                             tmp_path: Path) -> None:
    stack, env_file = world
    cfg = {**stack.stack_config(), "gpuaas-infra:environment": str(env_file)}
    engine = engine_factory(REPO, "local", config=cfg, backend=tmp_path / "backend")
    first = engine.up()
    assert first.ok, first.errors()
    assert stack.maas is not None and stack.vault is not None
    maas = MaasClient(stack.maas.url, stack.maas.api_key)
    path, key = BMC_REF.split("#")
    stack.vault.client().secrets.kv.v2.create_or_update_secret(
        path=path, mount_point="gpuaas", secret={key: json.dumps({"user": "walker", "password": "walk-pw"})})
    walked: list[str] = []
    for field, edit, hosts in WALK:
        expected = FIELD_RULES[field].change
        doc = yaml.safe_load(env_file.read_text())
        for h in hosts:
            edit(doc, h)
        env_file.write_text(yaml.safe_dump(doc, sort_keys=False))
        before_ids = {h: m["system_id"] for h, m in _maas(stack).items()}
        before = _deploys(stack)

        # The preview: MaasMachine replaced only for other hardware; the pool updated; the note says it.
        preview = engine.preview()
        assert preview.ok, (field, preview.errors())
        ops = _ops(preview)
        if "local-gpu-1" in hosts:
            want = "replace" if expected is Change.REIDENTIFY else "update"
            assert ops.get("machine-local-gpu-1") == want, (field, ops)
        if any(h != "local-gpu-1" for h in hosts):
            assert ops.get("pool-local-h200") == "update", (field, ops)
        note = render_note([StackPreview(stack="local", digest=parse_preview(json.dumps(preview.preview),
                                                                             "preview"))])
        says_redeploy = "machine redeploy" in note.splitlines()[2]  # the stack's summary line: destructive steps
        assert says_redeploy is (expected in (Change.REDEPLOY, Change.REIDENTIFY)), (field, note)

        up = engine.up()
        if not up.ok:
            pytest.fail(f"{field}: up failed:\n" + "\n".join(up.errors()), pytrace=False)
        after = _deploys(stack)
        now = _maas(stack)
        redeployed = {sid for sid in after if after[sid] > before.get(sid, 0)}
        targets = {before_ids[h] for h in hosts}
        if expected is Change.REDEPLOY:
            assert redeployed == targets, (field, redeployed, targets)
        elif expected is Change.REIDENTIFY:
            for h in hosts:
                old_sid, new = before_ids[h], now[h]
                assert new["system_id"] != old_sid and new["status_name"] == "Deployed", (field, h, new)
                old = next(m for m in now.values() if m["system_id"] == old_sid)
                assert old["hostname"] == f"{h}-was-{old_sid}" and old["status_name"] != "Deployed", (field, old)
            assert redeployed == {now[h]["system_id"] for h in hosts}, (field, redeployed)
        else:
            assert not redeployed, (field, redeployed)
        if field == "tags":
            assert all("walked" in now[h]["tag_names"] for h in hosts)
        if field == "ipmi_address":
            assert {h: maas.power_settings(now[h]["system_id"]).power_address for h in hosts} == IPMI
        if field == "power_user_path":
            assert {maas.power_settings(now[h]["system_id"]).power_user for h in hosts} == {"walker"}
        if field == "hostname":
            assert now["local-gpu-3r"]["system_id"] == before_ids["local-gpu-3"] and "local-gpu-3" not in now
        if field == "power_type":
            assert {maas.power_settings(now[h]["system_id"]).power_type for h in hosts} == {"manual"}
        clean = engine.preview(expect_no_changes=True)
        assert clean.ok, (field, _ops(clean), clean.errors())
        walked.append(field)
    assert walked == [f for f, _, _ in WALK]
    _hardware_sync_interval_changes_no_machine(engine, stack, env_file)


def _hardware_sync_interval_changes_no_machine(engine: Any, stack: LocalStack, env_file: Path) -> None:
    """A profile setting that is not deploy-time (issue 26, item 3): MAAS's hardware sync interval. Only the
    site profiles change (no bundle digest, no machine); MAAS then holds the new interval and every
    hardware-sync machine's `sync_interval` follows it; nothing redeploys."""
    doc = yaml.safe_load(env_file.read_text())
    for profile in doc["sites"][0]["profiles"]:  # one region setting: the site's profiles agree (POL007)
        profile["hardware_sync_interval"] = 1800
    env_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    before = _deploys(stack)
    preview = engine.preview()
    assert preview.ok, preview.errors()
    changed = {urn.rsplit("::", 1)[-1]: op.value for urn, op in preview.ops().items() if op.value != "same"}
    assert {n for n in changed if n.startswith("profile-")} == {"profile-local-h200-lab", "profile-local-h200-lab-b"}
    assert set(changed.values()) == {"update"}, changed
    note = render_note([StackPreview(stack="local", digest=parse_preview(json.dumps(preview.preview), "preview"))])
    assert "redeploy" not in note.splitlines()[2], note  # the summary line announces no redeploy
    up = engine.up()
    assert up.ok, up.errors()
    done = {urn.rsplit("::", 1)[-1]: op.value for urn, op in up.ops().items() if op.value != "same"}
    assert set(done) == {"profile-local-h200-lab", "profile-local-h200-lab-b"}, f"only the profiles: {done}"
    assert _deploys(stack) == before, "an interval change redeploys nothing"
    assert stack.maas is not None
    site = MaasSiteClient(stack.maas.url, stack.maas.api_key)
    assert site.hardware_sync_interval() == 1800
    synced = [m for m in _maas(stack).values() if m["enable_hw_sync"]]
    assert synced and {m["sync_interval"] for m in synced} == {1800}
    clean = engine.preview(expect_no_changes=True)
    assert clean.ok, clean.changed()


def test_a_renamed_pool_and_a_machine_moved_into_a_pool_keep_their_machines(
        engine_factory: Any, world: tuple[LocalStack, Path], tmp_path: Path) -> None:
    """A pool's resource is `pool-<name>`: renamed, it is a new resource that adopts the machines, and the
    old one is deleted after. The machines record their managing resource in MAAS owner data, so the old
    pool's delete leaves them alone: nothing is released or redeployed. The same for the standalone
    machine moved into the pool (its MaasMachine is deleted after the pool adopted it)."""
    stack, env_file = world
    cfg = {**stack.stack_config(), "gpuaas-infra:environment": str(env_file)}
    engine = engine_factory(REPO, "local", config=cfg, backend=tmp_path / "backend")
    assert engine.up().ok
    before, ids = _deploys(stack), {h: m["system_id"] for h, m in _maas(stack).items()}
    doc = yaml.safe_load(env_file.read_text())
    doc["machine_pools"][0]["name"] = "local-h200-renamed"
    for m in doc["machines"]:
        if m.get("pool") == "local-h200":
            m["pool"] = "local-h200-renamed"
    _machine(doc, "local-gpu-1")["pool"] = "local-h200-renamed"
    _machine(doc, "local-gpu-1").pop("teardown_mode", None)
    doc["hosts"] = [h for h in doc["hosts"] if h.get("machine") != "local-gpu-1"]
    doc["app_instances"] = []  # the Slurm worker was pinned to the standalone machine's host
    env_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    up = engine.up()
    assert up.ok, up.errors()
    ops = _ops(up)
    assert ops.get("pool-local-h200-renamed") == "create" and ops.get("pool-local-h200") == "delete", ops
    assert ops.get("machine-local-gpu-1") == "delete", ops
    now = _maas(stack)
    assert {h: now[h]["system_id"] for h in ids if h.startswith("local-gpu")} == {
        h: s for h, s in ids.items() if h.startswith("local-gpu")}
    assert {now[h]["status_name"] for h in now if h.startswith("local-gpu")} == {"Deployed"}
    assert _deploys(stack) == before, "a machine was redeployed"
    assert {now[h]["owner_data"].get("gpuaas_resource") for h in now if h.startswith("local-gpu")} == {
        "local/pool-local-h200-renamed"}
    assert "managed by local/pool-local-h200-renamed now: left as it is" in up.log
    assert engine.preview(expect_no_changes=True).ok
