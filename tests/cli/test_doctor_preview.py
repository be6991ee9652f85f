"""doctor's `preview identity` row (issue 28, item 1): the merge-request previews' AppRole may decrypt with the
stack's transit key and nothing more; Vault itself says so (`sys/capabilities-self`), against a real OpenBao."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cli.doctor_preview import ROLE_ENV, SECRET_ENV, check_preview_identity
from cli.secrets import secret_checklist
from environments import load_environment
from simulators.openbao import OpenBaoDevServer


@pytest.fixture(scope="module")
def bao() -> Iterator[OpenBaoDevServer]:
    with OpenBaoDevServer() as server:
        c = server.client()
        c.sys.enable_secrets_engine("transit", path="transit")
        c.secrets.transit.create_key(name="gpuaas-staging")
        c.sys.enable_auth_method("approle")
        yield server


def _role(bao: OpenBaoDevServer, name: str, grants: list[tuple[str, str]]) -> tuple[str, str]:
    c = bao.client()
    c.sys.create_or_update_policy(name=name, policy="\n".join(
        f'path "{p}" {{ capabilities = ["{cap}"] }}' for p, cap in grants))
    c.auth.approle.create_or_update_approle(name, token_policies=[name], token_ttl="5m")
    return (c.auth.approle.read_role_id(name)["data"]["role_id"],
            c.auth.approle.generate_secret_id(name)["data"]["secret_id"])


def _row(bao: OpenBaoDevServer, monkeypatch: pytest.MonkeyPatch, role: tuple[str, str] | None) -> tuple[str, ...]:
    env = load_environment("staging")
    if role:
        monkeypatch.setenv(ROLE_ENV, role[0])
        monkeypatch.setenv(SECRET_ENV, role[1])
    rows: list[tuple[str, ...]] = []
    check_preview_identity(env, bao.address, None, secret_checklist(env, None), lambda *r: rows.append(r))
    (row,) = rows
    return row


def test_a_read_only_preview_identity_passes_and_a_broader_one_fails(bao: OpenBaoDevServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert _row(bao, monkeypatch, None)[2:4] == ("SKIP", f"{ROLE_ENV}/{SECRET_ENV} not set")
    ok = _role(bao, "stg-preview", [("transit/decrypt/gpuaas-staging", "update")])
    assert _row(bao, monkeypatch, ok)[2] == "OK"
    broad = _role(bao, "stg-broad", [("transit/decrypt/gpuaas-staging", "update"), ("gpuaas/data/*", "read")])
    row = _row(bao, monkeypatch, broad)
    assert row[2] == "FAIL" and "not read-only" in row[3] and "gpuaas/data/staging/" in row[3]
    blind = _role(bao, "stg-blind", [("gpuaas/data/nothing", "read")])
    assert _row(bao, monkeypatch, blind)[2:4] == ("FAIL", "cannot decrypt with transit key gpuaas-staging")
    assert _row(bao, monkeypatch, ("no-such-role", "x"))[2] == "FAIL"
