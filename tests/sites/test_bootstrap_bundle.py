"""BundlePublisher and the BootstrapBundle provider methods against real moto S3 and OpenBao servers."""

from __future__ import annotations

import gzip
import io
import tarfile
import uuid
from typing import TypeVar

import pytest
from pydantic import SecretStr

from clients.s3 import S3Error, S3ErrorKind
from clients.vault import VaultCredentials, VaultError, VaultErrorKind
from environments.coded import CodedError
from providers.bootstrap_bundle import BootstrapBundleProvider
from providers.kind import UNKNOWN
from providers.sites.bundle import BundlePublisher, BundleSpec
from providers.sites.failures import BundleFail
from simulators.openbao import OpenBaoDevServer
from simulators.s3 import FAKE_SECRET_ACCESS_KEY, MotoS3Server

from .conftest import S3_CREDS_REF

E = TypeVar("E", bound=Exception)


def _source(err: CodedError, kind: type[E]) -> E:
    """The client error a coded error translates (it keeps it for callers that branch on its kind)."""
    assert isinstance(err.source, kind), err.source
    return err.source


def props(bao: OpenBaoDevServer, s3: MotoS3Server, bucket: str, **over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "name": "lab-h200", "site": "lab", "template_set": "h200",
        "packages": {"driver": ["nvidia-driver-550-server"], "runtime": [], "fabric": ["doca-ofed"]},
        "site_context": {"name": "lab"},
        "profile": {"fabric_mode": "roce", "storage_layout_profile": "h200-boss-flat", "require_hw_sync": True},
        "store": {"endpoint_url": s3.endpoint_url, "bucket": bucket, "credentials_path": S3_CREDS_REF},
        "vault": {"address": bao.address, "kv_mount": "gpuaas", "auth_method": "token"},
    }
    base.update(over)
    return base


def creds(bao: OpenBaoDevServer) -> VaultCredentials:
    return VaultCredentials(token=SecretStr(bao.root_token))


@pytest.fixture
def bucket(moto_s3: MotoS3Server) -> str:
    name = f"bundles-{uuid.uuid4().hex[:8]}"
    moto_s3.create_bucket(name, versioning=True)
    return name


def provider(bao: OpenBaoDevServer) -> BootstrapBundleProvider:
    p = BootstrapBundleProvider()
    p._credentials = creds(bao)  # what configure() sets from gpuaas-infra:vault_token
    return p


def test_publish_is_content_addressed_versioned_and_idempotent(
    openbao: OpenBaoDevServer, moto_s3: MotoS3Server, bucket: str
) -> None:
    spec = BundleSpec.model_validate(props(openbao, moto_s3, bucket))
    pub = BundlePublisher(spec, creds(openbao)).converge()
    assert pub.republished and pub.ref["key"] == f"bundles/lab/lab-h200/{pub.digest}.tar.gz"
    obj = moto_s3.client().get_object(Bucket=bucket, Key=pub.ref["key"], VersionId=pub.ref["version_id"])
    body = obj["Body"].read()
    assert obj["Metadata"] == {"digest": pub.digest, "site": "lab", "bundle": "lab-h200", "template-set": "h200"}
    assert len(body) == pub.size
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(body))) as tar:
        assert "steps/30-storage.sh" in tar.getnames()
    again = BundlePublisher(spec, creds(openbao)).converge()
    assert not again.republished and again.ref == pub.ref  # same digest: no new version
    versions = moto_s3.client().list_object_versions(Bucket=bucket)["Versions"]
    assert len(versions) == 1


def test_bucket_missing_is_a_clear_error(openbao: OpenBaoDevServer, moto_s3: MotoS3Server) -> None:
    spec = BundleSpec.model_validate(props(openbao, moto_s3, "no-such-bucket-here"))
    with pytest.raises(CodedError) as err:
        BundlePublisher(spec, creds(openbao)).converge()
    assert str(err.value).startswith("BND010 bundle ") and "'no-such-bucket-here'" in str(err.value)
    assert _source(err.value, S3Error).kind is S3ErrorKind.BUCKET_MISSING


def test_unversioned_bucket_is_refused(openbao: OpenBaoDevServer, moto_s3: MotoS3Server) -> None:
    name = f"plain-{uuid.uuid4().hex[:8]}"
    moto_s3.create_bucket(name, versioning=False)
    with pytest.raises(CodedError) as err:
        BundlePublisher(BundleSpec.model_validate(props(openbao, moto_s3, name)), creds(openbao)).converge()
    assert err.value.code is BundleFail.STORE and _source(err.value, S3Error).kind is S3ErrorKind.VERSIONING_OFF
    assert moto_s3.client().list_objects_v2(Bucket=name).get("KeyCount") == 0


def test_missing_vault_credentials_path_publishes_nothing(
    openbao: OpenBaoDevServer, moto_s3: MotoS3Server, bucket: str
) -> None:
    p = props(openbao, moto_s3, bucket, store={"endpoint_url": moto_s3.endpoint_url, "bucket": bucket,
                                               "credentials_path": "t/s3/nobody#credentials"})
    with pytest.raises(CodedError) as err:
        BundlePublisher(BundleSpec.model_validate(p), creds(openbao)).converge()
    assert err.value.code is BundleFail.VAULT and "t/s3/nobody" in str(err.value)
    assert _source(err.value, VaultError).kind is VaultErrorKind.PATH_MISSING
    assert moto_s3.client().list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_provider_check_adds_digest_and_rejects_bad_inputs(
    openbao: OpenBaoDevServer, moto_s3: MotoS3Server, bucket: str
) -> None:
    p = provider(openbao)
    res = p.check({}, props(openbao, moto_s3, bucket))
    assert not res.failures and len(res.inputs["digest"]) == 64
    assert "steps/30-storage.sh" in res.inputs["files"]
    # unknowns during preview are accepted untouched
    res = p.check({}, props(openbao, moto_s3, bucket, values={"x": UNKNOWN}))
    assert not res.failures and "digest" not in res.inputs
    # invalid name: the environment model's code for an invalid value
    res = p.check({}, props(openbao, moto_s3, bucket, name="Bad_Name"))
    assert res.failures and res.failures[0].reason.startswith("ENV004")
    res = p.check({}, props(openbao, moto_s3, bucket, template_set="missing-set"))
    assert res.failures and "template set 'missing-set' does not exist" in res.failures[0].reason


