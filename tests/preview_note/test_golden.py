"""Notes rendered from real `pulumi preview --json` documents match the golden notes exactly.

Each `golden/<case>.json` is a document the real CLI printed (`<case>.events.jsonl`: the policy events of its
`--event-log`), captured by `python -m tests.preview_note.capture` (see there); `<case>.md` is its note.
Regenerate the notes after an intended change with GPUAAS_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from preview_note import StackPreview, load_preview, render_note
from preview_note.model import PreviewDigest, load_event_log
from tests.preview_note.capture import CASES

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("GPUAAS_UPDATE_GOLDEN") == "1"
# What the pipeline's `pulumi preview --json` shows of this project's resources (the root stack is always
# `same`); `--show-sames`, `--show-replacement-steps` and `--refresh` add the others.
REAL_OPS = {"same", "create", "update", "replace", "delete", "create-replacement", "delete-replaced", "refresh"}


def stack_of(digest: PreviewDigest) -> str:
    """The stack a CLI document is of: its root stack step's URN (`urn:pulumi:<stack>::...`)."""
    root = next(s.urn for s in digest.steps if s.urn.split("::")[2:3] == ["pulumi:pulumi:Stack"])
    return root.split("::")[0].removeprefix("urn:pulumi:")


def _stack(case: str) -> StackPreview:
    digest = load_preview(GOLDEN / f"{case}.json")
    events = GOLDEN / f"{case}.events.jsonl"
    if events.exists():
        digest = digest.model_copy(update={"policy_violations": load_event_log(events)})
    return StackPreview(stack=stack_of(digest), digest=digest)


def _check(name: str, note: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(note, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with GPUAAS_UPDATE_GOLDEN=1 and review it"
    assert note == path.read_text(encoding="utf-8")


def test_every_case_is_captured_from_the_cli() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == CASES
    for case in CASES:
        raw = json.loads((GOLDEN / f"{case}.json").read_text())
        assert set(raw) <= {"config", "steps", "diagnostics", "duration", "changeSummary", "maybeCorrupt"}, case
        assert all("detailedDiff" in s for s in raw.get("steps", [])), case  # the CLI always writes the key


def test_every_step_kind_the_cli_shows_has_a_case() -> None:
    ops = set()
    for case in CASES:
        ops |= {s.op.value for s in load_preview(GOLDEN / f"{case}.json").steps}
    assert ops == REAL_OPS


@pytest.mark.parametrize("case", CASES)
def test_note_matches_golden(case: str) -> None:
    _check(f"{case}.md", render_note([_stack(case)]))


def test_three_stacks_in_one_note() -> None:
    note = render_note([_stack("showcase"), _stack("create"), _stack("create_prod")])
    _check("multi_stack.md", note)
    summary = [line for line in note.splitlines() if line.startswith("- **`")]
    assert [line.split("`")[1] for line in summary] == ["local", "staging", "prod"]


def test_showcase_reads_top_down() -> None:
    """The docs example: destructive first, per-machine pool view, nothing about unchanged resources."""
    note = render_note([_stack("showcase")])
    lines = note.splitlines()
    first_kind = next(i for i, line in enumerate(lines) if line.startswith("#### ") and "Destructive" not in line)
    assert lines.index("#### :warning: Destructive steps (2)") < first_kind
    assert ("  - redeploys (1, data disks erased (quick erase); rolling, at most 2 at once): `local-gpu-3` "
            "(deploy.hwe_kernel changed)") in lines
    for unchanged in ("SiteProfile", "BootstrapBundle", "RoceAssignment", "local-h200-lab"):
        assert unchanged not in note
    assert len(lines) < 40  # readable in 30 seconds
    assert (GOLDEN.parent.parent.parent / "docs" / "preview-notes.md").read_text().count(note.strip()) == 1


def test_the_replacement_halves_say_delete_before_replace() -> None:
    """The pipeline's document has the logical `replace` only; with `--show-replacement-steps` the CLI's
    order (delete-replaced first) shows the MaasMachine provider's delete-before-replace."""
    assert "(delete before replace)" not in render_note([_stack("showcase")])
    assert "- **replace** `machine-local-gpu-1` (`local-gpu-1`) (delete before replace)" in render_note(
        [_stack("replacement_steps")])
