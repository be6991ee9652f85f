"""Fixtures for sites / bundles / RoCE: real OpenBao and moto S3 servers, started once per session."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from simulators.openbao import OpenBaoDevServer
from simulators.s3 import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, MotoS3Server
from tests.fixtures.engine import engine_factory  # noqa: F401

# Real MAAS and platform simulators and the engine factory (function-scoped fixtures from their owners).
from tests.fixtures.maas_sim import maas_sim, maas_sim_factory  # noqa: F401
from tests.fixtures.platform_sim import platform_sim, platform_sim_factory  # noqa: F401

KV = "gpuaas"
S3_CREDS_REF = "t/s3/publisher#credentials"


@pytest.fixture(scope="session")
def openbao() -> Iterator[OpenBaoDevServer]:
    with OpenBaoDevServer() as server:
        server.ensure_kv_mount(KV)
        server.put_secret(KV, "t/s3/publisher", {"credentials": json.dumps(
            {"access_key_id": FAKE_ACCESS_KEY_ID, "secret_access_key": FAKE_SECRET_ACCESS_KEY})})
        yield server


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[MotoS3Server]:
    with MotoS3Server() as server:
        yield server
