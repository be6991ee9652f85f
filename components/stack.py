"""Declares a compiled environment's resources: the whole pipeline, in order, on one screen.

    sites      = build_sites(env, settings)                       # bundles, profiles, RoCE per site
    machines   = build_machines(env, settings, sites.site_outputs)  # MaasMachine / MachinePool
    apps       = build_apps(env, settings, machines.node_ids)     # AppInstance per app_instances entry
    host_roles = build_host_roles(env, settings)                 # HostConvergence when hostRoles is set

Each builder returns a frozen result; later builders take exactly what they need from earlier ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi

from environments import Environment

from .apps import build_apps
from .host_roles import build_host_roles
from .machines import SiteOutputs as MachineSiteInputs
from .machines import build_machines as _declare_machines
from .settings import StackSettings
from .site import build_sites

AREAS = ("sites", "machines", "apps", "host_roles")


@dataclass(frozen=True)
class MachinesResult:
    """The machines area (the shape components/machines.py's `build_machines` returns after issue 12)."""

    outputs: dict[str, Any] = field(default_factory=dict)
    node_ids: dict[str, pulumi.Output[Any]] = field(default_factory=dict)
    """hostname -> the platform node id the machine enrolled as (apps bind members by it)."""


def build_machines(env: Environment, settings: StackSettings, sites: MachineSiteInputs) -> MachinesResult:
    # Shim until components/machines.py exposes build_machines(env, settings, sites) -> MachinesResult
    # (its owner rewrites it); then import that one instead and drop this function.
    produced = _declare_machines(env, settings, {"sites": {"_site_outputs": sites}})
    return MachinesResult(outputs=produced.get("machines", {}), node_ids=produced.get("_node_ids", {}))


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
