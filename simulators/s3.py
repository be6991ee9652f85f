"""A throw-away S3 endpoint (moto's ThreadedMotoServer) for tests and the demo.

    with MotoS3Server() as s3:               # binds 127.0.0.1 on a free port, ready when returned
        s3.endpoint_url                      # "http://127.0.0.1:41235"
        s3.client().create_bucket(Bucket="b")  # boto3 client, path-style, like WEKA S3
        s3.create_bucket("b", versioning=True)

moto keeps its state per process and does not enforce signatures, so any access key works; we still
use distinct fake keys so the code paths that read them from Vault are exercised. Each server
starts from an empty backend (`reset()` on start) so tests do not see each other's buckets; as
moto's backends are process-wide, run one server per process at a time.
"""

from __future__ import annotations

import atexit
import logging
import time
from typing import Any

import boto3
import requests
from botocore.config import Config

__all__ = ["MotoS3Server", "FAKE_ACCESS_KEY_ID", "FAKE_SECRET_ACCESS_KEY"]

FAKE_ACCESS_KEY_ID = "AKIAMOTOLOCAL0000000"
FAKE_SECRET_ACCESS_KEY = "moto-local-secret-not-checked"  # noqa: S105 - moto does not check signatures


class MotoS3Server:
    """moto's server in a daemon thread on 127.0.0.1; a context manager, also usable with start()/stop()."""

    def __init__(self, region: str = "us-east-1") -> None:
        self.region = region
        self.endpoint_url = ""
        self._server: Any = None

    def __enter__(self) -> MotoS3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> MotoS3Server:
        if self._server is not None:
            return self
        from moto.server import ThreadedMotoServer  # heavy import: only when a server is wanted

        # werkzeug logs every request to stderr; tests and the demo only want errors.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
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
