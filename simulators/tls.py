"""A private CA and a TLS front for the embedded services, so tests (and a newcomer) can reach them
as they would reach a site behind `*.gpuaas.internal`: https URLs, a CA bundle to name.

    ca = PrivateCa(tmp_dir)                  # ca.pem: the CA certificate (what an environment names)
    cert, key = ca.issue("127.0.0.1")        # a server certificate for 127.0.0.1 / localhost
    with TlsFront(world.platform.url, cert, key) as front:
        front.url                            # https://127.0.0.1:<ephemeral port>[/same path]

`TlsFront` terminates TLS on 127.0.0.1 (or `host`; an ephemeral port) and pipes bytes to the plain-HTTP service
behind it; it stops with its `with` block (connection threads notice within half a second).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import select
import socket
import ssl
import threading
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["PrivateCa", "TlsFront"]

_POLL_S = 0.5


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "gpuaas-infra tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class PrivateCa:
    """A CA key and self-signed certificate (EC P-256, one day), written to `directory/ca.pem`."""

    def __init__(self, directory: Path, common_name: str = "gpuaas internal test CA") -> None:
        self.directory = directory
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.bundle = directory / "ca.pem"
        self.bundle.write_bytes(self.certificate.public_bytes(serialization.Encoding.PEM))

    def issue(self, host: str = "127.0.0.1") -> tuple[Path, Path]:
        """A server certificate for `host` (an IP or a DNS name; localhost too): (cert.pem, key.pem)."""
        key = ec.generate_private_key(ec.SECP256R1())
        try:
            names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(host))]
        except ValueError:
            names = [x509.DNSName(host)]
        names.append(x509.DNSName("localhost"))
        now = dt.datetime.now(dt.UTC)
        ca_ski = self.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(host))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        cert_file, key_file = self.directory / f"{host}.crt", self.directory / f"{host}.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.touch(mode=0o600)
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return cert_file, key_file


class TlsFront:
    """TLS on 127.0.0.1:<ephemeral> in front of one plain-HTTP service (bytes piped both ways)."""

    def __init__(self, backend_url: str, cert_file: Path, key_file: Path, host: str = "127.0.0.1") -> None:
        """`host`: the address to listen on (a lab network's gateway, for nodes: `PrivateCa.issue(host)`)."""
        self.host = host
        parts = urlsplit(backend_url)
        self._backend = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._path = parts.path.rstrip("/")
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(cert_file, key_file)
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self.url = ""

    def __enter__(self) -> TlsFront:
        listener = socket.create_server((self.host, 0))
        listener.settimeout(_POLL_S)
        self._listener = listener
        self.url = f"https://{self.host}:{listener.getsockname()[1]}{self._path}"
        threading.Thread(target=self._accept, name="tls-front", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by __exit__
            threading.Thread(target=self._serve, args=(conn,), name="tls-front-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            tls = self._context.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError):  # the client refused our certificate: that is what tests look for
            conn.close()
            return
        try:
            with tls, socket.create_connection(self._backend, timeout=10) as plain:
                self._pipe(tls, plain)
        except OSError:
            pass

    def _pipe(self, tls: ssl.SSLSocket, plain: socket.socket) -> None:
        peers: dict[socket.socket, socket.socket] = {tls: plain, plain: tls}
        while not self._stop.is_set():
            ready = [tls] if tls.pending() else select.select(list(peers), [], [], _POLL_S)[0]
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                peers[sock].sendall(data)
