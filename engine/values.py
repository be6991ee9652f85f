"""Property values as they travel on the wire: JSON trees with Pulumi's signature dicts.

The engine keeps every property bag in the exact shape the gRPC ``Struct`` carries (see
``google.protobuf.json_format``): a secret is ``{SIG_KEY: SECRET_SIG, "value": v}``, an unknown is the
``UNKNOWN`` string. Working on that shape (rather than SDK ``Output`` objects) keeps what the provider
server receives byte-for-byte what the real engine would send.
"""

from __future__ import annotations

import threading
from typing import Any

from google.protobuf import json_format, struct_pb2

SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SECRET_MASK = "[secret]"
PROVIDER_KEY = "__provider"

Props = dict[str, Any]


def to_struct(props: Props) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    json_format.ParseDict(props, out)
    return out


def from_struct(struct: struct_pb2.Struct | None) -> Props:
    if struct is None:
        return {}
    return json_format.MessageToDict(struct)


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(SIG_KEY) == SECRET_SIG


def make_secret(value: Any) -> dict[str, Any]:
    if is_secret(value):
        return value
    return {SIG_KEY: SECRET_SIG, "value": value}


def strip_secrets(value: Any) -> Any:
    """Plaintext copy of ``value``: the dynamic provider server declares ``acceptSecrets: False``."""
    if is_secret(value):
        return strip_secrets(value.get("value"))
    if isinstance(value, dict):
        return {k: strip_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_secrets(v) for v in value]
    return value


def contains_secret(value: Any) -> bool:
    if is_secret(value):
        return True
    if isinstance(value, dict):
        return any(contains_secret(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_secret(v) for v in value)
    return False


def contains_unknown(value: Any) -> bool:
    if value == UNKNOWN:
        return True
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return False


def secret_keys(props: Props) -> set[str]:
    """Top-level keys whose value is, or contains, a secret."""
    return {k for k, v in props.items() if contains_secret(v)}


def remark_secrets(outputs: Props, secret_input_keys: set[str], additional: list[str]) -> Props:
    """Re-mark provider outputs as the real engine does: a top-level output is secret when a secret
    input has the same key, or when ``additional_secret_outputs`` names it."""
    wanted = set(secret_input_keys) | set(additional)
    return {k: (make_secret(v) if k in wanted and v is not None else v) for k, v in outputs.items()}


def mask_secrets(value: Any) -> Any:
    """Display form: every secret renders as ``[secret]`` (as ``pulumi preview --json`` does)."""
    if is_secret(value):
        return SECRET_MASK
    if isinstance(value, dict):
        return {k: mask_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_secrets(v) for v in value]
    return value


def values_equal(a: Any, b: Any) -> bool:
    """Equality after unwrapping secrets; ints and floats compare numerically (the wire has only floats)."""
    return strip_secrets(a) == strip_secrets(b)


def secret_strings(value: Any, inside: bool = False) -> set[str]:
    """Plaintext strings held inside secrets (``__provider`` excluded: it is a pickled class reference)."""
    if is_secret(value):
        return secret_strings(value.get("value"), True)
    if isinstance(value, dict):
        found: set[str] = set()
        for key, item in value.items():
            if key != PROVIDER_KEY:
                found |= secret_strings(item, inside)
        return found
    if isinstance(value, list):
        return set().union(*(secret_strings(v, inside) for v in value)) if value else set()
    if inside and isinstance(value, str) and len(value) >= 4:
        return {value}
    return set()


class Redactor:
    """Replaces every known secret plaintext in text bound for the user (diagnostics, provider output)."""

    def __init__(self) -> None:
        self._secrets: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def add(self, value: Any) -> None:
        found = secret_strings(value)
        if found - self._secrets:
            with self._lock:  # copy-on-write: readers on other threads always see a whole set
                self._secrets = self._secrets | found

    def __call__(self, text: str) -> str:
        for secret in sorted(self._secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, SECRET_MASK)
        return text
