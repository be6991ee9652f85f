"""The runner imports the program's modules while the CLI starts (issue 29: the program's first run at
1,024 machines was 0.6 s, most of it imports), through the real CLI on a small project of its own:

- the program's top-level imports are read from its file, in order (absolute imports only);
- the imports run on the runner's warm-up thread, and the program finds them loaded;
- a module that fails to import still fails the program's own run, with the program's error.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.fixtures.engine import EngineFactory, engine_factory  # noqa: F401 - the fixture
from tools.pulumi_cli.runner import _imported_modules

PROJECT = "name: warmtest\nruntime: python\n"


def _project(tmp_path: Path, program: str, modules: dict[str, str]) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "Pulumi.yaml").write_text(PROJECT)
    (root / "__main__.py").write_text(textwrap.dedent(program))
    for name, text in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(text))
    return root


def test_the_programs_own_top_level_imports_in_order(tmp_path: Path) -> None:
    main = tmp_path / "__main__.py"
    main.write_text(textwrap.dedent("""\
        import pulumi
        import os.path, json
        from components.stack import declare_environment
        from . import sibling
        if True:
            import not_top_level
        def f():
            import inside_a_function
        """))
    assert _imported_modules(main) == ["pulumi", "os.path", "json", "components.stack"]
    main.write_text("import (\n")
    assert _imported_modules(main) == []  # the program's own run reports the syntax error


def test_the_program_finds_its_modules_imported_by_the_warm_up(tmp_path: Path,
                                                                 engine_factory: EngineFactory) -> None:  # noqa: F811
    root = _project(tmp_path, """\
        import pulumi
        import slowmod
        pulumi.export("imported_on", slowmod.THREAD)
        """, {"slowmod": """\
        import threading, time
        time.sleep(0.2)
        THREAD = threading.current_thread().name
        """})
    engine = engine_factory(root)
    result = engine.up(timeout=300)
    assert result.ok, result.log[-2000:]
    assert engine.export()["deployment"]["resources"][0]["outputs"]["imported_on"] == "warm-imports"
    # the timings the benchmarks quote: the CLI's run lies inside what the caller waited for
    assert result.until_cli_exit_s is not None and result.call_s is not None
    assert 0 < result.wall_s <= result.until_cli_exit_s <= result.call_s


def test_a_module_that_fails_to_import_fails_the_programs_run(tmp_path: Path,
                                                             engine_factory: EngineFactory) -> None:  # noqa: F811
    root = _project(tmp_path, """\
        import pulumi
        import broken
        pulumi.export("never", broken.VALUE)
        """, {"broken": """\
        raise RuntimeError("broken at import: the program says so")
        """})
    result = engine_factory(root).preview(timeout=300)
    assert not result.ok
    assert "broken at import: the program says so" in result.log
