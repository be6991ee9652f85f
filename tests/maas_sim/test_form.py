"""The MAAS request body (clients/maas/form.py): the form python-libmaas sends, without the email package.

The reference is the library itself: for any form the provider sends, the parts of our body and of
python-libmaas' body, read by the standard library's MIME parser (as Django's multipart parser reads them:
name, content type, charset, file name, decoded content), are the same, in the same order. The MAAS
simulator's parser reads our body on its fast path, the one for libmaas' own shape. Forms this encoder
does not write (a file) go through the library. And against the simulator, the client's writes take
this path and land.
"""

from __future__ import annotations

import email
import email.policy
import io
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from maas.client.bones import CallAPI
from maas.client.utils import multipart, prepare_payload

from clients.maas import MaasClient
from clients.maas.form import encode_form, plain_form
from simulators.maas import forms as sim_forms
from simulators.maas.simulator import MaasSimulator
from tests.fixtures.maas_sim import maas_sim, maas_sim_factory  # noqa: F401 - fixtures

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,20}", fullmatch=True)
SCALARS = st.one_of(st.text(max_size=300), st.binary(max_size=300), st.integers(), st.booleans(), st.none())
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4))
FORMS = st.dictionaries(NAMES, VALUES, max_size=8)


def _parts(body: bytes, headers: dict[str, str]) -> list[tuple[Any, ...]]:
    """Each part as a multipart/form-data reader sees it (the standard library's MIME parser)."""
    msg = email.message_from_bytes(f"Content-Type: {headers['Content-Type']}\r\n\r\n".encode() + body,
                                   policy=email.policy.HTTP)
    assert msg.is_multipart(), "not a multipart body"
    out = []
    for part in msg.iter_parts():
        assert part.get_content_disposition() == "form-data"
        assert part["Content-Transfer-Encoding"] == "base64"
        out.append((part.get_param("name", header="content-disposition"), part.get_content_type(),
                    part.get_content_charset(), part.get_filename(), part.get_payload(decode=True)))
    return out


def _libmaas(data: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    _uri, body, headers = prepare_payload("op", "POST", "http://maas/MAAS/api/2.0/machines/", data.items())
    return body, dict(headers)


@settings(max_examples=300, deadline=None)
@given(FORMS)
def test_every_plain_form_has_libmaas_parts(data: dict[str, Any]) -> None:
    assert plain_form(data)
    ours, ours_headers = encode_form(data)
    theirs, theirs_headers = _libmaas(data)
    if all(v == [] for v in data.values()):  # no part: one blank part (Piston reads no body as no data)
        boundary = ours_headers["Content-Type"].split('boundary="')[1].rstrip('"').encode()
        libmaas_boundary = theirs_headers["Content-Type"].split('boundary="')[1].rstrip('"').encode()
        assert ours == theirs.replace(libmaas_boundary, boundary)
        return
    assert _parts(ours, ours_headers) == _parts(theirs, theirs_headers)
    assert ours_headers["MIME-Version"] == "1.0" and int(ours_headers["Content-Length"]) == len(ours)
    # The simulator reads it on the fast path it keeps for libmaas' shape, to what its general parser reads.
    fast = sim_forms._multipart_fast(ours_headers["Content-Type"], ours)
    assert fast is not None, "the simulator's libmaas-shape parser refused the body"
    assert fast == sim_forms._multipart_email(ours_headers["Content-Type"], ours)


def test_forms_the_encoder_does_not_write_are_refused() -> None:
    assert not plain_form({"script": io.BytesIO(b"#!/bin/sh\n")})
    assert not plain_form({"opener": lambda: io.BytesIO(b"")})
    assert not plain_form({'na"me': "x"})
    assert not plain_form({"nämé": "x"})
    assert not plain_form({"nested": [["a"]]})
    assert not plain_form({"mapping": {"a": "b"}})
    assert plain_form({"ids": ["a", "b"], "flag": True, "n": 3, "none": None, "raw": b"\x00"})


@pytest.fixture
def client(maas_sim: MaasSimulator) -> MaasClient:  # noqa: F811 - fixture parameter
    return MaasClient(maas_sim.url, maas_sim.api_key, site="local")


def test_writes_use_the_encoder_and_land(client: MaasClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A POST with a list and a PUT, through the client: the library's encoder is never reached, the
    simulator reads them on its libmaas-shape path, and what was sent is what MAAS then holds."""

    def refused(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the email-package path was taken")

    monkeypatch.setattr(multipart, "build_multipart_message", refused)
    monkeypatch.setattr(sim_forms, "_multipart_email", refused)
    made = client.create(hostname="form-probe", pxe_mac="52:54:00:aa:bb:cc", power_type="manual",
                         power_address="", power_user=None, power_pass=None, commission=False)
    client.set_hostname(made.system_id, "form-probe-renamed")
    [seen] = client.by_hostnames(["form-probe-renamed"])
    assert seen.system_id == made.system_id
    assert client.by_macs(["52:54:00:aa:bb:cc"])[0].system_id == made.system_id


def test_a_form_with_a_file_goes_through_the_library(client: MaasClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """`prepare` hands a form it does not write to libmaas' own `prepare`, unchanged."""
    calls: list[Any] = []
    real = multipart.build_multipart_message

    def spy(data: Any) -> Any:
        calls.append(data)
        return real(data)

    monkeypatch.setattr(multipart, "build_multipart_message", spy)
    monkeypatch.setattr("maas.client.utils.build_multipart_message", spy)
    action = client._session().Machines.create
    uri, body, headers = action.bind().prepare({"script": io.BytesIO(b"#!/bin/sh\n")})
    assert calls, "the library's encoder was not used for a file"
    assert uri == client.url + "api/2.0/machines/" and "Authorization" in headers  # create: the POST without op
    [(name, _ctype, _charset, filename, content)] = _parts(body, headers)
    assert (name, filename, content) == ("script", "script", b"#!/bin/sh\n")


def test_the_uri_and_signature_are_libmaas(client: MaasClient) -> None:
    """The same URI (op in the query) and an OAuth PLAINTEXT signature of it, for a POST with an op (what
    the hot path sends: deploy, link_subnet), a POST without one (MAAS's create) and a PUT."""
    session = client._session()
    ops = []
    for action in (session.Machine.deploy, session.Machines.create, session.Machine.update):
        params = {"system_id": "abc123"} if "system_id" in action.handler.params else {}
        call = action.bind(**params)  # the session's VerifiedCall (clients/maas/verified.py)
        ours, theirs = call.prepare({"hostname": "h"}), CallAPI.prepare(call, {"hostname": "h"})
        assert ours[0] == theirs[0]
        ops.append((parse_qs(urlsplit(ours[0]).query).get("op") or [None])[0])
        for headers in (ours[2], theirs[2]):
            assert headers["Authorization"].startswith('OAuth realm="OAuth"')
            assert 'oauth_signature_method="PLAINTEXT"' in headers["Authorization"]
    assert ops == ["deploy", None, None]
