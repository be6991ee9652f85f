"""Declares a compiled environment's resources: the whole pipeline, in order, on one screen.

    sites      = build_sites(env, settings)                       # bundles, profiles, RoCE per site
    machines   = build_machines(env, settings, sites.site_outputs)  # MaasMachine / MachinePool
    apps       = build_apps(env, settings, machines.node_ids)     # AppInstance per app_instances entry
    host_roles = build_host_roles(env, settings, machines.identities)  # HostConvergence when hostRoles is set

Each builder returns a frozen result; later builders take exactly what they need from earlier ones.

A split stack (`gpuaas-infra:part`, components/parts.py) runs part of it: a site stack the sites and
machines of its site (and exports their node ids), a control stack apps and host roles, with the node
ids read from the site stacks (`referenced_node_ids`) instead of `machines.node_ids`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from environments import Environment

from .apps import build_apps, member_machines
from .host_roles import build_host_roles, host_machines
from .machines import build_machines
from .parts import MACHINE_IDENTITIES, NODE_IDS, referenced
from .settings import PartKind, StackSettings
from .site import build_sites

AREAS = ("sites", "machines", "apps", "host_roles")


def _summary(env: Environment) -> dict[str, Any]:
    return {
        "sites": [s.name for s in env.sites],
        "hosts": {h.hostname: h.logical_role.value for h in env.hosts},
        "machines": len(env.machines),
        "roce_pools": len(env.roce_pools),
        "app_instances": [a.name for a in env.app_instances],
    }


def declare_environment(env: Environment, settings: StackSettings) -> dict[str, Any]:
    """Every resource of the environment (of the stack's part); returns the stack outputs."""
    part = settings.part
    outputs: dict[str, Any] = {"environment": env.name, "tier": env.tier.value, "summary": _summary(env)}
    node_ids: Mapping[str, Any] = {}
    identities: dict[str, Any] = {}
    if part.kind is not PartKind.CONTROL:
        sites = build_sites(env, settings)
        machines = build_machines(env, settings, sites.site_outputs)
        outputs["sites"] = sites.outputs
        if machines.outputs:
            outputs["machines"] = machines.outputs
        node_ids, identities = machines.node_ids, machines.identities
        if part.kind is PartKind.SITE:
            outputs[NODE_IDS] = machines.node_ids.output()
            if identities:
                outputs[MACHINE_IDENTITIES] = identities
    else:
        hosts = set(host_machines(env).values()) if settings.host_roles is not None else set()
        read = referenced(env, settings, {NODE_IDS: member_machines(env), MACHINE_IDENTITIES: hosts})
        node_ids, identities = read[NODE_IDS], read[MACHINE_IDENTITIES]
    if part.declares_control:
        apps = build_apps(env, settings, node_ids)
        host_roles = build_host_roles(env, settings, identities)
        if apps.outputs:
            outputs["app_instances"] = apps.outputs
        if host_roles.reports is not None:
            outputs["host_roles"] = host_roles.reports
    outputs["areas"] = list(AREAS)
    if part.kind is not PartKind.ALL:
        outputs["part"] = str(part)
    return outputs
