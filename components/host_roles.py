"""HostRoles: the environment's hosts converged to their roles (one HostConvergence per environment).

Stack config (`gpuaas-infra:hostRoles`, an object; everything but the environment comes from here):

    gpuaas-infra:hostRoles:
      pins: environments/pins/dev.yaml # the releases the hosts install (operator data: environments/pins/):
                                       # k3s, gitlab, gitlab_runner, node_agent, pulumi_cli, each url + sha256
      artifacts: {}                    # inline pins replacing the file's by name (the lab's own URLs only)
      runner_tokens_path: dev/ci/runners    # Vault path: one token per runner, key <hostname>.<tag>
      secret_refs:                     # extra var -> Vault reference (values never in config/state)
        gpuaas_munge_key: dev/slurm/munge#key
        gpuaas_gitlab_root_password: dev/gitlab/root#password
        gpuaas_k3s_token: dev/k3s/cluster#token     # every k3s server joins the first with it
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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from environments import Environment
from environments.findings import Code, Finding, finding
from environments.model import HostRole
from environments.pins import STANDIN_MARK, load_pins, pin_findings, standin_digests
from environments.pins import display as pins_display
from environments.pins import resolve as resolve_pins
from providers.host_convergence import HostConvergence
from providers.hosts.convergence import ArtifactSource, HostConvergenceSpec, InventoryHost
from providers.wire import LogicalRole

from .mounts import role_mounts
from .settings import HOST_ROLES, NAMESPACE, HostRolesSettings, StackSettings, stack_file, vault_inputs

# Ansible role -> (artifacts it downloads, secret vars it renders): what its `assert` tasks require. The
# runner hosts get the pinned Pulumi CLI (the pipeline's jobs run it: docs/preview-notes.md).
ROLE_NEEDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "control_plane_k3s": (("k3s",), ("gpuaas_k3s_token",)),
    "gitlab": (("gitlab",), ("gpuaas_gitlab_root_password",)),
    "runner": (("gitlab_runner", "pulumi_cli"), ()),  # each runner's own token: hostRoles.runner_tokens_path
    "worker_compute": (("node_agent",), ("gpuaas_munge_key",)),
    "app_control": ((), ("gpuaas_munge_key",)),
    # every host (the playbook applies it to all): the site CA that signs each host's journal TLS certificate
    "journal_shipping": ((), ("gpuaas_journal_ca_cert", "gpuaas_journal_ca_key")),
}
EVERY_HOST = ("journal_shipping",)  # roles the playbook applies to every host whatever its layout


class HostRolesInvalid(ValueError):
    pass


class HostRoles(pulumi.ComponentResource):
    convergence: HostConvergence

    def __init__(self, name: str, spec: HostConvergenceSpec, opts: pulumi.ResourceOptions | None = None,
                 machines: Mapping[str, Any] | None = None) -> None:
        """`machines`: hostname -> Output of the identity of the MAAS machine the host is (see build_host_roles)."""
        super().__init__("gpuaas:index:HostRoles", name, None, opts)
        self.convergence = HostConvergence(f"{name}-convergence", spec, pulumi.ResourceOptions(parent=self),
                                           machines=machines)
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


def artifacts_of(host_roles: HostRolesSettings) -> dict[str, ArtifactSource]:
    """The pins the hosts verify: the pins file's pinned entries, then the inline ones (by name)."""
    out: dict[str, ArtifactSource] = {}
    if host_roles.pins:
        pins, _ = load_pins(host_roles.pins)
        out = {k: ArtifactSource(url=p.url, sha256=p.sha256, version=p.version)
               for k, p in (pins.artifacts if pins else {}).items() if p.pinned}
    inline = {k: ArtifactSource(url=a.url, sha256=a.sha256, version=a.version) for k, a in host_roles.artifacts.items()}
    return out | inline


def runner_token_refs(env: Environment, host_roles: HostRolesSettings) -> dict[str, dict[str, str]]:
    """hostname -> tag -> `<runner_tokens_path>#<hostname>.<tag>`: one token per runner (a host's tag)."""
    if not host_roles.runner_tokens_path:
        return {}
    return {h.hostname: {t.value: f"{host_roles.runner_tokens_path}#{h.hostname}.{t.value}" for t in h.runner_tags}
            for h in env.hosts if HostRole.RUNNER in h.roles and h.runner_tags}


def host_secret_refs(env: Environment, host_roles: HostRolesSettings | None) -> dict[str, str]:
    """Every Vault reference host convergence reads besides the SSH key (the secrets checklist lists them)."""
    if host_roles is None:
        return {}
    runners = {f"gpuaas_runner_tokens.{h}.{t}": ref for h, tags in runner_token_refs(env, host_roles).items()
               for t, ref in tags.items()}
    return {**host_roles.secret_refs, **runners}


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
        artifacts=artifacts_of(host_roles),
        secret_refs=host_roles.secret_refs,
        runner_token_refs=runner_token_refs(env, host_roles),
        preview_check=host_roles.preview_check,
        apt_source=host_roles.apt_source,
        extra_vars=host_roles.extra_vars,
    )


