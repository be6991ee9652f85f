"""A note from real engine output: the CLI-free engine previews the machines and apps components for prod."""

from __future__ import annotations

import json
from pathlib import Path

from engine.api import Engine
from engine.crypto import TEST_PASSPHRASE
from preview_note import StackPreview, parse_preview, render_note

PROGRAM = Path(__file__).resolve().parents[1] / "policy" / "program"


def test_prod_machines_preview_renders(tmp_path: Path) -> None:
    result = Engine(PROGRAM, "prod", tmp_path / "state.json", passphrase=TEST_PASSPHRASE).preview(timeout=300)
    assert result.ok, result.log[-2000:]
    text = json.dumps(result.preview_digest())
    note = render_note([StackPreview(stack="prod", digest=parse_preview(text, "engine preview"))])
    assert "- **`prod`**: 6 to create (MachinePool 3, AppInstance 3)" in note
    assert "  - joins (32): `dal1-h200-001`–`dal1-h200-032`" in note
    assert "  - joins (24): `sjc1-h200-001`–`sjc1-h200-024`" in note
    assert "  - `connection.maas.site` = `dal1`" in note
    assert "__provider" not in note and "gAWV" not in note  # the pickled provider never shows
    assert "  - members: `worker` ×8 on `dal1-h200-001`–`dal1-h200-008`" in note
    assert "Destructive" not in note
