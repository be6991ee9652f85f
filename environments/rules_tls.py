"""Rules about the private CAs an environment names (`ca_bundles`): the file exists, holds PEM
certificates only (never a private key), none has expired, and the kind has an https endpoint that
uses it. Registered in `rules.RULES`; `ca_paths.resolve_ca` is the one place a named bundle becomes a file."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

from cryptography import x509

from .ca_paths import REPO_ROOT, resolve_ca
from .findings import Code, Finding, Level, finding
from .model import Blueprint, CaBundles, EndpointKind, EnvironmentDocument

_MAX_BYTES = 1 << 20
_KEY_MARKER = b"PRIVATE KEY-----"
PLACEHOLDER_MARK = "placeholder: replace with the site CA"
"""In the subject of the CA certificate the repository ships (environments/ca/gpuaas-internal.pem), whose key
was never kept: a site replaces the file with its own CA's certificate."""


def ca_problem(file: Path) -> tuple[Code, str] | None:
    """What is wrong with a CA bundle file, if anything (the message never quotes the file's content)."""
    if not file.is_file():
        return Code.CA_BUNDLE_MISSING, f"{file} does not exist"
    data = file.read_bytes()[:_MAX_BYTES]
    if _KEY_MARKER in data:
        return Code.CA_BUNDLE_HAS_KEY, f"{file} holds a private key"
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        return Code.CA_BUNDLE_INVALID, f"{file} holds no PEM certificate"
    now = dt.datetime.now(dt.UTC)
    expired = [c.subject.rfc4514_string() for c in certs if c.not_valid_after_utc < now]
    if expired:
        return Code.CA_BUNDLE_EXPIRED, f"{file}: certificate {expired[0]} has expired"
    placeholder = [c.subject.rfc4514_string() for c in certs if PLACEHOLDER_MARK in c.subject.rfc4514_string()]
    if placeholder:
        return Code.CA_BUNDLE_PLACEHOLDER, (f"{file} is the repository's placeholder CA: no site certificate is "
                                            "signed by it, so every https call would be refused")
    return None


def _urls(doc: EnvironmentDocument, kind: EndpointKind) -> list[str]:
    if kind is EndpointKind.MAAS:
        return [s.maas_url for s in doc.sites if s.tls_verify]
    return [{EndpointKind.VAULT: doc.vault.address, EndpointKind.PLATFORM: doc.platform.url,
             EndpointKind.S3: doc.artifact_store.endpoint_url}[kind]]


def ca_bundles(doc: EnvironmentDocument, bp: Blueprint, file: str, root: Path = REPO_ROOT) -> Iterator[Finding]:
    named: CaBundles = doc.ca_bundles
    warned: set[str] = set()  # a placeholder named by several kinds is said once
    for kind in EndpointKind:
        path = named.of(kind)
        if path is None:
            continue
        where = f"ca_bundles.{kind.value}"
        problem = ca_problem(Path(resolve_ca(path, root) or ""))
        if problem is not None and problem[0] is Code.CA_BUNDLE_PLACEHOLDER:
            if path not in warned:
                kinds = [k.value for k in EndpointKind if named.of(k) == path]
                yield finding(problem[0], file, where, f"{problem[1]} (named for {', '.join(kinds)})",
                              level=Level.WARNING)
            warned.add(path)
        elif problem is not None:
            yield finding(problem[0], file, where, problem[1])
        if not any(u.startswith("https://") for u in _urls(doc, kind)):
            yield finding(Code.CA_BUNDLE_UNUSED, file, where,
                          f"no https {kind.value} endpoint verifies with this CA bundle", level=Level.WARNING)
