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

Wire-up (components/stack.py): `BUILDERS.append(("host_roles", build_host_roles))`.
Environments without hosts, or stacks without `hostRoles`, declare nothing.
"""

from __future__ import annotations

from typing import Any

import pulumi

from environments import Environment
from providers.common import VaultInputs
from providers.host_convergence import HostConvergence, HostConvergenceSpec

from .settings import NAMESPACE, StackSettings


class HostRoles(pulumi.ComponentResource):
    convergence: HostConvergence

    def __init__(self, name: str, spec: HostConvergenceSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("gpuaas:index:HostRoles", name, None, opts)
        self.convergence = HostConvergence(f"{name}-convergence", spec, pulumi.ResourceOptions(parent=self))
        self.register_outputs({"hosts": self.convergence.hosts, "content_hash": self.convergence.content_hash})


def spec_for(env: Environment, settings: StackSettings, host_roles: dict[str, Any]) -> HostConvergenceSpec:
    """The resource's inputs from the compiled environment + the stack's hostRoles config (pure)."""
    vault = VaultInputs(address=settings.endpoint(env.vault.address, "vault"), kv_mount=env.vault.kv_mount,
                        auth_method=env.vault.auth_method)
    return HostConvergenceSpec(
        environment=env.name,
        vault=vault,
        artifacts=host_roles.get("artifacts") or {},
        secret_refs=host_roles.get("secret_refs") or {},
        preview_check=bool(host_roles.get("preview_check", False)),
        apt_source=host_roles.get("apt_source") or "",
        address_overrides=host_roles.get("address_overrides") or {},
        extra_vars=host_roles.get("extra_vars") or {},
    )


def build_host_roles(env: Environment, settings: StackSettings, handles: dict[str, Any]) -> dict[str, Any]:
    host_roles = pulumi.Config(NAMESPACE).get_object("hostRoles")
    if not env.hosts or not host_roles:
        return {}
    component = HostRoles(f"{env.name}-host-roles", spec_for(env, settings, host_roles))
    return {"host_roles": component.convergence.hosts, "_host_roles": component}
