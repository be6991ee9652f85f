"""How `deployment.json` and `encryptionsalt` were made from `state.json` (ran once; kept as the record).

`state.json` is what the CLI-free engine of 1ad1b86 wrote (its own JSON, `"version": 1`; secrets, had
there been any, AES-256-GCM with a scrypt key, `{sig, "ciphertext": "v1:<nonce>:<ct>"}`; its verifier
proves the passphrase). That engine is gone; today the real Pulumi CLI owns state. This script turns the
v1 file, unchanged in content, into the deployment the CLI would have held for the same resources:

- every resource as `apitype.ResourceV3` (urn, custom, id, type, inputs, outputs, parent, dependencies,
  propertyDependencies, created, modified; flags only when set; the v1 engine's `ignoreChanges`, which
  no checkpoint has, dropped), in v1's order;
- the dynamic provider's default provider resource `pulumi:providers:pulumi-python::default` (id a UUID
  derived from its URN), right after the stack, whose inputs/outputs are the stack's config at capture
  time (the project's `stacks/Pulumi.local.yaml` at 1ad1b86 plus `world.pickle`'s `urls`, the
  overrides the capture ran with; `vault_token` a secret), and every custom resource's `provider`
  pointing at it as `<urn>::<id>`;
- secrets in the plaintext form (`{sig, "plaintext": "<json>"}`).

Then it imports that into a fresh `local` stack on a throwaway file backend, passphrase secrets with
`TEST_PASSPHRASE` (tools/pulumi_cli/install.py), and writes what `pulumi stack export` gives back
(secrets encrypted by the CLI) to `deployment.json`, and that stack's `encryptionsalt` to
`encryptionsalt`: a stack created with that salt and passphrase decrypts the deployment
(`test_state_v1.py`). Do not re-run it to "refresh" the fixture: its output is the fixture.

    .venv/bin/python -m tests.compat.state_v1.convert
"""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
import tempfile
import uuid
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
V1_PASSPHRASE = "gpuaas-infra-engine-test-passphrase"  # the deleted engine's test passphrase
V1_VERIFIER = "gpuaas-infra-engine-state"
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
PROVIDER_TYPE = "pulumi:providers:pulumi-python"
SECRET_CONFIG = {"gpuaas-infra:vault_token"}
CLI = "v3.274.1"  # the CLI that converted it (tools/pulumi-cli/go.mod)


def _v1_decrypter(doc: dict[str, Any]) -> Any:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    secrets = doc["secrets"]
    key = Scrypt(salt=base64.b64decode(secrets["salt"]), length=32, n=2**14, r=8, p=1).derive(V1_PASSPHRASE.encode())
    aead = AESGCM(key)

    def decrypt(token: str) -> Any:
        version, nonce, ciphertext = token.split(":")
        assert version == "v1", version
        return json.loads(aead.decrypt(base64.b64decode(nonce), base64.b64decode(ciphertext), None))

    assert decrypt(secrets["verifier"]) == V1_VERIFIER, "not the v1 engine's test passphrase"
    return decrypt


def _plaintext_secrets(value: Any, decrypt: Any) -> Any:
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            return {SIG_KEY: SECRET_SIG, "plaintext": json.dumps(decrypt(value["ciphertext"]))}
        return {k: _plaintext_secrets(v, decrypt) for k, v in value.items()}
    if isinstance(value, list):
        return [_plaintext_secrets(v, decrypt) for v in value]
    return value


def capture_config() -> dict[str, Any]:
    """The `local` stack's config when v1 ran: the stack file at 1ad1b86 (`environment: local`) plus the
    capture's overrides (world.pickle's `urls`: the simulators' endpoints, the Vault token)."""
    with open(HERE / "world.pickle", "rb") as f:
        urls = pickle.load(f)["urls"]  # noqa: S301 - our own fixture
    config: dict[str, Any] = {"gpuaas-infra:environment": "local", **urls}
    return {k: ({SIG_KEY: SECRET_SIG, "plaintext": json.dumps(v)} if k in SECRET_CONFIG else v)
            for k, v in sorted(config.items())}


