"""Sites: per site, its bootstrap bundles, one SiteProfile per profile, and its RoCE assignment.

`build_sites(env, settings) -> SitesResult` is the first step of components/stack.py. Per site a
`gpuaas:index:Site` component parents (each resource gets its kind's typed spec, built here):
  - `BootstrapBundle` per bundle of the site (rendered with the profile values templates use),
  - `SiteProfile` per profile (the bundles' published refs flow in, so a new digest updates
    exactly the profiles that name that bundle),
  - one `RoceAssignment` for the site's phase-2 RoCE machines (when it has any).
It returns the stack outputs plus a `SiteOutputs` the machines builder reads (platform ids, bundle
ref/digest, RoCE links per hostname, commissioning scripts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pulumi

from environments import Environment
from environments.model import BootstrapBundle as BundleDoc
from environments.model import Site
from environments.model_node import LoginUser, PasswordMode
from providers.bootstrap_bundle import BootstrapBundle
from providers.roce_assignment import RoceAssignment
from providers.site_profile import SiteProfile
from providers.sites.bundle import BundleProfile, BundleSite, BundleSpec, Packages
from providers.sites.bundle_node import AptSourceSpec, LoginUserCheck
from providers.sites.profile import PlatformInputs, ProfileInputs, SiteInputs, SiteProfileArgs
from providers.sites.roce import MaasInputs, Pool, RoceSpec
from providers.sites.roce_table import MachineNics, nic_groups
from providers.wire import FabricMode, Tier

from .mounts import bundle_mount_sets
from .settings import StackSettings, platform_url, store_inputs, vault_inputs


def _bundle_profile(env: Environment, b: BundleDoc) -> BundleProfile:
    """The profile a bundle renders for: the first of its site naming it as the bootstrap bundle."""
    profiles = env.site(b.site).profiles
    p = next((p for p in profiles if p.site_bootstrap_bundle_ref == b.name), None) or next(
        (p for p in profiles if b.name in (p.commissioning_bundle_ref, p.post_deploy_validation_bundle_ref)),
        profiles[0])
    dumped = p.model_dump(mode="json")
    layout = env.blueprint_model.storage_layouts.get(p.storage_layout_profile)
    dumped["data_devices"] = list(layout.data_devices) if layout is not None else []
    dumped["apt_sources"] = [apt_source_spec(env, name) for name in p.apt_sources]
    dumped["login_user"] = login_user_check(p.login_user)
    return BundleProfile.model_validate({k: dumped[k] for k in BundleProfile.model_fields})


def apt_source_spec(env: Environment, name: str) -> AptSourceSpec:
    a = env.apt_source(name)
    return AptSourceSpec(name=a.name, url=a.url, suite=a.suite, components=a.components,
                         fingerprint=a.signing_key.fingerprint, packages=a.packages,
                         key_ref=f"s3://{env.artifact_store.bucket}/{a.signing_key.object}")


def login_user_check(user: LoginUser | None) -> LoginUserCheck | None:
    if user is None:
        return None
    return LoginUserCheck(name=user.name, groups=user.groups, shell=user.shell, sudo=user.sudo.value,
                          ssh_keys=len(user.ssh_authorized_keys),
                          password_locked=user.password.mode is PasswordMode.LOCKED)


def bundle_spec(env: Environment, settings: StackSettings, b: BundleDoc) -> BundleSpec:
    site = env.site(b.site)
    return BundleSpec(
        name=b.name, site=b.site, template_set=b.template_set,
        packages=Packages.model_validate(b.vendor_packages.model_dump(mode="json")), values=dict(b.values),
        site_context=BundleSite(name=site.name, bmc_network=str(site.bmc_network),
                                customer_handoff=site.customer_handoff),
        profile=_bundle_profile(env, b), store=store_inputs(env, settings), vault=vault_inputs(env, settings),
        mounts=bundle_mount_sets(env, b.name),
    )


def profile_args(env: Environment, settings: StackSettings, site: Site, profile: str) -> SiteProfileArgs:
    p = next(p for p in site.profiles if p.name == profile)
    return SiteProfileArgs(
        tier=Tier(env.tier.value),
        site=SiteInputs.model_validate({**site.model_dump(mode="json", exclude={"profiles"}),
                                        "maas_url": settings.endpoint(site.maas_url, "maas"),
                                        "maas_ca_bundle": env.ca_bundles.maas}),
        # the node's own fields (apt sources, login user) reach nodes through bundles and deploys, not the platform
        profile=ProfileInputs.model_validate(p.model_dump(mode="json", exclude={"apt_sources", "login_user"})),
        vault=vault_inputs(env, settings), store=store_inputs(env, settings),
        platform=PlatformInputs(url=platform_url(env, settings), admin_token_path=env.platform.admin_token_path,
                                ca_bundle=env.ca_bundles.platform),
    )


def roce_spec(env: Environment, settings: StackSettings, site: Site) -> RoceSpec | None:
    machines = env.roce_machines(site.name)
    if not machines:
        return None
    return RoceSpec(
        site=site.name,
        pools=[Pool(site=p.site, rail=p.rail, subnet=p.subnet, start=p.range.start, end=p.range.end, mtu=p.mtu,
                    vlan=p.vlan) for p in env.roce_pools_of(site.name)],
        groups=nic_groups([MachineNics(hostname=m.hostname, profile=m.profile,
                              fabric_mode=FabricMode(env.profile(site.name, m.profile).fabric_mode.value),
                              enable_phase2_roce=env.profile(site.name, m.profile).enable_phase2_roce,
                              interfaces=list(env.sku(m.sku).fabric_interfaces), pxe_mac=str(m.pxe_mac))
                              for m in machines]),
        stack=pulumi.get_stack(),
        maas=MaasInputs(url=settings.endpoint(site.maas_url, "maas"), api_key_path=site.maas_api_key_path,
                        tls_verify=site.tls_verify, ca_bundle=env.ca_bundles.maas),
        vault=vault_inputs(env, settings),
    )


class SiteComponent(pulumi.ComponentResource):
    def __init__(self, env: Environment, settings: StackSettings, site: Site,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:Site", site.name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.bundles: dict[str, BootstrapBundle] = {
            b.name: BootstrapBundle(f"bundle-{b.name}", bundle_spec(env, settings, b), child)
            for b in env.bootstrap_bundles if b.site == site.name
        }
        self.profiles: dict[str, SiteProfile] = {}
        for p in site.profiles:
            args = profile_args(env, settings, site, p.name)
            bundles = pulumi.Output.all(**{n: self._published(n) for n in sorted(set(args.profile.bundle_refs()))})
            self.profiles[p.name] = SiteProfile(f"profile-{site.name}-{p.name}", args, bundles, child)
        spec = roce_spec(env, settings, site)
        self.roce: RoceAssignment | None = RoceAssignment(f"roce-{site.name}", spec, child) if spec else None
        # every machine's links, computed once from the recorded table (machines read their own). A read-only
        # mapping, not a dict: the SDK lifts every leaf of a dict an apply returns into an Output of its own
        # (~32k for 1,024 machines' links, seconds of a preview), and nothing here needs that (issue 29).
        self.roce_links: pulumi.Output[Mapping[str, list[dict[str, Any]]]] | None = (
            self.roce.table.apply(lambda table: MappingProxyType(spec.links(table)))
            if self.roce is not None and spec is not None else None)
        self.register_outputs({})

    def _published(self, name: str) -> pulumi.Output[dict[str, Any]]:
        b = self.bundles[name]
        return pulumi.Output.all(b.url, b.digest, b.ref).apply(lambda v: {"url": v[0], "digest": v[1], "ref": v[2]})


class SiteOutputs:
    """What machines read from the sites area (components/machines.py's `SiteOutputs` protocol)."""

    def __init__(self, sites: dict[str, SiteComponent], store_endpoint: str, machine_site: dict[str, str]) -> None:
        self._sites = sites
        self._machine_site = machine_site
        self._endpoint = store_endpoint.rstrip("/")

    def platform_ids(self, site: str, profile: str) -> pulumi.Output[tuple[str, str]]:
        sp = self._sites[site].profiles[profile]
        return pulumi.Output.all(sp.site_id, sp.profile_id).apply(lambda v: (v[0], v[1]))

    def commissioning_scripts(self, site: str, profile: str) -> pulumi.Output[list[str]]:
        return self._sites[site].profiles[profile].commissioning_scripts

    def testing_scripts(self, site: str, profile: str) -> pulumi.Output[list[str]]:
        """The commissioning bundle's testing scripts (a commission asks MAAS to run them)."""
        return self._sites[site].profiles[profile].commissioning_testing_scripts

    def bundle(self, name: str) -> pulumi.Output[dict[str, str]]:
        b = next(c.bundles[name] for c in self._sites.values() if name in c.bundles)
        return pulumi.Output.all(b.url, b.digest, b.ref).apply(lambda v: {
            "ref": v[0], "digest": v[1],
            # path-style HTTP URL of this exact version (what cloud-init fetches; the digest is checked)
            "launcher_url": f"{self._endpoint}/{v[2]['bucket']}/{v[2]['key']}?versionId={v[2]['version_id']}",
        })

    def roce_links(self, hostname: str) -> pulumi.Output[list[dict[str, Any]]]:
        return self.site_roce_links(self._machine_site.get(hostname, "")).apply(lambda links: links.get(hostname, []))

    def site_roce_links(self, site: str) -> pulumi.Output[Mapping[str, list[dict[str, Any]]]]:
        """Every RoCE machine's links of `site` (hostname -> links; empty without a RoCE assignment)."""
        component = self._sites.get(site)
        if component is None or component.roce_links is None:
            return pulumi.Output.from_input(MappingProxyType({}))
        return component.roce_links


def _link_summary(status: dict[str, str] | None) -> dict[str, int]:
    """{"linked": n, "pending": n, "missing": n} over the site's RoCE machines."""
    out = {"linked": 0, "pending": 0, "missing": 0}
    for st in (status or {}).values():
        key = str(st).split(":")[0].split(" ")[0]
        out[key if key in out else "pending"] += 1
    return out


@dataclass(frozen=True)
class SitesResult:
    """The sites area: its stack output and what machines read from it."""

    outputs: dict[str, Any]
    site_outputs: SiteOutputs


def build_sites(env: Environment, settings: StackSettings) -> SitesResult:
    sites = {s.name: SiteComponent(env, settings, s) for s in env.sites if settings.part.declares_site(s.name)}
    machine_site = {m.hostname: m.site for m in env.machines}
    outputs = {
        name: {
            "profiles": {p: {"site_id": r.site_id, "profile_id": r.profile_id} for p, r in c.profiles.items()},
            "bundles": {b: {"digest": r.digest, "url": r.url} for b, r in c.bundles.items()},
            # how many machines are linked (the addresses: the RoceAssignment's `table`, docs/sites-bundles-roce.md)
            **({"roce": c.roce.link_status.apply(_link_summary)} if c.roce is not None else {}),
        }
        for name, c in sites.items()
    }
    return SitesResult(outputs, SiteOutputs(sites, store_inputs(env, settings).endpoint_url, machine_site))
