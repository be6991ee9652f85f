"""Encryption of secret values in the state file: AES-256-GCM, key from the passphrase via scrypt.

Mirrors Pulumi's passphrase secrets provider in spirit (per-state salt, a verifier so a wrong passphrase
fails loudly) without claiming format compatibility with it.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

# Used only when PULUMI_CONFIG_PASSPHRASE is unset (tests, throwaway stacks); documented in docs/engine.md.
TEST_PASSPHRASE = "gpuaas-infra-engine-test-passphrase"
_VERIFIER = "gpuaas-infra-engine-state"
_SCRYPT_N = 2**14


class PassphraseError(Exception):
    """The passphrase does not decrypt this state file."""


class Crypter:
    def __init__(self, passphrase: str, salt: bytes) -> None:
        key = Scrypt(salt=salt, length=32, n=_SCRYPT_N, r=8, p=1).derive(passphrase.encode())
        self._aead = AESGCM(key)
        self.salt = salt

    @classmethod
    def new(cls, passphrase: str) -> Crypter:
        return cls(passphrase, os.urandom(16))

    def encrypt(self, value: Any) -> str:
        nonce = os.urandom(12)
        ciphertext = self._aead.encrypt(nonce, json.dumps(value).encode(), None)
        return "v1:" + base64.b64encode(nonce).decode() + ":" + base64.b64encode(ciphertext).decode()

    def decrypt(self, token: str) -> Any:
        try:
            version, nonce, ciphertext = token.split(":")
            if version != "v1":
                raise ValueError(version)
            plain = self._aead.decrypt(base64.b64decode(nonce), base64.b64decode(ciphertext), None)
        except (ValueError, InvalidTag) as exn:
            raise PassphraseError("cannot decrypt a secret in the state file") from exn
        return json.loads(plain)

    def verifier(self) -> str:
        return self.encrypt(_VERIFIER)

    def check(self, verifier: str) -> None:
        if self.decrypt(verifier) != _VERIFIER:
            raise PassphraseError("state verifier mismatch")
