"""docs/machines.md's lifecycle and change tables are the code's (tools/machine_tables.py draws them from
the lifecycle tables and the machines plan): a table edited by hand, or code changed without
`python -m tools.machine_tables --write`, fails here."""

from __future__ import annotations

from tools.machine_tables import DOC, TABLES, rewritten


def test_the_docs_tables_are_the_codes() -> None:
    text = DOC.read_text()
    assert rewritten(text) == text, "run `python -m tools.machine_tables --write`"


def test_the_check_can_fail() -> None:
    text = DOC.read_text().replace("| `machine.pxe_mac` | reidentify |", "| `machine.pxe_mac` | in place |", 1)
    assert rewritten(text) != text
    assert set(TABLES) == {"statuses", "stages", "changes"}
