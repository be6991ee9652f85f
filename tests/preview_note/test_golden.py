"""Each kind of step, secrets, unknowns and diagnostics render exactly as the golden note.

Regenerate after an intended change with GPUAAS_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from preview_note import StackPreview, load_preview, render_note

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.json"))
UPDATE = os.environ.get("GPUAAS_UPDATE_GOLDEN") == "1"


def _stack(case: str) -> StackPreview:
    digest = load_preview(GOLDEN / f"{case}.json")
    return StackPreview(stack=str(digest.config["gpuaas-infra:environment"]), digest=digest)


def _check(name: str, note: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(note, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with GPUAAS_UPDATE_GOLDEN=1 and review it"
    assert note == path.read_text(encoding="utf-8")


def test_every_step_kind_has_a_case() -> None:
    ops = set()
    for case in CASES:
        ops |= {s.op.value for s in load_preview(GOLDEN / f"{case}.json").steps}
    assert {
        "same",
        "create",
        "update",
        "replace",
        "delete",
        "create-replacement",
        "delete-replaced",
        "read",
        "refresh",
        "discard",
    } <= ops


@pytest.mark.parametrize("case", CASES)
def test_note_matches_golden(case: str) -> None:
    _check(f"{case}.md", render_note([_stack(case)]))


def test_three_stacks_in_one_note() -> None:
    note = render_note([_stack("dev_realistic"), _stack("create"), _stack("replace")])
    _check("multi_stack.md", note)
    summary = [line for line in note.splitlines() if line.startswith("- **`")]
    assert [line.split("`")[1] for line in summary] == ["dev", "staging", "prod"]


def test_dev_change_reads_top_down() -> None:
    """The docs example: destructive first, per-machine pool view, nothing about unchanged resources."""
    note = render_note([_stack("dev_realistic")])
    lines = note.splitlines()
    first_kind = next(i for i, line in enumerate(lines) if line.startswith("#### ") and "Destructive" not in line)
    assert lines.index("#### :warning: Destructive steps (1)") < first_kind
    assert "  - joins (4): `gpu-a05`–`gpu-a08`" in lines
    for unchanged in ("SiteProfile", "BootstrapBundle", "HostConvergence", "dev-lab-bundle"):
        assert unchanged not in note
    assert len(lines) < 40  # readable in 30 seconds
    assert (GOLDEN.parent.parent.parent / "docs" / "preview-notes.md").read_text().count(note.strip()) == 1


def test_machine_changes_follow_the_provider_descriptor() -> None:
    """The note calls a machine change in place exactly when the MaasMachine descriptor does."""
    from preview_note.kinds import machine_changes
    from providers.kind import all_kinds

    descriptor = all_kinds()["MaasMachine"]
    for rule in descriptor.in_place:
        if rule.startswith("machine."):
            field = rule.removeprefix("machine.")
            assert machine_changes({field: "a"}, {field: "b"}) == ([], [field]), field
    for rule in descriptor.replaces:
        field = rule.removeprefix("machine.")
        assert machine_changes({field: "a"}, {field: "b"}) == ([field], []), field
