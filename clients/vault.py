"""The one module that reads secrets from Vault / OpenBao (hvac, KV v2).

API:
    settings = VaultSettings(address=..., kv_mount="gpuaas", auth_method=VaultAuthMethod.TOKEN)
    creds = credentials_from_config(config)     # provider configure() config, else VAULT_* env vars
    vault = VaultReader(settings, creds)
    vault.read("prod/maas/dal1#api_key")        # -> pydantic.SecretStr (never printed by repr/str)
    vault.read_json("local/s3/bundle-publisher#credentials")   # -> dict[str, SecretStr]
    vault.require("prod/maas/dal1#api_key")     # raises VaultError if missing; returns nothing
    doc, version = vault.read_doc("leases/dal1/h200")        # a non-secret JSON document + its version
    vault.write_doc("leases/dal1/h200", doc, cas=version)    # False: someone wrote first (check-and-set)

Secrets are referenced by `VaultRef` strings `<path under the KV mount>#<key>` (environments/model.py).
Values are read at operation time and handed back as `SecretStr`; callers unwrap them only at the
point of use (an HTTP header, a boto3 client). Errors (`VaultError`, with a `VaultErrorKind`) name
the Vault address, mount, path and key, and what to do - never a value, never a token.

Credentials: `gpuaas-infra:vault_token`, or `gpuaas-infra:vault_role_id` + `gpuaas-infra:vault_secret_id`
from the provider's configure() config; if absent, VAULT_TOKEN / VAULT_ROLE_ID + VAULT_SECRET_ID.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, SecretStr
from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from clients.tls import untrusted, untrusted_hint

if TYPE_CHECKING:
    import hvac

# hvac and requests are imported where a secret is read, not at import: every provider module imports
# this one (through providers.common), and a preview of a large stack reads no secret (issue 18).

__all__ = [
    "VaultAuthMethod",
    "VaultCredentials",
    "VaultError",
    "VaultErrorKind",
    "VaultReader",
    "VaultSettings",
    "credentials_from_config",
    "parse_ref",
]

CONFIG_NS = "gpuaas-infra"


class VaultAuthMethod(StrEnum):
    """How the providers log in to Vault (the environment's `vault.auth_method` has the same values;
    clients are leaves, so this is the client's own enum)."""

    TOKEN = "token"
    APPROLE = "approle"


class VaultErrorKind(StrEnum):
    BAD_REFERENCE = "bad_reference"
    NO_CREDENTIALS = "no_credentials"
    AUTH_FAILED = "auth_failed"
    PATH_MISSING = "path_missing"
    KEY_MISSING = "key_missing"
    PERMISSION_DENIED = "permission_denied"
    SEALED = "sealed"
    UNREACHABLE = "unreachable"
    TLS_UNTRUSTED = "tls_untrusted"
    NOT_JSON = "not_json"


_HINTS: dict[VaultErrorKind, str] = {
    VaultErrorKind.BAD_REFERENCE: "write the reference as '<path under the KV mount>#<key>'",
    VaultErrorKind.NO_CREDENTIALS: (
        "set gpuaas-infra:vault_token (pulumi config set --secret) or VAULT_TOKEN, "
        "or vault_role_id + vault_secret_id for AppRole"
    ),
    VaultErrorKind.AUTH_FAILED: "check the Vault token / AppRole role_id and secret_id (they expire)",
    VaultErrorKind.PATH_MISSING: "write the secret there (vault kv put -mount=<mount> <path> <key>=...)",
    VaultErrorKind.KEY_MISSING: "add the key to the secret at that path (vault kv patch ...)",
    VaultErrorKind.PERMISSION_DENIED: "grant the token's policy 'read' on <mount>/data/<path>",
    VaultErrorKind.SEALED: "unseal Vault (vault operator unseal) and retry; nothing was changed",
    VaultErrorKind.UNREACHABLE: "check the Vault address and that Vault is running; nothing was changed",
    VaultErrorKind.TLS_UNTRUSTED: untrusted_hint("vault", None),
    VaultErrorKind.NOT_JSON: "store a JSON object under that key",
}
_DOC_HINT = (
    "grant the token's policy 'create', 'read' and 'update' on <mount>/data/<path> "
    "and 'read' on <mount>/metadata/<path>"
)


class VaultError(Exception):
    """A Vault failure: which kind, where (address, mount, path, key) and what to do. Never a value."""

    def __init__(self, kind: VaultErrorKind, address: str, where: str, detail: str = "", hint: str = "") -> None:
        self.kind = kind
        self.address = address
        self.where = where
        msg = f"Vault {kind.value.replace('_', ' ')}: {where} at {address}"
        if detail:
            msg += f" ({detail})"
        super().__init__(f"{msg}; fix: {hint or _HINTS[kind]}")


class VaultSettings(BaseModel):
    """Where Vault is (from the environment; not secret)."""

    model_config = ConfigDict(frozen=True)

    address: str
    kv_mount: str = "gpuaas"
    auth_method: VaultAuthMethod = VaultAuthMethod.TOKEN
    timeout_s: float = 5.0
    approle_mount: str = "approle"
    ca_bundle: str | None = None
    """PEM file of the CA that signs Vault's certificate (default: the system trust store)."""


class VaultCredentials(BaseModel):
    model_config = ConfigDict(frozen=True)

    token: SecretStr | None = None
    role_id: SecretStr | None = None
    secret_id: SecretStr | None = None


class _Getter(Protocol):
    def get(self, key: str) -> Any: ...


def credentials_from_config(config: _Getter | None = None) -> VaultCredentials:
    """Credentials from a provider's configure() config (namespaced keys), else the process environment."""
    config = config or {}

    def pick(key: str, env: str) -> SecretStr | None:
        value = config.get(f"{CONFIG_NS}:{key}") or config.get(key) or os.environ.get(env)
        return SecretStr(str(value)) if value else None

    return VaultCredentials(
        token=pick("vault_token", "VAULT_TOKEN"),
        role_id=pick("vault_role_id", "VAULT_ROLE_ID"),
        secret_id=pick("vault_secret_id", "VAULT_SECRET_ID"),
    )


def parse_ref(ref: str) -> tuple[str, str]:
    """'prod/maas/dal1#api_key' -> ('prod/maas/dal1', 'api_key')."""
    path, sep, key = ref.partition("#")
    if not sep or not path or not key or path.startswith("/"):
        # The reference is a location, not a value, so it is safe to show.
        raise VaultError(VaultErrorKind.BAD_REFERENCE, "-", f"reference {ref!r}")
    return path, key


# Connection failures are retried briefly (a restarting Vault); anything else is an answer, and an
# untrusted certificate stays untrusted.
def _connection_failure(e: BaseException) -> bool:
    import requests

    return isinstance(e, requests.ConnectionError | requests.Timeout) and not untrusted(e)


_transient = retry(
    retry=retry_if_exception(_connection_failure),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.1, max=1.0),
    reraise=True,
)


