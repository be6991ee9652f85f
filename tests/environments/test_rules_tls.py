"""`ca_bundles` validation: the named file exists, holds PEM certificates only, none expired, and the
kind has an https endpoint to verify; each finding has its code, its path and a fix."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from environments import validate_environment
from environments.findings import Code, Level
from environments.loader import ENVIRONMENTS_DIR
from simulators.tls import PrivateCa


def _validate(tmp_path: Path, bundles: dict[str, str], https: bool = True) -> list[tuple[Code, Level, str, str]]:
    doc = yaml.safe_load((ENVIRONMENTS_DIR / "dev.yaml").read_text())
    doc["ca_bundles"] = bundles
    if not https:
        doc["vault"]["address"] = "http://vault.gpuaas.internal:8200"
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, found = validate_environment(path)
    return [(f.code, f.level, f.path, f.hint) for f in found if f.path.startswith("ca_bundles")]


def _expired_cert(tmp_path: Path) -> Path:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "old CA")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - dt.timedelta(days=30)).not_valid_after(now - dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    out = tmp_path / "old.pem"
    out.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return out


def test_a_good_bundle_validates(tmp_path: Path) -> None:
    ca = PrivateCa(tmp_path)
    assert _validate(tmp_path, {k: str(ca.bundle) for k in ("vault", "platform", "s3")}) == []
    # dev's MAAS region is plain http: a MAAS bundle has nothing to verify
    assert [f[0] for f in _validate(tmp_path, {"maas": str(ca.bundle)})] == [Code.CA_BUNDLE_UNUSED]


@pytest.mark.parametrize("case", ["missing", "not pem", "with key", "expired"])
def test_each_bad_bundle_has_its_code_path_and_fix(tmp_path: Path, case: str) -> None:
    ca = PrivateCa(tmp_path)
    cert, key = ca.issue("vault.gpuaas.internal")
    files = {
        "missing": (tmp_path / "nowhere.pem", Code.CA_BUNDLE_MISSING),
        "not pem": (tmp_path / "junk.pem", Code.CA_BUNDLE_INVALID),
        "with key": (tmp_path / "both.pem", Code.CA_BUNDLE_HAS_KEY),
        "expired": (_expired_cert(tmp_path), Code.CA_BUNDLE_EXPIRED),
    }
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    (tmp_path / "both.pem").write_bytes(cert.read_bytes() + key.read_bytes())
    path, code = files[case]
    found = _validate(tmp_path, {"vault": str(path)})
    assert [(c, lvl, p) for c, lvl, p, _ in found] == [(code, Level.ERROR, "ca_bundles.vault")]
    assert found[0][3]  # a fix hint
    if case == "with key":
        assert "PRIVATE KEY" not in str(found)


def test_a_bundle_for_plain_http_endpoints_is_a_warning(tmp_path: Path) -> None:
    ca = PrivateCa(tmp_path)
    found = _validate(tmp_path, {"vault": str(ca.bundle)}, https=False)
    assert [(c, lvl, p) for c, lvl, p, _ in found] == [(Code.CA_BUNDLE_UNUSED, Level.WARNING, "ca_bundles.vault")]


@pytest.mark.parametrize("bad", ["ca.txt", "../ca.pem", "ca//x.pem"])
def test_a_bundle_name_is_a_pem_path(tmp_path: Path, bad: str) -> None:
    doc = yaml.safe_load((ENVIRONMENTS_DIR / "dev.yaml").read_text())
    doc["ca_bundles"] = {"maas": bad}
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump(doc))
    _, found = validate_environment(path)
    assert [(f.code, f.path) for f in found] == [(Code.INVALID_VALUE, "ca_bundles.maas")]

