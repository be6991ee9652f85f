"""Each name has one import path (issue 26 item 7): a product module (providers/, components/, clients/,
environments/) does not re-export what it imports, and nobody imports a name from a module that merely
imported it. Callers import the module that defines the name.

A re-export is a name a product module binds by an import and then
- lists in `__all__`, or
- never uses itself while some other file imports it from there.
And whatever a module binds by an import, no file of the repository (product, tests, tools, simulators...)
imports from it: `from providers.common import is_unknown` is wrong when providers/kind.py defines it.

A package `__init__.py` that IS its package's public API may gather its submodules' names (PACKAGE_APIS);
outside such a package, its names are then imported from the package, not from its submodules, and a package
that gathers all its submodules' names (WHOLE_APIS: the clients) is the only way in: `from clients.platform.models
import nodes` is refused as well.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("providers", "components", "clients", "environments")
# Everything of ours that may import a product module's names (excluding the virtualenv, the build, caches).
SCANNED = ("providers", "components", "clients", "environments", "tests", "tools", "simulators", "preview_note",
           "ci_lint", "lab", "benchmarks", "policy", "cli", "__main__.py")

# package -> why its __init__ gathers its submodules' names
PACKAGE_APIS: dict[str, str] = {
    "clients.maas": "the MAAS client's public surface; the heavy clients load lazily on first use (issue 18)",
    "clients.platform": "the platform API client's public surface (client, errors, retry policy, models)",
    "clients.platform.models": "the platform API contract's pydantic models, one namespace like the OpenAPI document",
    "environments": "loading and validating an environment: load_environment, the compiled Environment",
}
# APIs that gather (nearly) all their submodules' names: outside the package, its submodules are not imported
# at all. `environments` is a narrow API: its rules, findings and model modules are imported by name.
WHOLE_APIS = ("clients.maas", "clients.platform", "clients.platform.models")


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imported: dict[str, str] = field(default_factory=dict)  # local name -> "module.attr" it was bound from
    used: set[str] = field(default_factory=set)
    all_names: list[str] = field(default_factory=list)


def _dotted(path: Path, root: Path = REPO) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _files(tops: tuple[str, ...], root: Path = REPO) -> list[Path]:
    out: list[Path] = []
    for top in tops:
        path = root / top
        out += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [p for p in out if "-" not in p.stem and ".lab" not in p.parts]


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@cache
def _parse(path: Path, root: Path = REPO) -> Module:
    tree = _tree(path)
    mod = Module(_dotted(path, root), path, path.name == "__init__.py")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(node, mod.name, mod.is_package)
            for alias in node.names:
                mod.imported[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                mod.imported[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            mod.used.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            mod.used.update(_names_in_annotation(node.value))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            mod.all_names = [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
    return mod


def _names_in_annotation(text: str) -> set[str]:
    """Names in a quoted annotation ("MaasClient | None"); any other string yields nothing."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


@cache
def _modules(root: Path = REPO) -> dict[str, Module]:
    """The product modules of the checkout (or of a probe's own tree, `root`)."""
    return {m.name: m for m in (_parse(p, root) for p in _files(PRODUCT, root))}


def _is_module(dotted: str, root: Path = REPO) -> bool:
    return dotted in _modules(root)


def _in_api(module: str) -> str | None:
    """The public-API package `module` belongs to (itself or an enclosing package), if any."""
    return max((p for p in PACKAGE_APIS if module == p or module.startswith(p + ".")), key=len, default=None)


