"""State written by an older gpuaas-infra keeps working (issue: state files are a contract).

`state_v1/` holds the `local` stack's state file as the code at 1ad1b86 wrote it after two `up`s,
plus the simulators' stores at that moment (see `state_v1/capture.py`). The test stands that world up
again (same MAAS machines and system_ids, same platform nodes, same bundle objects), points the old
state at the new endpoints (operators' endpoints do not move between runs; ours are ephemeral
ports), then runs refresh, preview, a no-op `up` and destroy with the current code.
"""

from __future__ import annotations

import json
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest

from clients.platform.models import Role
from engine.model import StepOp
from simulators.localstack import LocalStack, maas_inventory
from simulators.maas import MaasSimulator
from simulators.openbao import OpenBaoDevServer
from simulators.platform import PlatformSimulator
from simulators.s3 import MotoS3Server

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "state_v1"
MACHINES = ("local-gpu-1", "local-gpu-2", "local-gpu-3", "local-gpu-4")
# Provider classes the old state pickled by reference: their import paths must keep resolving.
V1_PROVIDERS = (
    "providers.site_profile",
    "providers.bootstrap_bundle",
    "providers.roce_assignment",
    "providers.maas_machine",
    "providers.machine_pool",
    "providers.app_instance",
)


# The h200 bundle's templates changed since v1 (issue 15: the launcher moved into the deploy user_data,
# the bundle carries its steps/), so the local-h200 bundle has a new digest: a machine deployed from the
# old bundle is redeployed from the new one, as any bundle change does (docs/machines.md). For the one
# standalone MaasMachine that is a replace (release + deploy, same MAAS machine: checked below); pool
# machines redeploy inside an update.
ALLOWED = (StepOp.SAME.value, "replace")


class _Unpickler(pickle.Unpickler):
    pass


def _world_blob() -> dict[str, Any]:
    with open(FIXTURE / "world.pickle", "rb") as f:
        return _Unpickler(f).load()  # noqa: S301 - our own fixture


class RestoredWorld(LocalStack):
    """The `local` world as v1 left it: stores restored into fresh simulators."""

    def __init__(self, blob: dict[str, Any]) -> None:
        super().__init__("local")
        self.blob = blob

    def start(self) -> RestoredWorld:
        env, blob = self.env, self.blob
        self.vault = OpenBaoDevServer().start()
        self.s3 = MotoS3Server().start()
        self.s3.create_bucket(env.artifact_store.bucket, versioning=True)
        client = self.s3.client()
        for obj in blob["s3_objects"]:
            client.put_object(Bucket=env.artifact_store.bucket, Key=obj["key"], Body=obj["body"],
                              Metadata=obj["metadata"])
        self.platform = PlatformSimulator(time_scale=self.platform_time_scale)
        store = blob["platform_store"]
        store.clock = self.platform.clock
        store.lock = threading.RLock()
        self.platform.clock.advance(10**6)  # time moved on since v1 (idempotency windows long gone)
        self.platform.store = store
        self.platform.start()
        self.maas = MaasSimulator(maas_inventory(env), time_scale=self.maas_time_scale,
                                  platform_url=self.platform.url, api_key=blob["maas_api_key"])
        # The route handlers close over the store SimCore made: restore into that object.
        self.maas.core.store.__dict__.update(blob["maas_store"].__dict__)
        self.maas.start()
        self.platform_admin_token = self.platform.issue_token(Role.PLATFORM_ADMIN, name="gpuaas-infra")
        self._seed_vault()
        return self


def _old_state(world: RestoredWorld, path: Path) -> None:
    """The v1 state pointed at this world: its endpoints, and the bundle's S3 version (moto numbers
    the re-uploaded object anew; a real bucket keeps its versions)."""
    text = (FIXTURE / "state.json").read_text()
    new = world.stack_config()
    for key, old_url in world.blob["urls"].items():
        if key.startswith("gpuaas-infra:embedded_"):
            text = text.replace(old_url.rstrip("/"), new[key].rstrip("/"))
    assert world.s3 is not None
    client = world.s3.client()
    for res in json.loads(text)["resources"]:
        ref = (res.get("outputs") or {}).get("ref")
        if isinstance(ref, dict) and ref.get("version_id"):
            head = client.head_object(Bucket=ref["bucket"], Key=ref["key"])
            text = text.replace(ref["version_id"], head["VersionId"])
    path.write_text(text)
    path.chmod(0o600)


def _ops(result: Any) -> dict[str, str]:
    """Steps on custom resources (new component resources that group them are not external objects)."""
    return {urn.rsplit("::", 1)[-1]: op.value for urn, op in result.ops().items()
            if "pulumi-python:dynamic/" in urn.rsplit("::", 2)[-2].rsplit("$", 1)[-1]}


def _maas(world: RestoredWorld) -> dict[str, dict[str, Any]]:
    assert world.maas is not None
    return {m["hostname"]: m for m in world.maas.admin.machines()}


@pytest.fixture
def world() -> Any:
    with RestoredWorld(_world_blob()) as w:
        yield w


def test_v1_state_refresh_noop_up_destroy(engine_factory: Any, world: RestoredWorld, tmp_path: Path) -> None:
    state_path = tmp_path / "state.json"
    _old_state(world, state_path)
    recorded = json.loads(state_path.read_text())
    for res in recorded["resources"]:
        provider = (res.get("inputs") or {}).get("__provider", "")
        assert not provider or res["type"].startswith("pulumi-python:dynamic/")
    before = {h: m["system_id"] for h, m in _maas(world).items()}
    assert set(before) == set(MACHINES) and {m["status_name"] for m in _maas(world).values()} == {"Deployed"}

    engine = engine_factory(REPO, "local", config=world.stack_config(), state_path=state_path)
    refreshed = engine.refresh()
    assert refreshed.ok, refreshed.errors()
    assert len(json.loads(state_path.read_text())["resources"]) == len(recorded["resources"]), "refresh lost a resource"

    preview = engine.preview()
    assert preview.ok, preview.errors()
    bad = {n: op for n, op in _ops(preview).items() if op not in (*ALLOWED, StepOp.UPDATE.value)}
    assert not bad, f"old state must not create, replace or delete anything: {bad}"

    up = engine.up()
    assert up.ok, up.errors()
    assert not {n: op for n, op in _ops(up).items() if op not in (*ALLOWED, StepOp.UPDATE.value)}
    after = _maas(world)
    assert {h: m["system_id"] for h, m in after.items()} == before, "no machine lost or duplicated"
    assert {m["status_name"] for m in after.values()} == {"Deployed"}, "a replaced machine is deployed again"

    again = engine.up()
    assert again.ok and set(_ops(again).values()) == {StepOp.SAME.value}, _ops(again)

    down = engine.destroy()
    assert down.ok, down.errors()
    machines = _maas(world)
    assert {h: m["system_id"] for h, m in machines.items()} == before, "destroy never deletes machines from MAAS"
    assert {m["status_name"] for m in machines.values()} == {"Ready"}


def test_v1_provider_import_paths_resolve() -> None:
    import importlib

    for module in V1_PROVIDERS:
        importlib.import_module(module)
