"""This project's rules for .gitlab-ci.yml (seed 003 and DESIGN.md §4), on jobs with `extends` merged."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from environments.coded import line

STAGES = ("validate", "test", "preview", "deploy")
ALLOWED_TAGS = ("platform-control", "sim", "app-control", "worker-compute")
GPU_TAG = "worker-compute"
PROMOTION = ("dev", "staging", "prod")

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<lp>\() | (?P<rp>\)) | (?P<and>&&) | (?P<or>\|\|) | (?P<cmp>==|!=) | (?P<match>=~|!~)
  | (?P<var>\$(?:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\}))
  | (?P<str>"[^"]*"|'[^']*') | (?P<re>/(?:\\.|[^/\\])*/[imsx]*) | (?P<null>null\b))""",
    re.X,
)


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: str
    path: str
    message: str
    hint: str = ""

    def render(self, file: str) -> str:
        return line(self.code, f"{file}: {self.path}", self.message, self.hint)


def _tokens(expr: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(expr):
        if expr[pos:].strip() == "":
            break
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos:
            raise ValueError(f"unexpected text at column {pos + 1}: {expr[pos : pos + 20]!r}")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def check_expression(expr: str) -> str | None:
    """None when `expr` is a well-formed GitLab `rules:if` expression, else what is wrong."""
    try:
        toks = _tokens(expr)
    except ValueError as exc:
        return str(exc)
    if not toks:
        return "empty expression"
    pos = 0

    def peek() -> str | None:
        return toks[pos][0] if pos < len(toks) else None

    def take(*kinds: str) -> tuple[str, str]:
        nonlocal pos
        if peek() not in kinds:
            got = toks[pos][1] if pos < len(toks) else "end of expression"
            raise ValueError(f"expected {' or '.join(kinds)}, got {got!r}")
        pos += 1
        return toks[pos - 1]

    def atom() -> None:
        if peek() == "lp":
            take("lp")
            disjunction()
            take("rp")
            return
        left, _ = take("var", "str", "re", "null")
        if peek() == "cmp":
            take("cmp")
            take("var", "str", "null")
        elif peek() == "match":
            take("match")
            take("re", "var")
        elif left != "var":
            raise ValueError("a bare value must be a $VARIABLE (tests that it is set)")

    def conjunction() -> None:
        atom()
        while peek() == "and":
            take("and")
            atom()

    def disjunction() -> None:
        conjunction()
        while peek() == "or":
            take("or")
            conjunction()

    try:
        disjunction()
        if pos != len(toks):
            raise ValueError(f"unexpected {toks[pos][1]!r}")
    except ValueError as exc:
        return str(exc)
    return None


def _needs(job: dict[str, Any], key: str) -> list[tuple[str, bool]]:
    out = []
    for item in job.get(key) or []:
        if isinstance(item, str):
            out.append((item, False))
        elif isinstance(item, dict) and "job" in item:
            out.append((str(item["job"]), bool(item.get("optional"))))
    return out


def _active_rules(job: dict[str, Any]) -> list[dict[str, Any]]:
    rules = job.get("rules")
    if not isinstance(rules, list):
        return []
    return [r for r in rules if isinstance(r, dict) and r.get("when") != "never"]


def _env(job: dict[str, Any]) -> str | None:
    """The environment a job deploys to; a job that only prepares one (`action: prepare`: the previews'
    per-stack credential scopes `preview/<stack>`) deploys nothing."""
    env = job.get("environment")
    if isinstance(env, dict) and env.get("action") == "prepare":
        return None
    name = env.get("name") if isinstance(env, dict) else env
    return name if isinstance(name, str) else None


# How a job runs the program (`gpuaas-infra stack <verb>`: the program served inline to the CLI, any CLI build;
# docs/preview-notes.md) and the policy pack (an executable analyzer: no language host needed).
PREVIEW_CMD = "cli.main stack preview"
UP_CMD = "cli.main stack up"
POLICY_PACK = "--policy-pack \"$CI_PROJECT_DIR/policy/run-policy-pack\""


def _default_branch_only(job: dict[str, Any]) -> bool:
    rules = _active_rules(job)
    return bool(rules) and all("CI_DEFAULT_BRANCH" in str(r.get("if", "")) for r in rules)


def _manual(job: dict[str, Any]) -> bool:
    rules = _active_rules(job)
    if rules:
        return all(r.get("when", job.get("when")) == "manual" for r in rules)
    return job.get("when") == "manual"


def job_findings(name: str, job: dict[str, Any], jobs: dict[str, dict[str, Any]]) -> list[Finding]:
    # size: one block per seed-003 job rule, in the seed's order
    out: list[Finding] = []
    stage = job.get("stage", "test")
    if stage not in STAGES:
        out.append(
            Finding(
                code="CI021",
                path=f"{name}.stage",
                message=f"unknown stage {stage!r}",
                hint=f"use one of {', '.join(STAGES)}",
            )
        )
    tags = job.get("tags")
    if not isinstance(tags, list) or len(tags) != 1:
        out.append(
            Finding(
                code="CI022",
                path=f"{name}.tags",
                message=f"tags are {tags!r}",
                hint="give exactly one runner tag so the job lands on one kind of host",
            )
        )
    elif tags[0] not in ALLOWED_TAGS:
        out.append(
            Finding(
                code="CI023",
                path=f"{name}.tags",
                message=f"unknown runner tag {tags[0]!r}",
                hint=f"seed 003 tags: {', '.join(ALLOWED_TAGS)}",
            )
        )
    for key in ("needs", "dependencies"):
        for other, optional in _needs(job, key):
            if other not in jobs:
                if not optional:
                    out.append(Finding(code="CI024", path=f"{name}.{key}", message=f"no job named {other!r}"))
                continue
            if (
                stage in STAGES
                and jobs[other].get("stage", "test") in STAGES
                and (STAGES.index(jobs[other].get("stage", "test")) > STAGES.index(stage))
            ):
                out.append(
                    Finding(
                        code="CI025",
                        path=f"{name}.{key}",
                        message=f"{other!r} runs in a later stage ({jobs[other].get('stage')})",
                    )
                )
    if isinstance(tags, list) and GPU_TAG in tags:
        if not job.get("resource_group"):
            out.append(
                Finding(
                    code="CI040",
                    path=f"{name}.resource_group",
                    message="GPU-lane job not serialized",
                    hint="set resource_group: gpu-lane",
                )
            )
        if not _manual(job):
            out.append(
                Finding(
                    code="CI041",
                    path=f"{name}.rules",
                    message="GPU-lane job starts by itself",
                    hint="seed 003: GPU jobs are manual or protected; add when: manual",
                )
            )
        if not _default_branch_only(job):
            out.append(
                Finding(
                    code="CI042",
                    path=f"{name}.rules",
                    message="GPU-lane job can run on any branch/MR",
                    hint="no arbitrary CI jobs on the GPU host: restrict to $CI_DEFAULT_BRANCH",
                )
            )
    if _env(job) is not None:
        if not job.get("resource_group"):
            out.append(
                Finding(
                    code="CI050",
                    path=f"{name}.resource_group",
                    message="deploy job not serialized",
                    hint="two `pulumi up` on one stack must not overlap: set resource_group",
                )
            )
        if job.get("interruptible", False):
            out.append(
                Finding(
                    code="CI051",
                    path=f"{name}.interruptible",
                    message="a deploy must not be cancelled half-way by a newer pipeline",
                    hint="set interruptible: false",
                )
            )
        if not _default_branch_only(job):
            out.append(
                Finding(
                    code="CI052",
                    path=f"{name}.rules",
                    message="deploy can run outside the default branch",
                    hint="rules: - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH",
                )
            )
    return out


def _script_text(job: dict[str, Any]) -> str:
    def lines(value: Any) -> list[str]:  # nested lists come from `!reference` tags
        return [x for v in value for x in lines(v)] if isinstance(value, list) else [str(value)]

    return "\n".join(lines(job.get("script") or []))


def _stacks(job: dict[str, Any]) -> list[str]:
    from ci_lint.stacks import job_stacks  # stacks.py builds on this module

    return job_stacks(job)


def stack_env(stack: str) -> str:
    """The promotion environment a stack belongs to: `prod-dal1` -> `prod` (stack files say it exactly;
    ci_lint/stacks.py checks them)."""
    return next((e for e in PROMOTION if stack == e or stack.startswith(f"{e}-")), stack)


def _promotion_findings(i: int, env: str, name: str, job: dict[str, Any], same_env: list[str],
                        prev: list[str]) -> list[Finding]:
    out: list[Finding] = []
    text = _script_text(job)
    if POLICY_PACK not in text or UP_CMD not in text:
        out.append(Finding(code="CI076", path=f"{name}.script", message=f"{env} deploys without the policy pack",
                           hint=f"{UP_CMD} --yes --stack $STACK ... {POLICY_PACK}"))
    if i == 0 and _manual(job):
        out.append(Finding(code="CI071", path=f"{name}.rules", message=f"{env} should deploy automatically"))
    if i == 0:
        return out
    if not _manual(job):
        out.append(Finding(code="CI072", path=f"{name}.rules", message=f"{env} deploys without a person",
                           hint="when: manual"))
    needed = [n for n, _ in _needs(job, "needs")]
    # The environment's first jobs (needing none of its own) wait for the previous environment.
    if not set(needed) & set(same_env) and not set(needed) & set(prev):
        out.append(Finding(code="CI073", path=f"{name}.needs",
                           message=f"{env} does not need the {PROMOTION[i - 1]} deploy",
                           hint=f"promotion is {' -> '.join(PROMOTION)}: needs: [{(prev or ['?'])[-1]}]"))
    return out


def pipeline_findings(jobs: dict[str, dict[str, Any]]) -> list[Finding]:
    # size: one block per seed-003 pipeline rule, in the seed's order
    out: list[Finding] = []
    previews = {n: j for n, j in jobs.items() if j.get("stage") == "preview"}
    envs = {stack_env(s) for j in previews.values() for s in _stacks(j)}
    if not set(PROMOTION) <= envs:
        out.append(
            Finding(
                code="CI060",
                path="(preview stage)",
                message=f"previews cover the environments {sorted(envs)}",
                hint=f"preview each of {list(PROMOTION)} (every stack of each) on merge requests",
            )
        )
    for name, job in sorted(previews.items()):
        rules = _active_rules(job)
        if not rules or not all("merge_request_event" in str(r.get("if", "")) for r in rules):
            out.append(Finding(code="CI061", path=f"{name}.rules", message="preview not limited to merge requests"))
        text = _script_text(job)
        for needle in (f"{PREVIEW_CMD} --json", "preview-note", "post-note"):
            if needle not in text:
                out.append(Finding(code="CI062", path=f"{name}.script", message=f"does not run `{needle}`"))
        if POLICY_PACK not in text:
            out.append(
                Finding(
                    code="CI063",
                    path=f"{name}.script",
                    message="previews without the policy pack",
                    hint=f"{PREVIEW_CMD} --json ... {POLICY_PACK}",
                )
            )
    by_env: dict[str, list[str]] = {}
    for name, job in jobs.items():
        env = _env(job)
        if env is not None:
            by_env.setdefault(env, []).append(name)
    for env in sorted(set(by_env) - set(PROMOTION)):
        out.append(
            Finding(
                code="CI075",
                path=by_env[env][0],
                message=f"environment {env!r} is outside promotion",
                hint=f"environments are {' -> '.join(PROMOTION)}",
            )
        )
    for i, env in enumerate(PROMOTION):
        names = sorted(by_env.get(env, []))
        if not names:
            out.append(
                Finding(
                    code="CI070",
                    path="(deploy stage)",
                    message=f"no deploy job for {env}",
                    hint="one job per environment, or its site stacks' job and its control stack's",
                )
            )
            continue
        prev = sorted(by_env.get(PROMOTION[i - 1], [])) if i > 0 else []
        for name in names:
            out += _promotion_findings(i, env, name, jobs[name], names, prev)
        for name in names if env == PROMOTION[-1] else []:
            job = jobs[name]
            tier = (
                (job.get("environment") or {}).get("deployment_tier")
                if isinstance(job.get("environment"), dict)
                else None
            )
            if tier != "production":
                out.append(
                    Finding(
                        code="CI074",
                        path=f"{name}.environment",
                        message="prod is not the production tier",
                        hint="environment: {name: prod, deployment_tier: production} (protected)",
                    )
                )
    return out