def test_provider_lifecycle_create_read_diff_update_delete(
    openbao: OpenBaoDevServer, moto_s3: MotoS3Server, bucket: str
) -> None:
    p = provider(openbao)
    news = p.check({}, props(openbao, moto_s3, bucket)).inputs
    created = p.create(news)
    outs = created.outs
    assert created.id == outs["digest"] and outs["ref"]["bucket"] == bucket
    assert FAKE_SECRET_ACCESS_KEY not in repr(outs)
    assert p.read(created.id, outs).id == created.id
    # no change: no diff
    assert not p.diff(created.id, outs, p.check(outs, props(openbao, moto_s3, bucket)).inputs).changes
    # a value change: in-place update, new digest, old object kept
    changed = p.check(outs, props(openbao, moto_s3, bucket, values={"expected_gpus": 4})).inputs
    d = p.diff(created.id, outs, changed)
    assert d.changes and not d.replaces
    updated = p.update(created.id, outs, changed).outs
    assert updated["digest"] != outs["digest"]
    keys = {o["Key"] for o in moto_s3.client().list_objects_v2(Bucket=bucket)["Contents"]}
    assert keys == {outs["ref"]["key"], updated["ref"]["key"]}
    # a rename replaces
    assert p.diff(created.id, updated, p.check(updated, props(openbao, moto_s3, bucket, name="x")).inputs).replaces
    # delete removes this version; read then reports it gone
    p.delete(created.id, updated)
    assert p.read(created.id, updated).id == ""
    p.delete(created.id, updated)  # idempotent


@pytest.mark.parametrize("tamper", ["replaced", "version_deleted"])
def test_a_tampered_or_deleted_pinned_version_is_drift_and_up_publishes_it_again(
    openbao: OpenBaoDevServer, moto_s3: MotoS3Server, bucket: str, tamper: str
) -> None:
    """Nodes fetch the pinned version. Bytes replaced under the same key and metadata (a new version, metadata
    copied), or the pinned version deleted: refresh finds the bundle gone, and the next up publishes a new
    version with the right bytes (never the tampered one), which the machines then deploy."""
    p = provider(openbao)
    outs = p.create(p.check({}, props(openbao, moto_s3, bucket)).inputs).outs
    key, version = outs["ref"]["key"], outs["ref"]["version_id"]
    s3 = moto_s3.client()
    if tamper == "replaced":
        s3.put_object(Bucket=bucket, Key=key, Body=b"not the bundle", Metadata={"digest": outs["digest"]})
        s3.delete_object(Bucket=bucket, Key=key, VersionId=version)
    else:
        s3.delete_object(Bucket=bucket, Key=key, VersionId=version)
    assert p.read(outs["digest"], outs).id == "", "refresh: drift (the resource is gone from state)"
    again = p.create(p.check({}, props(openbao, moto_s3, bucket)).inputs).outs
    assert again["digest"] == outs["digest"] and again["ref"]["version_id"] != version
    body = s3.get_object(Bucket=bucket, Key=key, VersionId=again["ref"]["version_id"])["Body"].read()
    assert body != b"not the bundle" and p.read(again["digest"], again).id == again["digest"]


def test_unreachable_vault_publishes_nothing(openbao: OpenBaoDevServer, moto_s3: MotoS3Server, bucket: str) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    p = props(openbao, moto_s3, bucket, vault={"address": dead, "kv_mount": "gpuaas", "auth_method": "token"})
    with pytest.raises(CodedError) as err:
        provider(openbao).create(provider(openbao).check({}, p).inputs)
    assert str(err.value).startswith("BND009 bundle ") and dead in str(err.value)
    assert _source(err.value, VaultError).kind is VaultErrorKind.UNREACHABLE
    assert openbao.root_token not in str(err.value)
    assert moto_s3.client().list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_configure_reads_namespaced_stack_config_and_provider_pickles_small(
    openbao: OpenBaoDevServer, moto_s3: MotoS3Server, bucket: str
) -> None:
    import dill
    from pulumi.dynamic import ConfigureRequest
    from pulumi.dynamic.config import Config

    from providers.roce_assignment import RoceAssignmentProvider
    from providers.site_profile import SiteProfileProvider

    p = BootstrapBundleProvider()
    p.configure(ConfigureRequest(Config({"gpuaas-infra:vault_token": openbao.root_token}, "gpuaas-infra")))
    assert p.create(p.check({}, props(openbao, moto_s3, bucket)).inputs).outs["digest"]
    # Pickled by reference (state stays small and readable); nothing on the instance before configure().
    for cls in (BootstrapBundleProvider, SiteProfileProvider, RoceAssignmentProvider):
        assert len(dill.dumps(cls(), recurse=True)) < 200 and cls.serialize_as_secret_always is False
