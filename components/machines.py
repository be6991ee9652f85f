"""Machines: one MaasMachine per standalone machine, one MachinePool per declared pool.

Each machine's spec comes from the compiled environment plus the outputs of its site's resources
(the platform's site/profile ids, the bootstrap bundle's ref and digest, the RoCE assignment), so a
changed bundle digest or RoCE address flows into exactly the machines that use it.
"""

from __future__ import annotations

from typing import Any, Protocol

import pulumi

from environments import Environment
from environments.model import MaasMachine as MachineDoc
from providers.maas_machine import MaasMachine
from providers.machine_pool import MachinePool

from .settings import StackSettings


class SiteOutputs(Protocol):
    """What the sites area hands to machines (see components/site.py)."""

    def platform_ids(self, site: str, profile: str) -> pulumi.Output[tuple[str, str]]: ...
    def bundle(self, name: str) -> pulumi.Output[dict[str, str]]: ...
    def roce_links(self, hostname: str) -> pulumi.Output[list[dict[str, Any]]]: ...
    def commissioning_scripts(self, site: str, profile: str) -> pulumi.Output[list[str]]: ...


def _machine_spec(
    env: Environment, m: MachineDoc, bundle: dict[str, str], roce: list[dict[str, Any]]
) -> dict[str, Any]:
    profile = env.profile(m.site, m.profile)
    sku = env.sku(m.sku)
    layout = env.blueprint_model.storage_layouts[profile.storage_layout_profile]
    return {
        "hostname": m.hostname,
        "ipmi_address": str(m.ipmi_address),
        "pxe_mac": m.pxe_mac,
        "power_type": m.power_type.value,
        **({"power_user_path": m.power_user_path} if m.power_user_path else {}),
        "sku": m.sku,
        "site": m.site,
        "profile": m.profile,
        "pxe_interface": sku.pxe_interface,
        "tags": list(m.tags),
        "teardown_mode": m.teardown_mode.value,
        "storage": {
            "layout_profile": profile.storage_layout_profile,
            "maas_layout": layout.maas_layout.value,
            **({"root_size_gb": layout.root_size_gb} if layout.root_size_gb else {}),
            "boot_disk_hint": sku.boot_disk_hint.model_dump(exclude_none=True),
        },
        "roce_links": roce,
        "deploy": {
            "distro_series": m.distro_series,
            **({"hwe_kernel": m.hwe_kernel} if m.hwe_kernel else {}),
            "bundle_ref": bundle["ref"],
            "bundle_digest": bundle["digest"],
            "launcher_url": bundle.get("launcher_url", ""),
        },
    }


def _policy(env: Environment, site: str, profile_name: str, scripts: list[str]) -> dict[str, Any]:
    p = env.profile(site, profile_name)
    return {
        "strict_pxe_preflight": p.strict_pxe_preflight,
        "require_hw_sync": p.require_hw_sync,
        "hardware_sync_interval": p.hardware_sync_interval,
        "release_fallback_no_erase": p.release_fallback_no_erase,
        "enable_deploy_retry_on_datasource_failure": p.enable_deploy_retry_on_datasource_failure,
        "max_deploy_retry_attempts": p.max_deploy_retry_attempts,
        "auto_claim_single_new_machine": p.auto_claim_single_new_machine,
        "batch_max_parallel": p.batch_max_parallel,
        "enrollment_token_ttl_seconds": p.enrollment_token_ttl_seconds,
        "release_erase_mode": p.release_erase_mode.value,
        "commissioning_scripts": scripts,
    }


def _connection(env: Environment, settings: StackSettings, site_name: str, ids: tuple[str, str]) -> dict[str, Any]:
    site = env.site(site_name)
    return {
        "maas": {
            "site": site.name,
            "maas_url": settings.endpoint(site.maas_url, "maas"),
            "api_key_path": site.maas_api_key_path,
            "tls_verify": site.tls_verify,
        },
        "platform": {
            "url": settings.endpoint(env.platform.url, "platform"),
            "token_path": env.platform.admin_token_path,
        },
        "vault": {
            "address": settings.endpoint(env.vault.address, "vault"),
            "kv_mount": env.vault.kv_mount,
            "auth_method": env.vault.auth_method.value,
        },
        "platform_site_id": ids[0],
        "platform_profile_id": ids[1],
    }


def _spec_output(env: Environment, sites: SiteOutputs, m: MachineDoc) -> pulumi.Output[dict[str, Any]]:
    bundle = sites.bundle(env.machine_bundle(m).name)

    def spec(args: list[Any]) -> dict[str, Any]:
        return _machine_spec(env, m, args[0], args[1])

    return pulumi.Output.all(bundle, sites.roce_links(m.hostname)).apply(spec)


def _props(env: Environment, settings: StackSettings, sites: SiteOutputs, site: str, profile: str) -> dict[str, Any]:
    """The connection and policy inputs every machine resource of (site, profile) shares."""

    def connection(ids: tuple[str, str]) -> dict[str, Any]:
        return _connection(env, settings, site, ids)

    def policy(scripts: list[str]) -> dict[str, Any]:
        return _policy(env, site, profile, scripts)

    return {
        "connection": sites.platform_ids(site, profile).apply(connection),
        "policy": sites.commissioning_scripts(site, profile).apply(policy),
    }


def declare_machines(
    env: Environment, settings: StackSettings, sites: SiteOutputs, parent: pulumi.Resource | None = None
) -> dict[str, Any]:
    protect = env.tier.value == "prod"  # machines and pools in prod are protected (policy pack checks it)
    outputs: dict[str, Any] = {}
    for m in env.standalone_machines():
        props: dict[str, Any] = {
            "machine": _spec_output(env, sites, m),
            **_props(env, settings, sites, m.site, m.profile),
        }
        machine = MaasMachine(f"machine-{m.hostname}", props, pulumi.ResourceOptions(parent=parent, protect=protect))
        outputs[m.hostname] = {"system_id": machine.system_id, "status": machine.status, "node_id": machine.node_id}
    for pool in env.machine_pools:
        members = env.machines_in_pool(pool.name)
        if not members:
            continue
        specs = pulumi.Output.all(*[_spec_output(env, sites, m) for m in members])
        props = {"pool": pool.name, "machines": specs, **_props(env, settings, sites, pool.site, pool.profile)}
        resource = MachinePool(f"pool-{pool.name}", props, pulumi.ResourceOptions(parent=parent, protect=protect))
        outputs[f"pool:{pool.name}"] = resource.machines_state
    return outputs


def build_machines(env: Environment, settings: StackSettings, handles: dict[str, Any]) -> dict[str, Any]:
    """The "machines" builder of components/stack.py (after "sites").

    `_node_ids` (hostname -> Output of the platform node id the machine enrolled as) is the handle the
    apps area binds members with; reading it makes a resource depend on the machine.
    """
    if not env.machines:
        return {}
    sites: SiteOutputs = handles["sites"]["_site_outputs"]
    machines = declare_machines(env, settings, sites)
    node_ids: dict[str, pulumi.Output[Any]] = {}
    for m in env.machines:
        if m.pool is None and m.hostname in machines:
            node_ids[m.hostname] = machines[m.hostname]["node_id"]
        elif f"pool:{m.pool}" in machines:
            node_ids[m.hostname] = machines[f"pool:{m.pool}"].apply(
                lambda s, h=m.hostname: ((s or {}).get(h) or {}).get("node_id")
            )
    return {"machines": machines, "_node_ids": node_ids}
