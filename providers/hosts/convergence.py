"""HostConvergence: ansible-runner converged the host roles of one environment's hosts.

One resource per environment (not per host): one ansible run converges every host in parallel
(forks), the Slurm controller and workers must agree on one slurm.conf and munge key, and the
dynamic-provider server has only 4 worker threads — one per host would hold three of them.
Per-host results are still reported (`host_reports` output: ok/changed/failed/unreachable per host).

Input: the compiled inventory (`HostConvergenceSpec`: hosts with their addresses, users, logical
and Ansible roles, runner tags; artifact pins; vars; Vault references of secrets), built by
components/host_roles.py from the environment model. The provider never reads environment files,
and Pulumi diffs the inventory itself.
Layers (STYLE.md): `plan()` is pure (spec -> inventory + content hash, refusing a role-rule
violation before ansible runs), `converge()` is the effectful step (secrets from Vault, then
clients.ansible); `HostConvergenceProvider` (providers/host_convergence.py) is the thin Pulumi adapter.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import sys
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from clients.ansible import (
    ANSIBLE_DIR,
    SITE_PLAYBOOK,
    AnsibleWorkerFailed,
    PlaybookRun,
    RunResult,
    TaskEvent,
    TaskStatus,
    run_playbook,
)
from clients.vault import VaultError
from environments.coded import CodedError, coded_errors, line
from environments.findings import Finding, Level
from environments.rules_hosts import host_role_mix
from providers.common import VaultInputs
from providers.hosts.failures import HostFail
from providers.hosts.mounts import DROP_IN, MountDecl, unit_files
from providers.wire import LogicalRole, VaultRef, Wire

SecretReader = Callable[[str], SecretStr]
"""Vault reference (`path#key`) -> value. Injected in tests; `clients.vault` otherwise."""
SOURCE = "hosts"



class ArtifactSource(Wire):
    url: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    version: str = ""
    """The release, where a role checks it (the runners' Pulumi CLI)."""


class InventoryHost(Wire):
    """One host as the play sees it (compiled from the environment: effective roles, reachable address)."""

    hostname: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
    address: ipaddress.IPv4Address
    ssh_user: str = "gpuaas"
    logical_role: LogicalRole
    roles: tuple[str, ...]
    """Ansible role names (ansible/roles/<name>)."""
    runner_tags: tuple[str, ...] = ()
    mounts: tuple[MountDecl, ...] = ()
    """WEKA mounts of the host's logical role (seed 000 §2), rendered into `gpuaas_mounts` for the `common` role."""


class MachineIdentity(Wire):
    """What a host that is a MAAS machine is, this time: a redeploy with another deploy spec (a reimage) or a
    new MAAS machine (a replace) changes it, and with it what convergence keys on (`content_hash`)."""

    system_id: str = Field(min_length=1)
    deploy_fingerprint: str = Field(min_length=1)


class HostConvergenceSpec(Wire):
    """The resource's inputs: the compiled inventory. Secrets are Vault references only, never values."""

    environment: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
    """The environment's name (labels and `gpuaas_environment`); the provider never reads its file."""
    hosts: tuple[InventoryHost, ...] = Field(min_length=1)
    ssh_key_ref: VaultRef
    artifacts: dict[str, ArtifactSource] = {}
    apt_source: str = ""
    secret_refs: dict[str, str] = {}
    """extra var name -> Vault reference, e.g. gpuaas_munge_key_b64 -> dev/slurm/munge#key_b64."""
    runner_token_refs: dict[str, dict[str, VaultRef]] = {}
    """hostname -> runner tag -> the Vault reference of that runner's own token (`gpuaas_runner_tokens`)."""
    extra_vars: dict[str, Any] = {}
    vault: VaultInputs | None = None
    preview_check: bool = False
    """Run `--check --diff` during diff (preview) and print what would change."""
    timeout_s: int = 3600
    machines: dict[str, MachineIdentity] = {}
    """hostname -> the MAAS machine it is (hosts that are machines only), from the machine's own outputs: the
    resource depends on the machine (converges after its deploy) and re-converges when it is reimaged."""

    @field_validator("secret_refs")
    @classmethod
    def _refs_are_references(cls, v: dict[str, str]) -> dict[str, str]:
        for name, ref in v.items():
            if "#" not in ref:
                raise ValueError(f"secret_refs.{name}: expected a Vault reference '<path>#<key>'")
        return v


class HostOutcome(StrEnum):
    OK = "ok"
    CHANGED = "changed"
    FAILED = "failed"
    UNREACHABLE = "unreachable"


class HostReport(BaseModel):
    ok: int
    changed: int
    failed: int
    unreachable: int
    skipped: int
    outcome: HostOutcome


class ConvergenceResult(BaseModel):
    error: str | None = None
    content_hash: str
    check: bool
    hosts: dict[str, HostReport]
    changes: list[TaskEvent]
    duration_s: float


class Plan(BaseModel):
    model_config = ConfigDict(frozen=True)
    inventory: dict[str, Any]
    extravars: dict[str, Any]
    content_hash: str


def where(spec: HostConvergenceSpec) -> str:
    return f"host convergence {SOURCE}[{spec.environment}]"


class RoleRulesViolated(CodedError):
    """The inventory breaks the model's role rules: nothing was run. One finding a line under the head."""

    def __init__(self, findings: list[Finding], at: str = "host convergence") -> None:
        self.findings = findings
        super().__init__(HostFail.ROLE_RULES, at, "inventory refused before ansible ran", HostFail.ROLE_RULES.fix,
                         [line(f.code.value, f"{f.file}: {f.path}", f.message, f.hint) for f in findings])


class ConvergenceFailed(CodedError):
    def __init__(self, result: ConvergenceResult, failures: list[TaskEvent], at: str = "host convergence") -> None:
        self.result = result
        bad = {h: r.outcome.value for h, r in result.hosts.items() if r.outcome in (HostOutcome.FAILED,
                                                                                   HostOutcome.UNREACHABLE)}
        lines = [f"{e.host}: {e.status.value} in '{e.task}': {e.message}" for e in failures[:10]]
        if result.error:
            lines.append(f"ansible: {result.error}")
        super().__init__(HostFail.CONVERGENCE_FAILED, at,
                         f"failed on {', '.join(f'{h} ({o})' for h, o in sorted(bad.items()))}",
                         HostFail.CONVERGENCE_FAILED.fix, lines)


# --- planning (pure) -----------------------------------------------------------------------------

def role_findings(spec: HostConvergenceSpec) -> list[Finding]:
    """The environment's own role rules (ROLE001 ...) over the compiled hosts; never re-implemented here."""
    return [f for i, h in enumerate(spec.hosts)
            for f in host_role_mix(h.hostname, h.logical_role, h.roles, (), h.runner_tags,
                                         f"{SOURCE}[{spec.environment}]", f"hosts[{i}]")
            if f.level is Level.ERROR]


def build_inventory(hosts: tuple[InventoryHost, ...]) -> dict[str, Any]:
    """Groups = logical roles, plus `role_<name>` per Ansible role; hostnames as in the model."""
    out: dict[str, Any] = {}
    children: dict[str, Any] = {}
    for h in hosts:
        out[h.hostname] = {
            "ansible_host": str(h.address),
            "ansible_user": h.ssh_user,
            "gpuaas_logical_role": h.logical_role.value,
            "gpuaas_roles": list(h.roles),
            "gpuaas_runner_tags": list(h.runner_tags),
            "gpuaas_mounts": _mount_vars(h.mounts),
        }
        for group in [h.logical_role.value, *(f"role_{r}" for r in h.roles)]:
            children.setdefault(group, {"hosts": {}})["hosts"][h.hostname] = {}
    return {"all": {"hosts": out, "children": dict(sorted(children.items()))}}


def _mount_vars(mounts: tuple[MountDecl, ...]) -> list[dict[str, str]]:
    """[{name, unit, drop_in}] per mount unit (drop_in "" when the filesystem is real)."""
    files = unit_files(mounts)
    return [{"name": name, "unit": text, "drop_in": files.get(f"{name}.d/{DROP_IN}", "")}
            for name, text in files.items() if name.endswith(".mount")]


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def content_hash(inventory: Mapping[str, Any], extravars: Mapping[str, Any], secret_refs: Mapping[str, str],
                 machines: Mapping[str, MachineIdentity] | None = None) -> str:
    """Roles + playbook + ansible.cfg + inventory + vars + the identity of each host that is a machine (a
    reimaged host is converged again). Secrets enter by reference (rotate = new ref)."""
    doc: dict[str, Any] = {"ansible": _tree_digest(ANSIBLE_DIR), "inventory": inventory, "vars": extravars,
                           "secret_refs": dict(sorted(secret_refs.items()))}
    if machines:  # absent before issue 28: hashes of hosts without machines are unchanged
        doc["machines"] = {h: m.model_dump() for h, m in sorted(machines.items())}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def plan(spec: HostConvergenceSpec) -> Plan:
    if found := role_findings(spec):
        raise RoleRulesViolated(found, where(spec))
    inventory = build_inventory(spec.hosts)
    extravars = {"gpuaas_environment": spec.environment, "gpuaas_apt_source": spec.apt_source,
                 "gpuaas_artifacts": {k: a.model_dump() for k, a in sorted(spec.artifacts.items())},
                 **spec.extra_vars}
    unknown = sorted(set(spec.machines) - {h.hostname for h in spec.hosts})
    if unknown:
        raise HostFail.UNKNOWN_MACHINE_HOST(where(spec), f"machines names hosts not in the inventory: "
                                            f"{', '.join(unknown)}")
    refs = {**spec.secret_refs, **{f"gpuaas_runner_tokens.{h}.{t}": r for h, tags in spec.runner_token_refs.items()
                                   for t, r in tags.items()}}
    return Plan(inventory=inventory, extravars=extravars,
                content_hash=content_hash(inventory, extravars, refs, spec.machines))


# --- converging (effectful) ----------------------------------------------------------------------

def print_progress(e: TaskEvent) -> None:
    """Provider stdout/stderr reach the Pulumi CLI (DESIGN 3.1): one line per host and task."""
    if e.status is not TaskStatus.SKIPPED:
        print(f"[host-convergence] {e.host}: {e.status.value}: {e.task}", file=sys.stderr, flush=True)


def _report(result: RunResult, hostnames: list[str]) -> dict[str, HostReport]:
    out = {}
    for h in hostnames:
        s = result.hosts.get(h)
        if s is None:  # never reached a stats line: the run died before this host reported
            out[h] = HostReport(ok=0, changed=0, failed=1, unreachable=0, skipped=0, outcome=HostOutcome.FAILED)
            continue
        outcome = (HostOutcome.UNREACHABLE if s.unreachable else HostOutcome.FAILED if s.failed
                   else HostOutcome.CHANGED if s.changed else HostOutcome.OK)
        out[h] = HostReport(ok=s.ok, changed=s.changed, failed=s.failed, unreachable=s.unreachable,
                            skipped=s.skipped, outcome=outcome)
    return out


def converge(spec: HostConvergenceSpec, read_secret: SecretReader, *, check: bool = False,
             on_event: Callable[[TaskEvent], None] | None = print_progress) -> ConvergenceResult:
    """Validate, fetch secrets, run the site playbook. Raises ConvergenceFailed naming the hosts."""
    p = plan(spec)  # raises RoleRulesViolated before anything touches a host
    with coded_errors(where(spec), {VaultError: HostFail.VAULT}):
        secrets: dict[str, Any] = {name: read_secret(ref).get_secret_value()
                                   for name, ref in sorted(spec.secret_refs.items())}
        secrets["gpuaas_runner_tokens"] = {h: {t: read_secret(r).get_secret_value() for t, r in tags.items()}
                                           for h, tags in sorted(spec.runner_token_refs.items())}
        ssh_key = read_secret(spec.ssh_key_ref)
    run = PlaybookRun(playbook=SITE_PLAYBOOK, inventory=p.inventory, extravars={**p.extravars, **secrets},
                      ssh_private_key=ssh_key, check=check, diff=check, timeout_s=spec.timeout_s)
    with coded_errors(where(spec), {AnsibleWorkerFailed: HostFail.ANSIBLE_WORKER}):
        result = run_playbook(run, on_event)
    hosts = _report(result, [h.hostname for h in spec.hosts])
    out = ConvergenceResult(content_hash=p.content_hash, check=check, hosts=hosts, changes=result.changes,
                            duration_s=result.duration_s, error=result.error)
    if result.status != "successful" or any(r.outcome in (HostOutcome.FAILED, HostOutcome.UNREACHABLE)
                                             for r in hosts.values()):
        raise ConvergenceFailed(out, result.failures, where(spec))
    return out
