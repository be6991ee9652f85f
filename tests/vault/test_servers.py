"""The test-server runners themselves: readiness, isolation, cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import hvac
import pytest

from simulators.openbao import OpenBaoDevServer, OpenBaoStartError
from simulators.s3 import MotoS3Server

REPO = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_openbao_stops_with_the_context_and_with_a_killed_parent() -> None:
    with OpenBaoDevServer() as bao:
        pid = bao._proc.pid  # type: ignore[union-attr]
        assert bao.running and bao.address.startswith("http://127.0.0.1:")
    assert not _alive(pid)
    code = ("from simulators.openbao import OpenBaoDevServer; b = OpenBaoDevServer().start(); "
            "print(b._proc.pid, flush=True); import time; time.sleep(60)")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=REPO)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the dev server outlived its killed parent"


def test_two_openbao_servers_are_independent() -> None:
    with OpenBaoDevServer() as a, OpenBaoDevServer() as b:
        assert a.address != b.address and a.root_token != b.root_token
        a.put_secret("gpuaas", "x", {"k": "a"})
        b.ensure_kv_mount("gpuaas")
        with pytest.raises(hvac.exceptions.InvalidPath):
            b.client().secrets.kv.v2.read_secret_version(path="x", mount_point="gpuaas", raise_on_deleted_version=True)


def test_moto_server_starts_empty_and_serves_path_style() -> None:
    with MotoS3Server() as s3:
        s3.create_bucket("b-one", versioning=True)
        c = s3.client()
        put = c.put_object(Bucket="b-one", Key="k", Body=b"x", Metadata={"digest": "d"})
        assert put["VersionId"]
        assert c.head_object(Bucket="b-one", Key="k")["Metadata"] == {"digest": "d"}
        s3.reset()
        assert c.list_buckets()["Buckets"] == []


class _UpgradingKv:
    """A client whose new KV v2 mount refuses `refusals` reads with OpenBao's upgrade message."""

    def __init__(self, refusals: int, then: Exception) -> None:
        self.refusals, self.then, self.reads = refusals, then, 0
        self.secrets = self
        self.kv = self
        self.v2 = self

    def read_secret_version(self, **_: object) -> None:
        self.reads += 1
        if self.reads <= self.refusals:
            raise hvac.exceptions.InvalidRequest("Upgrading from non-versioned to versioned data. This backend will be "
                                                 "unavailable for a brief period and will resume service shortly.")
        raise self.then


def test_a_new_kv_mount_is_waited_for_until_its_upgrade_ends() -> None:
    server = OpenBaoDevServer()
    client = _UpgradingKv(3, hvac.exceptions.InvalidPath("no secret"))
    server._wait_kv_upgraded(client, "gpuaas")  # type: ignore[arg-type]
    assert client.reads == 4
    other = _UpgradingKv(1, hvac.exceptions.InvalidRequest("permission denied"))
    with pytest.raises(OpenBaoStartError, match="KV v2 mount 'gpuaas'.*permission denied"):
        server._wait_kv_upgraded(other, "gpuaas")  # type: ignore[arg-type]
    stuck = _UpgradingKv(10**6, hvac.exceptions.InvalidPath(""))
    with pytest.raises(OpenBaoStartError, match="not ready: Upgrading"):
        server._wait_kv_upgraded(stuck, "gpuaas", timeout=0.2)  # type: ignore[arg-type]
