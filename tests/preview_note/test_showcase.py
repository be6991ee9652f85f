"""The showcase note in docs/preview-notes.md is what the real CLI's preview of the local stack gives: the test
deploys the stack (embedded simulators), makes the change (tests/preview_note/capture.py's `showcase`),
runs `pulumi preview --json` with the policy pack as the pipeline does, and compares the note with the
doc's block. `GPUAAS_UPDATE_SHOWCASE=1` rewrites the block instead (then review the diff)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from preview_note import StackPreview, parse_preview, render_note
from tests.preview_note.capture import local_stack, showcase

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "preview-notes.md"
BLOCK = re.compile(r"(<!-- showcase:begin -->\n````markdown\n)(.*?)(````\n<!-- showcase:end -->)", re.S)


def test_the_showcase_note_is_what_the_cli_previews(policy_venv: None) -> None:
    with local_stack() as local:
        captured = local.preview(showcase, pack=True)
    assert not captured.policy_events
    digest = parse_preview(json.dumps(captured.preview), "pulumi preview --json")
    assert {s.op.value for s in digest.steps} == {"same", "update"}  # redeploys are updates (the machines plan)
    note = render_note([StackPreview(stack="local", digest=digest)])
    text = DOC.read_text()
    match = BLOCK.search(text)
    assert match, "docs/preview-notes.md lost its <!-- showcase:begin/end --> block"
    if os.environ.get("GPUAAS_UPDATE_SHOWCASE"):
        DOC.write_text(text[: match.start(2)] + note.rstrip("\n") + "\n" + text[match.end(2) :])
        return
    assert match.group(2).rstrip("\n") == note.rstrip("\n"), (
        "the showcase in docs/preview-notes.md is out of date; rerun with GPUAAS_UPDATE_SHOWCASE=1 and review:\n"
        + note
    )
