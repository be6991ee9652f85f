"""SiteProfile provider against real OpenBao, moto S3, the MAAS simulator and the platform simulator."""

from __future__ import annotations

import copy
import threading
import uuid
from typing import Any

import pytest
from pydantic import SecretStr

from clients.maas import MaasSiteClient
from clients.platform import PlatformClient
from clients.vault import VaultCredentials, VaultError, VaultErrorKind
from environments.coded import CodedError
from providers.site_profile import SiteProfileProvider
from providers.sites.bundle import BundlePublisher, BundleSpec
from providers.sites.failures import SiteProfileFail
from simulators.openbao import OpenBaoDevServer
from simulators.s3 import MotoS3Server

from .conftest import KV, S3_CREDS_REF

PROFILE = {
    "name": "h200-lab", "site_bootstrap_bundle_ref": "lab-h200", "commissioning_bundle_ref": "lab-h200",
    "post_deploy_validation_bundle_ref": "lab-h200", "fabric_mode": "roce", "enable_phase2_roce": True,
    "storage_layout_profile": "h200-boss-flat", "batch_max_parallel": 2.0, "enrollment_token_ttl_seconds": 900.0,
}


@pytest.fixture
def world(openbao: OpenBaoDevServer, moto_s3: MotoS3Server, maas_sim: Any, platform_sim: Any) -> dict[str, Any]:
    """Secrets in Vault, a published bundle, and the provider inputs that point at all of it."""
    tag = uuid.uuid4().hex[:6]
    maas_path, admin_path = f"t/{tag}/maas#api_key", f"t/{tag}/platform#token"
    openbao.put_secret(KV, f"t/{tag}/maas", {"api_key": maas_sim.api_key})
    openbao.put_secret(KV, f"t/{tag}/platform", {"token": platform_sim.creds.platform_admin})
    bucket = f"bundles-{tag}"
    moto_s3.create_bucket(bucket)
    store = {"endpoint_url": moto_s3.endpoint_url, "bucket": bucket, "credentials_path": S3_CREDS_REF}
    vault = {"address": openbao.address, "kv_mount": KV, "auth_method": "token"}
    creds = VaultCredentials(token=SecretStr(openbao.root_token))
    bspec = BundleSpec.model_validate({
        "name": "lab-h200", "site": "lab", "template_set": "h200", "site_context": {"name": "lab"}, "profile": {
            "fabric_mode": "roce", "storage_layout_profile": "h200-boss-flat", "require_hw_sync": True},
        "store": store, "vault": vault})
    pub = BundlePublisher(bspec, creds).converge()
    props = {
        "tier": "local",
        "site": {"name": "lab", "maas_url": maas_sim.url, "maas_api_key_path": maas_path, "tls_verify": False,
                 "bmc_network": "172.16.20.0/24"},
        "profile": dict(PROFILE),
        "bundles": {"lab-h200": {"url": pub.url, "digest": pub.digest, "ref": pub.ref}},
        "vault": vault, "platform": {"url": platform_sim.url, "admin_token_path": admin_path}, "store": store,
    }
    provider = SiteProfileProvider()
    provider._credentials = creds
    return {"props": props, "provider": provider, "maas": maas_sim, "platform": platform_sim, "pub": pub,
            "openbao": openbao, "admin": platform_sim.creds.platform_admin}


def platform_profiles(w: dict[str, Any]) -> list[Any]:
    with PlatformClient(w["platform"].url, w["admin"]) as api:
        site = api.find_site("lab")
        return api.list_profiles(site.site_id) if site else []


def test_create_registers_site_profile_and_scripts(world: dict[str, Any]) -> None:
    p, props = world["provider"], world["props"]
    assert [f.reason for f in p.check({}, props).failures] == []
    res = p.create(props)
    outs = res.outs
    assert outs["effective_policy"]["batch_max_parallel"] == 2 and outs["effective_policy"]["fabric_mode"] == "roce"
    assert outs["effective_policy"]["site_bootstrap_bundle_ref"] == world["pub"].url
    assert outs["effective_policy"]["hardware_sync_interval"] == "900s"
    assert "gpuaas-lab-h200-inventory" in outs["commissioning_scripts"]
    assert {"gpuaas-lab-h200-gpu-check", "gpuaas-lab-h200-fabric-check"} <= set(outs["testing_scripts"])
    # what a commission asks MAAS to test: the commissioning bundle's testing scripts, not the validation ones
    assert outs["commissioning_testing_scripts"] == ["gpuaas-lab-h200-fabric-check"]
    maas = MaasSiteClient(world["maas"].url, world["maas"].api_key, tls_verify=False)
    present = maas.scripts()
    for name, sha in outs["scripts"].items():
        assert present[name].sha256 == sha
    assert [x.name for x in platform_profiles(world)] == ["h200-lab"]
    # the platform stores a Vault reference, never the key
    with PlatformClient(world["platform"].url, world["admin"]) as api:
        site = api.find_site("lab")
    assert site.credential_ref.path.endswith("/maas") and site.credential_ref.field == "api_key"
    assert world["maas"].api_key not in repr(outs)
    # idempotent: a second apply changes nothing
    again = p.update(res.id, outs, props).outs
    assert again["profile_id"] == outs["profile_id"] and again["scripts"] == outs["scripts"]
    assert p.read(res.id, outs).id == res.id


