"""CI094: the pipeline's CI image installs the Pulumi CLI version that set-up builds for the tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from ci_lint.lint import lint
from ci_lint.pins import GO_MOD, PINS, cli_pin_findings

REPO = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path, pins_version: str) -> Path:
    for rel in (PINS, GO_MOD):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    pins = tmp_path / PINS
    pins.write_text("".join(f"PULUMI_VERSION={pins_version}\n" if line.startswith("PULUMI_VERSION=") else line
                            for line in pins.read_text().splitlines(keepends=True)))
    shutil.copy(REPO / ".gitlab-ci.yml", tmp_path / ".gitlab-ci.yml")
    return tmp_path


def test_the_committed_pins_agree() -> None:
    assert cli_pin_findings(REPO) == []


def test_a_ci_image_on_another_cli_version_fails_ci_lint(tmp_path: Path) -> None:
    root = _checkout(tmp_path, "3.140.0")
    problems = [p for p in lint(root / ".gitlab-ci.yml", stacks_dir=REPO / "stacks") if "CI094" in p]
    assert len(problems) == 1, problems
    assert str(root / PINS) in problems[0] and "3.140.0" in problems[0] and "PULUMI_VERSION=" in problems[0]


def test_a_v_prefixed_pin_of_the_same_version_passes(tmp_path: Path) -> None:
    version = next(line.split()[1] for line in (REPO / GO_MOD).read_text().splitlines()
                   if line.strip().startswith("github.com/pulumi/pulumi/pkg/v3 "))
    assert cli_pin_findings(_checkout(tmp_path, version)) == []
