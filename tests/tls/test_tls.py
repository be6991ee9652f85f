"""clients/tls.py: one SSL context per CA bundle, a bundle that cannot be loaded refused naming it, and a certificate
verification failure found anywhere in an exception's chain. (How each client and doctor report these against
real TLS endpoints: tests/tls/test_private_ca.py.)"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from clients.tls import CaBundleError, trust, untrusted
from simulators.tls import PrivateCa


def test_a_ca_bundle_is_loaded_once_and_trusts_only_its_ca(tmp_path: Path) -> None:
    ca = PrivateCa(tmp_path)
    context = trust(str(ca.bundle))
    assert context is trust(str(ca.bundle))  # one load per bundle and process
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.get_ca_certs(binary_form=True) == [ca.certificate.public_bytes(serialization.Encoding.DER)]


@pytest.mark.parametrize(("kind", "reason"), [("no PEM", "SSLError"), ("a directory", "IsADirectoryError"),
                                              ("missing", "FileNotFoundError")])
def test_a_ca_bundle_that_cannot_be_loaded_is_refused_naming_it(tmp_path: Path, kind: str, reason: str) -> None:
    path = tmp_path / "ca.pem"
    if kind == "no PEM":
        path.write_text("not a certificate\n")
    elif kind == "a directory":
        path.mkdir()
    with pytest.raises(CaBundleError) as caught:
        trust(str(path))
    e = caught.value
    assert (e.path, e.reason) == (str(path), reason)
    assert str(e) == f"CA bundle {path}: {reason}; fix: {e.fix}" and "PEM" in e.fix
    assert (e.detail, e.hint("s3")) == (f"CA bundle {path} unusable ({reason})", f"ca_bundles.s3: {e.fix}")
    assert isinstance(e, ValueError)  # what callers that predate the type catch


def test_a_verification_failure_is_found_at_any_depth_of_the_chain() -> None:
    failure = ssl.SSLCertVerificationError("certificate verify failed: unable to get local issuer certificate")
    try:
        try:
            raise failure
        except ssl.SSLError as inner:
            raise ConnectionError("connect failed") from inner
    except ConnectionError as outer:
        assert untrusted(outer)
    assert not untrusted(ConnectionError("connection refused"))
    assert not untrusted(None)
