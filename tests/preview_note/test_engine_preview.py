"""A note from the real CLI's output: `pulumi preview --json` of prod through the real components (the policy
tests' program: sites, machines, apps and host roles, every input known) renders as a reviewer needs it."""

from __future__ import annotations

import json
from pathlib import Path

from preview_note import StackPreview, parse_preview, render_note
from tools.pulumi_cli.api import Engine

PROGRAM = Path(__file__).resolve().parents[1] / "policy" / "program"


def test_prod_first_preview_renders(tmp_path: Path) -> None:
    result = Engine(PROGRAM, "prod", tmp_path / "backend").preview(timeout=600)
    assert result.ok, result.log[-2000:]
    note = render_note([StackPreview(stack="prod", digest=parse_preview(json.dumps(result.preview_digest()),
                                                                        "pulumi preview --json"))])
    summary = note.splitlines()[2]
    assert summary.startswith("- **`prod`**: 12 to create (SiteProfile 2, BootstrapBundle 2, RoceAssignment 1, "
                              "MachinePool 3, AppInstance 3, HostConvergence 1)"), summary
    assert "  - joins (32): `dal1-h200-001`–`dal1-h200-032`" in note
    assert "  - joins (24): `sjc1-h200-001`–`sjc1-h200-024`" in note
    assert "  - `connection.maas.site` = `dal1`" in note
    assert "__provider" not in note and "gAWV" not in note  # the pickled provider never shows
    assert "  - members: `worker` ×8 on `dal1-h200-001`–`dal1-h200-008`" in note
    assert "Destructive" not in note
