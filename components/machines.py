"""Machines: one MaasMachine per standalone machine, one MachinePool per declared pool.

Each machine's spec is built as a typed `MachineSpec` from the compiled environment plus the outputs
of its site's resources (the platform's site/profile ids, the bootstrap bundle's ref and digest, the
RoCE assignment), so a changed bundle digest or RoCE address flows into exactly the machines that
use it. The environment's enums convert to the spec's own (same values): the spec is a state
contract, the environment document is not.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, cast

import pulumi

from environments import Environment
from environments.model import MaasMachine as MachineDoc
from environments.model_node import LoginUser
from providers.maas_machine import MaasMachine
from providers.machine_pool import MachinePool
from providers.machines.plan import record_fields
from providers.machines.resource_io import spec_deltas
from providers.machines.spec import (
    AptKeyPin,
    BootDiskHint,
    BundlePin,
    Connection,
    DeploySpec,
    EraseMode,
    LifecyclePolicy,
    LoginUserSpec,
    MaasLayout,
    MaasSiteRef,
    MachineSpec,
    PlatformRef,
    PowerType,
    RoceLink,
    StorageSpec,
    TeardownMode,
)

from .mounts import machine_mount_sets
from .settings import StackSettings, platform_url, store_inputs, vault_inputs


class SiteOutputs(Protocol):
    """What the sites area hands to machines (see components/site.py)."""

    def platform_ids(self, site: str, profile: str) -> pulumi.Output[tuple[str, str]]: ...
    def bundle(self, name: str) -> pulumi.Output[dict[str, str]]: ...
    def roce_links(self, hostname: str) -> pulumi.Output[list[dict[str, Any]]]: ...
    def site_roce_links(self, site: str) -> pulumi.Output[Mapping[str, list[dict[str, Any]]]]: ...
    def commissioning_scripts(self, site: str, profile: str) -> pulumi.Output[list[str]]: ...
    def testing_scripts(self, site: str, profile: str) -> pulumi.Output[list[str]]: ...


@dataclass(frozen=True)
class MachinesResult:
    outputs: dict[str, Any]
    """Stack outputs of the machines area."""
    node_ids: NodeIds
    """hostname -> Output of the platform node id it enrolled as (reading it depends on the machine)."""
    identities: dict[str, pulumi.Output[Any]] = field(default_factory=dict)
    """machine hostname -> Output of {system_id, deploy_fingerprint} once it is deployed, for the machines that
    are declared hosts (host convergence keys on them and so runs after their deploy)."""


def machine_spec(
    env: Environment, doc: MachineDoc, bundle: Mapping[str, str], roce: list[dict[str, Any]],
    validation: Mapping[str, str] | None = None,
) -> MachineSpec:
    """One machine's spec from its document, its site's bundle ({ref, digest, launcher_url?}), its
    RoCE links ([{interface, subnet, address, mtu}]) and its profile's post-deploy validation bundle
    (same shape; None: the profile sets none, or names the machine's own bundle)."""
    profile = env.profile(doc.site, doc.profile)
    sku = env.sku(doc.sku)
    layout = env.blueprint_model.storage_layouts[profile.storage_layout_profile]
    return MachineSpec(
        hostname=doc.hostname,
        ipmi_address=str(doc.ipmi_address),
        pxe_mac=doc.pxe_mac,
        power_type=PowerType(doc.power_type.value),
        power_user_path=doc.power_user_path or None,
        sku=doc.sku,
        site=doc.site,
        profile=doc.profile,
        pxe_interface=sku.pxe_interface,
        tags=tuple(doc.tags),
        retry_generation=doc.retry_generation,
        teardown_mode=TeardownMode(doc.teardown_mode.value),
        storage=StorageSpec(
            layout_profile=profile.storage_layout_profile,
            maas_layout=MaasLayout(layout.maas_layout.value),
            root_size_gb=layout.root_size_gb or None,
            boot_disk_hint=BootDiskHint.model_validate(sku.boot_disk_hint.model_dump()),
        ),
        roce_links=tuple(RoceLink.model_validate(link) for link in roce),
        deploy=DeploySpec(
            distro_series=doc.distro_series,
            hwe_kernel=doc.hwe_kernel or None,
            bundle_ref=bundle["ref"],
            bundle_digest=bundle["digest"],
            launcher_url=bundle.get("launcher_url", ""),
            mount_sets=machine_mount_sets(env, doc),
            validation_bundle=BundlePin(ref=validation["ref"], digest=validation["digest"],
                                        url=validation.get("launcher_url", "")) if validation else None,
            apt_keys=tuple(AptKeyPin(source=a.name, ref=f"s3://{env.artifact_store.bucket}/{a.signing_key.object}",
                                     fingerprint=a.signing_key.fingerprint)
                           for a in map(env.apt_source, profile.apt_sources)) or None,
            login_user=_login_user(profile.login_user),
        ),
    )


def with_roce_links(spec: MachineSpec, roce: list[dict[str, Any]]) -> MachineSpec:
    """`spec` with its RoCE links (as `machine_spec` makes them): the links checked, the rest already was."""
    return spec.model_copy(update={"roce_links": tuple(RoceLink.model_validate(link) for link in roce)})


def _login_user(user: LoginUser | None) -> LoginUserSpec | None:
    if user is None:
        return None
    return LoginUserSpec(name=user.name, groups=user.groups, shell=user.shell, sudo=user.sudo.value,
                         ssh_key_refs=user.ssh_authorized_keys, password_hash_ref=user.password.hash_ref,
                         password_expire=user.password.expire)


def lifecycle_policy(env: Environment, site: str, profile_name: str, scripts: list[str],
                     testing: list[str] | None = None) -> LifecyclePolicy:
    p = env.profile(site, profile_name)
    return LifecyclePolicy(
        strict_pxe_preflight=p.strict_pxe_preflight,
        require_hw_sync=p.require_hw_sync,
        release_fallback_no_erase=p.release_fallback_no_erase,
        enable_deploy_retry_on_datasource_failure=p.enable_deploy_retry_on_datasource_failure,
        max_deploy_retry_attempts=p.max_deploy_retry_attempts,
        auto_claim_single_new_machine=p.auto_claim_single_new_machine,
        batch_max_parallel=p.batch_max_parallel,
        enrollment_token_ttl_seconds=p.enrollment_token_ttl_seconds,
        release_erase_mode=EraseMode(p.release_erase_mode.value),
        commissioning_scripts=tuple(scripts),
        testing_scripts=tuple(testing or ()),
        customer_handoff=env.site(site).customer_handoff,
    )


def policy_input(env: Environment, site: str, profile_name: str, scripts: list[str],
                 testing: list[str] | None = None) -> dict[str, Any]:
    """The policy input as Pulumi carries it (benchmarks feed it to the engine as JSON)."""
    return _plain(lifecycle_policy(env, site, profile_name, scripts, testing))


def connection(env: Environment, settings: StackSettings, site_name: str, ids: tuple[str, str]) -> Connection:
    site = env.site(site_name)
    return Connection(
        maas=MaasSiteRef(
            site=site.name,
            maas_url=settings.endpoint(site.maas_url, "maas"),
            api_key_path=site.maas_api_key_path,
            tls_verify=site.tls_verify,
            ca_bundle=env.ca_bundles.maas,
        ),
        platform=PlatformRef(
            url=platform_url(env, settings), token_path=env.platform.admin_token_path, ca_bundle=env.ca_bundles.platform
        ),
        vault=vault_inputs(env, settings),
        platform_site_id=ids[0],
        platform_profile_id=ids[1],
        store=store_inputs(env, settings),
    )


def _plain(model: Any) -> dict[str, Any]:
    """A typed input as Pulumi carries it: JSON values, no None (Pulumi drops None properties)."""
    return cast(dict[str, Any], model.model_dump(mode="json", exclude_none=True))


def validation_bundle_name(env: Environment, m: MachineDoc) -> str | None:
    """The profile's post-deploy validation bundle, when it is not the machine's own bundle."""
    name = env.profile(m.site, m.profile).post_deploy_validation_bundle_ref
    return name if name and name != env.machine_bundle(m).name else None


def _spec_output(env: Environment, sites: SiteOutputs, m: MachineDoc) -> pulumi.Output[MachineSpec]:
    bundle = sites.bundle(env.machine_bundle(m).name)
    vname = validation_bundle_name(env, m)
    validation = sites.bundle(vname) if vname else pulumi.Output.from_input(None)

    def spec(args: list[Any]) -> MachineSpec:
        return machine_spec(env, m, args[0], args[1], args[2])

    return pulumi.Output.all(bundle, sites.roce_links(m.hostname), validation).apply(spec)


def _pool_specs(env: Environment, sites: SiteOutputs, site: str,
                members: tuple[MachineDoc, ...]) -> pulumi.Output[Mapping[str, Any]]:
    """A pool's `machines` and `template` inputs, from one Output (issue 29: an Output per machine cost the
    program ~10 ms of the SDK's asyncio machinery each, most of a 1,024-machine preview). The intermediate
    value is a read-only mapping: the SDK lifts each leaf of a dict an apply returns into an Output of its
    own, and passes a Mapping that is not a dict as it is. The resource's `machines` input is a plain dict
    again (the caller's `dict(...)`: a policy pack's transformation deep-copies inputs, and a mapping proxy
    cannot be copied). One JSON string per machine (PoolInputs.machines: the SDK pays per leaf at every gRPC
    hop), each written against the pool's first machine, the template: what they share is stored once."""
    names = {env.machine_bundle(m).name for m in members}
    names |= {v for m in members if (v := validation_bundle_name(env, m))}
    bundles = pulumi.Output.all(**{n: sites.bundle(n) for n in sorted(names)})

    def unlinked(published: dict[str, Any]) -> tuple[MachineSpec, ...]:
        # Everything but the RoCE links, made as soon as the bundles are known: the RoCE assignment is checked
        # after them, and meanwhile the program has nothing else to do (issue 29: once the table is known, the
        # pool registers after its links only, not after 1,024 specs).
        return tuple(machine_spec(env, m, published[env.machine_bundle(m).name], [],
                                  published[vname] if (vname := validation_bundle_name(env, m)) else None)
                     for m in members)

    def build(args: list[Any]) -> Mapping[str, Any]:
        unlinked_specs, links = args
        specs = [with_roce_links(s, links.get(s.hostname, [])) for s in unlinked_specs]
        template = specs[0]
        return MappingProxyType({"template": template.wire(),
                                 "machines": MappingProxyType(spec_deltas(specs, template))})

    # chained applies, not Output.all: a tuple of specs would be lifted leaf by leaf (see `_gathered`)
    return _gathered([bundles.apply(unlinked), sites.site_roce_links(site)]).apply(build)


def _props(env: Environment, settings: StackSettings, sites: SiteOutputs, site: str, profile: str) -> dict[str, Any]:
    """The connection and policy inputs every machine resource of (site, profile) shares."""

    def conn(ids: tuple[str, str]) -> dict[str, Any]:
        return _plain(connection(env, settings, site, ids))

    def policy(scripts: list[Any]) -> dict[str, Any]:
        return policy_input(env, site, profile, scripts[0], scripts[1])

    return {
        "connection": sites.platform_ids(site, profile).apply(conn),
        "policy": pulumi.Output.all(sites.commissioning_scripts(site, profile),
                                    sites.testing_scripts(site, profile)).apply(policy),
    }


class SiteMachines(pulumi.ComponentResource):
    """A site's machines and pools, grouped under one parent in the preview and the state."""

    def __init__(self, site: str) -> None:
        super().__init__("gpuaas:index:SiteMachines", site, None, None)


def _options(parents: dict[str, SiteMachines], site: str, protect: bool) -> pulumi.ResourceOptions:
    if site not in parents:
        parents[site] = SiteMachines(site)
    # Machines had no parent before the SiteMachines component: the alias keeps their identity
    # (state written by older versions updates in place, never delete + create).
    return pulumi.ResourceOptions(parent=parents[site], protect=protect, aliases=[pulumi.Alias(parent=None)])


def _owner(resource_name: str) -> str:
    """What MAAS owner data records as the machine's managing resource (`gpuaas_resource`): a machine a
    renamed pool (or another resource) adopted is never released by the resource it left."""
    return f"{pulumi.get_stack()}/{resource_name}"


def _identity(system_id: Any, fingerprint: Any) -> dict[str, Any] | None:
    return {"system_id": system_id, "deploy_fingerprint": fingerprint} if system_id and fingerprint else None


def _pool_identity(hostname: str) -> Any:
    def pick(records: dict[str, Any] | None) -> dict[str, Any] | None:
        rec = record_fields((records or {}).get(hostname)) or {}
        return _identity(rec.get("system_id"), rec.get("deploy_fingerprint"))

    return pick


def declare_machines(env: Environment, settings: StackSettings, sites: SiteOutputs,
                     identities: dict[str, pulumi.Output[Any]] | None = None) -> dict[str, Any]:
    """hostname -> {system_id, status, node_id} per standalone machine; `pool:<name>` -> hostname ->
    {system_id, status, outcome, node_id} per pool machine. `identities` is filled for machines that are
    declared hosts (MachinesResult.identities)."""
    protect = env.tier.value == "prod"  # machines and pools in prod are protected (policy pack checks it)
    hosts = {h.machine for h in env.hosts if h.machine}
    identities = {} if identities is None else identities
    outputs: dict[str, Any] = {}
    parents: dict[str, SiteMachines] = {}
    for m in (m for m in env.standalone_machines() if settings.part.declares_site(m.site)):
        name = f"machine-{m.hostname}"
        spec = _spec_output(env, sites, m)
        props: dict[str, Any] = {
            "machine": spec.apply(_plain),
            **_props(env, settings, sites, m.site, m.profile),
            "owner": _owner(name),
        }
        machine = MaasMachine(name, props, _options(parents, m.site, protect))
        outputs[m.hostname] = {"system_id": machine.system_id, "status": machine.status, "node_id": machine.node_id}
        if m.hostname in hosts:  # the deployed machine's id (an output: after its deploy) and what it deployed
            identities[m.hostname] = pulumi.Output.all(machine.system_id, spec.apply(
                lambda s: s.deploy_fingerprint())).apply(lambda a: _identity(a[0], a[1]))
    for pool in env.machine_pools:
        members = env.machines_in_pool(pool.name)
        if not members or not settings.part.declares_site(pool.site):
            continue
        specs = _pool_specs(env, sites, pool.site, members)
        name = f"pool-{pool.name}"
        # the input itself a dict (transformations and mocks may copy it; a mapping proxy can't be copied)
        props = {"pool": pool.name, "machines": specs.apply(lambda p: dict(p["machines"])),
                 "template": specs.apply(lambda p: p["template"]),
                 **_props(env, settings, sites, pool.site, pool.profile), "owner": _owner(name)}
        resource = MachinePool(name, props, _options(parents, pool.site, protect))
        outputs[f"pool:{pool.name}"] = resource.machines_state.apply(_summary_records)
        for m in (m for m in members if m.hostname in hosts):
            identities[m.hostname] = resource.machines_state.apply(_pool_identity(m.hostname))
    return outputs


# What the stack outputs show per pool machine (the full record stays in the pool's own state: a stack
# output copies it into the state once more, issue 18).
_SUMMARY_FIELDS = ("system_id", "status", "outcome", "node_id")


def _summary_records(records: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    # a dict, not a read-only mapping: the SDK turns a stack output's other mappings into lists of their keys
    fields = {host: record_fields(raw) or {} for host, raw in (records or {}).items()}
    return {host: {k: rec[k] for k in _SUMMARY_FIELDS if rec.get(k) is not None} for host, rec in fields.items()}


def _gathered(outputs: list[pulumi.Output[Any]]) -> pulumi.Output[list[Any]]:
    """The outputs' values as one list, as `Output.all` gives them, without its lifting: `Output.all` first
    turns every leaf of each resolved value into an Output of its own, ~5,000 for a 1,024-machine pool's
    summary (0.4 s of the program in every pass, issue 29). Chained applies keep what `Output.all` keeps:
    the resources depended on, secrecy, and an unknown anywhere makes the whole unknown."""
    def then(gathered: pulumi.Output[list[Any]], output: pulumi.Output[Any]) -> pulumi.Output[list[Any]]:
        return gathered.apply(lambda values: output.apply(lambda value: [*values, value]))

    return functools.reduce(then, outputs, pulumi.Output.from_input(cast(list[Any], [])))


class NodeIds(Mapping[str, pulumi.Output[Any]]):
    """hostname -> Output of the platform node id its machine enrolled as, made when asked: the apps area asks
    for its members only, and an Output per machine costs the program milliseconds each at fleet scale."""

    def __init__(self, machines: Mapping[str, Any], pool_of: Mapping[str, str | None]) -> None:
        self._machines, self._pool_of = machines, dict(pool_of)
        self._made: dict[str, pulumi.Output[Any]] = {}

    def __getitem__(self, hostname: str) -> pulumi.Output[Any]:
        pool = self._pool_of[hostname]
        if hostname not in self._made:
            self._made[hostname] = (self._machines[hostname]["node_id"] if pool is None else
                                    self._machines[f"pool:{pool}"].apply(lambda s: ((s or {}).get(hostname) or {})
                                                                         .get("node_id")))
        return self._made[hostname]

    def __iter__(self) -> Iterator[str]:
        return iter(self._pool_of)

    def __len__(self) -> int:
        return len(self._pool_of)

    def output(self) -> pulumi.Output[dict[str, Any]]:
        """The whole map as one Output (the site stack's `node_ids` output), from one Output per pool."""
        standalone = [h for h, pool in self._pool_of.items() if pool is None]
        pools = sorted({p for p in self._pool_of.values() if p is not None})

        def merge(args: list[Any]) -> dict[str, Any]:  # a dict: a stack output's other mappings become key lists
            ids = dict(zip(standalone, args[0], strict=True))
            for records in args[1:]:
                ids.update({h: (r or {}).get("node_id") for h, r in (records or {}).items()})
            return {h: ids.get(h) for h in self._pool_of}

        return _gathered([pulumi.Output.all(*(self._machines[h]["node_id"] for h in standalone)),
                          *(self._machines[f"pool:{p}"] for p in pools)]).apply(merge)


def build_machines(env: Environment, settings: StackSettings, sites: SiteOutputs) -> MachinesResult:
    """The machines area: its stack outputs and each machine's node id output (the apps area binds
    members with them)."""
    if not env.machines:
        return MachinesResult(outputs={}, node_ids=NodeIds({}, {}))
    identities: dict[str, pulumi.Output[Any]] = {}
    machines = declare_machines(env, settings, sites, identities)
    pool_of = {m.hostname: m.pool for m in env.machines
               if (m.pool is None and m.hostname in machines) or f"pool:{m.pool}" in machines}
    return MachinesResult(outputs=machines, node_ids=NodeIds(machines, pool_of), identities=identities)
