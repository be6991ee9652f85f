"""State written by an older gpuaas-infra keeps working (issue: state is a contract).

`state_v1/` holds the `local` stack's state as the code at 1ad1b86 wrote it after two `up`s, plus the
simulators' stores at that moment (see `state_v1/capture.py`). That code's engine kept its own state
file (`state_v1/state.json`); `state_v1/convert.py` turned it once into the Pulumi deployment the real
CLI holds for the same resources (`deployment.json`, secrets encrypted for the test passphrase, the
stack's salt in `encryptionsalt`). The test stands that world up again (same MAAS machines and
system_ids, same platform nodes, same bundle objects), creates a `local` stack with that salt, imports
the deployment pointed at the new endpoints (operators' endpoints do not move between runs; ours are
ephemeral ports), then runs refresh, preview, a no-op `up` and destroy of today's program with the real CLI.
"""

from __future__ import annotations

import json
import pickle
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from clients.platform.models import Role
from simulators.localstack import LocalStack, maas_inventory
from simulators.maas import MaasSimulator
from simulators.openbao import OpenBaoDevServer
from simulators.platform import PlatformSimulator
from simulators.s3 import MotoS3Server
from tools.pulumi_cli.results import SECRET_SIG, StepOp

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
# old bundle is redeployed from the new one, as any bundle change does (docs/machines.md): the standalone
# MaasMachine and the pool machines redeploy inside an update (release + deploy, same MAAS machine: checked
# below). Nothing is replaced: a replace would mean other hardware.
ALLOWED = (StepOp.SAME.value,)


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
        # Vault as v1 left it, down to its token: a plain `pulumi refresh` runs no program, so it configures
        # the dynamic provider from the provider's inputs in state (the config of the last up, v1's token).
        vault = OpenBaoDevServer()
        vault.root_token = blob["urls"]["gpuaas-infra:vault_token"]
        self.vault = vault.start()
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


def _old_deployment(world: RestoredWorld) -> dict[str, Any]:
    """The v1 deployment pointed at this world: its endpoints, and the bundle's S3 version (moto numbers
    the re-uploaded object anew; a real bucket keeps its versions). No secret holds an endpoint, so the
    encrypted deployment is edited as it is."""
    text = (FIXTURE / "deployment.json").read_text()
    new = world.stack_config()
    for key, old_url in world.blob["urls"].items():
        if key.startswith("gpuaas-infra:embedded_"):
            text = text.replace(old_url.rstrip("/"), new[key].rstrip("/"))
    assert world.s3 is not None
    client = world.s3.client()
    for res in json.loads(text)["deployment"]["resources"]:
        ref = (res.get("outputs") or {}).get("ref")
        if isinstance(ref, dict) and ref.get("version_id"):
            head = client.head_object(Bucket=ref["bucket"], Key=ref["key"])
            text = text.replace(ref["version_id"], head["VersionId"])
    return dict(json.loads(text))


def _v1_stack(engine: Any) -> None:
    """Give the engine's `local` stack the salt the fixture's secrets were encrypted with (before `pulumi
    stack init`, which keeps a salt the stack file already has)."""
    engine.stack_file.parent.mkdir(parents=True, exist_ok=True)
    engine.stack_file.write_text(yaml.safe_dump({"encryptionsalt": (FIXTURE / "encryptionsalt").read_text().strip()}))


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
    deployment = _old_deployment(world)
    recorded = deployment["deployment"]["resources"]
    for res in recorded:
        provider = (res.get("inputs") or {}).get("__provider", "")
        assert not provider or res["type"].startswith("pulumi-python:dynamic/")
        assert res["type"].startswith("pulumi-python:dynamic/") == bool(res.get("provider")), res["urn"]
    before = {h: m["system_id"] for h, m in _maas(world).items()}
    assert set(before) == set(MACHINES) and {m["status_name"] for m in _maas(world).values()} == {"Deployed"}

    engine = engine_factory(REPO, "local", config=world.stack_config(), backend=tmp_path / "backend")
    _v1_stack(engine)
    engine.import_(deployment)
    # The CLI decrypts the fixture's secrets with the test passphrase and the stored salt: the provider's
    # config as v1 ran it (its Vault token, the one secret).
    shown = engine.resources(show_secrets=True)
    (provider,) = [r for r in shown.values() if r["type"] == "pulumi:providers:pulumi-python"]
    token = provider["inputs"]["gpuaas-infra:vault_token"]
    assert token[SECRET_SIG] == "1b47061264138c4ac30d75fd1eb44270"
    assert json.loads(token["plaintext"]) == world.blob["urls"]["gpuaas-infra:vault_token"]
    assert set(shown) == {r["urn"] for r in recorded}

    refreshed = engine.refresh()
    assert refreshed.ok, refreshed.errors()
    assert len(engine.resources()) == len(recorded), "refresh lost a resource"

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
    quiet = engine.preview(expect_no_changes=True)
    assert quiet.ok, quiet.changed()

    down = engine.destroy()
    assert down.ok, down.errors()
    machines = _maas(world)
    assert {h: m["system_id"] for h, m in machines.items()} == before, "destroy never deletes machines from MAAS"
    assert {m["status_name"] for m in machines.values()} == {"Ready"}


def test_v1_provider_import_paths_resolve() -> None:
    import importlib

    for module in V1_PROVIDERS:
        importlib.import_module(module)
