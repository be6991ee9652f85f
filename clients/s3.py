"""The one module that talks to the artifact store (S3; WEKA S3 in production) with boto3.

API:
    creds = s3_credentials(vault, "local/s3/bundle-publisher#credentials")   # from Vault, never inputs
    store = ArtifactStore(S3Location(endpoint_url=..., bucket=..., region=..., path_style=True), creds)
    store.check_bucket()                      # exists, reachable, versioning Enabled (else S3Error)
    store.head(key) -> StoredObject | None    # version_id, size, metadata of the latest version
    store.put(key, data, metadata) -> StoredObject
    store.get(key, version_id) -> bytes
    store.delete_version(key, version_id)
    store.presign_get(key, version_id, expires_in=900) -> str   # a short-lived GET URL (no request made)

Credentials: the Vault reference names a key holding a JSON object
`{"access_key_id": "...", "secret_access_key": "..."}` (one secret, one reference, like every other
credential in the environment). Errors (`S3Error`, `S3ErrorKind`) name endpoint, bucket and key and
what to do; never a credential.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError
from pydantic import BaseModel, ConfigDict, SecretStr

from clients.tls import untrusted, untrusted_hint
from clients.vault import VaultError, VaultErrorKind, VaultReader, parse_ref

__all__ = ["ArtifactStore", "S3Credentials", "S3Error", "S3ErrorKind", "S3Location", "StoredObject", "s3_credentials"]


class S3ErrorKind(StrEnum):
    BUCKET_MISSING = "bucket_missing"
    VERSIONING_OFF = "versioning_off"
    ACCESS_DENIED = "access_denied"
    OBJECT_MISSING = "object_missing"
    UNREACHABLE = "unreachable"
    TLS_UNTRUSTED = "tls_untrusted"
    FAILED = "failed"


_HINTS = {
    S3ErrorKind.BUCKET_MISSING: "create the bucket (with versioning) or fix artifact_store.bucket",
    S3ErrorKind.VERSIONING_OFF: "enable versioning on the bucket (aws s3api put-bucket-versioning ...)",
    S3ErrorKind.ACCESS_DENIED: "check the publisher credentials in Vault and the bucket policy",
    S3ErrorKind.OBJECT_MISSING: "re-run `up` to publish it again (the bundle is reproducible)",
    S3ErrorKind.UNREACHABLE: "check artifact_store.endpoint_url and that the store is up; nothing was changed",
    S3ErrorKind.TLS_UNTRUSTED: untrusted_hint("s3", None),
    S3ErrorKind.FAILED: "see the S3 error code; retry when the store is healthy",
}


class S3Error(Exception):
    def __init__(self, kind: S3ErrorKind, endpoint: str, where: str, detail: str = "", hint: str = "") -> None:
        self.kind = kind
        msg = f"S3 {kind.value.replace('_', ' ')}: {where} at {endpoint}"
        if detail:
            msg += f" ({detail})"
        super().__init__(f"{msg}; fix: {hint or _HINTS[kind]}")


class S3Location(BaseModel):
    model_config = ConfigDict(frozen=True)

    endpoint_url: str
    bucket: str
    region: str = "us-east-1"
    path_style: bool = True
    ca_bundle: str | None = None
    """PEM file of the CA that signs the store's certificate (default: the system trust store)."""


class S3Credentials(BaseModel):
    model_config = ConfigDict(frozen=True)

    access_key_id: SecretStr
    secret_access_key: SecretStr


class StoredObject(BaseModel):
    model_config = ConfigDict(frozen=True)

    bucket: str
    key: str
    version_id: str
    size: int
    metadata: dict[str, str] = {}


def s3_credentials(vault: VaultReader, ref: str) -> S3Credentials:
    blob = vault.read_json(ref)
    missing = [k for k in ("access_key_id", "secret_access_key") if k not in blob]
    if missing:
        path, key = parse_ref(ref)
        raise VaultError(VaultErrorKind.KEY_MISSING, vault.settings.address,
                         f"mount {vault.settings.kv_mount!r} path {path!r} key {key!r} member(s) {missing}")
    return S3Credentials(access_key_id=blob["access_key_id"], secret_access_key=blob["secret_access_key"])


