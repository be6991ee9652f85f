"""Plain-text tables for terminals and logs: left-aligned columns, a dashed rule under the heads, and
an optional note line under a row (indented past the first column). Used by `doctor` and the demo."""

from __future__ import annotations

from collections.abc import Sequence


def render_table(
    heads: Sequence[str], rows: Sequence[Sequence[str]], notes: Sequence[str | None] | None = None
) -> list[str]:
    """The table's lines (no trailing newline); `notes[i]`, when set, is printed under row i."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(heads)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(heads), line(["-" * w for w in widths])]
    for i, row in enumerate(rows):
        out.append(line(row))
        note = notes[i] if notes is not None else None
        if note:
            out.append(f"{'':{widths[0]}}  {note}")
    return out
