"""Modules stay readable: none over ~400 lines and no function over ~60 without a one-line reason at
its top (`# size: why`): in the module's first 10 lines, or a function's first 3 lines after `def`.
Tests are exempt (a test reads top to bottom like the lifecycle it checks)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CODE = ("environments", "components", "providers", "clients", "simulators", "engine", "preview_note", "ci_lint",
        "lab", "cli", "tools", "policy", "benchmarks")
MAX_MODULE, MAX_FUNCTION = 420, 60


def _reason(lines: list[str], start: int, count: int) -> bool:
    return any("# size:" in line for line in lines[start : start + count])


def oversized(path: Path, root: Path = REPO) -> list[str]:
    """`root`: what the findings' paths are shown relative to (the checkout; a probe's own tree)."""
    text = path.read_text()
    lines = text.splitlines()
    out = []
    if len(lines) > MAX_MODULE and not _reason(lines, 0, 10):
        out.append(f"{path.relative_to(root)}: {len(lines)} lines")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            body_start = node.body[0].lineno - 1 if node.body else node.lineno
            if length > MAX_FUNCTION and not _reason(lines, node.lineno - 1, body_start - node.lineno + 4):
                out.append(f"{path.relative_to(root)}:{node.lineno} {node.name}() {length} lines")
    return out


def test_no_oversized_module_or_function_without_a_reason() -> None:
    found = [o for pkg in CODE for path in sorted((REPO / pkg).rglob("*.py")) for o in oversized(path)]
    assert not found, "split these or give a one-line `# size:` reason:\n" + "\n".join(found)


def test_the_check_can_fail(tmp_path: Path) -> None:
    # The probe lives outside the checkout: the other workers' scans of the checkout must never see it.
    probe = tmp_path / "tools" / "_size_probe.py"
    probe.parent.mkdir()
    probe.write_text("def f():\n" + "    x = 1\n" * 70 + "\n\ndef g():\n    # size: a table\n" + "    y = 2\n" * 70)
    found = oversized(probe, root=tmp_path)
    assert found == ["tools/_size_probe.py:1 f() 71 lines"], found
