"""SiteProfile: a site and one of its profiles registered with the platform, bound to MAAS by Vault path.

Spec (`SiteProfileSpec`) <- inputs: the environment's `Site` and `SiteProfile` models (validated again
at `check`, so bad values fail with the environment's codes), the published bundles (url + digest)
the profile names, and where Vault, the platform, and the artifact store are.
Reconciler (`SiteProfileReconciler.apply`), in this order, so a failure leaves nothing changed:
  1. read the MAAS key from Vault (path missing / sealed / unreachable -> VaultError, nothing mutated)
  2. MAAS `whoami` with that key (rejected -> error naming site and Vault path, nothing mutated)
  3. fetch the commissioning / validation bundles from S3 and verify their sha256 digests
  4. platform: adopt-or-create the site, then the profile; update only what differs
  5. MAAS node scripts: upload each bundle script whose body differs (named by its metadata header)
Outputs: site_id, profile_id, the effective policy (as the platform stored it), the registered
script names per type (the machine lifecycle commissions with them) and their sha256.
A policy field change is an in-place update (diff never asks for replacement except on a rename).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import tarfile
from types import SimpleNamespace
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)
from pydantic import BaseModel, ConfigDict, ValidationError

from clients.maas import MaasSiteClient
from clients.platform import PlatformClient
from clients.platform import models as pm
from clients.s3 import ArtifactStore, S3Location, s3_credentials
from clients.vault import VaultCredentials, credentials_from_config, parse_ref
from environments import rules
from environments.findings import Level
from environments.model import Site, Tier
from environments.model import SiteProfile as ProfileModel
from providers.bootstrap_bundle import StoreInputs
from providers.common import VaultInputs, has_unknown, plain, spec_failures, vault_reader
from providers.machines.ports import MaasError

SOURCE = "sites"
_META = re.compile(r"^#\s*(name|script_type|title|description):\s*(.+?)\s*$", re.MULTILINE)


class _M(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BundleOutput(_M):
    url: str
    digest: str
    ref: dict[str, str]


class SiteInputs(Site):
    """The environment's Site without its profile list (each profile is its own resource)."""

    profiles: tuple[ProfileModel, ...] = ()


class PlatformInputs(_M):
    url: str
    admin_token_path: str


class SiteProfileSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    tier: Tier = Tier.LOCAL
    site: SiteInputs
    profile: ProfileModel
    bundles: dict[str, BundleOutput] = {}
    """bundle name -> its published ref (the profile's *_bundle_ref names point here)."""
    vault: VaultInputs
    platform: PlatformInputs
    store: StoreInputs

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


def policy_findings(spec_in: dict[str, Any]) -> list[str]:
    """The environment's own rules (POL001, POL003 ...) over this one site and profile."""
    site = Site.model_validate({**spec_in["site"], "profiles": [spec_in["profile"]]})
    doc = SimpleNamespace(sites=[site], tier=Tier(spec_in.get("tier", "local")))
    found = rules.policy_combinations(doc, None, f"{SOURCE}[{site.name}]")  # type: ignore[arg-type]
    return [f"{f.code.value} {f.file}: profiles[{site.profiles[0].name}]{f.path.split('profiles[0]')[-1]}: "
            f"{f.message}; fix: {f.hint}" for f in found if f.level is Level.ERROR]


class Script(_M):
    name: str
    script_type: str
    title: str
    description: str
    body: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


def bundle_scripts(data: bytes, folder: str, default_type: str) -> list[Script]:
    """The `<folder>/*.sh` scripts of a packed bundle, named by their MAAS metadata header."""
    out: list[Script] = []
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if not (member.isfile() and member.name.startswith(f"{folder}/") and member.name.endswith(".sh")):
                continue
            body = tar.extractfile(member).read()  # type: ignore[union-attr]
            meta = dict(_META.findall(body.decode(errors="replace")))
            name = meta.get("name") or member.name.rsplit("/", 1)[-1].removesuffix(".sh")
            out.append(Script(name=name, script_type=meta.get("script_type") or default_type,
                              title=meta.get("title") or name, description=meta.get("description") or "", body=body))
    return out


class ProfileResult(BaseModel):
    site_id: str
    profile_id: str
    effective_policy: dict[str, Any]
    commissioning_scripts: list[str]
    testing_scripts: list[str]
    scripts: dict[str, str]