def test_policy_change_is_an_in_place_update(world: dict[str, Any]) -> None:
    p, props = world["provider"], world["props"]
    outs = p.create(props).outs
    news = copy.deepcopy(props)
    news["profile"]["batch_max_parallel"] = 6.0
    d = p.diff("x", outs, news)
    assert d.changes and not d.replaces
    updated = p.update("x", outs, news).outs
    assert updated["profile_id"] == outs["profile_id"] and updated["effective_policy"]["batch_max_parallel"] == 6
    renamed = copy.deepcopy(props)
    renamed["profile"]["name"] = "h200-other"
    assert p.diff("x", outs, renamed).replaces == ["profile.name"]


def test_the_hardware_sync_interval_is_maas_setting_set_read_back_and_repaired(world: dict[str, Any]) -> None:
    """MAAS's region `hardware_sync_interval` is the profile's: set at create, changed in place (no bundle,
    so no machine, changes), found drifted by a refresh after a hand change in MAAS and set again by up."""
    p, props = world["provider"], world["props"]
    maas = MaasSiteClient(world["maas"].url, world["maas"].api_key, tls_verify=False)
    maas.set_hardware_sync_interval(120)  # someone's earlier setting: the profile's default (900 s) wins
    outs = p.create(props).outs
    assert outs["maas_hardware_sync_interval"] == 900 and maas.hardware_sync_interval() == 900
    news = copy.deepcopy(props)
    news["profile"]["hardware_sync_interval"] = 1800.0
    d = p.diff("x", outs, news)
    assert d.changes and not d.replaces
    outs = p.update("x", outs, news).outs
    assert outs["maas_hardware_sync_interval"] == 1800 and maas.hardware_sync_interval() == 1800
    assert outs["bundles"] == props["bundles"], "the bundle is not touched"
    assert not p.diff("x", p.read("x", outs).outs, news).changes, "read back: no drift"
    maas.set_hardware_sync_interval(300)  # a hand change in MAAS
    seen = p.read("x", outs).outs
    assert seen["maas_hardware_sync_interval"] == 300 and p.diff("x", seen, news).changes
    repaired = p.update("x", seen, news).outs
    assert repaired["maas_hardware_sync_interval"] == 1800 and maas.hardware_sync_interval() == 1800


def test_state_from_before_the_interval_was_managed_reads_without_drift(world: dict[str, Any]) -> None:
    p, props = world["provider"], world["props"]
    outs = p.create(props).outs
    old = {k: v for k, v in outs.items() if k != "maas_hardware_sync_interval"}
    assert not p.diff("x", old, props).changes
    assert p.read("x", old).outs["maas_hardware_sync_interval"] == 900


@pytest.mark.parametrize(("field", "value", "code"), [
    ("batch_max_parallel", 0.0, "ENV005"), ("hardware_sync_interval", 10.0, "ENV005"),
    ("fabric_mode", "token-ring", "ENV004"), ("unknown_knob", True, "ENV002"),
])
def test_check_rejects_bad_values_with_environment_codes(world: dict[str, Any], field: str, value: object,
                                                         code: str) -> None:
    props = copy.deepcopy(world["props"])
    props["profile"][field] = value
    failures = world["provider"].check({}, props).failures
    assert failures and failures[0].reason.startswith(code) and field in failures[0].reason


def test_check_applies_policy_rules_and_accepts_unknowns(world: dict[str, Any]) -> None:
    props = copy.deepcopy(world["props"])
    props["profile"]["fabric_mode"] = "ib"  # phase-2 RoCE on IB: POL001
    failures = world["provider"].check({}, props).failures
    assert failures and failures[0].reason.startswith("POL001")
    props = copy.deepcopy(world["props"])
    props["bundles"] = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # UNKNOWN during preview
    assert not world["provider"].check({}, props).failures
    props["profile"]["max_deploy_retry_attempts"] = 99.0  # still checked while the bundles are unknown
    failures = world["provider"].check({}, props).failures
    assert failures and failures[0].reason.startswith("ENV005")


