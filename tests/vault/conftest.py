"""Fixtures: one real OpenBao dev server per test session (simulators/openbao.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from simulators.openbao import OpenBaoDevServer


@pytest.fixture(scope="session")
def openbao() -> Iterator[OpenBaoDevServer]:
    with OpenBaoDevServer() as server:
        server.ensure_kv_mount("gpuaas")
        yield server


@pytest.fixture
def sealable_openbao() -> Iterator[OpenBaoDevServer]:
    """A private server for tests that seal or stop Vault (never the shared one)."""
    with OpenBaoDevServer() as server:
        server.ensure_kv_mount("gpuaas")
        yield server