class SiteProfileReconciler:
    def __init__(self, spec: SiteProfileSpec, credentials: VaultCredentials | None) -> None:
        self.spec, self._credentials = spec, credentials

    def _maas(self, vault: Any) -> MaasSiteClient:
        s = self.spec.site
        key = vault.read(s.maas_api_key_path)
        maas = MaasSiteClient(s.maas_url, key.get_secret_value(), tls_verify=s.tls_verify)
        try:
            maas.whoami()
        except MaasError as e:
            if e.status in (401, 403):
                raise RuntimeError(f"site {s.name}: MAAS at {s.maas_url} rejected the API key read from Vault "
                                   f"path {s.maas_api_key_path!r} (HTTP {e.status}); fix: write a valid key "
                                   "there (MAAS UI > API keys); nothing was changed") from None
            raise RuntimeError(f"site {s.name}: MAAS at {s.maas_url} did not answer ({e}); nothing was changed") \
                from None
        return maas

    def _scripts(self, vault: Any) -> list[Script]:
        p, s = self.spec.profile, self.spec.store
        wanted = [(p.commissioning_bundle_ref, "commissioning", "commissioning"),
                  (p.post_deploy_validation_bundle_ref, "validation", "testing")]
        if not any(name for name, _f, _t in wanted):
            return []
        loc = S3Location(endpoint_url=s.endpoint_url, bucket=s.bucket, region=s.region, path_style=s.path_style)
        store = ArtifactStore(loc, s3_credentials(vault, s.credentials_path))
        out: list[Script] = []
        for name, folder, default_type in wanted:
            if not name:
                continue
            b = self.spec.bundles[name]
            data = store.get(b.ref["key"], b.ref.get("version_id"))
            if hashlib.sha256(data).hexdigest() != b.digest:
                raise RuntimeError(f"bundle {name}: s3://{b.ref['bucket']}/{b.ref['key']} does not match its digest "
                                   f"{b.digest}; fix: run up again to republish it; nothing was changed")
            out += bundle_scripts(data, folder, default_type)
        return out

    def _platform(self, vault: Any) -> PlatformClient:
        return PlatformClient(self.spec.platform.url, vault.read(self.spec.platform.admin_token_path))

    def apply(self, previous_scripts: list[str] | None = None) -> ProfileResult:
        vault = vault_reader(self.spec.vault, self._credentials)
        maas = self._maas(vault)  # steps 1-2: verified before any change
        scripts = self._scripts(vault)  # step 3
        s, policy = self.spec.site, self.spec.policy()
        with self._platform(vault) as api:  # step 4
            site = api.find_site(s.name)
            desc = f"managed by gpuaas-infra ({self.spec.tier.value})"
            if site is None:
                site = api.create_site(pm.MaasSiteCreate(name=s.name, maas_url=s.maas_url, description=desc,
                                                         credential_ref=self.spec.credential_ref()))
            elif (site.maas_url, site.credential_ref) != (s.maas_url, self.spec.credential_ref()):
                site = api.update_site(site.site_id, pm.MaasSiteUpdate(
                    maas_url=s.maas_url, region=site.region, description=site.description or desc,
                    credential_ref=self.spec.credential_ref()))
            prof = next(iter(api.list_profiles(site.site_id, name=self.spec.profile.name)), None)
            if prof is None:
                prof = api.create_profile(site.site_id, pm.SiteProfileCreate(name=self.spec.profile.name,
                                                                             policy=policy))
            elif prof.policy != policy:
                prof = api.update_profile(site.site_id, prof.profile_id, policy)
        present = maas.scripts()  # step 5
        for sc in scripts:
            have = present.get(sc.name)
            if have is None or have.sha256 != sc.sha256 or have.script_type != sc.script_type:
                maas.put_script(sc.name, sc.script_type, sc.body, title=sc.title, description=sc.description,
                                tags=("gpuaas", s.name), replace=have is not None)
        for name in sorted(set(previous_scripts or ()) - {sc.name for sc in scripts}):
            maas.delete_script(name)  # registered by a previous bundle, gone from the new one
        return ProfileResult(
            site_id=site.site_id, profile_id=prof.profile_id, effective_policy=prof.policy.model_dump(mode="json"),
            commissioning_scripts=[x.name for x in scripts if x.script_type == "commissioning"],
            testing_scripts=[x.name for x in scripts if x.script_type == "testing"],
            scripts={x.name: x.sha256 for x in scripts},
        )

    def remove(self, site_id: str, profile_id: str, scripts: list[str]) -> None:
        """Unregister the profile (the site stays: other profiles and machines may use it) and its scripts."""
        vault = vault_reader(self.spec.vault, self._credentials)
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


def _bundle_name(url: str | None) -> str | None:
    """'s3://bucket/bundles/<site>/<name>/<digest>.tar.gz' -> '<site>/<name>'."""
    m = re.search(r"/bundles/([^/]+/[^/]+)/[0-9a-f]{64}\.tar\.gz$", url or "")
    return m.group(1) if m else None


