"""SiteProfile: a site and one of its profiles registered with the platform, bound to MAAS by Vault path.

Spec (`SiteProfileSpec`) <- inputs: the provider's own `SiteInputs` and `ProfileInputs` (validated again
at `check`, so bad values fail with the environment's codes), the published bundles (url + digest)
the profile names, and where Vault, the platform, and the artifact store are.
Reconciler (`SiteProfileReconciler`: `converge`, `observe`, `release`); `converge`, in this order, so a
failure leaves nothing changed:
  1. read the MAAS key from Vault (path missing / sealed / unreachable -> SPR005, nothing mutated)
  2. MAAS `whoami` with that key (rejected -> SPR001 naming site and Vault path, nothing mutated)
  3. fetch the commissioning / validation bundles from S3 and verify their sha256 digests
  4. platform: adopt-or-create the site, then the profile; update only what differs
  5. MAAS node scripts: upload each bundle script whose body differs (named by its metadata header)
  6. MAAS's region setting `hardware_sync_interval`: set when it differs, read back (MAAS holds one interval
     per region: validation (POL007) makes a site's profiles agree; deleting a profile leaves the setting)
Outputs: site_id, profile_id, the effective policy (as the platform stored it), the registered
script names per type (the machine lifecycle commissions with them) and their sha256, and MAAS's
interval as read back. The interval is not deploy-time: no bundle carries it (a change redeploys nothing;
MAAS renders each deploy's hardware-sync timer from its setting and reports `sync_interval` from it).
Failures are coded (`failures.SiteProfileFail`, SPR0xx; client errors too: `PROFILE_CLIENTS`).
A policy field change is an in-place update (diff never asks for replacement except on a rename).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

import clients.maas
import clients.platform
from clients.maas import MaasError
from clients.platform import PlatformApiError
from clients.platform import models as pm
from clients.s3 import ArtifactStore, s3_credentials
from clients.vault import VaultCredentials, VaultReader, parse_ref
from environments.ca_paths import resolve_ca
from environments.coded import line, raises_coded
from environments.findings import Level
from environments.rules_policy import profile_policy, site_tls
from providers.common import VaultInputs, plain, vault_reader
from providers.sites.bundle import Script, StoreInputs, bundle_scripts
from providers.sites.failures import PROFILE_CLIENTS, SiteProfileFail
from providers.wire import EraseMode, FabricMode, Name, Tier, VaultRef, Wire

if TYPE_CHECKING:  # the HTTP clients load when a call first makes one (clients/maas, clients/platform)
    from clients.maas import MaasSiteClient
    from clients.platform import PlatformClient

SOURCE = "sites"



class BundleOutput(Wire):
    url: str
    digest: str
    ref: dict[str, str]


class SiteInputs(Wire):
    """A site as this provider records it (the environment's Site, minus its profile list)."""

    name: Name
    maas_url: str
    maas_api_key_path: VaultRef
    tls_verify: bool = True
    maas_ca_bundle: str | None = None
    """PEM file of the CA that signs MAAS's certificate (`ca_bundles.maas`)."""
    customer_handoff: bool = False
    bmc_network: ipaddress.IPv4Network | None = None


class ProfileInputs(Wire):
    """A site profile's policy as this provider records it (same names and bounds as the environment's)."""

    name: Name
    site_bootstrap_bundle_ref: str
    strict_pxe_preflight: bool = True
    enable_phase2_roce: bool = False
    require_hw_sync: bool = True
    hardware_sync_interval: int = Field(900, ge=60, le=86400)
    release_fallback_no_erase: bool = False
    enable_deploy_retry_on_datasource_failure: bool = True
    max_deploy_retry_attempts: int = Field(3, ge=1, le=10)
    auto_claim_single_new_machine: bool = False
    batch_max_parallel: int = Field(8, ge=1, le=64)
    enrollment_token_ttl_seconds: int = Field(3600, ge=300, le=86400)
    fabric_mode: FabricMode = FabricMode.ETHERNET
    commissioning_bundle_ref: str | None = None
    post_deploy_validation_bundle_ref: str | None = None
    storage_layout_profile: str = "flat"
    release_erase_mode: EraseMode = EraseMode.QUICK

    def bundle_refs(self) -> tuple[str, ...]:
        return tuple(n for n in (self.site_bootstrap_bundle_ref, self.commissioning_bundle_ref,
                                 self.post_deploy_validation_bundle_ref) if n)


class PlatformInputs(Wire):
    url: str
    admin_token_path: str
    ca_bundle: str | None = None
    """PEM file of the CA that signs the platform's certificate (`ca_bundles.platform`)."""


class SiteProfileArgs(BaseModel):
    """What the component knows at declaration time (the bundles' published refs come later)."""

    model_config = ConfigDict(frozen=True, extra="ignore")  # ignore output keys recorded beside inputs

    tier: Tier = Tier.LOCAL
    site: SiteInputs
    profile: ProfileInputs
    vault: VaultInputs
    platform: PlatformInputs
    store: StoreInputs


class SiteProfileSpec(SiteProfileArgs):
    bundles: dict[str, BundleOutput] = {}
    """bundle name -> its published ref (the profile's *_bundle_ref names point here)."""

    def bundle_url(self, name: str | None) -> str | None:
        return self.bundles[name].url if name else None

    def policy(self) -> pm.SiteProfilePolicy:
        p = self.profile
        return pm.SiteProfilePolicy(
            site_bootstrap_bundle_ref=self.bundle_url(p.site_bootstrap_bundle_ref),
            strict_pxe_preflight=p.strict_pxe_preflight, enable_phase2_roce=p.enable_phase2_roce,
            require_hw_sync=p.require_hw_sync, hardware_sync_interval=f"{p.hardware_sync_interval}s",
            release_fallback_no_erase=p.release_fallback_no_erase,
            enable_deploy_retry_on_datasource_failure=p.enable_deploy_retry_on_datasource_failure,
            max_deploy_retry_attempts=p.max_deploy_retry_attempts,
            auto_claim_single_new_machine=p.auto_claim_single_new_machine, batch_max_parallel=p.batch_max_parallel,
            enrollment_token_ttl_seconds=p.enrollment_token_ttl_seconds, fabric_mode=pm.FabricMode(p.fabric_mode),
            commissioning_bundle_ref=self.bundle_url(p.commissioning_bundle_ref),
            post_deploy_validation_bundle_ref=self.bundle_url(p.post_deploy_validation_bundle_ref),
            storage_layout_profile=p.storage_layout_profile,
        )

    def credential_ref(self) -> pm.VaultCredentialRef:
        path, key = parse_ref(self.site.maas_api_key_path)
        return pm.VaultCredentialRef(mount=self.vault.kv_mount, path=path, field=key)


def policy_findings(spec: SiteProfileArgs) -> list[str]:
    """The environment's own rules (POL001, POL003 ...) over this one site and profile."""
    s, p = spec.site, spec.profile
    source, base = f"{SOURCE}[{s.name}]", f"profiles[{p.name}]"
    found = [*site_tls(s.name, s.tls_verify, spec.tier, source, "site.tls_verify"),
             *profile_policy(s.name, p.name, fabric_mode=p.fabric_mode, enable_phase2_roce=p.enable_phase2_roce,
                            retry_enabled=p.enable_deploy_retry_on_datasource_failure,
                            retry_attempts_set="max_deploy_retry_attempts" in p.model_fields_set,
                            customer_handoff=s.customer_handoff, release_erase_mode=p.release_erase_mode,
                            file=source, base=base)]
    return [line(f.code.value, f"{f.file}: {f.path}", f.message, f.hint) for f in found if f.level is Level.ERROR]


class ProfileResult(BaseModel):
    """The outputs, in one shape for create, update and read (a refresh after up shows no drift)."""

    site_id: str
    profile_id: str
    effective_policy: dict[str, Any]
    commissioning_scripts: list[str]
    testing_scripts: list[str]
    commissioning_testing_scripts: list[str] = []
    """The commissioning bundle's testing scripts: what a commission asks MAAS to test (the validation
    bundle's testing scripts are registered too, and run on the node after deploy)."""
    scripts: dict[str, str]
    """script name -> sha256 as MAAS has it ("missing" when a refresh found it gone)."""
    scripts_registered: dict[str, str]
    """script name -> sha256 this stack registered (scripts != scripts_registered: drift)."""
    maas_hardware_sync_interval: int | None = None
    """MAAS's region `hardware_sync_interval` in seconds as last read (None: state from before it was managed,
    or a value MAAS holds that is not a time span)."""


class SiteProfileReconciler:
    """converge / observe / release one site profile. Plain Python: no Pulumi here."""

    def __init__(self, spec: SiteProfileSpec, credentials: VaultCredentials | None) -> None:
        self.commissioning_testing: list[str] = []  # set by _scripts
        self.spec, self._credentials = spec, credentials

    @property
    def where(self) -> str:
        return f"site profile {self.spec.site.name}/{self.spec.profile.name}"

    def _vault(self) -> VaultReader:
        return vault_reader(self.spec.vault, self._credentials)

    def _maas(self, vault: VaultReader) -> MaasSiteClient:
        s = self.spec.site
        key = vault.read(s.maas_api_key_path)
        maas = clients.maas.MaasSiteClient(s.maas_url, key.get_secret_value(), tls_verify=s.tls_verify,
                              ca_bundle=resolve_ca(s.maas_ca_bundle))
        try:
            maas.whoami()
        except MaasError as e:
            if e.status in (401, 403):
                raise SiteProfileFail.MAAS_KEY_REJECTED(
                    self.where, f"MAAS at {s.maas_url} rejected the API key read from Vault path "
                    f"{s.maas_api_key_path!r} (HTTP {e.status}); nothing was changed",
                    "write a valid key there (MAAS UI > API keys)") from None
            raise SiteProfileFail.MAAS_UNREACHABLE(self.where, f"MAAS at {s.maas_url} did not answer ({e}); nothing "
                                                   "was changed") from None
        return maas

    def _scripts(self, vault: VaultReader) -> list[Script]:
        p, s = self.spec.profile, self.spec.store
        wanted = [(p.commissioning_bundle_ref, "commissioning", "commissioning"),
                  (p.post_deploy_validation_bundle_ref, "validation", "testing")]
        if not any(name for name, _f, _t in wanted):
            return []
        store = ArtifactStore(s.location(), s3_credentials(vault, s.credentials_path))
        out: list[Script] = []
        for name, folder, default_type in wanted:
            if not name:
                continue
            b = self.spec.bundles[name]
            data = store.get(b.ref["key"], b.ref.get("version_id"))
            if hashlib.sha256(data).hexdigest() != b.digest:
                raise SiteProfileFail.BUNDLE_DIGEST(self.where, f"bundle {name}: s3://{b.ref['bucket']}/{b.ref['key']} "
                                                    f"does not match its digest {b.digest}; nothing was changed")
            found = bundle_scripts(data, folder, default_type)
            if folder == "commissioning":
                self.commissioning_testing = [x.name for x in found if x.script_type == "testing"]
            out += found
        return out

    def _platform(self, vault: VaultReader) -> PlatformClient:
        p = self.spec.platform
        return clients.platform.PlatformClient(p.url, vault.read(p.admin_token_path), ca_bundle=resolve_ca(p.ca_bundle))

    def _ensure_profile(self, api: PlatformClient) -> tuple[str, pm.SiteProfile]:
        """Adopt-or-create the site, then the profile; update only what differs."""
        s, policy, cref = self.spec.site, self.spec.policy(), self.spec.credential_ref()
        site = api.find_site(s.name)
        desc = f"managed by gpuaas-infra ({self.spec.tier.value})"
        if site is None:
            try:
                site = api.create_site(pm.MaasSiteCreate(name=s.name, maas_url=s.maas_url, description=desc,
                                                         credential_ref=cref))
            except PlatformApiError as e:  # another run created it first: adopt it
                site = api.find_site(s.name) if e.status == 409 else None
                if site is None:
                    raise
        if (site.maas_url, site.credential_ref) != (s.maas_url, cref):
            site = api.update_site(site.site_id, pm.MaasSiteUpdate(
                maas_url=s.maas_url, region=site.region, description=site.description or desc, credential_ref=cref))
        name = self.spec.profile.name
        prof = next(iter(api.list_profiles(site.site_id, name=name)), None)
        if prof is None:
            try:
                prof = api.create_profile(site.site_id, pm.SiteProfileCreate(name=name, policy=policy))
            except PlatformApiError as e:  # profile_name_conflict: another run created it first: adopt it
                prof = next(iter(api.list_profiles(site.site_id, name=name)), None) if e.status == 409 else None
                if prof is None:
                    raise
        if prof.policy != policy:
            prof = api.update_profile(site.site_id, prof.profile_id, policy)
        return site.site_id, prof

    @raises_coded(PROFILE_CLIENTS)
    def converge(self, previous_scripts: list[str] | None = None) -> ProfileResult:
        vault = self._vault()
        maas = self._maas(vault)  # 1-2: Vault key and MAAS verified before any change
        scripts = self._scripts(vault)  # 3: bundles fetched and their digests verified
        with self._platform(vault) as api:  # 4
            site_id, prof = self._ensure_profile(api)
        present = maas.scripts()  # 5
        for sc in scripts:
            have = present.get(sc.name)
            if have is None or have.sha256 != sc.sha256 or have.script_type != sc.script_type:
                self._put_script(maas, sc, replace=have is not None)
        for name in sorted(set(previous_scripts or ()) - {sc.name for sc in scripts}):
            maas.delete_script(name)  # registered by a previous bundle, gone from the new one
        interval = self._ensure_hw_sync_interval(maas)  # 6
        registered = {x.name: x.sha256 for x in scripts}
        return ProfileResult(
            site_id=site_id, profile_id=prof.profile_id, effective_policy=prof.policy.model_dump(mode="json"),
            commissioning_scripts=[x.name for x in scripts if x.script_type == "commissioning"],
            testing_scripts=[x.name for x in scripts if x.script_type == "testing"],
            commissioning_testing_scripts=list(self.commissioning_testing),
            scripts=registered, scripts_registered=dict(registered), maas_hardware_sync_interval=interval,
        )

    def _ensure_hw_sync_interval(self, maas: MaasSiteClient) -> int:
        """MAAS's region interval: set when it differs, then read back (what is reported is what MAAS holds)."""
        wanted = self.spec.profile.hardware_sync_interval
        if maas.hardware_sync_interval() == wanted:
            return wanted
        maas.set_hardware_sync_interval(wanted)
        got = maas.hardware_sync_interval()
        if got != wanted:
            raise SiteProfileFail.SETTING_NOT_HELD(self.where, f"MAAS at {self.spec.site.maas_url} holds "
                                                   f"hardware_sync_interval {got}s after setting it to {wanted}s")
        return got

    def _put_script(self, maas: MaasSiteClient, sc: Script, replace: bool) -> None:
        """Register a script; "already exists" (another run or profile registered it meanwhile) adopts it when
        it is the same script, and is an error naming both otherwise."""
        try:
            maas.put_script(sc.name, sc.script_type, sc.body, title=sc.title, description=sc.description,
                            tags=("gpuaas", self.spec.site.name), replace=replace)
        except MaasError as e:
            if e.status != 400:
                raise
            have = maas.scripts().get(sc.name)
            if have is None:
                raise
            if (have.sha256, have.script_type) != (sc.sha256, sc.script_type):
                raise SiteProfileFail.SCRIPT_CONFLICT(self.where, f"MAAS script {sc.name} was registered meanwhile "
                                                      f"with other content (sha256 {have.sha256}, ours {sc.sha256})") \
                    from e

    @raises_coded(PROFILE_CLIENTS)
    def observe(self, last: ProfileResult) -> ProfileResult | None:
        """The profile as the platform has it and the scripts as MAAS has them; None when it is gone."""
        vault = self._vault()
        with self._platform(vault) as api:
            prof = next((p for p in api.list_profiles(last.site_id) if p.profile_id == last.profile_id), None)
        if prof is None:
            return None
        maas = self._maas(vault)
        present = maas.scripts()
        actual = {n: (present[n].sha256 if n in present else "missing") for n in last.scripts_registered}
        return last.model_copy(update={"effective_policy": prof.policy.model_dump(mode="json"), "scripts": actual,
                                       "maas_hardware_sync_interval": maas.hardware_sync_interval()})

    @raises_coded(PROFILE_CLIENTS)
    def release(self, site_id: str, profile_id: str, scripts: list[str]) -> None:
        """Unregister the profile (the site stays: other profiles and machines may use it) and its scripts."""
        vault = self._vault()
        maas = self._maas(vault)
        with self._platform(vault) as api:
            profiles = api.list_profiles(site_id)
            if any(p.profile_id == profile_id for p in profiles):
                api.delete_profile(site_id, profile_id)
        # Scripts are named per bundle: keep them while another profile of the site uses the same bundle.
        ours = {_bundle_name(self.spec.bundle_url(n)) for n in (self.spec.profile.commissioning_bundle_ref,
                                                                self.spec.profile.post_deploy_validation_bundle_ref)}
        others = {_bundle_name(u) for p in profiles if p.profile_id != profile_id
                  for u in (p.policy.commissioning_bundle_ref, p.policy.post_deploy_validation_bundle_ref)}
        if (ours - {None}) & others:
            return
        for name in scripts:
            maas.delete_script(name)

    def drift(self, last: dict[str, Any]) -> list[str]:
        """What the last observation (a refresh) found changed outside the stack."""
        out = []
        if "scripts_registered" in last and plain(last.get("scripts")) != plain(last["scripts_registered"]):
            out.append("scripts")
        found = last.get("effective_policy")
        if found is not None and plain(found) != self.spec.policy().model_dump(mode="json"):
            out.append("effective_policy")
        if "maas_hardware_sync_interval" in last and plain(last["maas_hardware_sync_interval"]) != \
                self.spec.profile.hardware_sync_interval:
            out.append("maas_hardware_sync_interval")  # a hand change in MAAS (or a value it cannot read: None)
        return out


def _bundle_name(url: str | None) -> str | None:
    """'s3://bucket/bundles/<site>/<name>/<digest>.tar.gz' -> '<site>/<name>'."""
    m = re.search(r"/bundles/([^/]+/[^/]+)/[0-9a-f]{64}\.tar\.gz$", url or "")
    return m.group(1) if m else None
