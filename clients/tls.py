"""TLS trust shared by every client: one SSL context per CA bundle, and telling an untrusted
certificate apart from an unreachable endpoint.

An endpoint behind a private CA (`*.gpuaas.internal`) is verified with the PEM bundle the environment
names for its kind (`ca_bundles.<kind>`); without one, the system trust store (`/etc/ssl/certs`) is
used, never a pinned bundle. `untrusted(exc)` finds a certificate verification failure anywhere in an
exception's chain, so each client can say "certificate not trusted" with the fix, not "unreachable".
"""

from __future__ import annotations

import functools
import ssl

__all__ = ["CaBundleError", "trust", "untrusted", "untrusted_hint"]

CA_BUNDLE_FIX = "name a PEM file of CA certificates"


class CaBundleError(ValueError):
    """A named CA bundle that cannot be loaded: its path, why (the OS's or OpenSSL's error name) and the fix."""

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.reason, self.fix = path, reason, CA_BUNDLE_FIX
        self.detail = f"CA bundle {path} unusable ({reason})"
        super().__init__(f"CA bundle {path}: {reason}; fix: {CA_BUNDLE_FIX}")

    def hint(self, kind: str) -> str:
        """What to change, at the environment's key naming the bundle for an endpoint kind."""
        return f"ca_bundles.{kind}: {self.fix}"


@functools.cache
def trust(ca_bundle: str | None = None) -> ssl.SSLContext:
    """A verifying client context: the named CA bundle only, else the system store. One load per
    bundle and process (~40 ms each; providers build a client per call)."""
    if ca_bundle is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=ca_bundle)
    except OSError as e:  # missing, a directory, unreadable, or no PEM of CAs (ssl.SSLError is an OSError)
        raise CaBundleError(ca_bundle, type(e).__name__) from None


def untrusted(exc: BaseException | None) -> bool:
    """True when a certificate verification failure caused `exc` (at any depth of its chain)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__ or next((a for a in exc.args if isinstance(a, BaseException)), None)
    return False


def untrusted_hint(kind: str, ca_bundle: str | None) -> str:
    trusted = f"the CA bundle {ca_bundle}" if ca_bundle else "the system trust store"
    return (f"the certificate is not signed by {trusted}: name the CA that signs the {kind} endpoint in the "
            f"environment's ca_bundles.{kind} (a PEM file), or fix the certificate's name")
