"""v1 state (tests/compat/state_v1) through refresh, preview, a no-op up and destroy with this code,
for the machine kinds.

tests/compat/test_state_v1.py runs the same flow but its restored world is not faithful (reported to
the coordinator): it swaps `core.store` after the MAAS simulator registered its handlers, which keep
the fresh empty store (so MAAS answers every read with no machine), and moto gives the re-uploaded
bundle a new S3 version id, so the SiteProfile update reads a version that doesn't exist. Here the
restored MAAS store is copied into the store the handlers hold, and the state is pointed at the
bundle's new version id; everything else is the compat test's world. Remove this file once that
test runs without its xfail mark.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.model import StepOp
from tests.compat.test_state_v1 import MACHINES, RestoredWorld, _maas, _old_state, _ops, _world_blob

REPO = Path(__file__).resolve().parents[2]


class InPlaceWorld(RestoredWorld):
    def start(self) -> InPlaceWorld:
        super().start()
        assert self.maas is not None
        restored = self.maas.core.store
        for handlers_store in _handler_stores(self):
            if handlers_store is not restored:
                handlers_store.__dict__.update(restored.__dict__)
                self.maas.core.store = self.maas.core.lifecycle.store = handlers_store
        return self


def _handler_stores(world: RestoredWorld) -> list[Any]:
    """The store object the MAAS simulator's route handlers closed over at construction."""
    assert world.maas is not None
    found: dict[int, Any] = {}
    for handler in world.maas.core.routes.handlers:
        for action in handler.actions:
            for cell in action.fn.__closure__ or ():
                obj = cell.cell_contents
                if type(obj).__name__ == "Store":
                    found[id(obj)] = obj
    return list(found.values())


@pytest.fixture
def world() -> Iterator[InPlaceWorld]:
    with InPlaceWorld(_world_blob()) as w:
        yield w


def _repin_bundle(world: InPlaceWorld, state_path: Path) -> None:
    assert world.s3 is not None
    client = world.s3.client()
    text = state_path.read_text()
    for res in json.loads(text)["resources"]:
        ref = (res.get("outputs") or {}).get("ref")
        if isinstance(ref, dict) and ref.get("version_id"):
            head = client.head_object(Bucket=ref["bucket"], Key=ref["key"])
            text = text.replace(ref["version_id"], head["VersionId"])
    state_path.write_text(text)


def test_v1_state_machines_refresh_preview_noop_up_destroy(
    engine_factory: Any, world: InPlaceWorld, tmp_path: Path
) -> None:
    assert _handler_stores(world), "the simulator's handlers were not found: update _handler_stores"
    state_path = tmp_path / "state.json"
    _old_state(world, state_path)
    _repin_bundle(world, state_path)
    before = {h: m["system_id"] for h, m in _maas(world).items()}
    assert set(before) == set(MACHINES)

    engine = engine_factory(REPO, "local", config=world.stack_config(), state_path=state_path)
    assert engine.refresh().ok
    machines = [r for r in json.loads(state_path.read_text())["resources"] if "Machine" in r["type"]]
    for res in machines:
        outs = res["outputs"]
        records = outs.get("machines_state") or {"standalone": outs}
        assert {r["status"] for r in records.values()} == {"Deployed"}, "refresh found the machines"
        assert not any({"notes", "stage_seconds"} & set(r) for r in records.values()), "refresh shrinks state"

    preview = engine.preview()
    assert preview.ok, preview.errors()
    assert set(_ops(preview).values()) == {StepOp.SAME.value}, _ops(preview)
    up = engine.up()
    assert up.ok and set(_ops(up).values()) == {StepOp.SAME.value}, (_ops(up), up.errors())

    down = engine.destroy()
    assert down.ok, down.errors()
    after = _maas(world)
    assert {h: m["system_id"] for h, m in after.items()} == before, "destroy never deletes machines from MAAS"
    assert {m["status_name"] for m in after.values()} == {"Ready"}
