"""Generated blocks in the docs: the text between a start marker and an end marker, rewritten from the code
(tools/machine_tables.py, tools/failure_codes.py; their tests fail when a doc's block drifts)."""

from __future__ import annotations

import re


def replace_block(text: str, where: str, mark: str, end: str, body: str) -> str:
    """`text` with the block between `mark` and `end` replaced by `body`; a doc without the block is an error
    naming `where` (the markers are the doc's, never added silently)."""
    pattern = re.compile(re.escape(mark) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{where}: no `{mark}` ... `{end}` block")
    return pattern.sub(lambda _found: f"{mark}\n{body}\n{end}", text)
