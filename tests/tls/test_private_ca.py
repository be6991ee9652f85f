"""Endpoints behind a private CA: a real CA (made here with `cryptography`) signs a certificate for
127.0.0.1, TLS fronts serve the embedded MAAS, OpenBao, platform and S3 with it, and every client works
when the environment's CA bundle is named and fails with "certificate not trusted" and the fix when
it is not (or when another CA is named)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from cli.doctor import Doctor, Status
from clients.maas import MaasError, MaasSiteClient
from clients.platform import PlatformApiError, PlatformClient, RetryPolicy
from clients.s3 import ArtifactStore, S3Error, S3ErrorKind, S3Location, s3_credentials
from clients.vault import VaultCredentials, VaultError, VaultErrorKind, VaultReader, VaultSettings
from components.settings import StackSettings
from environments.model import CaBundles
from simulators.localstack import LocalStack
from simulators.tls import PrivateCa, TlsFront

KV = "gpuaas"


class Site:
    """The embedded services behind TLS fronts signed by `ca`; `other` is a CA that signed nothing here."""

    def __init__(self, world: LocalStack, ca: PrivateCa, other: PrivateCa, fronts: dict[str, TlsFront]) -> None:
        self.world, self.ca, self.other = world, ca, other
        self.urls = {kind: front.url for kind, front in fronts.items()}

    def vault(self, ca_bundle: Path | None) -> VaultReader:
        assert self.world.vault is not None
        bundle = str(ca_bundle) if ca_bundle else None
        settings = VaultSettings(address=self.urls["vault"], kv_mount=KV, ca_bundle=bundle)
        return VaultReader(settings, VaultCredentials(token=SecretStr(self.world.vault.root_token)))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    ca = PrivateCa(tmp_path_factory.mktemp("ca"))
    other = PrivateCa(tmp_path_factory.mktemp("other-ca"), common_name="some other CA")
    cert, key = ca.issue("127.0.0.1")
    with LocalStack("local") as world:
        assert world.maas and world.platform and world.vault and world.s3
        backends = {"maas": world.maas.url, "platform": world.platform.url, "vault": world.vault.address,
                    "s3": world.s3.endpoint_url}
        fronts = {kind: TlsFront(url, cert, key) for kind, url in backends.items()}
        for front in fronts.values():
            front.__enter__()
        try:
            yield Site(world, ca, other, fronts)
        finally:
            for front in fronts.values():
                front.__exit__(None, None, None)


def test_the_fronts_serve_https_on_loopback(site: Site) -> None:
    for url in site.urls.values():
        assert url.startswith("https://127.0.0.1:")


def test_vault_with_the_ca_named_reads_and_without_it_says_untrusted(site: Site) -> None:
    assert site.vault(site.ca.bundle).read("local/platform/admin#token").get_secret_value()
    for bundle in (None, site.other.bundle):
        with pytest.raises(VaultError) as e:
            site.vault(bundle).read("local/platform/admin#token")
        assert e.value.kind is VaultErrorKind.TLS_UNTRUSTED
        assert "certificate not trusted" in str(e.value) and "ca_bundles.vault" in str(e.value)


def test_platform_with_the_ca_named_answers_and_without_it_says_untrusted(site: Site) -> None:
    token = site.world.platform_admin_token
    with PlatformClient(site.urls["platform"], token, ca_bundle=str(site.ca.bundle)) as api:
        assert isinstance(api.list_sites(), list)
    for bundle in (None, str(site.other.bundle)):
        with PlatformClient(site.urls["platform"], token, ca_bundle=bundle, retry=RetryPolicy(attempts=3)) as api:
            started = time.monotonic()
            with pytest.raises(PlatformApiError) as e:
                api.list_sites()
            assert time.monotonic() - started < 5, "an untrusted certificate is not retried"
        assert e.value.code == "tls_untrusted" and "ca_bundles.platform" in str(e.value)
        assert token not in str(e.value)


def test_s3_with_the_ca_named_checks_the_bucket_and_without_it_says_untrusted(site: Site) -> None:
    env = site.world.env
    creds = s3_credentials(site.vault(site.ca.bundle), env.artifact_store.credentials_path)

    def store(bundle: Path | None) -> ArtifactStore:
        loc = S3Location(endpoint_url=site.urls["s3"], bucket=env.artifact_store.bucket,
                         ca_bundle=str(bundle) if bundle else None)
        return ArtifactStore(loc, creds)

    store(site.ca.bundle).check_bucket()
    for bundle in (None, site.other.bundle):
        with pytest.raises(S3Error) as e:
            store(bundle).check_bucket()
        assert e.value.kind is S3ErrorKind.TLS_UNTRUSTED and "ca_bundles.s3" in str(e.value)
        assert creds.secret_access_key.get_secret_value() not in str(e.value)


def test_maas_with_the_ca_named_works_and_without_it_says_untrusted(site: Site) -> None:
    assert site.world.maas is not None
    key = site.world.maas.api_key
    client = MaasSiteClient(site.urls["maas"], key, ca_bundle=str(site.ca.bundle), site="local")
    assert client.whoami()
    assert isinstance(client.subnets(), list)  # an authenticated read through the verified session
    for bundle in (None, str(site.other.bundle)):
        started = time.monotonic()
        with pytest.raises(MaasError) as e:
            MaasSiteClient(site.urls["maas"], key, ca_bundle=bundle, site="local").whoami()
        assert time.monotonic() - started < 5, "an untrusted certificate is not retried as an outage"
        assert "certificate not trusted" in str(e.value) and "ca_bundles.maas" in str(e.value)
        assert key not in str(e.value)


def _doctor(site: Site, bundles: CaBundles, monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, str], Status]:
    assert site.world.vault is not None
    monkeypatch.setenv("VAULT_TOKEN", site.world.vault.root_token)
    sites = tuple(s.model_copy(update={"tls_verify": True}) for s in site.world.env.sites)  # as a real site
    env = site.world.env.model_copy(update={"ca_bundles": bundles, "sites": sites})
    config = {f"embedded_{kind}_url": url for kind, url in site.urls.items()}
    settings = StackSettings.from_config("local", {**config, "environment": "local"})
    creds = VaultCredentials(token=SecretStr(site.world.vault.root_token))
    return {(r.check, r.target.split()[0]): r.status for r in Doctor(env, settings, creds).run()}


def test_doctor_uses_the_named_ca(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = str(site.ca.bundle)
    rows = _doctor(site, CaBundles(maas=ca, vault=ca, platform=ca, s3=ca), monkeypatch)
    assert [k for k, s in rows.items() if s is Status.FAIL] == [], rows
    assert all(rows[("tls", t)] is Status.OK for t in ("vault", "platform", "s3", "maas[local]")), rows
    assert rows[("maas api key", "maas[local]")] is Status.OK
    assert rows[("s3 bucket", "s3://gpuaas-local-bundles")] is Status.OK


def test_doctor_without_the_ca_fails_tls_for_each_kind(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _doctor(site, CaBundles(), monkeypatch)
    failed = sorted(t for (check, t), s in rows.items() if s is Status.FAIL)
    assert failed == ["maas[local]", "platform", "s3", "vault"]
    assert all(check == "tls" for (check, _), s in rows.items() if s is Status.FAIL)
