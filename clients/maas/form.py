"""A MAAS request's form body, as python-libmaas sends it, encoded without the email package.

python-libmaas 0.6.8 sends every PUT and POST as multipart/form-data with each part base64-encoded
(`maas.client.utils.multipart`), built and flattened through `email.mime` and `email.generator`: 1.7 ms of
CPU for a four-field `link_subnet` here, a fifth of the provider plugin's CPU while a pool onboards (eight
links per machine), all of it under the plugin's GIL beside the machines' other threads (issue 29). This
writes the same parts, with the same headers, content types and base64 transfer encoding, by joining bytes.

Only the shapes the provider sends are written here: text, bytes, integers, booleans, None and lists of them
(`plain_form`). Anything else (a file, an opener) goes through the library's own encoder, so nothing the
library accepts is refused or sent differently in meaning (tests/maas_sim/test_form.py parses both).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["encode_form", "plain_form"]

_OCTETS = b"Content-Type: application/octet-stream\r\n"
_TEXT = b'Content-Type: text/plain; charset="utf-8"\r\n'
_COMMON = b"MIME-Version: 1.0\r\nContent-Transfer-Encoding: base64\r\n"


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, bytes, int))  # bool is an int


def plain_form(data: Mapping[str, Any]) -> bool:
    """Whether `encode_form` writes this form: ASCII names without quotes or backslashes, and values that
    are text, bytes, integers, booleans, None or lists and tuples of those."""
    for name, value in data.items():
        if not name.isascii() or '"' in name or "\\" in name or "\r" in name or "\n" in name:
            return False
        if not (_scalar(value) or (isinstance(value, (list, tuple)) and all(_scalar(v) for v in value))):
            return False
    return True


def _parts(data: Mapping[str, Any]) -> Iterator[tuple[str, bytes, bytes]]:
    """(name, content-type header, content) per part, in libmaas' order: a list is one part per item."""
    for name, value in data.items():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, str):
                yield name, _TEXT, item.encode("utf-8")
            elif item is None:
                yield name, _OCTETS, b""
            elif isinstance(item, bool):
                yield name, _OCTETS, b"true" if item else b"false"
            elif isinstance(item, int):
                yield name, _OCTETS, b"%d" % item
            else:
                yield name, _OCTETS, item


def encode_form(data: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
    """(body, headers) of the multipart form libmaas would send for `data` (which `plain_form` accepts):
    the headers are its Content-Type (with the boundary), MIME-Version and Content-Length."""
    # Base64 never holds "-", and names are plain ASCII without quotes: the boundary cannot occur inside.
    boundary = f"gpuaas-{secrets.token_hex(16)}".encode()
    delimiter = b"--" + boundary + b"\r\n"
    chunks: list[bytes] = []
    for name, content_type, content in _parts(data):
        chunks += (delimiter, content_type, _COMMON, b'Content-Disposition: form-data; name="', name.encode(),
                   b'"\r\n\r\n', base64.encodebytes(content).replace(b"\n", b"\r\n"), b"\r\n")
    if not chunks:  # libmaas sends an empty form as one blank part, so that MAAS (Piston) sees a body
        chunks.append(delimiter + b"\r\n")
    chunks.append(b"--" + boundary + b"--")
    body = b"".join(chunks)
    return body, {"Content-Type": f'multipart/form-data; boundary="{boundary.decode()}"', "MIME-Version": "1.0",
                  "Content-Length": str(len(body))}
