"""Where the pinned Pulumi CLI is, and the environment that keeps it offline and private to one run."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = REPO / "build" / "pulumi" / "bin"
GO_MOD = REPO / "tools" / "pulumi-cli" / "go.mod"
TEST_PASSPHRASE = "gpuaas-infra-test-passphrase"  # tests and the demo's throwaway stacks only


class CliMissing(RuntimeError):
    pass


def pinned_version() -> str:
    """The CLI version this project runs: tools/pulumi-cli/go.mod's pulumi pkg/v3 require (e.g. v3.274.1)."""
    match = re.search(r"^\s*github\.com/pulumi/pulumi/pkg/v3 (v\S+)", GO_MOD.read_text(), re.M)
    if not match:
        raise CliMissing(f"{GO_MOD}: no github.com/pulumi/pulumi/pkg/v3 require")
    return match.group(1)


def pulumi_binary() -> Path:
    path = BIN_DIR / "pulumi"
    if not os.access(path, os.X_OK):
        raise CliMissing(f"{path}: no Pulumi CLI; run `make setup` (tools/pulumi-cli/setup.sh builds it)")
    return path


def cli_env(pulumi_home: Path, backend_url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of one CLI run: this process's, plus a private PULUMI_HOME, the backend, no
    update check, no plugin download, the bundled plugins (dynamic provider, policy launcher) on PATH
    and this venv's Python for them (they run `$PULUMI_PYTHON_CMD -m pulumi.dynamic`)."""
    env = dict(os.environ)
    env.update(
        PULUMI_HOME=str(pulumi_home),
        PULUMI_BACKEND_URL=backend_url,
        PULUMI_SKIP_UPDATE_CHECK="true",
        PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
        # The hidden flags an inline program needs (--client, --exec-kind, --event-log) exist only with it.
        PULUMI_DEBUG_COMMANDS="true",
        PULUMI_PYTHON_CMD=sys.executable,
        PYTHONUNBUFFERED="1",
        PATH=os.pathsep.join([str(BIN_DIR), env.get("PATH", "")]),
    )
    env.update(extra or {})
    return env
