"""Sites: per site, its bootstrap bundles, one SiteProfile per profile, and its RoCE assignment.

`build_sites(env, settings, handles)` is the "sites" builder of components/stack.py. Per site a
`gpuaas:index:Site` component parents:
  - `BootstrapBundle` per bundle of the site (rendered with the profile values templates use),
  - `SiteProfile` per profile (the bundles' published refs flow in, so a new digest updates
    exactly the profiles that name that bundle),
  - one `RoceAssignment` for the site's phase-2 RoCE machines (when it has any).
It returns the stack outputs plus `_site_outputs`, a `SiteOutputs` the machines builder reads
(platform ids, bundle ref/digest, RoCE links per hostname, commissioning scripts).
"""

from __future__ import annotations

from typing import Any

import pulumi

from environments import Environment
from environments.model import BootstrapBundle as BundleDoc
from environments.model import Site
from providers.bootstrap_bundle import BootstrapBundle
from providers.roce_assignment import RoceAssignment
from providers.site_profile import SiteProfile

from .settings import StackSettings

# Profile fields bundle templates may use. Only these reach the bundle: changing another policy
# field (batch_max_parallel, ...) must not change the bundle digest (which redeploys machines).
BUNDLE_PROFILE_FIELDS = ("fabric_mode", "storage_layout_profile", "require_hw_sync", "hardware_sync_interval",
                         "enable_phase2_roce")


def _vault(env: Environment, settings: StackSettings) -> dict[str, Any]:
    return {"address": settings.endpoint(env.vault.address, "vault"), "kv_mount": env.vault.kv_mount,
            "auth_method": env.vault.auth_method.value}


def _store(env: Environment, settings: StackSettings) -> dict[str, Any]:
    a = env.artifact_store
    return {"endpoint_url": settings.endpoint(a.endpoint_url, "s3"), "bucket": a.bucket, "region": a.region,
            "path_style": a.path_style, "credentials_path": a.credentials_path}


def _bundle_profile(env: Environment, b: BundleDoc) -> dict[str, Any]:
    """The profile a bundle renders for: the first of its site naming it as the bootstrap bundle."""
    profiles = env.site(b.site).profiles
    p = next((p for p in profiles if p.site_bootstrap_bundle_ref == b.name), None) or next(
        (p for p in profiles if b.name in (p.commissioning_bundle_ref, p.post_deploy_validation_bundle_ref)),
        profiles[0])
    dumped = p.model_dump(mode="json")
    return {k: dumped[k] for k in BUNDLE_PROFILE_FIELDS}


def _site_inputs(env: Environment, settings: StackSettings, s: Site) -> dict[str, Any]:
    return {**s.model_dump(mode="json", exclude={"profiles"}), "maas_url": settings.endpoint(s.maas_url, "maas")}


