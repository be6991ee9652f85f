"""`gpuaas-infra doctor` against the embedded services: green on a freshly seeded local stack, then
each fault injected in turn produces exactly its FAIL row with a fix hint, and no secret value
ever reaches the output."""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import SecretStr

from cli.doctor import Doctor, Row, Status, stack_config
from cli.main import main
from clients.platform.models import Role
from clients.vault import VaultAuthMethod, VaultCredentials
from components.settings import StackSettings
from environments import Environment
from simulators.localstack import LocalStack

KV = "gpuaas"


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    with LocalStack("local") as w:
        assert w.vault is not None
        monkeypatch.setenv("VAULT_TOKEN", w.vault.root_token)
        monkeypatch.delenv("VAULT_ROLE_ID", raising=False)
        monkeypatch.delenv("VAULT_SECRET_ID", raising=False)
        yield w


def doctor(
    world: LocalStack, capsys: pytest.CaptureFixture[str], secrets: list[str] | None = None, **override: str
) -> tuple[int, str]:
    """Runs the command as an operator would (Vault token from VAULT_TOKEN); exit code and output.
    `secrets`: the values to look for in the output (default: everything the world handed out)."""
    secrets = world.secret_values() if secrets is None else secrets
    assert len(secrets) >= 6  # the scan below must have something to find
    config = {k: v for k, v in world.stack_config().items() if not k.endswith(("vault_token", "time_scale"))}
    config.update({f"gpuaas-infra:embedded_{k}_url": v for k, v in override.items()})
    code = main(["doctor", "local", *(f"--config={k}={v}" for k, v in config.items())])
    captured = capsys.readouterr()
    out = captured.out + captured.err
    for secret in secrets:
        assert secret not in out, "a secret value reached the doctor's output"
    return code, out


def fails(out: str) -> list[tuple[str, str]]:
    """(the FAIL line, its fix line) pairs."""
    lines = out.splitlines()
    return [(line, lines[i + 1] if i + 1 < len(lines) else "") for i, line in enumerate(lines) if "  FAIL  " in line]


