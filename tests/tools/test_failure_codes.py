"""The runtime failure catalogues, one per kind: each doc's code table is the catalogue's (tools/failure_codes.py
draws it), every code is unique across every catalogue of the project (validation findings, MCH, the kinds'),
each kind keeps one prefix of its own, every code is raised somewhere, and no bare RuntimeError/ValueError
(or a client's own error type) is raised where an operator would meet it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from environments.coded import FailureCode
from environments.findings import Code
from providers.machines.records import FailCode
from tools.failure_codes import CATALOGUES, rewritten

REPO = Path(__file__).resolve().parents[2]
PREFIX = re.compile(r"^([A-Z]+)\d{3}$")


def _prefix(code: str) -> str:
    m = PREFIX.match(code)
    assert m, f"{code!r} is not <PREFIX><3 digits>"
    return m.group(1)


def test_the_docs_tables_are_the_catalogues() -> None:
    for doc in set(CATALOGUES.values()):
        text = doc.read_text()
        assert rewritten(doc, text) == text, f"{doc.name}: run `python -m tools.failure_codes --write`"


def test_the_check_can_fail() -> None:
    doc = next(iter(CATALOGUES.values()))
    text = doc.read_text()
    bent = re.sub(r"\| `(\w+)` \| [^|]+ \|", r"| `\1` | something else |", text, count=1)
    assert bent != text and rewritten(doc, bent) != bent


def test_every_machine_code_is_in_the_machines_doc() -> None:
    """FailCode keeps its meanings as comments; docs/machines.md names each code in its prose list."""
    text = (REPO / "docs" / "machines.md").read_text()
    assert [c.value for c in FailCode if c.value not in text] == []


def test_every_catalogue_is_documented() -> None:
    product = {c for c in FailureCode.__subclasses__() if c.__module__.split(".")[0] in ("providers", "components")}
    assert product == set(CATALOGUES)


def test_codes_are_unique_and_each_kind_has_a_prefix_of_its_own() -> None:
    kinds = {c.__name__: [m.value for m in c] for c in CATALOGUES}
    kinds |= {"FailCode": [m.value for m in FailCode]}
    every = [code for codes in kinds.values() for code in codes] + [c.value for c in Code]
    assert len(every) == len(set(every)), sorted(c for c in every if every.count(c) > 1)
    prefixes = {name: {_prefix(c) for c in codes} for name, codes in kinds.items()}
    assert all(len(p) == 1 for p in prefixes.values()), prefixes
    validation = {_prefix(c.value) for c in Code}
    mine = [p for ps in prefixes.values() for p in ps]
    assert len(mine) == len(set(mine)) and not set(mine) & validation, (prefixes, validation)
    assert all(m.meaning and m.fix for c in CATALOGUES for m in c)


def test_every_code_is_raised_somewhere() -> None:
    """Named at a raise site, as a default, or in a kind's client-error map (a definition is `NAME = (...)`)."""
    source = "".join(p.read_text() for p in (REPO / "providers").rglob("*.py"))
    unused = [f"{c.__name__}.{m.name}" for c in CATALOGUES for m in c if f"{c.__name__}.{m.name}" not in source]
    assert unused == []


# A pydantic validator's ValueError is a validation message (pydantic reports it with the field's path).
VALIDATORS = {("providers/wire.py", "_vault_ref"), ("providers/hosts/convergence.py", "_refs_are_references"),
              ("providers/sites/roce_table.py", "_parallel")}
BARE = {"RuntimeError", "ValueError", "Exception", "MaasError", "VaultError", "S3Error", "PlatformApiError"}


def _bare_raises(path: Path) -> list[str]:
    rel = path.relative_to(REPO).as_posix()
    out = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, ast.FunctionDef) or (rel, fn.name) in VALIDATORS:
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and \
                    isinstance(node.exc.func, ast.Name) and node.exc.func.id in BARE:
                out.append(f"{rel}:{node.lineno} {fn.name}() raises {node.exc.func.id}")
    return out


def test_no_bare_error_reaches_the_operator() -> None:
    """Outside providers/machines (its own FailCode) and the node-side script (not operator-facing)."""
    files = [p for p in sorted((REPO / "providers").rglob("*.py"))
             if "machines" not in p.relative_to(REPO).parts and "node" not in p.relative_to(REPO).parts]
    assert [o for p in files for o in _bare_raises(p)] == []


def test_the_scan_sees_a_bare_raise(tmp_path: Path) -> None:
    probe = REPO / "providers" / "_bare_probe.py"
    probe.write_text("def f():\n    raise RuntimeError('x')\n\n\ndef g():\n    raise MaasError('y')\n")
    try:
        assert [o.split(" ", 1)[1] for o in _bare_raises(probe)] == ["f() raises RuntimeError", "g() raises MaasError"]
    finally:
        probe.unlink()
