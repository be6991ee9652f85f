"""The private CAs a deployed node trusts from its first boot (docs/node-bootstrap.md, "Private CA on the node").

A node's first https calls (the bundle download from the artifact store, the enrollment and reports to the
platform, the node agent download the platform names) happen before anything but cloud-init has run, so the
CAs that sign those endpoints travel in the deploy user_data: `/etc/gpuaas/ca.pem`, the certificates of the
environment's `ca_bundles.platform` and `ca_bundles.s3` (each once), each preceded by a comment line the
launcher quotes when a certificate is not trusted (`# gpuaas-ca: <subject> (sha256 <fingerprint>) from
ca_bundles.s3`). Certificates only, never a key: the file is public (0644 on the node).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # cryptography loads when a bundle is made (a deploy), not in every provider plugin's imports
    from cryptography import x509

CA_PATH = "/etc/gpuaas/ca.pem"
MARK = "# gpuaas-ca:"


class NodeTrustError(Exception):
    """A CA bundle the environment names cannot be read as certificates (validation says so first: TLS001-TLS004)."""


def _certs(label: str, path: str) -> list[x509.Certificate]:
    from cryptography import x509

    file = Path(path)
    if not file.is_file():
        raise NodeTrustError(f"{label}: the CA bundle {path} does not exist; put the CA's PEM file there (TLS001)")
    try:
        return x509.load_pem_x509_certificates(file.read_bytes())
    except ValueError:
        raise NodeTrustError(f"{label}: {path} holds no PEM certificate; export the CA in PEM form (TLS002)") from None


def node_ca_bundle(named: Mapping[str, str | None]) -> str:
    """`{"ca_bundles.platform": <absolute path or None>, "ca_bundles.s3": ...}` -> the PEM text the node gets,
    each certificate once (by fingerprint) and named; "" when no CA is named (the node trusts its system store)."""
    from cryptography.hazmat.primitives import hashes, serialization

    seen: dict[str, tuple[x509.Certificate, list[str]]] = {}
    for label, path in named.items():
        if not path:
            continue
        for cert in _certs(label, path):
            fp = cert.fingerprint(hashes.SHA256()).hex()
            seen.setdefault(fp, (cert, []))[1].append(label)
    out = []
    for fp, (cert, labels) in seen.items():
        out.append(f"{MARK} {cert.subject.rfc4514_string()} (sha256 {fp[:16]}) from {', '.join(labels)}\n")
        out.append(cert.public_bytes(serialization.Encoding.PEM).decode())
    return "".join(out)