def test_a_freshly_seeded_local_stack_is_green(world: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = doctor(world, capsys)
    assert code == 0, out
    assert fails(out) == []
    for check in (
        "reachable",
        "vault auth",
        "vault entry",
        "maas version",
        "maas api key",
        "platform token",
        "platform contract",
        "app token",
        "s3 bucket",
    ):
        assert any(line.startswith(check) and "  OK  " in line for line in out.splitlines()), check
    assert "3.4.0" in out and "role platform_admin" in out and "versioning Enabled" in out
    assert out.count("vault entry") == 5


def _missing_entry(w: LocalStack) -> list[str]:
    assert w.vault is not None
    w.vault.client().secrets.kv.v2.delete_metadata_and_all_versions(path="local/platform/sa-proj-lab", mount_point=KV)
    return []


def _missing_key(w: LocalStack) -> list[str]:
    assert w.vault is not None
    w.vault.put_secret(KV, "local/maas/local", {"apikey": "a:b:c"})  # a typo in the key name
    return []


def _missing_json_member(w: LocalStack) -> list[str]:
    assert w.vault is not None
    w.vault.put_secret(KV, "local/s3/bundle-publisher", {"credentials": json.dumps({"access_key_id": "only-this"})})
    return ["only-this"]


def _wrong_maas_key(w: LocalStack) -> list[str]:
    assert w.vault is not None
    w.vault.put_secret(KV, "local/maas/local", {"api_key": "wrongconsumer:wrongtoken:wrongsecret"})
    return ["wrongconsumer:wrongtoken:wrongsecret", "wrongsecret"]


def _token_without_admin_role(w: LocalStack) -> list[str]:
    assert w.vault is not None and w.platform is not None
    project = next(iter(w.project_ids))
    sa = w.platform.issue_token(Role.SERVICE_ACCOUNT, project_id=project, name="not-an-admin")
    w.vault.put_secret(KV, "local/platform/admin", {"token": sa})
    return [sa]


def _expired_admin_token(w: LocalStack) -> list[str]:
    assert w.vault is not None and w.platform is not None
    token = w.platform.issue_token(Role.PLATFORM_ADMIN, ttl_s=60)
    w.vault.put_secret(KV, "local/platform/admin", {"token": token})
    w.platform.advance(61)
    return [token]


def _revoked_app_token(w: LocalStack) -> list[str]:
    assert w.vault is not None and w.platform is not None
    path = "local/platform/sa-proj-lab"
    token = w.vault.client().secrets.kv.v2.read_secret_version(path=path, mount_point=KV,
                                                               raise_on_deleted_version=True)["data"]["data"]["token"]
    w.platform.revoke_token(token)
    return []


def _app_token_of_another_project(w: LocalStack) -> list[str]:
    assert w.vault is not None and w.platform is not None
    tenant = w.platform.create_tenant("elsewhere")
    other = w.platform.issue_token(Role.SERVICE_ACCOUNT, project_id=w.platform.create_project(tenant, "elsewhere"))
    w.vault.put_secret(KV, "local/platform/sa-proj-lab", {"token": other})
    return [other]


def _bucket_without_versioning(w: LocalStack) -> list[str]:
    assert w.s3 is not None
    w.s3.client().put_bucket_versioning(
        Bucket=w.env.artifact_store.bucket, VersioningConfiguration={"Status": "Suspended"}
    )
    return []


FAULTS: list[tuple[str, Callable[[LocalStack], list[str]], str, str, str]] = [
    # id, inject, FAIL row must contain, ... and its detail, the fix hint must contain
    (
        "missing-entry",
        _missing_entry,
        "vault entry  local/platform/sa-proj-lab#token",
        "path missing",
        "vault kv put -mount=gpuaas local/platform/sa-proj-lab token=<bearer_token>",
    ),
    (
        "missing-key",
        _missing_key,
        "vault entry  local/maas/local#api_key",
        "key 'api_key' missing",
        "vault kv patch -mount=gpuaas local/maas/local api_key=",
    ),
    (
        "missing-json-member",
        _missing_json_member,
        "vault entry  local/s3/bundle-publisher#credentials",
        "secret_access_key",
        'JSON {"access_key_id", "secret_access_key"}',
    ),
    ("wrong-maas-key", _wrong_maas_key, "maas api key", "MAAS rejected the key", "local/maas/local#api_key"),
    (
        "no-admin-role",
        _token_without_admin_role,
        "platform token",
        "403 role_not_permitted",
        "lacks the platform_admin role",
    ),
    ("expired-token", _expired_admin_token, "platform token", "401 unauthenticated", "token_expired"),
    ("app-token-revoked", _revoked_app_token, "app token  slurm-local", "401 unauthenticated", "token_revoked"),
    (
        "app-token-other-project",
        _app_token_of_another_project,
        "app token  slurm-local",
        "403 project_boundary",
        "lacks access to project project-10ca1000000000a1",
    ),
    ("bucket-versioning-off", _bucket_without_versioning, "s3 bucket", "versioning_off", "enable versioning"),
]


@pytest.mark.parametrize(("inject", "row", "detail", "hint"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_each_fault_gives_exactly_its_fail_row_and_hint(
    world: LocalStack,
    capsys: pytest.CaptureFixture[str],
    inject: Callable[[LocalStack], list[str]],
    row: str,
    detail: str,
    hint: str,
) -> None:
    secrets = world.secret_values()
    code, out = doctor(world, capsys, secrets + inject(world))
    failed = fails(out)
    assert code == 1 and len(failed) == 1, out
    line, fix = failed[0]
    assert " ".join(row.split()) in " ".join(line.split()) and detail in line, out
    assert fix.strip().startswith("fix:") and hint in fix, out
    assert "1 FAIL" in out


def test_an_unreachable_endpoint_fails_its_row_and_skips_what_depends_on_it(
    world: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    code, out = doctor(world, capsys, platform=closed)
    failed = fails(out)
    assert code == 1 and len(failed) == 1, out
    assert failed[0][0].startswith("reachable") and f"platform {closed}" in failed[0][0]
    assert "fix: check the URL" in failed[0][1]
    skipped = [line for line in out.splitlines() if "  SKIP  " in line and line.startswith("platform")]
    assert len(skipped) == 2  # token and contract: not checked, not failed


def test_a_bad_vault_token_fails_auth_once_and_skips_every_entry(
    world: LocalStack, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_TOKEN", "hvs.not-a-token")
    code, out = doctor(world, capsys)
    failed = fails(out)
    assert code == 1 and len(failed) == 1 and failed[0][0].startswith("vault auth"), out
    assert sum("vault entry" in line and "  SKIP  " in line for line in out.splitlines()) == 5


@pytest.fixture
def untrusted_https() -> Iterator[str]:
    """An HTTPS server whose self-signed certificate nobody trusts."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    import datetime as dt
    import ipaddress
    import tempfile

    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    with tempfile.TemporaryDirectory() as tmp:
        pem = Path(tmp) / "server.pem"
        pem.write_bytes(
            cert.public_bytes(serialization.Encoding.PEM)
            + key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pem)

        class Quiet(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self.send_response(404)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"https://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()


def test_an_untrusted_certificate_is_a_tls_failure(
    world: LocalStack, capsys: pytest.CaptureFixture[str], untrusted_https: str
) -> None:
    code, out = doctor(world, capsys, platform=untrusted_https)
    failed = fails(out)
    assert code == 1 and len(failed) == 1, out
    assert failed[0][0].startswith("tls") and "certificate not trusted" in failed[0][0]
    assert "ca_bundles.platform" in failed[0][1]  # the fix names where the CA goes


def test_config_comes_from_the_stack_file_and_flags(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.x.yaml").write_text(
        "config:\n  gpuaas-infra:environment: local\n  gpuaas-infra:embedded_maas_url: http://a\n"
        "  gpuaas-infra:vault_token:\n    secure: AAAA\n"
    )
    got = stack_config("x", ["embedded_maas_url=http://b", "gpuaas-infra:embedded_s3_url=http://c"], tmp_path)
    assert got == {"environment": "local", "embedded_maas_url": "http://b", "embedded_s3_url": "http://c"}
    with pytest.raises(ValueError, match="key=value"):
        stack_config("x", ["embedded_maas_url"], tmp_path)


def test_unresolved_embedded_endpoints_fail_with_the_config_key_to_set(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAULT_TOKEN", "unused")
    assert main(["doctor", "local"]) == 1
    out = capsys.readouterr().out
    endpoint_fails = [line for line, _ in fails(out) if line.startswith("endpoint")]
    assert len(endpoint_fails) == 4 and "embedded_platform_url" in out
    assert main(["doctor", "local", "--config", "oops"]) == 2


def test_doctor_only_reads(world: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    """Every call it made is a read: MAAS handlers, platform operations, S3 objects, Vault versions."""
    assert world.maas and world.platform and world.s3 and world.vault
    bucket = world.env.artifact_store.bucket
    versions = {
        p: world.vault.client().secrets.kv.v2.read_secret_metadata(path=p, mount_point=KV)["data"]["current_version"]
        for p in ("local/maas/local", "local/platform/admin", "local/s3/bundle-publisher")
    }
    assert doctor(world, capsys)[0] == 0
    assert world.maas.admin.request_counts() == {
        "DescribeHandler": {"read": 1},
        "UsersHandler": {"whoami": 1},
        "VersionHandler": {"read": 1},
    }
    assert set(world.platform.store.calls) == {"listMaasSites", "listAppInstances"}
    assert world.platform.audit() == [] and world.platform.operations() == []
    assert world.s3.client().list_object_versions(Bucket=bucket).get("Versions") is None
    for path, version in versions.items():
        meta = world.vault.client().secrets.kv.v2.read_secret_metadata(path=path, mount_point=KV)
        assert meta["data"]["current_version"] == version


def _doctor_rows(world: LocalStack, env: Environment, credentials: VaultCredentials) -> list[Row]:
    config = {k.removeprefix("gpuaas-infra:"): v for k, v in world.stack_config().items() if "embedded" in k}
    return Doctor(env, StackSettings.from_config("local", config), credentials).run()


def _failed(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.status is Status.FAIL]


def test_approle_login_and_a_policy_missing_one_path(world: LocalStack) -> None:
    """The pipeline's AppRole can read every path but one: that entry fails with the grant to add."""
    assert world.vault is not None
    env = world.env.model_copy(
        update={"vault": world.env.vault.model_copy(update={"auth_method": VaultAuthMethod.APPROLE})}
    )
    granted = [f"{KV}/data/local/{p}" for p in ("maas/local", "platform/admin", "s3/bundle-publisher", "ssh/lab-admin")]
    role_id, secret_id = world.vault.approle(KV, policy_paths=granted)
    creds = VaultCredentials(role_id=SecretStr(role_id), secret_id=SecretStr(secret_id))
    rows = _doctor_rows(world, env, creds)
    auth = next(r for r in rows if r.check == "vault auth")
    assert auth.status is Status.OK and "approle" in auth.detail
    (only,) = _failed(rows)
    assert (only.check, only.target, only.detail) == (
        "vault entry",
        "local/platform/sa-proj-lab#token",
        "permission_denied",
    )
    assert "grant the token's policy 'read'" in only.hint
    bad = VaultCredentials(role_id=SecretStr(role_id), secret_id=SecretStr("not-the-secret-id"))
    (auth_fail,) = _failed(_doctor_rows(world, env, bad))
    assert auth_fail.check == "vault auth" and auth_fail.detail == "auth_failed"


def test_a_sealed_vault_is_reachable_but_fails_auth(world: LocalStack) -> None:
    assert world.vault is not None
    world.vault.seal()
    rows = _doctor_rows(world, world.env, VaultCredentials(token=SecretStr(world.vault.root_token)))
    (only,) = _failed(rows)
    assert (only.check, only.detail) == ("vault auth", "sealed") and "unseal" in only.hint
    assert any(r.check == "reachable" and r.target.startswith("vault") and r.status is Status.OK for r in rows)