def _imports_of(path: Path, modules: bool = False, root: Path = REPO) -> list[tuple[int, str, str]]:
    """(line, source module, name) of every `from <product module> import <name>` in `path`; with `modules`,
    the product modules it imports instead, as (line, module, "")."""
    mod = _parse(path, root)
    tree = _tree(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(node, mod.name, mod.is_package)
            if source not in _modules(root):
                continue
            if modules:
                out += [(node.lineno, f"{source}.{a.name}", "") for a in node.names
                        if _is_module(f"{source}.{a.name}", root)]
            else:
                out += [(node.lineno, source, a.name) for a in node.names if not _is_module(f"{source}.{a.name}", root)]
        elif isinstance(node, ast.Import) and modules:
            out += [(node.lineno, a.name, "") for a in node.names if _is_module(a.name, root)]
    return out


def _where(path: Path, line: int, root: Path = REPO) -> str:
    return f"{path.relative_to(root)}:{line}"


def reexports(files: list[Path] | None = None, root: Path = REPO) -> list[str]:
    """Names a product module binds by an import and hands on: in `__all__`, or unused but imported from it
    (by one of `files`, every scanned file by default)."""
    importers: dict[tuple[str, str], list[str]] = {}
    for path in _files(SCANNED, root) if files is None else files:
        for line, source, name in _imports_of(path, root=root):
            importers.setdefault((source, name), []).append(_where(path, line, root))
    wrong = []
    for mod in _modules(root).values():
        if mod.name in PACKAGE_APIS:
            continue
        for local, origin in sorted(mod.imported.items()):
            if _is_module(origin, root):
                continue
            if local in mod.all_names:
                wrong.append(f"{mod.path.relative_to(root)} lists {local} (from {origin}) in __all__")
            elif local not in mod.used and (mod.name, local) in importers:
                users = ", ".join(importers[(mod.name, local)])
                wrong.append(f"{mod.path.relative_to(root)} re-exports {local} (from {origin}); imported by {users}")
    return wrong


def second_paths(files: list[Path] | None = None, root: Path = REPO) -> list[str]:
    """`from M import X` where M only imported X (M's own package API aside), or where M's package is a public
    API and the importer, outside that package, reaches past it into a submodule."""
    wrong = []
    for path in _files(SCANNED, root) if files is None else files:
        importer = _dotted(path, root)
        for line, source, name in _imports_of(path, root=root):
            mod = _modules(root)[source]
            origin = mod.imported.get(name)
            api = _in_api(source)
            if origin and not _is_module(origin, root) and source not in PACKAGE_APIS:
                wrong.append(f"{_where(path, line, root)} imports {name} from {source}; import it from "
                             f"{origin.rsplit('.', 1)[0]}")
            elif api and api != source and not _in_api(importer) and name in _modules(root)[api].all_names:
                wrong.append(f"{_where(path, line, root)} imports {name} from {source}; {api} is its public API")
        for line, module, _ in _imports_of(path, modules=True, root=root):
            api = _in_api(module)
            if api in WHOLE_APIS and api != module and not _in_api(importer):
                wrong.append(f"{_where(path, line, root)} imports the module {module}; import its names from {api}, "
                             "the package's public API")
    return wrong


def test_no_product_module_reexports_another_modules_names() -> None:
    wrong = reexports()
    assert not wrong, "\n".join(wrong)


def test_every_name_is_imported_from_its_one_path() -> None:
    wrong = second_paths()
    assert not wrong, "\n".join(wrong)


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A probe module that re-exports (unused + imported by another probe, and via __all__) is found. The probes
    sit in a copy of the product packages outside the checkout: the other workers' scans of the checkout must
    never see them (a probe written into the checkout was read by a scan after it was removed)."""
    for top in PRODUCT:
        shutil.copytree(REPO / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    probe = tmp_path / "providers" / "_reexport_probe.py"
    user = tmp_path / "providers" / "_reexport_user.py"
    probe.write_text('from providers.kind import is_unknown, register\n\n__all__ = ["register"]\n')
    user.write_text("from providers._reexport_probe import is_unknown\nfrom clients.platform.models import nodes\n")
    found, paths = reexports([user], root=tmp_path), second_paths([user], root=tmp_path)
    assert any("_reexport_probe.py re-exports is_unknown" in w for w in found), found
    assert any("_reexport_probe.py lists register" in w for w in found), found
    assert any("_reexport_user.py:1 imports is_unknown from providers._reexport_probe" in w for w in paths), paths
    assert any("_reexport_user.py:2 imports the module clients.platform.models.nodes" in w for w in paths), paths
