"""The JSON state file: secrets encrypted, written atomically after every step.

On disk every secret is ``{SIG_KEY: SECRET_SIG, "ciphertext": "v1:..."}`` (the shape of Pulumi's own
checkpoints); in memory it is ``{SIG_KEY: SECRET_SIG, "value": ...}``. Plaintext never reaches the file.
Pending operations are recorded before a create/update/delete starts and cleared when it ends, so a run
killed mid-operation leaves a state the next run can resume from (like Pulumi's ``pending_operations``).
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from engine.crypto import Crypter, PassphraseError
from engine.graph import topo_order
from engine.model import PendingOperation, ResourceState
from engine.values import SECRET_SIG, SIG_KEY, is_secret

STATE_VERSION = 1


class StateError(Exception):
    """The state file cannot be used; the message names the file and what to do."""


class SecretsConfig(BaseModel):
    kdf: str = "scrypt"
    salt: str
    verifier: str


class StateDocument(BaseModel):
    version: int = STATE_VERSION
    project: str = ""
    stack: str = ""
    secrets: SecretsConfig | None = None
    resources: list[ResourceState] = Field(default_factory=list)
    pending_operations: list[PendingOperation] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(default_factory=dict)

    def by_urn(self) -> dict[str, ResourceState]:
        """Live resources by URN (replaced ones waiting for deletion, ``delete: true``, left out)."""
        return {r.urn: r for r in self.resources if not r.delete}


def _walk(value: Any, on_secret: Any) -> Any:
    if is_secret(value):
        return on_secret(value)
    if isinstance(value, dict):
        return {k: _walk(v, on_secret) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, on_secret) for v in value]
    return value


def encrypt_tree(value: Any, crypter: Crypter, cache: dict[str, str] | None = None) -> Any:
    """Ciphertext form of ``value``. With ``cache``, an unchanged secret keeps its ciphertext across saves
    (as Pulumi's caching crypter does), so a save costs one encryption per new secret, not per secret."""

    def enc(secret: dict[str, Any]) -> dict[str, Any]:
        if "ciphertext" in secret:
            return secret
        if cache is None:
            return {SIG_KEY: SECRET_SIG, "ciphertext": crypter.encrypt(secret.get("value"))}
        key = json.dumps(secret.get("value"), sort_keys=True)
        token = cache.get(key)
        if token is None:
            token = cache[key] = crypter.encrypt(secret.get("value"))
        return {SIG_KEY: SECRET_SIG, "ciphertext": token}

    return _walk(value, enc)


def decrypt_tree(value: Any, crypter: Crypter) -> Any:
    def dec(secret: dict[str, Any]) -> dict[str, Any]:
        if "ciphertext" not in secret:
            return secret
        return {SIG_KEY: SECRET_SIG, "value": crypter.decrypt(secret["ciphertext"])}

    return _walk(value, dec)


def _load_raw(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise StateError(f"{path}: no such state file (an `up` creates it)") from None
    except json.JSONDecodeError as exn:
        raise StateError(f"{path}: not valid JSON (line {exn.lineno}): restore it or delete it to start over") from None
    if not isinstance(raw, dict) or raw.get("version") != STATE_VERSION:
        raise StateError(f'{path}: not a state file of this engine (expected "version": {STATE_VERSION})')
    return raw


def _crypter_for(path: Path, doc: StateDocument, passphrase: str) -> Crypter:
    if doc.secrets is None:
        return Crypter.new(passphrase)
    crypter = Crypter(passphrase, base64.b64decode(doc.secrets.salt))
    try:
        crypter.check(doc.secrets.verifier)
    except PassphraseError:
        raise StateError(
            f"{path}: PULUMI_CONFIG_PASSPHRASE does not match the passphrase this state was written with"
        ) from None
    return crypter


def _decrypted(raw: dict[str, Any], crypter: Crypter) -> dict[str, Any]:
    parts = {
        key: raw.get(key, default) for key, default in (("resources", []), ("pending_operations", []), ("outputs", {}))
    }
    return {**raw, **decrypt_tree(parts, crypter)}


def _validate(path: Path, raw: dict[str, Any]) -> StateDocument:
    try:
        return StateDocument.model_validate(raw)
    except ValidationError as exn:
        first = exn.errors()[0]
        loc = "/".join(str(p) for p in first["loc"])
        raise StateError(f"{path}: invalid state at {loc}: {first['msg']}") from None


def read_state(path: str | os.PathLike[str], passphrase: str | None = None) -> StateDocument:
    """Read a state file. With ``passphrase`` secrets come back decrypted (``{sig, "value"}``),
    without it they stay as ciphertext, exactly as on disk."""
    path = Path(path)
    raw = _load_raw(path)
    doc = _validate(path, raw)
    if passphrase is None:
        return doc
    return _validate(path, _decrypted(raw, _crypter_for(path, doc, passphrase)))


def _render(header: dict[str, Any], lists: dict[str, list[str]], outputs: dict[str, Any]) -> str:
    """JSON with one top-level key, and one resource or pending operation, per line: readable and
    grep-able, yet encoded by the C encoder (``indent=`` would force the slow pure-Python one)."""
    lines = [f"{json.dumps(key)}: {json.dumps(value)}" for key, value in header.items()]
    for key, items in lists.items():
        body = "[\n  " + ",\n  ".join(items) + "\n]" if items else "[]"
        lines.append(f"{json.dumps(key)}: {body}")
    lines.append(f'"outputs": {json.dumps(outputs)}')
    return "{\n" + ",\n".join(lines) + "\n}\n"


class StateStore:
    """Owns one state file for one run: loads it once, then rewrites it atomically on every change."""

    def __init__(self, path: str | os.PathLike[str], passphrase: str, project: str, stack: str) -> None:
        self.path = Path(path)
        self.project = project
        self.stack = stack
        self._lock = threading.Lock()
        self._ciphertexts: dict[str, str] = {}
        self._encoded_cache: dict[int, tuple[ResourceState, str]] = {}
        if self.path.exists():
            raw = _load_raw(self.path)
            doc = _validate(self.path, raw)
            if doc.stack and doc.stack != stack:
                raise StateError(f"{self.path}: holds stack {doc.stack!r}, not {stack!r}; use another --state")
            self.crypter = _crypter_for(self.path, doc, passphrase)  # one key derivation per run
            self.initial = _validate(self.path, _decrypted(raw, self.crypter))
        else:
            self.crypter = Crypter.new(passphrase)
            self.initial = StateDocument(project=project, stack=stack)

    def _encoded(self, res: ResourceState) -> str:
        """One resource as encrypted JSON, cached per (immutable) resource object: a save re-encodes only
        the resources that changed since the last one."""
        hit = self._encoded_cache.get(id(res))
        if hit is not None and hit[0] is res:
            return hit[1]
        text = json.dumps(encrypt_tree(res.model_dump(mode="json"), self.crypter, self._ciphertexts))
        self._encoded_cache[id(res)] = (res, text)
        return text

    def save(self, resources: list[ResourceState], pending: list[PendingOperation], outputs: dict[str, Any]) -> None:
        ordered = topo_order(resources)
        header = StateDocument(
            project=self.project,
            stack=self.stack,
            secrets=SecretsConfig(salt=base64.b64encode(self.crypter.salt).decode(), verifier=self.crypter.verifier()),
        ).model_dump(mode="json", exclude={"resources", "pending_operations", "outputs"})
        rendered = [self._encoded(r) for r in ordered]
        self._encoded_cache = {id(r): self._encoded_cache[id(r)] for r in ordered}
        pending_json = [
            json.dumps(encrypt_tree(p.model_dump(mode="json"), self.crypter, self._ciphertexts)) for p in pending
        ]
        text = _render(
            header,
            {"resources": rendered, "pending_operations": pending_json},
            encrypt_tree(outputs, self.crypter, self._ciphertexts),
        )
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".state-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w") as fh:
                    fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
