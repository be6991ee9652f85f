"""Stack secrets under the real CLI: the `local` stack with the `hashivault://` secrets provider (Vault's transit
engine: the embedded OpenBao's), and with the passphrase provider; `pulumi stack export` never holds a secret
value of the world in plaintext.

The CLI's hashivault driver (gocloud.dev/secrets/hashivault) reads VAULT_ADDR (or VAULT_SERVER_URL) and
VAULT_TOKEN (or VAULT_SERVER_TOKEN); `hashivault://<key>` names a key of the transit engine mounted at
`transit/` (its default `engine`), whose `transit/encrypt/<key>` wraps the stack's data key: the stack file's
`encryptedkey` is that ciphertext (`vault:v1:...`), base64-encoded.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulators.localstack import LocalStack
from tools.pulumi_cli.api import CliError, Engine

REPO = Path(__file__).resolve().parents[2]
KEY = "gpuaas-local"
SECRET_SIG = "4dabf18193072939515e22adb298388d"


@pytest.fixture
def world() -> Iterator[LocalStack]:
    with LocalStack("local") as w:
        yield w


def _transit_key(world: LocalStack, key: str = KEY) -> None:
    """A transit engine at `transit/` (the driver's default) with one key, as docs/operations.md §0 sets up."""
    assert world.vault is not None
    client = world.vault.client()
    client.sys.enable_secrets_engine("transit", path="transit")
    client.secrets.transit.create_key(name=key)


def _leaks(world: LocalStack, text: str) -> list[str]:
    return [f"{s[:4]}...({len(s)} chars)" for s in world.secret_values() if s in text]


def _secret_values(doc: Any) -> list[Any]:
    """Every secret-signed value of an exported deployment (ciphertext, or plaintext with --show-secrets)."""
    if isinstance(doc, dict):
        if doc.get(SECRET_SIG) == "1b47061264138c4ac30d75fd1eb44270":
            return [doc]
        return [v for x in doc.values() for v in _secret_values(x)]
    if isinstance(doc, list):
        return [v for x in doc for v in _secret_values(x)]
    return []


def test_hashivault_stack_keeps_its_key_in_vault(engine_factory: Any, world: LocalStack, tmp_path: Path) -> None:
    assert world.vault is not None
    _transit_key(world)
    vault_env = {"VAULT_ADDR": world.vault.address, "VAULT_TOKEN": world.vault.root_token}
    engine = engine_factory(REPO, "local", config=world.stack_config(), backend=tmp_path / "backend",
                            passphrase=None, secrets_provider=f"hashivault://{KEY}", env=vault_env)
    up = engine.up(timeout=900)
    assert up.ok, up.errors()
    assert engine.preview(timeout=600, expect_no_changes=True).ok  # the second run changes nothing

    # The stack file: the provider, the data key wrapped by Vault transit, config secrets under that key.
    stack = yaml.safe_load(engine.stack_file.read_text())
    assert stack["secretsprovider"] == f"hashivault://{KEY}"
    wrapped = base64.b64decode(stack["encryptedkey"]).decode()
    assert wrapped.startswith("vault:v1:"), wrapped[:12]
    plain = world.vault.client().secrets.transit.decrypt_data(name=KEY, ciphertext=wrapped)
    assert len(base64.b64decode(plain["data"]["plaintext"])) == 32  # Vault unwraps it: the stack's data key
    assert "secure" in stack["config"]["gpuaas-infra:vault_token"]
    assert world.vault.root_token not in engine.stack_file.read_text()

    # `pulumi stack export`: secrets as ciphertext, no secret value of the world anywhere.
    exported = engine.export()
    provider = exported["deployment"]["secrets_providers"]  # the CLI's gocloud-based provider, "cloud"
    assert provider["type"] == "cloud" and provider["state"]["url"] == f"hashivault://{KEY}", provider
    assert provider["state"]["encryptedkey"] == stack["encryptedkey"]
    text = json.dumps(exported)
    assert _leaks(world, text) == []
    secrets = _secret_values(exported)
    assert secrets and all("ciphertext" in s and "plaintext" not in s for s in secrets)
    # With --show-secrets the CLI decrypts them through Vault.
    shown = _secret_values(engine.export(show_secrets=True))
    assert len(shown) == len(secrets) and all("plaintext" in s for s in shown)

    # Without a valid Vault token the data key can't be unwrapped, so no secret can be read.
    denied = Engine(REPO, "local", tmp_path / "backend", passphrase=None, secrets_provider=f"hashivault://{KEY}",
                    env={**vault_env, "VAULT_TOKEN": "not-a-vault-token"})
    with pytest.raises(CliError):
        denied.export(show_secrets=True)


def test_passphrase_stack_export_holds_no_secret_value(engine_factory: Any, world: LocalStack,
                                                      tmp_path: Path) -> None:
    engine = engine_factory(REPO, "local", config=world.stack_config(), backend=tmp_path / "backend")
    up = engine.up(timeout=900)
    assert up.ok, up.errors()
    exported = engine.export()
    assert exported["deployment"]["secrets_providers"]["type"] == "passphrase"
    assert _leaks(world, json.dumps(exported)) == []
    secrets = _secret_values(exported)
    assert secrets and all("ciphertext" in s for s in secrets)
    assert _leaks(world, engine.stack_file.read_text()) == []
