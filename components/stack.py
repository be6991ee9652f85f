"""Declares a compiled environment's resources: the whole pipeline, in order, on one screen.

    sites      = build_sites(env, settings)                       # bundles, profiles, RoCE per site
    machines   = build_machines(env, settings, sites.site_outputs)  # MaasMachine / MachinePool
    apps       = build_apps(env, settings, machines.node_ids)     # AppInstance per app_instances entry
    host_roles = build_host_roles(env, settings)                 # HostConvergence when hostRoles is set

Each builder returns a frozen result; later builders take exactly what they need from earlier ones.
"""

from __future__ import annotations

from typing import Any

from environments import Environment

from .apps import build_apps
from .host_roles import build_host_roles
from .machines import build_machines
from .settings import StackSettings
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
    """Every resource of the environment; returns the stack outputs."""
    sites = build_sites(env, settings)
    machines = build_machines(env, settings, sites.site_outputs)
    apps = build_apps(env, settings, machines.node_ids)
    host_roles = build_host_roles(env, settings)

    outputs: dict[str, Any] = {"environment": env.name, "tier": env.tier.value, "summary": _summary(env)}
    outputs["sites"] = sites.outputs
    if env.machines:
        outputs["machines"] = machines.outputs
    if apps.outputs:
        outputs["app_instances"] = apps.outputs
    if host_roles.reports is not None:
        outputs["host_roles"] = host_roles.reports
    outputs["areas"] = list(AREAS)
    return outputs
