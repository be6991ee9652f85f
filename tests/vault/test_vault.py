"""clients/vault.py against a real OpenBao dev server: token + AppRole auth, KV v2, every failure kind."""

from __future__ import annotations

import json
import socket

import pytest
from pydantic import SecretStr

from clients.vault import (
    VaultAuthMethod,
    VaultCredentials,
    VaultError,
    VaultErrorKind,
    VaultReader,
    VaultSettings,
    credentials_from_config,
    parse_ref,
)
from simulators.openbao import OpenBaoDevServer

SECRET = "maas-key-8f3a:very-secret-value"


def reader(bao: OpenBaoDevServer, token: str | None = None, **kw: object) -> VaultReader:
    settings = VaultSettings(address=bao.address, kv_mount="gpuaas", **kw)  # type: ignore[arg-type]
    return VaultReader(settings, VaultCredentials(token=SecretStr(token or bao.root_token)))


def test_reads_a_key_as_secretstr_and_never_shows_it(openbao: OpenBaoDevServer) -> None:
    openbao.put_secret("gpuaas", "t/maas/site-a", {"api_key": SECRET})
    value = reader(openbao).read("t/maas/site-a#api_key")
    assert isinstance(value, SecretStr)
    assert value.get_secret_value() == SECRET
    assert SECRET not in repr(value) and SECRET not in str(value)
    assert SECRET not in repr(reader(openbao))


def test_approle_login_reads_the_same_secret(openbao: OpenBaoDevServer) -> None:
    openbao.put_secret("gpuaas", "t/approle/x", {"k": "v1"})
    role_id, secret_id = openbao.approle("gpuaas")
    r = VaultReader(
        VaultSettings(address=openbao.address, auth_method=VaultAuthMethod.APPROLE),
        VaultCredentials(role_id=SecretStr(role_id), secret_id=SecretStr(secret_id)),
    )
    assert r.read("t/approle/x#k").get_secret_value() == "v1"


def test_approle_with_a_wrong_secret_id_is_auth_failed(openbao: OpenBaoDevServer) -> None:
    role_id, _ = openbao.approle("gpuaas")
    r = VaultReader(
        VaultSettings(address=openbao.address, auth_method=VaultAuthMethod.APPROLE),
        VaultCredentials(role_id=SecretStr(role_id), secret_id=SecretStr("not-the-secret-id")),
    )
    with pytest.raises(VaultError) as err:
        r.read("t/approle/x#k")
    assert err.value.kind is VaultErrorKind.AUTH_FAILED
    assert "not-the-secret-id" not in str(err.value)


def test_missing_path_names_mount_and_path(openbao: OpenBaoDevServer) -> None:
    with pytest.raises(VaultError) as err:
        reader(openbao).read("t/nothing/here#api_key")
    assert err.value.kind is VaultErrorKind.PATH_MISSING
    assert "'t/nothing/here'" in str(err.value) and "'gpuaas'" in str(err.value)
    assert "fix:" in str(err.value)


def test_missing_key_names_the_key_not_the_others_values(openbao: OpenBaoDevServer) -> None:
    openbao.put_secret("gpuaas", "t/maas/site-b", {"api_key": SECRET})
    with pytest.raises(VaultError) as err:
        reader(openbao).read("t/maas/site-b#token")
    assert err.value.kind is VaultErrorKind.KEY_MISSING
    assert "'token'" in str(err.value) and SECRET not in str(err.value)


def test_permission_denied_is_told_apart_from_a_bad_token(openbao: OpenBaoDevServer) -> None:
    openbao.put_secret("gpuaas", "t/private/x", {"k": "v"})
    c = openbao.client()
    policy = 'path "gpuaas/data/other/*" { capabilities = ["read"] }'
    c.sys.create_or_update_policy(name="other-only", policy=policy)
    limited = c.auth.token.create(policies=["other-only"], ttl="5m")["auth"]["client_token"]
    with pytest.raises(VaultError) as err:
        reader(openbao, token=limited).read("t/private/x#k")
    assert err.value.kind is VaultErrorKind.PERMISSION_DENIED
    assert limited not in str(err.value)
    with pytest.raises(VaultError) as err:
        reader(openbao, token="hvs.not-a-real-token").read("t/private/x#k")
    assert err.value.kind is VaultErrorKind.AUTH_FAILED


def test_sealed_vault_is_a_clear_error_and_recovers(sealable_openbao: OpenBaoDevServer) -> None:
    sealable_openbao.put_secret("gpuaas", "t/s", {"k": "v"})
    sealable_openbao.seal()
    with pytest.raises(VaultError) as err:
        reader(sealable_openbao).read("t/s#k")
    assert err.value.kind is VaultErrorKind.SEALED
    assert "unseal" in str(err.value)
    sealable_openbao.unseal()
    assert reader(sealable_openbao).read("t/s#k").get_secret_value() == "v"


def test_unreachable_vault_is_a_clear_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = VaultReader(VaultSettings(address=f"http://127.0.0.1:{port}", timeout_s=1),
                    VaultCredentials(token=SecretStr("whatever")))
    with pytest.raises(VaultError) as err:
        r.read("t/x#k")
    assert err.value.kind is VaultErrorKind.UNREACHABLE
    assert f"127.0.0.1:{port}" in str(err.value) and "whatever" not in str(err.value)


def test_json_credentials(openbao: OpenBaoDevServer) -> None:
    blob = json.dumps({"access_key_id": "AK", "secret_access_key": "SK"})
    openbao.put_secret("gpuaas", "t/s3", {"credentials": blob})
    creds = reader(openbao).read_json("t/s3#credentials")
    assert creds["secret_access_key"].get_secret_value() == "SK"
    openbao.put_secret("gpuaas", "t/s3-bad", {"credentials": "plain-sentinel-7731"})
    with pytest.raises(VaultError) as err:
        reader(openbao).read_json("t/s3-bad#credentials")
    assert err.value.kind is VaultErrorKind.NOT_JSON and "plain-sentinel-7731" not in str(err.value)


def test_no_credentials_and_bad_refs() -> None:
    r = VaultReader(VaultSettings(address="http://127.0.0.1:1"), VaultCredentials())
    with pytest.raises(VaultError) as err:
        r.read("a/b#c")
    assert err.value.kind is VaultErrorKind.NO_CREDENTIALS
    for bad in ("no-key", "a/b#", "#k", "/abs#k"):
        with pytest.raises(VaultError) as err:
            parse_ref(bad)
        assert err.value.kind is VaultErrorKind.BAD_REFERENCE
    assert parse_ref("prod/maas/dal1#api_key") == ("prod/maas/dal1", "api_key")


def test_credentials_from_config_prefers_stack_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAULT_TOKEN", "from-env")
    monkeypatch.delenv("VAULT_ROLE_ID", raising=False)
    monkeypatch.delenv("VAULT_SECRET_ID", raising=False)
    from_config = credentials_from_config({"gpuaas-infra:vault_token": "from-config"})
    assert from_config.token.get_secret_value() == "from-config"  # type: ignore[union-attr]
    assert credentials_from_config({}).token.get_secret_value() == "from-env"  # type: ignore[union-attr]
    assert credentials_from_config({}).role_id is None