class ArtifactStore:
    """One bucket of an S3-compatible store. Build per provider call (holds a boto3 client)."""

    def __init__(self, location: S3Location, credentials: S3Credentials) -> None:
        # boto3 is imported where a store is used, not at import: the provider modules that import this
        # one also run previews that never touch the store (issue 18: preview cost of a large stack).
        import boto3
        from botocore.config import Config

        self.location = location
        self._s3: Any = boto3.client(
            "s3",
            endpoint_url=location.endpoint_url,
            region_name=location.region,
            verify=location.ca_bundle or True,
            aws_access_key_id=credentials.access_key_id.get_secret_value(),
            aws_secret_access_key=credentials.secret_access_key.get_secret_value(),
            config=Config(
                signature_version="s3v4",  # presigned URLs too (SigV2 is deprecated)
                s3={"addressing_style": "path" if location.path_style else "virtual"},
                retries={"max_attempts": 3, "mode": "standard"},
                connect_timeout=5,
                read_timeout=30,
            ),
        )

    def __repr__(self) -> str:
        return f"ArtifactStore({self.location.endpoint_url!r}, bucket={self.location.bucket!r})"

    def _error(self, exc: Exception, where: str) -> S3Error:
        ep = self.location.endpoint_url
        if untrusted(exc):
            hint = untrusted_hint("s3", self.location.ca_bundle)
            return S3Error(S3ErrorKind.TLS_UNTRUSTED, ep, where, "certificate not trusted", hint)
        if isinstance(exc, EndpointConnectionError | BotoCoreError) and not isinstance(exc, ClientError):
            return S3Error(S3ErrorKind.UNREACHABLE, ep, where, type(exc).__name__)
        if isinstance(exc, ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchBucket",):
                return S3Error(S3ErrorKind.BUCKET_MISSING, ep, f"bucket {self.location.bucket!r}")
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
                return S3Error(S3ErrorKind.ACCESS_DENIED, ep, where, code)
            if code in ("NoSuchKey", "NoSuchVersion", "404"):
                return S3Error(S3ErrorKind.OBJECT_MISSING, ep, where, code)
            return S3Error(S3ErrorKind.FAILED, ep, where, code)
        return S3Error(S3ErrorKind.FAILED, ep, where, type(exc).__name__)

    def check_bucket(self) -> None:
        bucket = self.location.bucket
        where = f"bucket {bucket!r}"
        try:
            self._s3.head_bucket(Bucket=bucket)
            status = self._s3.get_bucket_versioning(Bucket=bucket).get("Status")
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket"):
                raise S3Error(S3ErrorKind.BUCKET_MISSING, self.location.endpoint_url, where) from None
            raise self._error(e, where) from None
        except (BotoCoreError, EndpointConnectionError) as e:
            raise self._error(e, where) from None
        if status != "Enabled":
            detail = f"status {status or 'never set'}"
            raise S3Error(S3ErrorKind.VERSIONING_OFF, self.location.endpoint_url, where, detail)

    def head(self, key: str) -> StoredObject | None:
        where = f"s3://{self.location.bucket}/{key}"
        try:
            r = self._s3.head_object(Bucket=self.location.bucket, Key=key)
        except ClientError as e:
            if str(e.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey"):
                return None
            raise self._error(e, where) from None
        except (BotoCoreError, EndpointConnectionError) as e:
            raise self._error(e, where) from None
        return StoredObject(bucket=self.location.bucket, key=key, version_id=r.get("VersionId") or "null",
                            size=int(r["ContentLength"]), metadata=dict(r.get("Metadata") or {}))

    def put(
        self, key: str, data: bytes, metadata: dict[str, str], content_type: str = "application/gzip"
    ) -> StoredObject:
        where = f"s3://{self.location.bucket}/{key}"
        try:
            r = self._s3.put_object(Bucket=self.location.bucket, Key=key, Body=data, Metadata=metadata,
                                    ContentType=content_type)
        except (ClientError, BotoCoreError, EndpointConnectionError) as e:
            raise self._error(e, where) from None
        return StoredObject(bucket=self.location.bucket, key=key, version_id=r.get("VersionId") or "null",
                            size=len(data), metadata=metadata)

    def get(self, key: str, version_id: str | None = None) -> bytes:
        where = f"s3://{self.location.bucket}/{key}" + (f"?versionId={version_id}" if version_id else "")
        kwargs: dict[str, str] = {"Bucket": self.location.bucket, "Key": key}
        if version_id and version_id != "null":
            kwargs["VersionId"] = version_id
        try:
            return bytes(self._s3.get_object(**kwargs)["Body"].read())
        except (ClientError, BotoCoreError, EndpointConnectionError) as e:
            raise self._error(e, where) from None

    def delete_version(self, key: str, version_id: str) -> None:
        where = f"s3://{self.location.bucket}/{key}?versionId={version_id}"
        kwargs: dict[str, str] = {"Bucket": self.location.bucket, "Key": key}
        if version_id != "null":
            kwargs["VersionId"] = version_id
        try:
            self._s3.delete_object(**kwargs)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchBucket", "NoSuchKey", "NoSuchVersion", "404"):
                return  # already gone: deleting is idempotent
            raise self._error(e, where) from None
        except (BotoCoreError, EndpointConnectionError) as e:
            raise self._error(e, where) from None

    def presign_get(self, key: str, version_id: str | None, expires_in: int) -> str:
        """A presigned GET URL of one object version, valid `expires_in` seconds (SigV4: at most 7 days).
        The URL is itself a short-lived credential: it goes to the one node that needs it, never to logs
        or state. Signing is local (no request to the store)."""
        params: dict[str, str] = {"Bucket": self.location.bucket, "Key": key}
        if version_id and version_id != "null":
            params["VersionId"] = version_id
        ttl = max(1, min(int(expires_in), 7 * 24 * 3600))
        try:
            return str(self._s3.generate_presigned_url("get_object", Params=params, ExpiresIn=ttl))
        except (ClientError, BotoCoreError) as e:
            raise self._error(e, f"s3://{self.location.bucket}/{key}") from None
