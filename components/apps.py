"""App instances: one AppInstance per `app_instances` entry of the environment (seed 004).

Members name declared hosts or machines. A node that is a MAAS machine managed in this stack binds
by the platform node id the machine enrolled as (the machines area's `_node_ids` handle), so the
instance waits for the machine; a host that is not (the app_control host) has no node id the
project's service account could name — the contract places members by node id only — so the
platform places that member, and the stack remembers which member fills that host's slot.
"""

from __future__ import annotations

from typing import Any

import pulumi

from environments import Environment
from environments.model import AppInstance as AppDoc
from providers.app_instance import AppInstance
from providers.apps.spec import GPU_NODE

from .settings import StackSettings

CONFIG_PARALLEL = "app_member_parallelism"  # stack config: member operations in flight per instance
CONFIG_TIMEOUT = "app_operation_timeout_s"  # stack config: deadline of one platform operation


def _node_machine(env: Environment, node: str) -> str | None:
    """The MAAS machine hostname a member node names (a host may be a machine), if any."""
    host = next((h for h in env.hosts if h.hostname == node), None)
    if host is not None:
        return host.machine
    return node if any(m.hostname == node for m in env.machines) else None


def _topology(env: Environment, a: AppDoc) -> dict[str, str]:
    roles = {h.hostname: h.logical_role.value for h in env.hosts}
    nodes = {n for spec in a.members.values() for n in spec.nodes}
    return {n: roles.get(n, GPU_NODE) for n in sorted(nodes)}


def _placements(env: Environment, a: AppDoc, node_ids: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, spec in a.members.items():
        ids = []
        for node in spec.nodes:
            machine = _node_machine(env, node)
            ids.append(node_ids.get(machine) if machine else None)
        out[key] = pulumi.Output.all(*ids).apply(list) if ids else []
    return out


def declare_apps(env: Environment, settings: StackSettings, node_ids: dict[str, Any]) -> dict[str, Any]:
    config = pulumi.Config("gpuaas-infra")
    bp = env.blueprint_model
    outputs: dict[str, Any] = {}
    for a in env.app_instances:
        props = {
            "stack": settings.stack,
            "instance": a.model_dump(mode="json"),
            "blueprint": {"name": bp.name, "app": bp.apps[a.app.slug].model_dump(mode="json"),
                          "runtime_combinations": [c.model_dump(mode="json") for c in bp.runtime_combinations]},
            "topology": _topology(env, a),
            "placements": _placements(env, a, node_ids),
            "platform_url": settings.endpoint(env.platform.url, "platform"),
            "vault": {"address": settings.endpoint(env.vault.address, "vault"), "kv_mount": env.vault.kv_mount,
                      "auth_method": env.vault.auth_method.value},
            "max_parallel": config.get_int(CONFIG_PARALLEL) or 4,
            "operation_timeout_s": config.get_float(CONFIG_TIMEOUT) or 900.0,
        }
        res = AppInstance(f"app-{a.name}", props, pulumi.ResourceOptions(protect=env.tier.value == "prod"))
        outputs[a.name] = {"instance_id": res.instance_id, "status": res.status, "app_version": res.app_version,
                           "members": res.members}
    return outputs


def build_apps(env: Environment, settings: StackSettings, handles: dict[str, Any]) -> dict[str, Any]:
    """The "apps" builder of components/stack.py (after "machines")."""
    if not env.app_instances:
        return {}
    node_ids: dict[str, Any] = (handles.get("machines") or {}).get("_node_ids", {})
    return {"app_instances": declare_apps(env, settings, node_ids)}
