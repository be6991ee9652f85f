"""HostRoles: the environment's hosts converged to their roles (one HostConvergence per environment).

Stack config (`gpuaas-infra:hostRoles`, an object; everything but the environment comes from here):

    gpuaas-infra:hostRoles:
      artifacts:                       # non-Debian artifacts, each verified by sha256 on the host
        k3s: {url: ..., sha256: ...}
        gitlab: {url: ..., sha256: ...}          # the gitlab-ce .deb
        gitlab_runner: {url: ..., sha256: ...}   # the gitlab-runner .deb
        node_agent: {url: ..., sha256: ...}
      secret_refs:                     # extra var -> Vault reference (values never in config/state)
        gpuaas_munge_key: dev/slurm/munge#key
        gpuaas_runner_token: dev/ci/runner#token
        gpuaas_gitlab_root_password: dev/gitlab/root#password
      preview_check: true              # preview runs ansible --check --diff and prints what would change
      apt_source: ""                   # extra apt line (the lab's mirror); empty in real environments
      address_overrides: {}            # hostname -> address (the lab only)

The component compiles the environment's hosts into the resource's typed inventory (effective
Ansible roles, reachable addresses, users, runner tags; one SSH key reference), so Pulumi diffs the
inventory and the provider never reads environment files.
Environments without hosts, or stacks without `hostRoles`, declare nothing.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

import pulumi

from environments import Environment
from providers.host_convergence import ArtifactSource, HostConvergence, HostConvergenceSpec, InventoryHost
from providers.wire import LogicalRole

from .mounts import role_mounts
from .settings import HostRolesSettings, StackSettings, vault_inputs


class HostRolesInvalid(ValueError):
    pass


class HostRoles(pulumi.ComponentResource):
    convergence: HostConvergence

    def __init__(self, name: str, spec: HostConvergenceSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:HostRoles", name, None, opts)
        self.convergence = HostConvergence(f"{name}-convergence", spec, pulumi.ResourceOptions(parent=self))
        self.register_outputs({"hosts": self.convergence.host_reports, "content_hash": self.convergence.content_hash})


def inventory_hosts(env: Environment, overrides: dict[str, str]) -> tuple[InventoryHost, ...]:
    """The environment's hosts as the play sees them (`overrides`: hostname -> address, the lab only)."""
    unknown = sorted(set(overrides) - {h.hostname for h in env.hosts})
    if unknown:
        raise HostRolesInvalid(f"hostRoles.address_overrides names hosts not in environment {env.name}: "
                               f"{', '.join(unknown)}; fix: use hostnames from {env.source}")
    return tuple(InventoryHost(
        hostname=h.hostname, address=ipaddress.IPv4Address(overrides.get(h.hostname, str(h.address))),
        ssh_user=h.ssh_user, logical_role=LogicalRole(h.logical_role.value), roles=tuple(r.value for r in h.roles),
        runner_tags=tuple(t.value for t in h.runner_tags), mounts=role_mounts(env, h.logical_role.value))
        for h in env.hosts)


def spec_for(env: Environment, settings: StackSettings, host_roles: HostRolesSettings) -> HostConvergenceSpec:
    """The resource's inputs from the compiled environment + the stack's hostRoles config (pure)."""
    keys = sorted({h.ssh_key_path for h in env.hosts})
    if len(keys) != 1:
        raise HostRolesInvalid(f"environment {env.name}: hosts use different ssh_key_path values ({', '.join(keys)}); "
                               "one run uses one key; fix: give every host the same ssh_key_path")
    return HostConvergenceSpec(
        environment=env.name,
        hosts=inventory_hosts(env, host_roles.address_overrides),
        ssh_key_ref=keys[0],
        vault=vault_inputs(env, settings),
        artifacts={k: ArtifactSource(url=a.url, sha256=a.sha256) for k, a in host_roles.artifacts.items()},
        secret_refs=host_roles.secret_refs,
        preview_check=host_roles.preview_check,
        apt_source=host_roles.apt_source,
        extra_vars=host_roles.extra_vars,
    )


@dataclass(frozen=True)
class HostRolesResult:
    """The host-roles area: per-host reports of the last run (None: the stack converges no hosts)."""

    reports: pulumi.Output[dict[str, Any]] | None


def build_host_roles(env: Environment, settings: StackSettings) -> HostRolesResult:
    if not env.hosts or settings.host_roles is None:
        return HostRolesResult(None)
    component = HostRoles(f"{env.name}-host-roles", spec_for(env, settings, settings.host_roles))
    return HostRolesResult(component.convergence.host_reports)