class VaultReader:
    """Reads KV v2 secrets. Cheap to build; build one per provider call (holds a login token)."""

    def __init__(self, settings: VaultSettings, credentials: VaultCredentials) -> None:
        self.settings = settings
        self._credentials = credentials
        self._client: hvac.Client | None = None

    def __repr__(self) -> str:  # never show credentials
        return f"VaultReader(address={self.settings.address!r}, mount={self.settings.kv_mount!r})"

    # ------------------------------------------------------------------------------------------
    def _where(self, path: str, key: str | None = None) -> str:
        loc = f"mount {self.settings.kv_mount!r} path {path!r}"
        return f"{loc} key {key!r}" if key else loc

    def _translate(self, exc: Exception, where: str) -> VaultError:
        import requests
        from hvac import exceptions as hv

        addr = self.settings.address
        if isinstance(exc, hv.VaultDown):
            return VaultError(VaultErrorKind.SEALED, addr, where)
        if isinstance(exc, hv.InvalidPath):
            return VaultError(VaultErrorKind.PATH_MISSING, addr, where)
        if isinstance(exc, hv.Forbidden):
            return VaultError(VaultErrorKind.PERMISSION_DENIED, addr, where)
        if isinstance(exc, hv.Unauthorized):
            return VaultError(VaultErrorKind.AUTH_FAILED, addr, where)
        if isinstance(exc, requests.RequestException) and untrusted(exc):
            hint = untrusted_hint("vault", self.settings.ca_bundle)
            return VaultError(VaultErrorKind.TLS_UNTRUSTED, addr, where, "certificate not trusted", hint)
        if isinstance(exc, requests.RequestException):
            return VaultError(VaultErrorKind.UNREACHABLE, addr, where, type(exc).__name__)
        return VaultError(VaultErrorKind.UNREACHABLE, addr, where, f"unexpected {type(exc).__name__}")

    def _login(self) -> hvac.Client:
        import hvac
        from hvac import exceptions as hv

        if self._client is not None:
            return self._client
        s, c = self.settings, self._credentials
        client = hvac.Client(url=s.address, timeout=s.timeout_s, verify=s.ca_bundle or True)
        if s.auth_method is VaultAuthMethod.APPROLE:
            if not (c.role_id and c.secret_id):
                raise VaultError(VaultErrorKind.NO_CREDENTIALS, s.address, "AppRole login")
            try:
                _transient(client.auth.approle.login)(
                    role_id=c.role_id.get_secret_value(),
                    secret_id=c.secret_id.get_secret_value(),
                    mount_point=s.approle_mount,
                )
            except hv.InvalidRequest as e:
                raise VaultError(VaultErrorKind.AUTH_FAILED, s.address, "AppRole login") from e
            except Exception as e:  # noqa: BLE001 - translated, re-raised once
                raise self._translate(e, "AppRole login") from e
        else:
            if not c.token:
                raise VaultError(VaultErrorKind.NO_CREDENTIALS, s.address, "token login")
            client.token = c.token.get_secret_value()
        self._client = client
        return client

    def read_path(self, path: str) -> dict[str, SecretStr]:
        """Every key of the latest version of a KV v2 secret."""
        client = self._login()
        where = self._where(path)
        try:
            resp = _transient(client.secrets.kv.v2.read_secret_version)(
                path=path, mount_point=self.settings.kv_mount, raise_on_deleted_version=True
            )
        except Exception as e:  # noqa: BLE001 - translated, re-raised once
            from hvac import exceptions as hv

            if isinstance(e, hv.Forbidden) and self.settings.auth_method is VaultAuthMethod.TOKEN:
                # KV v2 answers 403 for a bad token and for a missing grant alike; tell them apart.
                if not self._token_valid(client):
                    raise VaultError(VaultErrorKind.AUTH_FAILED, self.settings.address, where) from None
            raise self._translate(e, where) from None
        data = (resp or {}).get("data", {}).get("data") or {}
        return {k: SecretStr(v if isinstance(v, str) else json.dumps(v)) for k, v in data.items()}

    def client(self) -> hvac.Client:
        """The logged-in hvac client (raises VaultError when the login fails)."""
        return self._login()

    def token(self) -> SecretStr:
        """The token this reader logs in with (AppRole: the one the login returned), for a caller that must
        hand it on: the pipeline's `hashivault://` secrets provider reads VAULT_TOKEN only."""
        return SecretStr(str(self._login().token))

    @staticmethod
    def _token_valid(client: hvac.Client) -> bool:
        try:
            client.auth.token.lookup_self()
            return True
        except Exception:  # noqa: BLE001 - any failure means the token cannot be used
            return False

    def read(self, ref: str) -> SecretStr:
        """The value behind `<path>#<key>`."""
        path, key = parse_ref(ref)
        data = self.read_path(path)
        if key not in data:
            raise VaultError(VaultErrorKind.KEY_MISSING, self.settings.address, self._where(path, key))
        return data[key]

    def require(self, ref: str) -> None:
        """Fail unless the secret exists (check-time verification; the value is dropped)."""
        self.read(ref)

    def read_json(self, ref: str) -> dict[str, SecretStr]:
        """A key holding a JSON object (e.g. S3 credentials); each member wrapped as SecretStr."""
        raw = self.read(ref).get_secret_value()
        try:
            obj = json.loads(raw)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            path, key = parse_ref(ref)
            raise VaultError(VaultErrorKind.NOT_JSON, self.settings.address, self._where(path, key))
        return {k: SecretStr(str(v)) for k, v in obj.items()}

    # -- documents written with check-and-set (not secrets: the batch_max_parallel slot leases) ---------
    def read_doc(self, path: str) -> tuple[dict[str, Any] | None, int]:
        """The latest version of a KV v2 document and its version number: (None, 0) when it was never
        written, (None, v) when its latest version v was deleted (`vault kv delete`). Values as stored.
        The data read and the metadata read are two requests: a document created between them is read
        again, never reported as (None, v) of a live version (a CAS write on that would drop it)."""
        client = self._login()
        for _ in range(5):
            try:
                resp = _transient(client.secrets.kv.v2.read_secret_version)(
                    path=path, mount_point=self.settings.kv_mount, raise_on_deleted_version=True
                )
            except Exception as e:  # noqa: BLE001 - translated, re-raised once
                from hvac import exceptions as hv

                if not isinstance(e, hv.InvalidPath):
                    raise self._doc_error(e, path) from None
                version, live = self._current_version(client, path)
                if not live:
                    return None, version
                continue  # written since the data read: read it
            body = resp.get("data") or {}
            return body.get("data"), int((body.get("metadata") or {}).get("version") or 0)
        raise VaultError(VaultErrorKind.UNREACHABLE, self.settings.address, self._where(path),
                         "the document kept changing between its data and metadata reads", "retry")

    def _current_version(self, client: hvac.Client, path: str) -> tuple[int, bool]:
        """(latest version, whether it is live): 0 when never written (or its metadata was deleted)."""
        from hvac import exceptions as hv

        try:
            meta = _transient(client.secrets.kv.v2.read_secret_metadata)(path=path, mount_point=self.settings.kv_mount)
        except hv.InvalidPath:
            return 0, False
        except Exception as e:  # noqa: BLE001 - translated, re-raised once
            raise self._doc_error(e, path) from None
        data = meta.get("data") or {}
        current = int(data.get("current_version") or 0)
        latest = (data.get("versions") or {}).get(str(current)) or {}
        return current, current > 0 and not latest.get("deletion_time") and not latest.get("destroyed")

    def write_doc(self, path: str, doc: dict[str, Any], cas: int) -> bool:
        """Write `doc` as the next version only if the latest is still `cas` (0: only if none exists).
        False when another writer came first (re-read and decide again); a lost answer retried by the
        transport also ends as False, so the caller's re-read sees its own write."""
        client = self._login()
        try:
            _transient(client.secrets.kv.v2.create_or_update_secret)(
                path=path, secret=doc, cas=cas, mount_point=self.settings.kv_mount
            )
        except Exception as e:  # noqa: BLE001 - translated, re-raised once
            from hvac import exceptions as hv

            if isinstance(e, hv.InvalidRequest) and "check-and-set" in str(e):
                return False
            raise self._doc_error(e, path) from None
        return True

    def _doc_error(self, exc: Exception, path: str) -> VaultError:
        err = self._translate(exc, self._where(path))
        if err.kind is VaultErrorKind.PERMISSION_DENIED:
            return VaultError(err.kind, err.address, err.where, hint=_DOC_HINT)
        return err