class SiteComponent(pulumi.ComponentResource):
    def __init__(self, env: Environment, settings: StackSettings, site: Site,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:Site", site.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        vault, store = _vault(env, settings), _store(env, settings)
        site_ctx = {"name": site.name, "bmc_network": str(site.bmc_network), "customer_handoff": site.customer_handoff}
        self.bundles: dict[str, BootstrapBundle] = {}
        for b in (b for b in env.bootstrap_bundles if b.site == site.name):
            self.bundles[b.name] = BootstrapBundle(f"bundle-{b.name}", {
                "name": b.name, "site": b.site, "template_set": b.template_set,
                "packages": b.vendor_packages.model_dump(mode="json"), "values": dict(b.values),
                "site_context": site_ctx, "profile": _bundle_profile(env, b), "store": store, "vault": vault,
            }, child)
        self.profiles: dict[str, SiteProfile] = {}
        for p in site.profiles:
            named = sorted({n for n in (p.site_bootstrap_bundle_ref, p.commissioning_bundle_ref,
                                        p.post_deploy_validation_bundle_ref) if n})
            bundles = pulumi.Output.all(**{n: self._published(n) for n in named})
            self.profiles[p.name] = SiteProfile(f"profile-{site.name}-{p.name}", {
                "tier": env.tier.value, "site": _site_inputs(env, settings, site), "profile": p.model_dump(mode="json"),
                "bundles": bundles, "vault": vault, "store": store,
                "platform": {"url": settings.endpoint(env.platform.url, "platform"),
                             "admin_token_path": env.platform.admin_token_path},
            }, child)
        self.roce: RoceAssignment | None = None
        machines = env.roce_machines(site.name)
        if machines:
            self.roce = RoceAssignment(f"roce-{site.name}", {
                "site": site.name,
                "pools": [{"site": p.site, "rail": p.rail, "subnet": str(p.subnet), "start": str(p.range.start),
                           "end": str(p.range.end), "mtu": p.mtu, **({"vlan": p.vlan} if p.vlan else {})}
                          for p in env.roce_pools_of(site.name)],
                "machines": [{"hostname": m.hostname, "profile": m.profile,
                              "fabric_mode": env.profile(site.name, m.profile).fabric_mode.value,
                              "enable_phase2_roce": env.profile(site.name, m.profile).enable_phase2_roce,
                              "interfaces": list(env.sku(m.sku).fabric_interfaces)} for m in machines],
                "maas": {"url": settings.endpoint(site.maas_url, "maas"), "api_key_path": site.maas_api_key_path,
                         "tls_verify": site.tls_verify},
                "vault": vault,
            }, child)
        self.register_outputs({})


    def _published(self, name: str) -> pulumi.Output[dict[str, Any]]:
        b = self.bundles[name]
        return pulumi.Output.all(b.url, b.digest, b.ref).apply(lambda v: {"url": v[0], "digest": v[1], "ref": v[2]})


class SiteOutputs:
    """What machines read from the sites area (components/machines.py's `SiteOutputs` protocol)."""

    def __init__(self, sites: dict[str, SiteComponent], store: dict[str, Any], machine_site: dict[str, str]) -> None:
        self._sites = sites
        self._machine_site = machine_site
        self._endpoint = store["endpoint_url"].rstrip("/")

    def platform_ids(self, site: str, profile: str) -> pulumi.Output[tuple[str, str]]:
        sp = self._sites[site].profiles[profile]
        return pulumi.Output.all(sp.site_id, sp.profile_id).apply(lambda v: (v[0], v[1]))

    def commissioning_scripts(self, site: str, profile: str) -> pulumi.Output[list[str]]:
        return self._sites[site].profiles[profile].commissioning_scripts

    def bundle(self, name: str) -> pulumi.Output[dict[str, str]]:
        b = next(c.bundles[name] for c in self._sites.values() if name in c.bundles)
        return pulumi.Output.all(b.url, b.digest, b.ref).apply(lambda v: {
            "ref": v[0], "digest": v[1],
            # path-style HTTP URL of this exact version (what cloud-init fetches; the digest is checked)
            "launcher_url": f"{self._endpoint}/{v[2]['bucket']}/{v[2]['key']}?versionId={v[2]['version_id']}",
        })

    def roce_links(self, hostname: str) -> pulumi.Output[list[dict[str, Any]]]:
        site = self._sites.get(self._machine_site.get(hostname, ""))
        if site is None or site.roce is None:
            return pulumi.Output.from_input([])
        return site.roce.table.apply(lambda t: _links(t, hostname))


def _links(table: dict[str, list[dict[str, Any]]] | None, hostname: str) -> list[dict[str, Any]]:
    # The machine lifecycle's RoceLink fields only (it forbids extras such as mac and rail).
    return [{"interface": r["interface"], "subnet": r["subnet"], "address": r["address"], "mtu": int(r["mtu"])}
            for r in (table or {}).get(hostname, [])]


def build_sites(env: Environment, settings: StackSettings, handles: dict[str, Any]) -> dict[str, Any]:
    sites = {s.name: SiteComponent(env, settings, s) for s in env.sites}
    machine_site = {m.hostname: m.site for m in env.machines}
    out: dict[str, Any] = {"_site_outputs": SiteOutputs(sites, _store(env, settings), machine_site)}
    out["sites"] = {
        name: {
            "profiles": {p: {"site_id": r.site_id, "profile_id": r.profile_id} for p, r in c.profiles.items()},
            "bundles": {b: {"digest": r.digest, "url": r.url} for b, r in c.bundles.items()},
            **({"roce": c.roce.table} if c.roce is not None else {}),
        }
        for name, c in sites.items()
    }
    return out
