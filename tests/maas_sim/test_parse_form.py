"""The simulator's fast multipart parser answers exactly what the email package does, for the
bodies python-libmaas sends, and steps aside for anything else."""

from __future__ import annotations

import io

import pytest
from maas.client.utils import prepare_payload

from simulators.maas.forms import _multipart_email, _multipart_fast, parse_form

BINARY = bytes(range(256)) * 40  # line breaks, NULs and high bytes, longer than one base64 line


def _libmaas(data: list[tuple[str, object]]) -> tuple[str, bytes]:
    _, body, headers = prepare_payload("op", "POST", "http://sim/MAAS/api/2.0/machines/", data)
    return dict(headers)["Content-Type"], body


@pytest.mark.parametrize("data", [
    [("mode", "STATIC"), ("subnet", "5"), ("ip_address", "172.16.0.21")],
    [("hostname", "h200-0001"), ("description", "rack 7, U12 — ünïcode"), ("empty", "")],
    [("mac_addresses", "52:54:00:00:00:01"), ("mac_addresses", "52:54:00:00:00:02")],
    [("user_data", BINARY), ("distro_series", "jammy")],
    [("script", io.BytesIO(b"#!/bin/sh\necho hi\n" * 200)), ("name", "x")],
    [("owner_data", "a=b\r\nc=d\n")],
])
def test_fast_path_matches_email_for_libmaas_bodies(data: list[tuple[str, object]]) -> None:
    content_type, body = _libmaas(data)
    fast = _multipart_fast(content_type, body)
    assert fast is not None
    assert fast == _multipart_email(content_type, body)


@pytest.mark.parametrize("body", [
    b"preamble\r\n--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nplain\r\n--B--\r\n",
    b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nplain\r\n--B--\r\n",
    b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Transfer-Encoding: quoted-printable\r\n"
    b"Content-Type: text/plain\r\n\r\nx=3Dy\r\n--B--\r\n",
    b"--B\nContent-Disposition: form-data; name=\"a\"\nContent-Transfer-Encoding: base64\n"
    b"Content-Type: text/plain\n\nYQ==\n--B--\n",
    b"--B\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Transfer-Encoding: base64\r\n"
    b"Content-Type: text/plain\r\n\r\nYQ=\r\n--B--\r\n",
])
def test_other_shapes_fall_back_to_email(body: bytes) -> None:
    content_type = "multipart/form-data; boundary=B"
    assert _multipart_fast(content_type, body) is None
    assert parse_form(content_type, body) == _multipart_email(content_type, body)
