"""Declares a compiled environment's resources: one builder per resource area.

Each area (sites/profiles/bundles/RoCE, machines, app instances, host roles) registers a builder
here; `declare_environment` runs them in dependency order and returns the stack outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from environments import Environment

from .apps import build_apps
from .host_roles import build_host_roles
from .machines import build_machines
from .settings import StackSettings
from .site import build_sites

# A builder declares resources for one area and returns (output name -> value) and the
# area-specific handles later builders need (e.g. machines need the site profiles).
Builder = Callable[[Environment, StackSettings, dict[str, Any]], dict[str, Any]]

BUILDERS: list[tuple[str, Builder]] = []
BUILDERS.append(("sites", build_sites))  # sites, profiles, bundles, RoCE (components/site.py)
BUILDERS.append(("machines", build_machines))  # MaasMachine / MachinePool (components/machines.py)
BUILDERS.append(("apps", build_apps))  # AppInstance per app_instances entry (components/apps.py)
BUILDERS.append(("host_roles", build_host_roles))  # HostConvergence when gpuaas-infra:hostRoles is set


def declare_environment(env: Environment, settings: StackSettings) -> dict[str, Any]:
    handles: dict[str, Any] = {}
    outputs: dict[str, Any] = {
        "environment": env.name,
        "tier": env.tier.value,
        "summary": {
            "sites": [s.name for s in env.sites],
            "hosts": {h.hostname: h.logical_role.value for h in env.hosts},
            "machines": len(env.machines),
            "roce_pools": len(env.roce_pools),
            "app_instances": [a.name for a in env.app_instances],
        },
    }
    for area, build in BUILDERS:
        produced = build(env, settings, handles)
        handles[area] = produced
        outputs.update({k: v for k, v in produced.items() if not k.startswith("_")})
    outputs["areas"] = [area for area, _ in BUILDERS]
    return outputs
