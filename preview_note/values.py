"""How one property value is shown in a note: secrets hidden, unknowns named, long values digested.

A note is an artifact posted where many people read it, so anything that is or looks like a secret
is never printed, even when the preview JSON carries it in plain text by mistake.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

# rpc.UNKNOWN in the SDK; the engine serializes computed values as this string.
UNKNOWN_SENTINEL = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
# apitype.SecretV1 signature key/value, for documents serialized with an encrypter.
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
ARCHIVE_SIG = "0def7320c3a5731c473e5ecbe6d01bc7"
SECRET_TEXT = "[secret]"
UNKNOWN_TEXT = "(known after apply)"
REDACTED_TEXT = "[redacted: looks like a secret]"
ABSENT = object()  # a property that is not there (before a create, after a delete)

_CLI_UNKNOWN = re.compile(r"^output<[A-Za-z0-9_.\[\]{}<>, ]*>$")
# Names that mean "this is a credential"; *_ref / *_path / *_digest name where a secret lives, not it.
_SECRET_NAME = re.compile(r"(password|passwd|secret|token|api_?key|private_?key|credential|oauth)", re.I)
_NOT_SECRET_NAME = re.compile(r"(_ref|_path|_digest|_id|_name|_mount|_role|_ttl)$", re.I)
_SECRET_VALUE = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----|\bhvs\.[A-Za-z0-9_-]{20,}|\bglpat-[A-Za-z0-9_-]{20}")
MAX_INLINE = 72


def is_secret(value: Any) -> bool:
    if value == SECRET_TEXT:
        return True
    return isinstance(value, dict) and value.get(SECRET_SIG_KEY) == SECRET_SIG


def is_special(value: Any) -> bool:
    """An asset, archive or secret in the engine's signature-keyed encoding: one value, not a map."""
    return isinstance(value, dict) and SECRET_SIG_KEY in value


def is_unknown(value: Any) -> bool:
    return isinstance(value, str) and (value == UNKNOWN_SENTINEL or bool(_CLI_UNKNOWN.match(value)))


def looks_secret(path: str, value: Any) -> bool:
    """A plaintext value that should have been a Pulumi secret (by its name or by its shape)."""
    if not isinstance(value, str) or not value or is_secret(value) or is_unknown(value):
        return False
    leaf = path.rsplit(".", 1)[-1].split("[", 1)[0]
    if _SECRET_NAME.search(leaf) and not _NOT_SECRET_NAME.search(leaf):
        return True
    return bool(_SECRET_VALUE.search(value))


def normalize(value: Any) -> Any:
    """Numbers arrive as floats from dynamic providers (4 -> 4.0); compare and show them as ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def digest_of(value: Any) -> str:
    data = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    raw = data.encode("utf-8")
    return f"[{len(raw)} bytes, sha256:{hashlib.sha256(raw).hexdigest()[:12]}]"


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested inputs as `a.b[0].c` -> leaf. Secrets, unknowns and scalar lists stay leaves."""
    out: dict[str, Any] = {}
    if isinstance(value, dict) and not is_special(value) and (value or not prefix):
        for key in sorted(value):
            if key.startswith("__"):  # __provider and friends: engine plumbing, not user inputs
                continue
            out.update(flatten(value[key], f"{prefix}.{key}" if prefix else key))
    elif isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]"))
    else:
        out[prefix] = normalize(value)
    return out


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def show(value: Any, path: str = "") -> str:
    """One value as inline Markdown."""
    if value is ABSENT:
        return "(none)"
    if is_secret(value):
        return SECRET_TEXT
    if is_unknown(value):
        return UNKNOWN_TEXT
    if is_special(value):  # asset or archive: its content, digested
        kind = "archive" if value.get(SECRET_SIG_KEY) == ARCHIVE_SIG else "asset"
        return f"[{kind} " + digest_of({k: v for k, v in value.items() if k != SECRET_SIG_KEY})[1:]
    if looks_secret(path, value):
        return REDACTED_TEXT
    value = normalize(value)
    if isinstance(value, list):
        value = [normalize(v) for v in value]
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        if len(value) > MAX_INLINE or "\n" in value:
            return digest_of(value)
        return _code(value) if value else '`""`'
    text = json.dumps(value, sort_keys=True, separators=(", ", ": "))
    if len(text) > MAX_INLINE:
        return digest_of(value)
    return _code(text)


def changed_paths(
    old: dict[str, Any] | None, new: dict[str, Any] | None, skip: frozenset[str] = frozenset()
) -> list[tuple[str, Any, Any]]:
    """(path, before, after) for every leaf that differs; `skip` drops paths (and below) shown elsewhere."""

    def kept(path: str) -> bool:
        return not any(path == p or path.startswith((p + ".", p + "[")) for p in skip)

    before = {k: v for k, v in flatten(old or {}).items() if kept(k)}
    after = {k: v for k, v in flatten(new or {}).items() if kept(k)}
    # A whole object known only after apply (the CLI sends `machine` or `bundles` as one unknown when any
    # part of it waits on another resource): one row for it, with what it was, not a removal per old leaf.
    unknown = [k for k, v in after.items() if is_unknown(v) and k not in before]
    for top in unknown:
        under = {k: before.pop(k) for k in [k for k in before if _below(k, top)]}
        if under:
            before[top] = {k[len(top):].lstrip("."): v for k, v in under.items()}
    rows = []
    for key in sorted(before.keys() | after.keys()):
        b, a = before.get(key, ABSENT), after.get(key, ABSENT)
        if b != a:
            rows.append((key, b, a))
    return rows


def _below(path: str, top: str) -> bool:
    return path.startswith((top + ".", top + "["))


def natural(text: str) -> list[Any]:
    """`gpu-a2` before `gpu-a10`."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]
