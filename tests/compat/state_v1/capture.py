"""How `state_v1/` was made (historical: ran once, at commit 1ad1b86, with that commit's code).

It ran the `local` stack's `up` twice through that commit's CLI-free engine against the embedded
simulators and saved what a later version needs to stand the same world up again:
- `state.json`: the engine's own state file (its JSON, `"version": 1`; secrets would be AES-GCM with a
  scrypt key from the engine's test passphrase `gpuaas-infra-engine-test-passphrase`; this one holds none);
- `world.pickle`: the MAAS and platform simulators' in-memory stores, the S3 bucket's objects and the
  stack config the run used (simulator test keys only; Vault is re-seeded by the test from the environment).

That engine is gone and the real Pulumi CLI owns state now, so `convert.py` (run once, with the CLI
v3.274.1) turned `state.json` into what the test imports: `deployment.json`, the same resources as a
`pulumi stack export` deployment (the dynamic provider's default provider resource added, holding the
capture's stack config; secrets encrypted by the CLI for `TEST_PASSPHRASE`), and `encryptionsalt`, the
salt of the stack it was exported from. `test_state_v1.py` loads `deployment.json` and `world.pickle`
with the current code. Do not re-run either script with newer code: the point of the fixture is that
it was written by the old one.
"""

from __future__ import annotations

import json
import pickle
import shutil
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(REPO))

from tools.engine.api import Engine  # noqa: E402
from tools.engine.crypto import TEST_PASSPHRASE  # noqa: E402
from tools.localstack import LocalStack  # noqa: E402

_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):  # type: ignore[no-untyped-def]
        if isinstance(obj, _LOCK_TYPES):
            return (threading.RLock, ())
        return NotImplemented


def main() -> None:
    with LocalStack("local") as world:
        state = HERE / "work-state.json"
        engine = Engine(REPO, "local", state, config_overrides=world.stack_config(), passphrase=TEST_PASSPHRASE)
        up = engine.run("up")
        assert up.ok, up
        again = engine.run("up")
        assert again.ok
        shutil.copy(state, HERE / "state.json")
        state.unlink()
        Path(str(state) + ".lock").unlink(missing_ok=True)
        s3 = world.s3.client()  # type: ignore[union-attr]
        bucket = world.env.artifact_store.bucket
        objects = []
        for version in s3.list_object_versions(Bucket=bucket).get("Versions", []):
            body = s3.get_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])
            objects.append({"key": version["Key"], "body": body["Body"].read(), "metadata": body.get("Metadata", {})})
        urls = world.stack_config()
        world.platform.stop()  # type: ignore[union-attr]
        world.maas.stop()  # type: ignore[union-attr]
        blob = {
            "maas_store": world.maas.core.store,  # type: ignore[union-attr]
            "maas_api_key": str(world.maas.api_key),  # type: ignore[union-attr]
            "platform_store": world.platform.store,  # type: ignore[union-attr]
            "s3_objects": objects,
            "urls": urls,
        }
        with open(HERE / "world.pickle", "wb") as f:
            _Pickler(f, protocol=4).dump(blob)
        print(json.dumps({k: v for k, v in blob["urls"].items() if "token" not in k}, indent=1))


if __name__ == "__main__":
    main()
