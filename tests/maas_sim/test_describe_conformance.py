"""The describe document is generated from the route table; every handler, path, URL param and
action (name, method, op) it lists must match the real MAAS 2.2 describe document, or, for what
arrived after 2.2, canonical/maas's current handlers."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

REFERENCE = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "maas-api-2.2-describe.json"

# Handlers added after MAAS 2.2, as canonical/maas defines them (src/maasserver/api/scripts.py,
# urls_api.py: r"^scripts/$" and r"^scripts/(?P<name>[^/]+)$").
POST_22 = {
    "NodeScriptsHandler": ("/MAAS/api/2.0/scripts/", [], {("create", "POST", None), ("read", "GET", None)}),
    "NodeScriptHandler": ("/MAAS/api/2.0/scripts/{name}", ["name"], {
        ("read", "GET", None), ("delete", "DELETE", None), ("update", "PUT", None),
        ("download", "GET", "download"), ("revert", "POST", "revert"), ("add_tag", "POST", "add_tag"),
        ("remove_tag", "POST", "remove_tag")}),
    # src/maasserver/api/scriptresults.py; urls_api.py: r"^nodes/(?P<system_id>[^/]+)/results/$" and
    # r"^nodes/(?P<system_id>[^/]+)/results/(?P<id>[^/]+)/$"
    "NodeScriptResultsHandler": ("/MAAS/api/2.0/nodes/{system_id}/results/", ["system_id"], {("read", "GET", None)}),
    "NodeScriptResultHandler": ("/MAAS/api/2.0/nodes/{system_id}/results/{id}/", ["system_id", "id"], {
        ("read", "GET", None), ("delete", "DELETE", None), ("download", "GET", "download")}),
}


def _reference() -> dict:
    if not REFERENCE.exists():
        pytest.fail(f"reference describe document missing: {REFERENCE} (expected in ../shared/reference/)")
    return json.loads(REFERENCE.read_text())


def _handlers(doc: dict) -> dict[str, dict]:
    out = {}
    for res in doc["resources"]:
        for kind in ("anon", "auth"):
            h = res.get(kind)
            if h:
                out[h["name"]] = {**h, "_resource": res}
    return out


def test_every_implemented_handler_matches_real_maas(maas_sim) -> None:
    ours = httpx.get(f"{maas_sim.url}api/2.0/describe/").json()
    ref = _handlers(_reference())
    checked = 0
    for name, h in _handlers(ours).items():
        actions = {(a["name"], a["method"], a["op"]) for a in h["actions"]}
        if name in ref:
            real = ref[name]
            assert h["path"] == real["path"], name
            assert h["params"] == real["params"], name
            real_actions = {(a["name"], a["method"], a["op"]) for a in real["actions"]}
            assert actions <= real_actions, f"{name}: not in MAAS 2.2: {sorted(actions - real_actions, key=str)}"
            for a in h["actions"]:
                assert a["restful"] == (a["op"] is None)
            # Same anon/auth pairing per resource as MAAS.
            real_res, our_res = real["_resource"], h["_resource"]
            for kind in ("anon", "auth"):
                if our_res[kind]:
                    assert real_res[kind] and real_res[kind]["name"] == our_res[kind]["name"], (name, kind)
        else:
            assert name in POST_22, f"{name} is neither in the 2.2 document nor in the post-2.2 table"
            path, params, allowed = POST_22[name]
            assert (h["path"], h["params"]) == (path, params), name
            assert actions <= allowed, name
        checked += len(actions)
    assert checked >= 50  # the lifecycle surface: machines, interfaces, disks, network, tags, scripts


def test_uri_follows_host_header_and_admin_is_not_described(maas_sim) -> None:
    resp = httpx.get(f"{maas_sim.url}api/2.0/describe/", headers={"Host": "maas.example:5240"})
    doc = resp.json()
    assert resp.headers["content-type"] == "application/json"
    uris = [h["uri"] for r in doc["resources"] for h in (r["anon"], r["auth"]) if h]
    assert uris and all(u.startswith("http://maas.example:5240/MAAS/api/2.0/") for u in uris)
    assert not any("_sim" in u for u in uris)


def test_lifecycle_ops_are_all_described(maas_sim) -> None:
    doc = httpx.get(f"{maas_sim.url}api/2.0/describe/").json()
    ops = {(h["name"], a["name"]) for r in doc["resources"] for h in (r["anon"], r["auth"]) if h
           for a in h["actions"]}
    wanted = {("MachineHandler", op) for op in (
        "read", "update", "delete", "commission", "deploy", "release", "abort", "power_on", "power_off",
        "query_power_state", "mark_broken", "mark_fixed", "set_storage_layout", "power_parameters",
        "set_owner_data")} | {
        ("MachinesHandler", "read"), ("MachinesHandler", "create"), ("MachinesHandler", "accept"),
        ("MachinesHandler", "power_parameters"), ("InterfacesHandler", "read"), ("InterfaceHandler", "read"),
        ("InterfaceHandler", "link_subnet"), ("InterfaceHandler", "unlink_subnet"),
        ("BlockDevicesHandler", "read"), ("BlockDeviceHandler", "read"), ("BlockDeviceHandler", "set_boot_disk"),
        ("TagsHandler", "create"), ("TagHandler", "update_nodes"), ("TagHandler", "machines"),
        ("NodeScriptsHandler", "create"), ("NodeScriptsHandler", "read"), ("VersionHandler", "read"),
        ("NodeScriptResultsHandler", "read"), ("NodeScriptResultHandler", "read")}
    assert wanted <= ops, sorted(wanted - ops)
