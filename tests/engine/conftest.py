"""Fixtures for the engine's own tests: the fixture project driven through the real engine subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import EngineResult, read_state
from engine.crypto import TEST_PASSPHRASE
from tests.fixtures.engine import EngineFactory, TrackedEngine, engine_factory  # noqa: F401

FIXTURE_PROJECT = Path(__file__).parent / "fixture_project"
WIDGET = "pulumi-python:dynamic/fixture:Widget"


class FixtureStack:
    """One stack of the fixture project: runs take a spec (the widgets the program declares)."""

    def __init__(self, factory: EngineFactory, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.backend_path = tmp_path / "backend.json"
        self.state_path = tmp_path / "state.json"
        self._factory = factory

    def engine(self, spec: list[dict[str, Any]], **config: str) -> TrackedEngine:
        values = {"spec": json.dumps(spec), "backend": str(self.backend_path), **config}
        return self._factory(FIXTURE_PROJECT, "test", config=values, state_path=self.state_path)

    def run(self, operation: str, spec: list[dict[str, Any]] | None = None, **kw: Any) -> EngineResult:
        return self.engine(spec or []).run(operation, **kw)

    def up(self, spec: list[dict[str, Any]], **kw: Any) -> EngineResult:
        return self.run("up", spec, **kw)

    def urn(self, name: str, parent_type: str = "") -> str:
        typ = f"{parent_type}${WIDGET}" if parent_type else WIDGET
        return f"urn:pulumi:test::engine-fixture::{typ}::{name}"

    def backend(self) -> dict[str, Any]:
        return (
            json.loads(self.backend_path.read_text()) if self.backend_path.exists() else {"objects": {}, "events": []}
        )

    def objects_by_name(self) -> dict[str, dict[str, Any]]:
        return {o["name"]: o for o in self.backend()["objects"].values()}

    def events(self, phase: str = "done") -> list[tuple[str, str]]:
        return [(op, name) for op, name, ph, _ in self.backend()["events"] if ph == phase]

    def timed_events(self) -> list[tuple[str, str, str, float]]:
        return [tuple(e) for e in self.backend()["events"]]  # type: ignore[misc]

    def clear_events(self) -> None:
        data = self.backend()
        data["events"] = []
        self.backend_path.write_text(json.dumps(data))

    def state(self, decrypt: bool = False):  # noqa: ANN201 - StateDocument
        return read_state(self.state_path, TEST_PASSPHRASE if decrypt else None)

    def resource(self, name: str, decrypt: bool = True):  # noqa: ANN201 - ResourceState | None
        urn = self.urn(name)
        found = [r for r in self.state(decrypt).resources if r.urn == urn and not r.delete]
        return found[0] if found else None


@pytest.fixture
def stack(engine_factory: EngineFactory, tmp_path: Path) -> FixtureStack:  # noqa: F811
    return FixtureStack(engine_factory, tmp_path)


def widget(name: str, **props: Any) -> dict[str, Any]:
    """A spec item; ``secret=[...]``, ``refs={...}``, ``opts={...}``, ``parent=`` go beside props."""
    item: dict[str, Any] = {"name": name}
    for key in ("secret", "refs", "opts", "parent"):
        if key in props:
            item[key] = props.pop(key)
    item["props"] = props
    return item


def assert_ok(result: EngineResult) -> None:
    assert result.ok, f"{result.operation} failed: {result.errors()}\n{result.log}"
