"""App instances: one AppInstance per `app_instances` entry of the environment (seed 004).

An input naming another instance's endpoint (`inputs: {llm_endpoint: {instance: vllm-chat, endpoint:
openai}}`, seed 000 §6) is wired from that instance's `endpoints` output: the consumer is declared after
it, depends on it, and is created only once the endpoint exists (and updated in place when it changes).

Members name declared hosts or machines. A node that is a MAAS machine managed in this stack binds
by the platform node id the machine enrolled as (`MachinesResult.node_ids`), so the
instance waits for the machine; a host that is not (the app_control host) has no node id the
project's service account could name — the contract places members by node id only — so the
platform places that member, and the stack remembers which member fills that host's slot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from environments import Environment
from environments.model import AppInstance as AppDoc
from environments.model_runtime import EndpointRef
from providers.app_instance import AppInstance
from providers.apps.spec import AppInstanceArgs, AppSpec, BlueprintInputs, InstanceInputs, NodeRole, RuntimeMetadata

from .settings import StackSettings, platform_url, vault_inputs


def node_machine(env: Environment, node: str) -> str | None:
    """The MAAS machine hostname a member node names (a host may be a machine), if any."""
    host = next((h for h in env.hosts if h.hostname == node), None)
    if host is not None:
        return host.machine
    return node if any(m.hostname == node for m in env.machines) else None


def _topology(env: Environment, a: AppDoc) -> dict[str, NodeRole]:
    roles = {h.hostname: NodeRole(h.logical_role.value) for h in env.hosts}
    nodes = {n for spec in a.members.values() for n in spec.nodes}
    return {n: roles.get(n, NodeRole.GPU_NODE) for n in sorted(nodes)}


def _placements(env: Environment, a: AppDoc, node_ids: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, spec in a.members.items():
        ids = []
        for node in spec.nodes:
            machine = node_machine(env, node)
            ids.append(node_ids.get(machine) if machine else None)
        out[key] = pulumi.Output.all(*ids).apply(list) if ids else []
    return out


def instance_args(env: Environment, settings: StackSettings, a: AppDoc) -> AppInstanceArgs:
    bp = env.blueprint_model
    return AppInstanceArgs(
        stack=settings.stack,
        instance=InstanceInputs.model_validate(a.model_dump(mode="json")),
        blueprint=BlueprintInputs(
            name=bp.name, app=AppSpec.model_validate(bp.apps[a.app.slug].model_dump(mode="json")),
            runtime_combinations=tuple(RuntimeMetadata.model_validate(c.model_dump(mode="json"))
                                       for c in bp.runtime_combinations)),
        topology=_topology(env, a),
        platform_url=platform_url(env, settings),
        platform_ca_bundle=env.ca_bundles.platform,
        vault=vault_inputs(env, settings),
        max_parallel=settings.app_member_parallelism,
        operation_timeout_s=settings.app_operation_timeout_s,
        cpu_only_offered=env.platform.cpu_only_allocations,
    )


def in_dependency_order(instances: tuple[AppDoc, ...]) -> list[AppDoc]:
    """Instances whose endpoints others consume first (validation refused unknown references)."""
    done: dict[str, AppDoc] = {}

    def visit(a: AppDoc, seen: frozenset[str]) -> None:
        if a.name in done or a.name in seen:
            return
        for ref in (v for v in a.inputs.values() if isinstance(v, EndpointRef)):
            target = next((x for x in instances if x.name == ref.instance), None)
            if target is not None:
                visit(target, seen | {a.name})
        done[a.name] = a

    for a in instances:
        visit(a, frozenset())
    return list(done.values())


def _pick(name: str) -> Any:
    def pick(published: dict[str, str] | None) -> str | None:
        return (published or {}).get(name)

    return pick


def _input_endpoints(a: AppDoc, declared: dict[str, AppInstance]) -> dict[str, Any]:
    """input key -> the URL the referenced instance publishes (an Output of its `endpoints`)."""
    out: dict[str, Any] = {}
    for key, ref in a.inputs.items():
        if isinstance(ref, EndpointRef) and ref.instance in declared:
            out[key] = declared[ref.instance].endpoints.apply(_pick(ref.endpoint))
    return out


class ProjectApps(pulumi.ComponentResource):
    """A platform project's app instances, grouped under one parent in the preview and the state."""

    def __init__(self, project_id: str) -> None:
        super().__init__("gpuaas:index:ProjectApps", project_id, None, None)


def declare_apps(env: Environment, settings: StackSettings, node_ids: Mapping[str, Any]) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    parents: dict[str, ProjectApps] = {}
    declared: dict[str, AppInstance] = {}
    for a in in_dependency_order(env.app_instances):
        if a.project_id not in parents:
            parents[a.project_id] = ProjectApps(a.project_id)
        # Instances had no parent before ProjectApps: the alias keeps their identity in older state.
        opts = pulumi.ResourceOptions(parent=parents[a.project_id], protect=env.tier.value == "prod",
                                      aliases=[pulumi.Alias(parent=None)])
        res = AppInstance(f"app-{a.name}", instance_args(env, settings, a), _placements(env, a, node_ids), opts,
                          input_endpoints=_input_endpoints(a, declared))
        declared[a.name] = res
        outputs[a.name] = {"instance_id": res.instance_id, "status": res.status, "app_version": res.app_version,
                           "members": res.members, "endpoints": res.endpoints}
    return outputs


@dataclass(frozen=True)
class AppsResult:
    """The apps area: stack output `app_instances` (instance name -> its outputs)."""

    outputs: dict[str, Any]


def member_machines(env: Environment) -> set[str]:
    """The MAAS machines app members name (their node ids bind the members)."""
    return {m for a in env.app_instances for spec in a.members.values() for n in spec.nodes
            if (m := node_machine(env, n)) is not None}


def build_apps(env: Environment, settings: StackSettings, node_ids: Mapping[str, pulumi.Output[Any]]) -> AppsResult:
    """Members bind to machines by `node_ids` (hostname -> platform node id, from the machines area)."""
    return AppsResult(declare_apps(env, settings, node_ids) if env.app_instances else {})
