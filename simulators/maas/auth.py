"""OAuth1 PLAINTEXT API keys, issued by the simulator, checked like MAAS's piston auth does.

A MAAS API key is `consumer_key:token_key:token_secret` (the consumer secret is empty), and
python-libmaas signs every call with `oauth_signature="&<token_secret>"`.
"""

from __future__ import annotations

import secrets
import string
import threading
from dataclasses import dataclass
from urllib.parse import unquote

from oauthlib.oauth1.rfc5849.utils import parse_authorization_header

from . import errors

_ALNUM = string.ascii_letters + string.digits


@dataclass(frozen=True)
class ApiKey:
    consumer_key: str
    token_key: str
    token_secret: str
    user: str = "admin"
    name: str = "MAAS consumer"

    @property
    def text(self) -> str:
        return f"{self.consumer_key}:{self.token_key}:{self.token_secret}"

    def __repr__(self) -> str:  # never print the secret
        return f"ApiKey(consumer_key={self.consumer_key!r}, token_key={self.token_key!r}, user={self.user!r})"

    @classmethod
    def generate(cls, user: str = "admin") -> ApiKey:
        def rand(n: int) -> str:
            return "".join(secrets.choice(_ALNUM) for _ in range(n))

        return cls(rand(18), rand(18), rand(32), user)

    @classmethod
    def parse(cls, text: str, user: str = "admin") -> ApiKey:
        parts = text.split(":")
        if len(parts) != 3 or not all(parts):
            raise ValueError("a MAAS API key is consumer_key:token_key:token_secret")
        return cls(parts[0], parts[1], parts[2], user)


class KeyRing:
    def __init__(self, keys: list[ApiKey]) -> None:
        self._by_consumer = {k.consumer_key: k for k in keys}
        self._lock = threading.Lock()  # keys are added and deleted by requests while others authenticate

    def add(self, key: ApiKey) -> None:
        with self._lock:
            self._by_consumer[key.consumer_key] = key

    def of_user(self, user: str) -> list[ApiKey]:
        with self._lock:
            return [k for k in self._by_consumer.values() if k.user == user]

    def remove(self, user: str, token_key: str) -> bool:
        """Delete `user`'s token `token_key` and its consumer (MAAS's delete_authorisation_token)."""
        with self._lock:
            found = [c for c, k in self._by_consumer.items() if k.user == user and k.token_key == token_key]
            for consumer in found:
                del self._by_consumer[consumer]
        return bool(found)

    def authenticate(self, authorization: str | None) -> str | None:
        """The user an Authorization header authenticates, None if anonymous; raises 401/400."""
        if not authorization or not authorization.strip().lower().startswith("oauth"):
            return None
        try:
            params = dict(parse_authorization_header(authorization))
        except (ValueError, IndexError):
            raise errors.ApiError(400, "Bad Request: 'Malformed OAuth header'") from None
        required = ("oauth_consumer_key", "oauth_token", "oauth_signature_method", "oauth_signature")
        missing = [p for p in required if not params.get(p)]
        if missing:
            raise errors.ApiError(400, f"Bad Request: '{missing[0]} is missing'")
        key = self._by_consumer.get(params["oauth_consumer_key"])
        if key is None:
            raise errors.unauthorized("Authorization Error: Invalid API key.")
        if params["oauth_token"] != key.token_key:
            raise errors.unauthorized(f"Authorization Error: 'Invalid access token: {params['oauth_token']}'")
        if params["oauth_signature_method"].upper() != "PLAINTEXT":
            raise errors.unauthorized("Authorization Error: 'Signature method not supported by the simulator.'")
        # PLAINTEXT: signature = consumer_secret & token_secret, both percent-encoded.
        consumer_secret, _, token_secret = unquote(params["oauth_signature"]).partition("&")
        if consumer_secret or not secrets.compare_digest(token_secret, key.token_secret):
            # MAAS echoes the expected signature here; the simulator does not put secrets in bodies.
            raise errors.unauthorized("Authorization Error: 'Invalid signature.'")
        return key.user
