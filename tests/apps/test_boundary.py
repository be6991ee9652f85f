"""Seed 004's boundary questions, as tests: the provider drives the public contract only, with a
project-scoped service account, and a token of another project is refused."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from clients.platform import CLIENT_METHODS
from clients.platform import models as m
from clients.platform.catalogue import BY_OPERATION_ID
from clients.platform.transport import Transport
from environments.coded import CodedError
from providers.apps.failures import AppFail

from .conftest import TOKEN_REF, Lab
from .test_reconciler import hosts

REPO = Path(__file__).resolve().parents[2]
MODULES = [REPO / "providers" / "app_instance.py", *sorted((REPO / "providers" / "apps").glob("*.py")),
           REPO / "components" / "apps.py"]
# Client helpers built on one endpoint each.
HELPERS = {"add_member": "requestMemberOperation", "drain_member": "requestMemberOperation",
           "remove_member": "requestMemberOperation", "replace_member": "requestMemberOperation",
           "wait_for_operation": "getOperation"}
OPERATION_OF = {**{meth: op for op, meth in CLIENT_METHODS.items()}, **HELPERS}


def test_the_app_lane_imports_no_simulator_and_calls_only_service_account_endpoints() -> None:
    called: set[str] = set()
    for path in MODULES:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n.startswith(("simulators", "tools")) for n in names), f"{path.name} imports {names}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "api":
                called.add(node.func.attr)
    assert called, "the scan found the provider's platform calls"
    unknown = called - set(OPERATION_OF)
    assert not unknown, f"calls outside the typed client: {unknown}"
    for meth in called:
        ep = BY_OPERATION_ID[OPERATION_OF[meth]]
        assert m.Role.SERVICE_ACCOUNT in ep.roles and ep.path.startswith("/api/v1/projects/{project_id}/"), meth


def test_every_request_of_a_lifecycle_is_project_scoped_and_by_the_service_account(
        lab: Lab, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str]] = []
    real = Transport.call

    def spy(self: Transport, operation_id: str, **kw: Any) -> Any:  # records every request the client sends
        seen.append((operation_id, (kw.get("path") or {}).get("project_id", "")))
        return real(self, operation_id, **kw)

    monkeypatch.setattr(Transport, "call", spy)
    out = lab.rec(lab.spec()).converge()
    out = lab.rec(lab.spec(workers=2, version="24.05.1")).converge(out.instance_id, hosts(out))
    lab.rec(lab.spec(workers=2, version="24.05.1")).release(out.instance_id)
    monkeypatch.undo()
    assert {op for op, _ in seen} >= {"createAppInstance", "requestMemberOperation", "upgradeAppInstance",
                                      "decommissionAppInstance", "listMembers", "getOperation"}
    assert {pid for _, pid in seen} == {lab.pid}
    assert all(m.Role.SERVICE_ACCOUNT in BY_OPERATION_ID[op].roles for op, _ in seen)
    events = [e for e in lab.sim.audit() if e.project_id == lab.pid]
    assert events and {(e.role, e.outcome.value) for e in events} == {(m.Role.SERVICE_ACCOUNT, "accepted")}


def test_a_token_of_another_project_is_refused_and_nothing_changes(lab: Lab) -> None:
    lab.vault.put_secret("gpuaas", TOKEN_REF.split("#")[0], {"token": lab.sim.creds.other_service_account})
    with pytest.raises(CodedError) as err:
        lab.rec(lab.spec()).converge()
    text = str(err.value)
    assert text.startswith("AIN001 app instance ") and err.value.code is AppFail.TOKEN_REFUSED
    assert "refused the service-account token" in text and "project_boundary" in text
    assert repr(TOKEN_REF) in text and lab.pid in text and "correlation_id=req-" in text
    assert lab.sim.creds.other_service_account not in text and lab.sim.creds.service_account not in text
    assert lab.sim.store.instances == {}
    denied = [e for e in lab.sim.audit() if e.outcome.value == "denied"]
    assert [e.role for e in denied] in ([], [m.Role.SERVICE_ACCOUNT]), "refused before or at the first mutation"
