"""Split stacks in the pipeline (issue 18): which stacks each job previews or deploys, and the rules
about one stack per site deployed in parallel (`parallel:matrix`) before its environment's control stack.

A stack's environment and part come from `stacks/Pulumi.<stack>.yaml` (`gpuaas-infra:environment`,
default the stack name; `gpuaas-infra:part`, default `all`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from ci_lint.rules import Finding, _env, _needs


class StackFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    environment: str
    part: str = "all"


def job_stacks(job: dict[str, Any]) -> list[str]:
    """The stacks a job runs on: `variables.STACK`, or each `STACK` of its `parallel:matrix`."""
    matrix = (job.get("parallel") or {}).get("matrix") if isinstance(job.get("parallel"), dict) else None
    if isinstance(matrix, list):
        out = []
        for row in matrix:
            values = row.get("STACK") if isinstance(row, dict) else None
            out += [str(v) for v in (values if isinstance(values, list) else [values] if values else [])]
        if out:
            return out
    stack = (job.get("variables") or {}).get("STACK")
    return [str(stack)] if stack is not None else []


def stack_file(stacks_dir: Path, stack: str) -> StackFile | None:
    path = stacks_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        return None
    config = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    return StackFile(environment=str(config.get("gpuaas-infra:environment") or stack),
                     part=str(config.get("gpuaas-infra:part") or "all"))


def _deploys(jobs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: j for n, j in jobs.items() if _env(j) is not None}


def split_findings(jobs: dict[str, dict[str, Any]], stacks_dir: Path) -> list[Finding]:
    # size: one block per split-stack rule (CI090-CI093)
    out: list[Finding] = []
    deploys = _deploys(jobs)
    previewed = {s for j in jobs.values() if j.get("stage") == "preview" for s in job_stacks(j)}
    deployer: dict[str, str] = {}
    for name, job in sorted(deploys.items()):
        stacks = job_stacks(job)
        group = str(job.get("resource_group") or "")
        if len(stacks) > 1 and "$STACK" not in group and "${STACK}" not in group:
            out.append(Finding(code="CI090", path=f"{name}.resource_group",
                               message=f"the matrix's stacks {stacks} share resource group {group!r}",
                               hint="one resource_group per stack: resource_group: deploy-$STACK"))
        for stack in stacks:
            deployer[stack] = name
            info = stack_file(stacks_dir, stack)
            if info is None:
                out.append(Finding(code="CI091", path=f"{name}.variables",
                                   message=f"deploys stack {stack!r}, which has no stacks/Pulumi.{stack}.yaml",
                                   hint="add the stack file (its environment and part)"))
            elif info.environment != _env(job):
                out.append(Finding(code="CI091", path=f"{name}.environment",
                                   message=f"stack {stack!r} is environment {info.environment!r}, the job "
                                           f"deploys to {_env(job)!r}",
                                   hint="deploy a stack in its own environment's job"))
            if stack not in previewed:
                out.append(Finding(code="CI093", path=f"{name}.variables",
                                   message=f"stack {stack!r} is deployed but never previewed on merge requests",
                                   hint="add it to a preview job (parallel:matrix STACK)"))
    for stack, name in sorted(deployer.items()):
        info = stack_file(stacks_dir, stack)
        if info is None or info.part != "control":
            continue
        needed = {n for n, _ in _needs(deploys[name], "needs")}
        for site_stack, site_job in sorted(deployer.items()):
            site = stack_file(stacks_dir, site_stack)
            if site and site.environment == info.environment and site.part.startswith("site:") \
                    and site_job not in needed:
                out.append(Finding(code="CI092", path=f"{name}.needs",
                                   message=f"control stack {stack!r} can deploy before site stack {site_stack!r}",
                                   hint=f"needs: [{site_job}] (the control stack reads its node ids)"))
    return out