def test_vault_path_missing_changes_nothing(world: dict[str, Any]) -> None:
    props = copy.deepcopy(world["props"])
    props["site"]["maas_api_key_path"] = "t/nowhere/maas#api_key"
    with pytest.raises(CodedError) as err:
        world["provider"].create(props)
    assert str(err.value).startswith("SPR005 site profile lab/h200-lab: Vault path missing: ") and \
        "t/nowhere/maas" in str(err.value) and "; fix: write the secret there" in str(err.value)
    assert isinstance(err.value.source, VaultError) and err.value.source.kind is VaultErrorKind.PATH_MISSING
    assert platform_profiles(world) == []


def test_maas_key_rejected_changes_nothing(world: dict[str, Any]) -> None:
    tag = uuid.uuid4().hex[:6]
    world["openbao"].put_secret(KV, f"t/{tag}/badkey", {"api_key": "aaa:bbb:ccc"})
    props = copy.deepcopy(world["props"])
    props["site"]["maas_api_key_path"] = f"t/{tag}/badkey#api_key"
    with pytest.raises(CodedError, match=r"^SPR001 site profile lab/h200-lab: MAAS at \S+ rejected the API key read "
                       r"from Vault path 't/\w+/badkey#api_key'.*; fix: write a valid key there") as err:
        world["provider"].create(props)
    assert "aaa:bbb:ccc" not in str(err.value)
    assert platform_profiles(world) == []


def test_a_bundle_whose_bytes_miss_their_digest_changes_nothing(world: dict[str, Any]) -> None:
    props = copy.deepcopy(world["props"])
    props["bundles"]["lab-h200"]["digest"] = "0" * 64
    with pytest.raises(CodedError, match=r"^SPR003 site profile lab/h200-lab: bundle lab-h200: s3://\S+ does not "
                       r"match its digest 0{64}; nothing was changed; fix: run up again"):
        world["provider"].create(props)
    assert platform_profiles(world) == []


