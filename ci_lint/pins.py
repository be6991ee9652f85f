"""One Pulumi CLI version everywhere: the CI image's pin (build/ci-image/pins.env PULUMI_VERSION, the
release the pipeline's image installs) must be the version set-up builds for the tests, demo and
benchmarks (tools/pulumi-cli/go.mod's github.com/pulumi/pulumi/pkg/v3 require). CI094 names both."""

from __future__ import annotations

import re
from pathlib import Path

from .rules import Finding

PINS = Path("build/ci-image/pins.env")
GO_MOD = Path("tools/pulumi-cli/go.mod")


def _pins_version(text: str) -> str | None:
    m = re.search(r"^PULUMI_VERSION=v?(\S+)\s*$", text, re.M)
    return m.group(1) if m else None


def _go_mod_version(text: str) -> str | None:
    m = re.search(r"^\s*github\.com/pulumi/pulumi/pkg/v3 v(\S+)", text, re.M)
    return m.group(1) if m else None


def cli_pin_findings(root: Path) -> list[tuple[Path, Finding]]:
    """(file, finding) for a CI image pin that differs from the CLI the tests build; nothing when either
    file is absent (a checkout without the CI image or the CLI build has nothing to compare)."""
    pins, go_mod = root / PINS, root / GO_MOD
    if not pins.is_file() or not go_mod.is_file():
        return []
    image, tests = _pins_version(pins.read_text()), _go_mod_version(go_mod.read_text())
    if tests is None:
        return [(go_mod, Finding(code="CI094", path="require", message="no github.com/pulumi/pulumi/pkg/v3 require",
                                 hint="tools/pulumi-cli builds the CLI from that module"))]
    if image != tests:
        return [(pins, Finding(code="CI094", path="PULUMI_VERSION",
                               message=f"the CI image installs Pulumi CLI {image or '(none)'}, the tests build {tests} "
                                       f"({GO_MOD})",
                               hint=f"set PULUMI_VERSION={tests} (and its PULUMI_SHA256) or bump {GO_MOD}"))]
    return []