def to_deployment(doc: dict[str, Any], config: dict[str, Any], salt: str) -> dict[str, Any]:
    """v1 state document -> `apitype.UntypedDeployment` (version 3), secrets in plaintext form, passphrase
    secrets provider with the target stack's `salt`."""
    assert doc["version"] == 1 and not doc.get("pending_operations"), "a v1 state at rest"
    decrypt = _v1_decrypter(doc)
    prefix = f"urn:pulumi:{doc['stack']}::{doc['project']}::"
    provider_urn = f"{prefix}{PROVIDER_TYPE}::default"
    provider_id = str(uuid.uuid5(uuid.NAMESPACE_URL, provider_urn))
    first = doc["resources"][0]
    provider = {"urn": provider_urn, "custom": True, "id": provider_id, "type": PROVIDER_TYPE,
                "inputs": config, "outputs": config, "created": first["created"], "modified": first["created"]}
    resources: list[dict[str, Any]] = []
    for res in doc["resources"]:
        assert not res.get("ignoreChanges") and not res.get("delete"), res["urn"]
        out: dict[str, Any] = {"urn": res["urn"], "custom": res["custom"]}
        if res["custom"]:
            out["id"] = res["id"]
        out["type"] = res["type"]
        out["inputs"] = _plaintext_secrets(res.get("inputs") or {}, decrypt)
        out["outputs"] = _plaintext_secrets(res.get("outputs") or {}, decrypt)
        if res.get("parent"):
            out["parent"] = res["parent"]
        for flag in ("protect", "external", "retainOnDelete"):
            if res.get(flag):
                out[flag] = True
        if res.get("dependencies"):
            out["dependencies"] = res["dependencies"]
        if res["custom"]:
            out["provider"] = f"{provider_urn}::{provider_id}"
        if res.get("propertyDependencies"):
            out["propertyDependencies"] = res["propertyDependencies"]
        if res.get("additionalSecretOutputs"):
            out["additionalSecretOutputs"] = res["additionalSecretOutputs"]
        out["created"], out["modified"] = res["created"], res["modified"]
        resources.append(out)
        if res["type"] == "pulumi:pulumi:Stack":
            resources.append(provider)
    return {
        "version": 3,
        "deployment": {
            "manifest": {"time": doc["resources"][-1]["modified"], "magic": hashlib.sha256(CLI.encode()).hexdigest(),
                         "version": CLI},  # the CLI's integrity check: magic = sha256(version)
            "secrets_providers": {"type": "passphrase", "state": {"salt": salt}},
            "resources": resources,
        },
    }


def main() -> None:
    from tools.pulumi_cli.api import Engine

    doc = json.loads((HERE / "state.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(REPO, "local", Path(tmp) / "backend")
        engine.apply_config()  # `pulumi stack init` (passphrase, TEST_PASSPHRASE): writes the salt
        salt = str(yaml.safe_load(engine.stack_file.read_text())["encryptionsalt"])
        engine.import_(to_deployment(doc, capture_config(), salt))
        exported = engine.export()
        assert exported["deployment"]["secrets_providers"]["state"]["salt"] == salt
        shown = engine.export(show_secrets=True)
        (provider,) = [r for r in shown["deployment"]["resources"] if r["type"] == PROVIDER_TYPE]
        with open(HERE / "world.pickle", "rb") as f:
            token = pickle.load(f)["urls"]["gpuaas-infra:vault_token"]  # noqa: S301 - our own fixture
        assert json.loads(provider["inputs"]["gpuaas-infra:vault_token"]["plaintext"]) == token
    (HERE / "deployment.json").write_text(json.dumps(exported, indent=1) + "\n")
    (HERE / "encryptionsalt").write_text(salt + "\n")
    print(f"wrote {HERE / 'deployment.json'} ({len(exported['deployment']['resources'])} resources)")


if __name__ == "__main__":
    main()