def test_a_script_registered_meanwhile_with_other_content_is_named(world: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run (or another profile's bundle) registers a script of the same name between our read and our
    create: adopted when it is the same script, SPR004 naming both digests when it is not."""
    maas = MaasSiteClient(world["maas"].url, world["maas"].api_key, tls_verify=False)
    maas.put_script("gpuaas-lab-h200-inventory", "commissioning", b"#!/bin/sh\necho other\n")
    reads = {"n": 0}
    real = MaasSiteClient.scripts

    def first_read_misses_it(self: MaasSiteClient) -> Any:
        reads["n"] += 1
        return {} if reads["n"] == 1 else real(self)

    monkeypatch.setattr(MaasSiteClient, "scripts", first_read_misses_it)
    with pytest.raises(CodedError) as err:
        world["provider"].create(world["props"])
    text = str(err.value)
    assert text.startswith("SPR004 site profile lab/h200-lab: MAAS script gpuaas-lab-h200-inventory was registered "
                           "meanwhile with other content") and "; fix: two bundles name one script" in text


def test_vault_sealed_changes_nothing(world: dict[str, Any], maas_sim: Any, platform_sim: Any) -> None:
    with OpenBaoDevServer() as bao:  # a private server: sealing the shared one would break other tests
        bao.put_secret(KV, "t/maas", {"api_key": maas_sim.api_key})
        props = copy.deepcopy(world["props"])
        props["vault"]["address"] = bao.address
        props["site"]["maas_api_key_path"] = "t/maas#api_key"
        world["provider"]._credentials = VaultCredentials(token=SecretStr(bao.root_token))
        bao.seal()
        with pytest.raises(CodedError) as err:
            world["provider"].create(props)
        assert err.value.code is SiteProfileFail.VAULT and isinstance(err.value.source, VaultError)
        assert err.value.source.kind is VaultErrorKind.SEALED
    assert platform_profiles(world) == []


def test_delete_unregisters_profile_and_scripts(world: dict[str, Any]) -> None:
    p, props = world["provider"], world["props"]
    res = p.create(props)
    p.delete(res.id, res.outs)
    assert platform_profiles(world) == []
    maas = MaasSiteClient(world["maas"].url, world["maas"].api_key, tls_verify=False)
    assert not set(res.outs["scripts"]) & set(maas.scripts())
    assert p.read(res.id, res.outs).id == ""


def test_refresh_detects_drift_and_update_repairs_it(world: dict[str, Any]) -> None:
    p, props = world["provider"], world["props"]
    res = p.create(props)
    assert not p.diff(res.id, p.read(res.id, res.outs).outs, props).changes  # refreshed, no drift
    # by hand: a script deleted in MAAS, a policy field changed in the platform
    maas = MaasSiteClient(world["maas"].url, world["maas"].api_key, tls_verify=False)
    gone = res.outs["commissioning_scripts"][0]
    maas.delete_script(gone)
    with PlatformClient(world["platform"].url, world["admin"]) as api:
        prof = api.get_profile(res.outs["site_id"], res.outs["profile_id"])
        api.update_profile(res.outs["site_id"], res.outs["profile_id"],
                           prof.policy.model_copy(update={"batch_max_parallel": 40}))
    refreshed = p.read(res.id, res.outs).outs
    assert refreshed["scripts"][gone] == "missing" and refreshed["effective_policy"]["batch_max_parallel"] == 40
    d = p.diff(res.id, refreshed, props)
    assert d.changes and not d.replaces
    repaired = p.update(res.id, refreshed, props).outs
    assert repaired["effective_policy"]["batch_max_parallel"] == 2 and gone in maas.scripts()
    assert not p.diff(res.id, p.read(res.id, repaired).outs, props).changes


def test_scripts_shared_by_two_profiles_survive_deleting_one(world: dict[str, Any]) -> None:
    p, props = world["provider"], world["props"]
    other = copy.deepcopy(props)
    other["profile"]["name"] = "h200-lab-b"
    a, b = p.create(props), p.create(other)
    assert a.outs["site_id"] == b.outs["site_id"] and a.outs["scripts"] == b.outs["scripts"]
    maas = MaasSiteClient(world["maas"].url, world["maas"].api_key, tls_verify=False)
    p.delete(a.id, a.outs)
    assert set(a.outs["scripts"]) <= set(maas.scripts())  # b still uses them
    assert [x.name for x in platform_profiles(world)] == ["h200-lab-b"]
    p.delete(b.id, b.outs)
    assert not set(b.outs["scripts"]) & set(maas.scripts())


def test_creates_that_lose_a_race_adopt_what_the_other_run_created(
        world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another run (a second stack, a concurrent `up`) creates the site, the profile and the scripts between
    this run's lookups and its creates: each "already exists" (409 site/profile name conflict, MAAS 400 for
    the script) is looked up again and adopted, never a failure; one site, one profile, each script once."""
    p, props = world["provider"], world["props"]
    p.create(props)  # the other run, done first
    before = {n: s.sha256 for n, s in MaasSiteClient(world["maas"].url, world["maas"].api_key,
                                                     tls_verify=False).scripts().items()}
    blind = {"find_site": 1, "list_profiles": 1, "scripts": 1}  # this run's first lookups see nothing yet

    def blind_once(cls: type, name: str, empty: Any) -> None:
        real = getattr(cls, name)

        def lookup(self: Any, *a: Any, **kw: Any) -> Any:
            if blind[name] > 0:
                blind[name] -= 1
                return empty
            return real(self, *a, **kw)
        monkeypatch.setattr(cls, name, lookup)

    blind_once(PlatformClient, "find_site", None)
    blind_once(PlatformClient, "list_profiles", [])
    blind_once(MaasSiteClient, "scripts", {})
    outs = p.create(props).outs
    assert blind == {"find_site": 0, "list_profiles": 0, "scripts": 0}, "each lookup was blinded once"
    monkeypatch.undo()
    assert [x.name for x in platform_profiles(world)] == ["h200-lab"] and outs["profile_id"]
    after = {n: s.sha256 for n, s in MaasSiteClient(world["maas"].url, world["maas"].api_key,
                                                    tls_verify=False).scripts().items()}
    assert after == before


def test_concurrent_creators_converge_on_one_site_and_profile(world: dict[str, Any]) -> None:
    p, props = world["provider"], world["props"]
    gate = threading.Barrier(4)
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        gate.wait()
        try:
            results.append(p.create(props).outs)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len({r["profile_id"] for r in results}) == 1 and [x.name for x in platform_profiles(world)] == ["h200-lab"]



def test_an_interval_maas_does_not_hold_after_setting_it_is_spr009(world: dict[str, Any]) -> None:
    """Another writer (a second stack of the site with another interval) changed it between set and read."""
    from types import SimpleNamespace

    props = copy.deepcopy(world["props"])
    props["profile"]["hardware_sync_interval"] = 1800.0
    other = SimpleNamespace(hardware_sync_interval=lambda: 600, set_hardware_sync_interval=lambda _s: None)
    with pytest.raises(Exception) as err:
        world["provider"]._rec(props)._ensure_hw_sync_interval(other)
    assert str(err.value).startswith("SPR009 ") and "holds hardware_sync_interval 600s after setting it to 1800s" \
        in str(err.value) and "; fix: " in str(err.value)
