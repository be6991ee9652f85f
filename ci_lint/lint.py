"""`make ci-lint`: check .gitlab-ci.yml offline.

Two layers: GitLab's own JSON schema for the file (SchemaStore's, as vendored by check-jsonschema),
then this project's rules (seed 003): known stages, one allowed runner tag per job, needs that
resolve, well-formed rules and `if:` expressions, GPU-lane jobs manual and serialized, previews of
every stack on merge requests, and promotion dev -> staging -> prod.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ci_lint.images import executor_findings, image_findings
from ci_lint.pins import cli_pin_findings
from ci_lint.rules import (
    ALLOWED_TAGS,
    PROMOTION,
    STAGES,
    Finding,
    check_expression,
    job_findings,
    pipeline_findings,
)
from ci_lint.stacks import split_findings
from environments.coded import line

RESERVED = frozenset(
    {
        "default",
        "include",
        "stages",
        "variables",
        "workflow",
        "image",
        "services",
        "cache",
        "before_script",
        "after_script",
        "spec",
        "pages:deploy",
    }
)
RULE_KEYS = frozenset(
    {"if", "changes", "exists", "when", "allow_failure", "variables", "needs", "interruptible", "start_in"}
)
RULE_WHEN = frozenset({"on_success", "on_failure", "always", "never", "manual", "delayed"})


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys silently; GitLab would too, hiding a job."""


def _mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
# GitLab's `!reference [job, key]` tag: kept as its list (GitLab expands it server-side).
_UniqueKeyLoader.add_constructor("!reference", lambda loader, node: loader.construct_sequence(node))


def load_schema() -> dict[str, Any]:
    text = (resources.files("check_jsonschema.builtin_schemas.vendor") / "gitlab-ci.json").read_text("utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def schema_findings(doc: Any) -> list[Finding]:
    import jsonschema  # local: only this layer needs it

    validator = jsonschema.Draft7Validator(load_schema())
    out = []
    for err in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path))):
        path = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        # The schema's oneOf/anyOf errors are long; the best sub-error says what is wrong.
        best = jsonschema.exceptions.best_match([err])
        out.append(
            Finding(
                code="CI001",
                path=path,
                message=best.message[:300],
                hint="see https://docs.gitlab.com/ci/yaml/ for the keyword",
            )
        )
    return out


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def resolve_jobs(doc: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], list[Finding]]:
    """Jobs (non-hidden, non-reserved keys) with `extends` merged as GitLab does (hashes deep-merged)."""
    findings: list[Finding] = []

    def resolve(name: str, trail: tuple[str, ...]) -> dict[str, Any]:
        job = doc.get(name)
        if not isinstance(job, dict):
            return {}
        parents = job.get("extends", [])
        parents = [parents] if isinstance(parents, str) else parents
        merged: dict[str, Any] = {}
        for parent in parents:
            if parent in trail:
                findings.append(Finding(code="CI010", path=f"{name}.extends", message=f"cycle through {parent!r}"))
                continue
            if parent not in doc:
                findings.append(
                    Finding(
                        code="CI011",
                        path=f"{name}.extends",
                        message=f"unknown template {parent!r}",
                        hint="define it (hidden jobs start with '.') or fix the name",
                    )
                )
                continue
            merged = _deep_merge(merged, resolve(parent, trail + (parent,)))
        return _deep_merge(merged, {k: v for k, v in job.items() if k != "extends"})

    jobs = {
        name: resolve(name, (name,))
        for name in doc
        if isinstance(name, str) and not name.startswith(".") and name not in RESERVED
    }
    return jobs, findings


def _rule_findings(where: str, rules: Any) -> list[Finding]:
    if not isinstance(rules, list) or not rules:
        return [Finding(code="CI030", path=where, message="rules must be a non-empty list")]
    out = []
    for i, rule in enumerate(rules):
        path = f"{where}[{i}]"
        if not isinstance(rule, dict):
            out.append(Finding(code="CI031", path=path, message="a rule must be a mapping"))
            continue
        for key in sorted(set(rule) - RULE_KEYS):
            out.append(
                Finding(
                    code="CI032",
                    path=f"{path}.{key}",
                    message="unknown rule keyword",
                    hint="allowed: " + ", ".join(sorted(RULE_KEYS)),
                )
            )
        if "when" in rule and rule["when"] not in RULE_WHEN:
            out.append(Finding(code="CI033", path=f"{path}.when", message=f"unknown when {rule['when']!r}"))
        if "if" in rule:
            problem = check_expression(rule["if"]) if isinstance(rule["if"], str) else "not a string"
            if problem:
                out.append(
                    Finding(
                        code="CI034",
                        path=f"{path}.if",
                        message=f"bad expression: {problem}",
                        hint='e.g. $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH && $X != "y"',
                    )
                )
    return out


def project_findings(doc: dict[str, Any], stacks_dir: Path | None = None) -> list[Finding]:
    out: list[Finding] = []
    if doc.get("stages") != list(STAGES):
        out.append(
            Finding(
                code="CI020",
                path="stages",
                message=f"stages are {doc.get('stages')!r}",
                hint=f"use exactly {list(STAGES)} in that order",
            )
        )
    if "workflow" in doc:
        out += _rule_findings("workflow.rules", (doc.get("workflow") or {}).get("rules"))
    jobs, found = resolve_jobs(doc)
    out += found
    for name, job in sorted(jobs.items()):
        if "rules" in job:
            out += _rule_findings(f"{name}.rules", job["rules"])
        out += job_findings(name, job, jobs)
    out += pipeline_findings(jobs)
    if stacks_dir is not None:
        out += split_findings(jobs, stacks_dir)
    out += image_findings(doc, jobs)
    return out


def lint(path: Path, stacks_dir: Path | None = None) -> list[str]:
    """Every problem in the file, as `CODE file: path: message; fix: hint` lines; empty when clean. The split-stack
    rules read the stack files in `stacks_dir` (default: `stacks/` beside the file, when it exists)."""
    if stacks_dir is None and (path.parent / "stacks").is_dir():
        stacks_dir = path.parent / "stacks"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return [f"{path}: cannot read ({exc.strerror})"]
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "(parse)"
        problem = getattr(exc, "problem", None) or str(exc)
        return [line("CI000", f"{path}: {where}", f"not valid YAML: {problem}", "fix the YAML syntax there")]
    if not isinstance(doc, dict):
        return [line("CI000", f"{path}: (top level)", "expected a mapping of keywords and jobs")]
    findings = schema_findings(doc) + project_findings(doc, stacks_dir)
    root = stacks_dir.resolve().parent if stacks_dir is not None else path.resolve().parent  # the repository
    findings += executor_findings(doc, resolve_jobs(doc)[0], root)
    pins = cli_pin_findings(path.resolve().parent)
    return [f.render(str(path)) for f in findings] + [f.render(str(file)) for file, f in pins]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpuaas-infra ci-lint", description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=Path(".gitlab-ci.yml"))
    args = parser.parse_args(argv)
    problems = lint(args.file)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"ci-lint: {len(problems)} problem(s) in {args.file}", file=sys.stderr)
        return 1
    print(
        f"ci-lint: {args.file} OK (GitLab schema, stages, tags {', '.join(ALLOWED_TAGS)}, needs, rules, "
        f"promotion {' -> '.join(PROMOTION)})"
    )
    return 0