# --- adapter ------------------------------------------------------------------------------------------
REPLACE_KEYS = ("site.name", "profile.name")


def _get(d: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        d = (d or {}).get(part)  # type: ignore[assignment]
    return d


def _drift(olds: dict[str, Any]) -> list[str]:
    """What a refresh found changed outside the stack: the platform's policy, MAAS's scripts."""
    out = []
    if "scripts_registered" in olds and plain(olds.get("scripts")) != plain(olds["scripts_registered"]):
        out.append("scripts")
    try:
        desired = SiteProfileSpec.model_validate(plain(olds)).policy().model_dump(mode="json")
    except (ValidationError, KeyError):
        return out
    if olds.get("effective_policy") is not None and plain(olds["effective_policy"]) != desired:
        out.append("effective_policy")
    return out


class SiteProfileProvider(ResourceProvider):
    serialize_as_secret_always = False  # pickled by reference; holds nothing secret

    def configure(self, req: ConfigureRequest) -> None:
        self._credentials = credentials_from_config(req.config)

    def _rec(self, props: dict[str, Any]) -> SiteProfileReconciler:
        return SiteProfileReconciler(SiteProfileSpec.model_validate(plain(props)), getattr(self, "_credentials", None))

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        # The bundles are other resources' outputs, unknown in a preview that changes them; the site and
        # profile come from the environment and are always known: validate them regardless.
        bundles_known = not has_unknown(news.get("bundles"))
        inputs = plain({**news, "bundles": news.get("bundles") if bundles_known else {}})
        if has_unknown(inputs):
            return CheckResult(news, [])
        name = (inputs.get("site") or {}).get("name")
        try:
            spec = SiteProfileSpec.model_validate(inputs)
        except ValidationError as e:
            return CheckResult(news, spec_failures(e, f"{SOURCE}[{name}]"))
        failures = [CheckFailure("profile", f) for f in policy_findings(inputs)]
        for ref in (spec.profile.site_bootstrap_bundle_ref, spec.profile.commissioning_bundle_ref,
                    spec.profile.post_deploy_validation_bundle_ref):
            if bundles_known and ref and ref not in spec.bundles:
                failures.append(CheckFailure("bundles", f"REF003 {SOURCE}[{name}]: profile {spec.profile.name} "
                                             f"names bundle {ref!r}, which is not passed in; fix: declare it under "
                                             "bootstrap_bundles for this site"))
        return CheckResult(news, failures)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = ("tier", "site", "profile", "bundles", "vault", "platform", "store")
        changed = [k for k in keys if plain(olds.get(k)) != plain(news.get(k))] + _drift(olds)
        replaces = [k for k in REPLACE_KEYS if plain(_get(olds, k)) != plain(_get(news, k))]
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=True)

    def _outs(self, props: dict[str, Any], r: ProfileResult) -> dict[str, Any]:
        return {**plain(props), **r.model_dump(mode="json"), "scripts_registered": r.scripts}

    def create(self, props: dict[str, Any]) -> CreateResult:
        r = self._rec(props).apply()
        return CreateResult(f"{r.site_id}/{r.profile_id}", self._outs(props, r))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        r = self._rec(news).apply(previous_scripts=list(olds.get("scripts_registered") or olds.get("scripts") or {}))
        return UpdateResult(self._outs(news, r))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: the policy as the platform has it, the scripts as MAAS has them (drift -> diff)."""
        rec = self._rec(props)
        vault = vault_reader(rec.spec.vault, getattr(self, "_credentials", None))
        with rec._platform(vault) as api:
            prof = next((p for p in api.list_profiles(props["site_id"]) if p.profile_id == props["profile_id"]), None)
        if prof is None:
            return ReadResult("", {})
        present = rec._maas(vault).scripts()
        wanted = props.get("scripts_registered") or props.get("scripts") or {}
        actual = {n: (present[n].sha256 if n in present else "missing") for n in wanted}
        return ReadResult(id_, {**props, "effective_policy": prof.policy.model_dump(mode="json"), "scripts": actual,
                                "scripts_registered": wanted})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        self._rec(props).remove(props["site_id"], props["profile_id"], list(props.get("scripts") or {}))


class SiteProfile(Resource, module="gpuaas", name="SiteProfile"):
    site_id: pulumi.Output[str]
    profile_id: pulumi.Output[str]
    effective_policy: pulumi.Output[dict[str, Any]]
    commissioning_scripts: pulumi.Output[list[str]]
    testing_scripts: pulumi.Output[list[str]]
    scripts: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        outs = {k: None for k in ("site_id", "profile_id", "effective_policy", "commissioning_scripts",
                                  "testing_scripts", "scripts")}
        super().__init__(SiteProfileProvider(), name, {**outs, **props}, opts)
