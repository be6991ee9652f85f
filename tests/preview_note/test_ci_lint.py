"""`make ci-lint`: the real .gitlab-ci.yml passes; each kind of mistake is caught with its code."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_lint.lint import lint
from ci_lint.rules import check_expression

REPO = Path(__file__).resolve().parents[2]
CI_FILE = REPO / ".gitlab-ci.yml"


def _mutated(tmp_path: Path, *edits: tuple[str, str]) -> list[str]:
    text = CI_FILE.read_text()
    for old, new in edits:
        assert old in text, f"edit target {old!r} not in .gitlab-ci.yml"
        text = text.replace(old, new, 1)
    path = tmp_path / ".gitlab-ci.yml"
    path.write_text(text)
    return lint(path, stacks_dir=REPO / "stacks")


def _codes(problems: list[str]) -> set[str]:
    return {p.split()[0] for p in problems}  # `CODE file: path: message; fix: hint`


def test_the_projects_pipeline_is_clean() -> None:
    assert lint(CI_FILE) == []


@pytest.mark.parametrize(
    ("edits", "code"),
    [
        # schema: a typo
        ([("  resource_group: deploy-prod-control\n", "  resource_grup: deploy-prod-control\n")], "CI001"),
        ([("      when: manual\n      allow_failure", "      when: manually\n      allow_failure")], "CI001"),
        ([("stages:\n  - validate\n  - test\n", "stages:\n  - test\n  - validate\n")], "CI020"),
        ([("lint:\n  stage: validate", "lint:\n  stage: build")], "CI021"),
        ([("tags: [sim]", "tags: [sim, platform-control]")], "CI022"),
        ([("tags: [sim]", "tags: [docker]")], "CI023"),
        (
            [
                (
                    "needs: [deploy-dev]\n  resource_group: deploy-staging",
                    "needs: [deploy-qa]\n  resource_group: deploy-staging",
                )
            ],
            "CI024",
        ),
        (
            [
                (
                    "unit-tests:\n  stage: test\n  tags: [sim]\n  needs: [lint]",
                    "unit-tests:\n  stage: test\n  tags: [sim]\n  needs: [preview-dev]",
                )
            ],
            "CI025",
        ),
        (
            [
                (
                    '- if: $CI_PIPELINE_SOURCE == "merge_request_event"\n  before_script',
                    '- if: ($CI_PIPELINE_SOURCE == "x"\n  before_script',
                )
            ],
            "CI034",
        ),
        (
            [
                (
                    "      when: manual\n      allow_failure: true",
                    "      allow_failure: true",
                )
            ],
            "CI041",
        ),
        ([("  resource_group: gpu-lane\n", "")], "CI040"),
        (
            [
                (
                    "  resource_group: gpu-lane\n  interruptible: false\n  before_script: []\n  rules:\n"
                    "    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH",
                    "  resource_group: gpu-lane\n  interruptible: false\n  before_script: []\n  rules:\n"
                    '    - if: $CI_PIPELINE_SOURCE == "merge_request_event"',
                )
            ],
            "CI042",
        ),
        ([("  resource_group: deploy-dev\n", "")], "CI050"),
        ([("preview-prod-sites:\n", "preview-staging-again:\n"),
          ("      - STACK: [prod-dal1, prod-sjc1]\n", "      - STACK: [staging]\n"),
          ("    STACK: prod-control\n", "    STACK: staging\n")], "CI060"),
        # split stacks (issue 18): one resource group per stack, control after its sites, stack files, previews
        ([("  resource_group: deploy-$STACK\n", "  resource_group: deploy-prod\n")], "CI090"),
        ([("  needs: [deploy-prod-sites]\n", "  needs: [deploy-staging]\n")], "CI092"),
        ([("      - STACK: [prod-dal1, prod-sjc1]\n  environment:", "      - STACK: [prod-dal1, prod-nyc1]\n"
                                                                 "  environment:")], "CI091"),
        ([("    matrix:\n      - STACK: [prod-dal1, prod-sjc1]\n\npreview-prod-control",
           "    matrix:\n      - STACK: [prod-dal1]\n\npreview-prod-control")], "CI093"),
        (
            [
                (
                    '  rules:\n    - if: $CI_PIPELINE_SOURCE == "merge_request_event"\n  before_script:',
                    "  rules:\n    - if: $CI_COMMIT_BRANCH\n  before_script:",
                )
            ],
            "CI061",
        ),
        ([(".venv/bin/python -m cli.main post-note", "echo skipped")], "CI062"),
        ([('        --policy-pack "$CI_PROJECT_DIR/policy/run-policy-pack" \\\n', "")], "CI063"),
        ([('--stack "$STACK"\n        --policy-pack "$CI_PROJECT_DIR/policy/run-policy-pack"', '--stack "$STACK"')],
         "CI076"),
        # issue 28: the runners are shell executors: an image would be ignored
        ([("default:\n  interruptible: true\n", "default:\n  image: python:3.11@sha256:" + "0" * 64
           + "\n  interruptible: true\n")], "CI081"),
        # previews run in preview/<stack> (action prepare): that is no deploy, so no promotion rule applies
        ([("    name: preview/$STACK\n    action: prepare\n", "    name: preview/$STACK\n")], "CI075"),
        ([("needs: [deploy-staging]", "needs: [deploy-dev]")], "CI073"),  # prod straight from dev
        (
            [
                (
                    "    name: staging\n    deployment_tier: staging\n  rules:\n"
                    "    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH\n"
                    "      when: manual\n",
                    "    name: staging\n    deployment_tier: staging\n  rules:\n"
                    "    - if: $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH\n",
                )
            ],
            "CI072",
        ),
        ([("    deployment_tier: production", "    deployment_tier: staging")], "CI074"),
    ],
)
def test_each_mistake_is_caught(tmp_path: Path, edits: list[tuple[str, str]], code: str) -> None:
    problems = _mutated(tmp_path, *edits)
    assert code in _codes(problems), problems


def test_duplicate_keys_and_bad_yaml_name_the_line(tmp_path: Path) -> None:
    [problem] = _mutated(tmp_path, ("lint:\n  stage: validate\n", "lint:\n  stage: validate\n  stage: test\n"))
    assert "duplicate key 'stage'" in problem and "line " in problem
    [problem] = _mutated(tmp_path, ("stages:\n", "stages: [\n"))
    assert problem.startswith(f"CI000 {tmp_path / '.gitlab-ci.yml'}: line ") and ": not valid YAML" in problem


def test_problem_lines_name_file_path_and_fix(tmp_path: Path) -> None:
    [problem] = _mutated(tmp_path, ("tags: [sim]", "tags: [docker]"))
    assert problem == (
        f"CI023 {tmp_path / '.gitlab-ci.yml'}: unit-tests.tags: unknown runner tag 'docker'; "
        "fix: seed 003 tags: platform-control, sim, app-control, worker-compute"
    )


@pytest.mark.parametrize(
    "expr",
    [
        '$CI_PIPELINE_SOURCE == "merge_request_event"',
        "$A && ($B || $C != null)",
        "$CI_COMMIT_REF_NAME =~ /^release-.*$/i",
        "$X != 'y' || $Y",
        "${CI_COMMIT_TAG} == null",
    ],
)
def test_good_expressions(expr: str) -> None:
    assert check_expression(expr) is None


@pytest.mark.parametrize("expr", ["", "$A ==", '"x"', "($A", "$A === $B", "$A && || $B", "$A =~ 'x'", "A == B"])
def test_bad_expressions(expr: str) -> None:
    assert check_expression(expr) is not None
