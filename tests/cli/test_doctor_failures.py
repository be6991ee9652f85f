"""The doctor's remaining failures, each produced once with its hint (test_doctor.py holds the others):
a named CA bundle it cannot load, an endpoint that accepts connections but never answers, a URL that is
not MAAS, no Vault credentials at all, a platform that answers outside the contract, a missing bucket,
S3 keys the store refuses, a Vault entry deleted mid-run.
docs/operations.md §3 lists every check; tests/cli/test_doctor.py's FAULTS and this file cover each FAIL."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import SecretStr

import cli.doctor
from cli.doctor import Doctor, Row, Status
from clients.vault import VaultCredentials
from components.settings import StackSettings
from environments import Environment
from environments.model import CaBundles
from simulators.localstack import LocalStack

from .test_doctor import doctor, fails, world  # noqa: F401 - the fixture is used by name


def _rows(w: LocalStack, env: Environment | None = None, creds: VaultCredentials | None = None,
          **override: str) -> list[Row]:
    assert w.vault is not None
    config = {k.removeprefix("gpuaas-infra:"): v for k, v in w.stack_config().items() if "embedded" in k}
    config.update({f"embedded_{k}_url": v for k, v in override.items()})
    creds = creds or VaultCredentials(token=SecretStr(w.vault.root_token))
    return Doctor(env or w.env, StackSettings.from_config("local", config), creds).run()


def _failed(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.status is Status.FAIL]


class _Answer(BaseHTTPRequestHandler):
    body = b""
    content_type = "text/html"
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(self.status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[object]:
    """serve(body, content_type, status=200) -> the URL of a 127.0.0.1 server answering every GET so."""
    servers: list[ThreadingHTTPServer] = []

    def start(body: bytes, content_type: str, status: int = 200) -> str:
        handler = type("H", (_Answer,), {"body": body, "content_type": content_type, "status": status})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_a_ca_bundle_it_cannot_load_fails_tls_with_the_fix(world: LocalStack, tmp_path: Path) -> None:  # noqa: F811
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n")
    rows = _rows(world, world.env.model_copy(update={"ca_bundles": CaBundles(vault=str(bad))}))
    (only,) = _failed(rows)
    assert (only.check, only.detail) == ("tls", f"CA bundle {bad} unusable (SSLError)")
    assert only.target.startswith("vault")
    assert only.hint == "ca_bundles.vault: name a PEM file of CA certificates", only


def test_an_endpoint_that_never_answers_fails_reachable(
    world: LocalStack, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    monkeypatch.setattr(cli.doctor, "TIMEOUT_S", 0.5)
    with socket.socket() as s:  # the kernel accepts the connection; nobody ever reads or answers
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        rows = _rows(world, s3=f"http://127.0.0.1:{s.getsockname()[1]}")
    (only,) = _failed(rows)
    assert only.check == "reachable" and only.target.startswith("s3") and only.detail.startswith("no answer")
    assert "check the service is up" in only.hint
    assert next(r for r in rows if r.check == "s3 bucket").status is Status.SKIP


def test_a_url_that_is_not_maas_fails_version_and_key_check(world: LocalStack, serve: object) -> None:  # noqa: F811
    url = serve(b"<html>a web page</html>", "text/html")  # type: ignore[operator]
    failed = {r.check: r for r in _failed(_rows(world, maas=url))}
    assert set(failed) == {"maas version", "maas api key"}, failed
    assert "not a MAAS version document" in failed["maas version"].detail
    assert "region API" in failed["maas version"].hint
    assert failed["maas api key"].detail.startswith("authenticated read failed")
    assert "MAAS region's health" in failed["maas api key"].hint


def test_no_vault_credentials_fail_auth_with_what_to_export(
    world: LocalStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    monkeypatch.delenv("VAULT_TOKEN")
    code, out = doctor(world, capsys)
    failed = fails(out)
    assert code == 1 and len(failed) == 1, out
    line, fix = failed[0]
    assert line.startswith("vault auth") and "no_credentials" in line, out
    assert "VAULT_TOKEN" in fix, out


def test_a_platform_outside_the_contract_fails_the_contract_row_only(
    world: LocalStack, serve: object  # noqa: F811
) -> None:
    url = serve(json.dumps({"unexpected": True}).encode(), "application/json")  # type: ignore[operator]
    rows = _rows(world, platform=url)
    (only,) = _failed(rows)
    assert only.check == "platform contract" and "align client and platform versions" in only.hint
    assert {r.check: r.status for r in rows if r.check in ("platform token", "app token")} == {
        "platform token": Status.SKIP, "app token": Status.SKIP}


def test_a_platform_error_fails_token_checks_with_its_answer(world: LocalStack, serve: object) -> None:  # noqa: F811
    body = json.dumps({"code": "internal", "message": "boom", "correlation_id": "req-doctor-500"}).encode()
    url = serve(body, "application/json", 500)  # type: ignore[operator]
    failed = {r.check: r for r in _failed(_rows(world, platform=url))}
    assert set(failed) == {"platform token", "app token"}, failed
    assert failed["platform token"].detail.startswith("500 ")
    assert all("see the platform's answer above; nothing was changed" == r.hint for r in failed.values())


def test_a_missing_bucket_fails_with_how_to_create_it(world: LocalStack) -> None:  # noqa: F811
    store = world.env.artifact_store.model_copy(update={"bucket": "gpuaas-no-such-bucket"})
    (only,) = _failed(_rows(world, world.env.model_copy(update={"artifact_store": store})))
    assert (only.check, only.target) == ("s3 bucket", "s3://gpuaas-no-such-bucket")
    assert only.detail.startswith("bucket_missing") and "create the bucket" in only.hint


def test_s3_keys_the_store_refuses_fail_the_bucket_row_with_the_fix(
    world: LocalStack, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """moto checks signatures only once told to (its INITIAL_NO_AUTH_ACTION_COUNT): then the publisher
    keys from Vault, unknown to the store's IAM, are refused as a real S3 refuses them."""
    from moto import settings as moto_settings

    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    (only,) = _failed(_rows(world))
    assert only.check == "s3 bucket" and only.detail.startswith("access_denied"), only
    assert "publisher credentials in Vault" in only.hint


def test_a_vault_entry_deleted_between_its_check_and_the_s3_read_fails_the_bucket_row(
    world: LocalStack, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """A hand change while doctor runs: the publisher keys are deleted from the real Vault after the
    entries were checked and before the S3 check reads them again."""
    assert world.vault is not None
    env = world.env
    path = env.artifact_store.credentials_path.partition("#")[0]
    real = cli.doctor.s3_credentials

    def deleted_first(reader, ref):  # noqa: ANN001, ANN202 - same signature as clients.s3.s3_credentials
        world.vault.client().secrets.kv.v2.delete_metadata_and_all_versions(path=path, mount_point=env.vault.kv_mount)
        return real(reader, ref)

    monkeypatch.setattr(cli.doctor, "s3_credentials", deleted_first)
    (only,) = _failed(_rows(world))
    assert only.check == "s3 bucket" and only.detail == "path_missing", only
    assert only.hint
