"""Pytest support: ``engine_factory`` builds ``Engine`` objects whose runs are cleaned up after the test.

Register in a conftest with ``from tools.engine.testing import engine_factory  # noqa: F401``.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tools.engine.api import Engine, EngineHandle
from tools.engine.crypto import TEST_PASSPHRASE
from tools.engine.model import Operation


class TrackedEngine(Engine):
    """An ``Engine`` that remembers its runs so the fixture can kill any left running."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.handles: list[EngineHandle] = []

    def start(
        self, operation: Operation | str, targets: list[str] | None = None, expect_no_changes: bool = False
    ) -> EngineHandle:
        handle = super().start(operation, targets, expect_no_changes)
        self.handles.append(handle)
        return handle


EngineFactory = Callable[..., TrackedEngine]


@pytest.fixture
def engine_factory(tmp_path: Path) -> Iterator[EngineFactory]:
    """``engine_factory(project_dir, stack="test", config={...}, state_path=None, passphrase=...)``.

    The state file defaults to a fresh file under ``tmp_path``; config values are stack-config overrides
    (unnamespaced keys get the project's namespace), passed by environment, not argv.
    """
    made: list[TrackedEngine] = []
    counter = itertools.count()

    def factory(
        project_dir: str | os.PathLike[str],
        stack: str = "test",
        *,
        config: dict[str, str] | None = None,
        state_path: str | os.PathLike[str] | None = None,
        passphrase: str | None = TEST_PASSPHRASE,
        env: dict[str, str] | None = None,
    ) -> TrackedEngine:
        path = state_path or tmp_path / f"state-{stack}-{next(counter)}.json"
        engine = TrackedEngine(project_dir, stack, path, config_overrides=config, passphrase=passphrase, env=env)
        made.append(engine)
        return engine

    yield factory
    for engine in made:
        for handle in engine.handles:
            if handle.popen.poll() is None:
                handle.kill()
                handle.popen.wait()
