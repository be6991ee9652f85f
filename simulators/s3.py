"""A throw-away S3 endpoint (moto's ThreadedMotoServer) for tests and the demo.

    with MotoS3Server() as s3:               # binds 127.0.0.1 on a free port, ready when returned
        s3.endpoint_url                      # "http://127.0.0.1:41235"
        s3.client().create_bucket(Bucket="b")  # boto3 client, path-style, like WEKA S3
        s3.create_bucket("b", versioning=True)

moto keeps its state per process and does not enforce signatures, so any access key works; we still
use distinct fake keys so the code paths that read them from Vault are exercised. Presigned URLs are
checked as S3 checks them (moto does not): past `X-Amz-Date` + `X-Amz-Expires` (shifted by `skew_s`,
so a test can age a URL, plus `client_skew_s[<caller address>]`, so it can age the URLs one caller
uses: a lab node that boots late) the answer is S3's 403 `AccessDenied` "Request has expired". With
`private=True` an unsigned object GET is refused too (403), as on a private bucket. Each server
starts from an empty backend (`reset()` on start) so tests do not see each other's buckets; as
moto's backends are process-wide, run one server per process at a time.
"""

from __future__ import annotations

import atexit
import calendar
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

import boto3
import requests
from botocore.config import Config

__all__ = ["MotoS3Server", "FAKE_ACCESS_KEY_ID", "FAKE_SECRET_ACCESS_KEY"]

FAKE_ACCESS_KEY_ID = "AKIAMOTOLOCAL0000000"
FAKE_SECRET_ACCESS_KEY = "moto-local-secret-not-checked"  # noqa: S105 - moto does not check signatures


_DENIED = (
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>AccessDenied</Code><Message>{msg}</Message>"
    "</Error>"
)


class _PresignGate:
    """WSGI middleware in front of moto: what S3 checks about presigned and anonymous requests."""

    def __init__(self, app: Any, owner: MotoS3Server) -> None:
        self.app, self.owner = app, owner

    def _refusal(self, environ: dict[str, Any]) -> str | None:
        q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        now = time.time() + self.owner.skew_s + self.owner.client_skew_s.get(environ.get("REMOTE_ADDR", ""), 0.0)
        if "X-Amz-Expires" in q and "X-Amz-Date" in q:
            signed = calendar.timegm(time.strptime(q["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))
            if now > signed + int(q["X-Amz-Expires"]):
                return "Request has expired"
            return None
        if "Expires" in q and "Signature" in q:  # SigV2 query authentication: an absolute epoch
            return "Request has expired" if now > int(q["Expires"]) else None
        anonymous = "HTTP_AUTHORIZATION" not in environ and "X-Amz-Signature" not in q
        is_object = environ.get("PATH_INFO", "/").strip("/").count("/") >= 1
        if self.owner.private and anonymous and is_object and environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            return "Access Denied"
        return None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        refusal = self._refusal(environ)
        if refusal is None:
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        body = _DENIED.format(msg=refusal).encode()
        start_response("403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]


class MotoS3Server:
    """moto's server in a daemon thread on 127.0.0.1; a context manager, also usable with start()/stop()."""

    def __init__(self, region: str = "us-east-1", private: bool = False, host: str = "127.0.0.1") -> None:
        """`host`: 127.0.0.1, or a lab network's gateway address for nspawn nodes (lab/node.py)."""
        self.region = region
        self.host = host
        self.endpoint_url = ""
        self.private = private
        self.skew_s = 0.0
        """Seconds added to the clock presigned URLs are checked against (ages every URL at once)."""
        self.client_skew_s: dict[str, float] = {}
        """More seconds for the requests from one address (ages the URLs one caller, e.g. a lab node, uses)."""
        self._server: Any = None

    def __enter__(self) -> MotoS3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> MotoS3Server:
        if self._server is not None:
            return self
        # werkzeug logs every request to stderr; tests and the demo only want errors.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)

        server = _gated_server(self)
        server.start()
        host, port = server.get_host_and_port()
        self._server = server
        self.endpoint_url = f"http://{host}:{port}"
        self._wait_ready()
        self.reset()
        atexit.register(self.stop)
        return self

    def _wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                requests.get(f"{self.endpoint_url}/moto-api/", timeout=1)
                return
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def reset(self) -> None:
        """Forget every bucket and object (moto's backends are process-wide)."""
        requests.post(f"{self.endpoint_url}/moto-api/reset", timeout=5)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=FAKE_ACCESS_KEY_ID,
            aws_secret_access_key=FAKE_SECRET_ACCESS_KEY,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
        )

    def create_bucket(self, bucket: str, versioning: bool = True) -> None:
        c = self.client()
        c.create_bucket(Bucket=bucket)
        if versioning:
            c.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})


def _gated_server(owner: MotoS3Server) -> Any:
    """moto's ThreadedMotoServer whose WSGI app sits behind `_PresignGate`."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer  # heavy: only when a server is wanted
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class Gated(ThreadedMotoServer):  # type: ignore[misc]
        def _server_entry(self) -> None:
            app = _PresignGate(DomainDispatcherApplication(create_backend_app), owner)
            self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return Gated(ip_address=owner.host, port=0, verbose=False)
