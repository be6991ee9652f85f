"""Imports run one way (docs/architecture.md): environments and clients are leaves; providers use
clients and only the environment's pure rule functions; components wire environments to providers;
product code never imports the simulators, the tools or any other support code."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OURS = {p.name for p in REPO.iterdir() if (p / "__init__.py").exists()} | {"__main__"}
SUPPORT = {"simulators", "preview_note", "ci_lint", "lab", "tools", "tests", "benchmarks", "policy", "cli"}
# layer -> what of ours it may import (a module path prefix: "environments" or "environments.rules")
ALLOWED: dict[str, tuple[str, ...]] = {
    "clients": ("clients",),
    "environments": ("environments",),
    # The environment's pure rule functions, from the modules that define them (one import path each).
    "providers": ("providers", "clients", "environments.rules_policy", "environments.rules_apps",
                  "environments.rules_hosts", "environments.ca_paths", "environments.findings", "environments.coded"),
    "components": ("components", "providers", "environments"),
    "__main__": ("components", "environments"),
}


def _imports(path: Path, root: Path = REPO) -> list[tuple[int, str]]:
    """`root`: the tree `path`'s relative imports resolve in (the checkout; a probe's own tree)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(root).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] if node.level > 1 else package
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            # `from environments import rules` names environments.rules; `from x import Name`, x.Name
            out += [(node.lineno, f"{module}.{a.name}" if module else a.name) for a in node.names]
    return [(line, name) for line, name in out if name.split(".")[0] in OURS]


def _layer_files(layer: str) -> list[Path]:
    return [REPO / "__main__.py"] if layer == "__main__" else sorted((REPO / layer).rglob("*.py"))


def _allowed(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_imports_run_one_way() -> None:
    wrong = []
    for layer, prefixes in ALLOWED.items():
        for path in _layer_files(layer):
            for line, name in _imports(path):
                if not _allowed(name, prefixes):
                    wrong.append(f"{path.relative_to(REPO)}:{line} imports {name} ({layer} may import {prefixes})")
    assert not wrong, "\n".join(wrong)


def test_product_code_never_imports_support_code() -> None:
    wrong = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for layer in ALLOWED
        for path in _layer_files(layer)
        for line, name in _imports(path)
        if name.split(".")[0] in SUPPORT
    ]
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_a_back_edge(tmp_path: Path) -> None:
    """The scan must be able to fail: a relative and an absolute back edge are both found."""
    # The probe lives outside the checkout: the other workers' scans of the checkout must never see it.
    fake = tmp_path / "clients" / "_layer_probe.py"
    fake.parent.mkdir()
    fake.write_text("from providers.kind import KindDescriptor\nfrom ..tools import demo\n")
    names = [n for _, n in _imports(fake, root=tmp_path)]
    assert names == ["providers.kind.KindDescriptor", "tools.demo"], names
    assert not any(_allowed(n, ALLOWED["clients"]) for n in names)