def _needs(env: Environment) -> dict[tuple[Code, str], dict[str, list[str]]]:
    needs: dict[tuple[Code, str], dict[str, list[str]]] = {}
    for host in env.hosts:
        for role in (*(r.value for r in host.roles), *EVERY_HOST):
            artifacts, secrets = ROLE_NEEDS.get(role, ((), ()))
            for code, names in ((Code.PIN_MISSING, artifacts), (Code.HOST_SECRET_MISSING, secrets)):
                for name in names:
                    needs.setdefault((code, name), {}).setdefault(role, []).append(host.hostname)
    return needs


def _users(by_role: dict[str, list[str]]) -> str:
    return "; ".join(f"role {r} on {', '.join(hosts)}" for r, hosts in sorted(by_role.items()))


def host_roles_findings(env: Environment, settings: StackSettings, preview: bool = False) -> list[Finding]:
    """Before anything runs: every artifact pin and secret reference the hosts' roles need is in the
    stack's hostRoles or its pins file (a role would otherwise fail on the host, mid-run), and no pin is a lab
    stand-in outside the lab. An artifact the pins file declares but has not pinned yet is a warning in a
    preview (`preview`) and an error otherwise: `up` refuses before anything is changed."""
    roles = settings.host_roles
    if roles is None or not env.hosts:
        return []
    needs = _needs(env)
    out: list[Finding] = []
    pins = None
    if roles.pins:
        pins, bad = load_pins(roles.pins)
        out += bad
    declared = set(roles.artifacts) | set(pins.artifacts if pins else ())
    if pins is not None and roles.pins:
        wanted = {name: _users(by_role) for (code, name), by_role in needs.items()
                  if code is Code.PIN_MISSING and name not in roles.artifacts and name in pins.artifacts}
        out += pin_findings(pins, pins_display(resolve_pins(roles.pins)), wanted,
                            lab_allowed=env.tier.value == "local", preview=preview)
    out += _inline_standins(env, settings)
    runners = [h.hostname for h in env.hosts if HostRole.RUNNER in h.roles]
    if runners and not roles.runner_tokens_path:
        out.append(finding(Code.HOST_SECRET_MISSING, stack_file(settings.stack),
                           f"{NAMESPACE}:{HOST_ROLES}.runner_tokens_path",
                           f"the runners of {', '.join(runners)} need their tokens (one per runner)",
                           hint=f"set {NAMESPACE}:{HOST_ROLES}.runner_tokens_path: <Vault path>; under it, one key "
                                "<hostname>.<tag> per runner (gpuaas-infra secrets lists them)"))
    for (code, name), by_role in sorted(needs.items()):
        have = declared if code is Code.PIN_MISSING else set(roles.secret_refs)
        if name in have:
            continue
        section = "artifacts" if code is Code.PIN_MISSING else "secret_refs"
        what = ("{url: <where the hosts fetch it>, sha256: <sha256sum of that file>} (in the pins file)"
                if code is Code.PIN_MISSING else "<path>#<key> (then fill that Vault entry)")
        out.append(finding(code, stack_file(settings.stack), f"{NAMESPACE}:{HOST_ROLES}.{section}.{name}",
                           f"{name} is needed by {_users(by_role)}",
                           hint=f"under {NAMESPACE}:{HOST_ROLES}.{section} add {name}: {what}"))
    return out


def _inline_standins(env: Environment, settings: StackSettings) -> list[Finding]:
    """Inline pins are for the lab; a stand-in among them outside a local-tier environment is refused too."""
    roles = settings.host_roles
    if roles is None or env.tier.value == "local":
        return []
    standins = standin_digests()
    return [finding(Code.LAB_STANDIN_OUTSIDE_LAB, stack_file(settings.stack), f"{NAMESPACE}:{HOST_ROLES}.artifacts.{k}",
                    f"{k} is pinned to a lab stand-in (lab/standins.py), not the real {k}")
            for k, a in sorted(roles.artifacts.items()) if a.sha256 in standins or STANDIN_MARK in a.url]


@dataclass(frozen=True)
class HostRolesResult:
    """The host-roles area: per-host reports of the last run (None: the stack converges no hosts)."""

    reports: pulumi.Output[dict[str, Any]] | None


def host_machines(env: Environment) -> dict[str, str]:
    """hostname -> the MAAS machine it is, for the hosts that are machines (dev-gpu-1)."""
    return {h.hostname: h.machine for h in env.hosts if h.machine}


def build_host_roles(env: Environment, settings: StackSettings,
                     identities: Mapping[str, pulumi.Output[Any]] | None = None) -> HostRolesResult:
    """`identities`: machine hostname -> Output of {system_id, deploy_fingerprint} (MachinesResult.identities,
    or a control stack's reads of its site stacks). A host that is a machine is converged after that machine's
    deploy, and again after each reimage: its identity is part of the convergence's inputs and content hash."""
    if not env.hosts or settings.host_roles is None:
        return HostRolesResult(None)
    identities = identities or {}
    machines = {h: identities[m] for h, m in host_machines(env).items() if m in identities}
    component = HostRoles(f"{env.name}-host-roles", spec_for(env, settings, settings.host_roles), machines=machines)
    return HostRolesResult(component.convergence.host_reports)
