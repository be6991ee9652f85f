"""Seed 003's host rules: which Ansible roles and runner tags a host may carry for its logical role
(never control-plane or CI services on a GPU worker, with one stated exception), and a platform_control
host in every environment with hosts. Registered in `rules.RULES` (re-exported from `rules`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .findings import Code, Finding, finding
from .model import CONTROL_PLANE_AND_CI_ROLES, Blueprint, EnvironmentDocument, HostRole, LogicalRole, RunnerTag

# Seed 003's one exception to "no CI on GPU workers": the GPU lane's runner, worker-compute tag only.
GPU_LANE_RUNNER = (RunnerTag.WORKER_COMPUTE.value,)


def effective_roles(logical_role: LogicalRole, extra: tuple[HostRole, ...], bp: Blueprint) -> tuple[HostRole, ...]:
    """The blueprint's roles for the logical role, then the host's extra roles (no repeats)."""
    seen: dict[HostRole, None] = {}
    for r in (*bp.role_layout.get(logical_role, ()), *extra):
        seen[r] = None
    return tuple(seen)


def host_role_mix(
    hostname: str,
    logical_role: str,
    roles: Sequence[str],
    extra_roles: Sequence[str],
    runner_tags: Sequence[str],
    file: str,
    base: str,
) -> Iterator[Finding]:
    """Seed 003 for one host (its effective Ansible roles). Narrow: providers call it with their own values.
    The one exception (GPU_LANE_RUNNER): a worker_compute host runs the runner role when it serves the
    worker-compute tag only: GPU jobs need the GPU, and nothing else reaches that host."""
    worker = LogicalRole(logical_role) is LogicalRole.WORKER_COMPUTE
    if worker:
        for r in map(HostRole, roles):
            if r is HostRole.RUNNER and tuple(runner_tags) == GPU_LANE_RUNNER:
                continue
            if r in CONTROL_PLANE_AND_CI_ROLES:
                j = list(extra_roles).index(r) if r in extra_roles else None
                yield finding(
                    Code.ROLE_ON_WORKER,
                    file,
                    f"{base}.extra_roles[{j}]" if j is not None else f"{base}.logical_role",
                    f"host {hostname} is worker_compute but would run role {r.value}",
                )
    if RunnerTag.WORKER_COMPUTE.value in runner_tags and not worker:
        yield finding(
            Code.GPU_TAG_OFF_WORKER,
            file,
            f"{base}.runner_tags",
            f"host {hostname} is {LogicalRole(logical_role).value} (no GPU) but serves the worker-compute tag",
        )
    if runner_tags and HostRole.RUNNER not in roles:
        yield finding(
            Code.RUNNER_TAGS_WITHOUT_RUNNER,
            file,
            f"{base}.runner_tags",
            f"host {hostname} declares runner tags but has no runner role",
        )


def host_roles(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    """Seed 003: never mix control-plane or CI services with GPU worker roles on one host."""
    for i, h in enumerate(doc.hosts):
        roles = effective_roles(h.logical_role, h.extra_roles, bp)
        yield from host_role_mix(h.hostname, h.logical_role, roles, h.extra_roles, h.runner_tags, file, f"hosts[{i}]")
    if doc.hosts and not any(h.logical_role is LogicalRole.PLATFORM_CONTROL for h in doc.hosts):
        yield finding(Code.NO_PLATFORM_CONTROL, file, "hosts", "no host has logical_role platform_control")
    by_host = {i: effective_roles(h.logical_role, h.extra_roles, bp) for i, h in enumerate(doc.hosts)}
    gitlab = [i for i, r in by_host.items() if HostRole.GITLAB in r]
    for i in gitlab[1:]:  # one GitLab per environment: the runners register with it, the pipeline runs in it
        yield finding(Code.GITLAB_ON_SEVERAL_HOSTS, file, f"hosts[{i}].extra_roles",
                      f"host {doc.hosts[i].hostname} would run a second GitLab (hosts[{gitlab[0]}], "
                      f"{doc.hosts[gitlab[0]].hostname}, runs it)")
    runners = [doc.hosts[i].hostname for i, r in by_host.items() if HostRole.RUNNER in r]
    if runners and not gitlab:
        yield finding(Code.RUNNERS_WITHOUT_GITLAB, file, "hosts",
                      f"{', '.join(runners)} run GitLab runners but no host runs GitLab")
