"""The pure rule functions (policy/gpuaas_rules.py) on their own: edge cases the analyzer run can't reach."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from environments.model import CONTROL_PLANE_AND_CI_ROLES
from policy import gpuaas_rules as rules

DYN = "pulumi-python:dynamic/gpuaas:"


class UnknownValueError(Exception):
    """Same name as the policy SDK's: what its proxies raise when a preview value is unknown."""


class PreviewProps(Mapping[str, Any]):
    """A mapping whose listed keys are unknown (like pulumi_policy's unknown-checking proxy)."""

    def __init__(self, data: dict[str, Any], unknown: set[str]) -> None:
        self._data, self._unknown = data, unknown

    def __getitem__(self, key: str) -> Any:
        if key in self._unknown:
            raise UnknownValueError(key)
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _res(kind: str, props: Mapping[str, Any], protect: bool = False) -> rules.Res:
    return rules.Res(
        urn=f"urn:pulumi:prod::gpuaas-infra::{DYN}{kind}::x", type=DYN + kind, props=props, protect=protect
    )


def test_role_set_is_the_environment_models() -> None:
    assert rules.CONTROL_PLANE_AND_CI_ROLES == {r.value for r in CONTROL_PLANE_AND_CI_ROLES}


def test_unknown_values_are_skipped_not_fatal() -> None:
    props = PreviewProps({"connection": {"maas": {"tls_verify": False}}, "token": "x", "machine": {}}, {"token"})
    assert rules.plaintext_secrets(_res("MaasMachine", props)) == []
    assert rules.tls_off_in_prod(_res("MaasMachine", props), "prod") == [
        "input connection.maas.tls_verify is false in prod; MAAS TLS verification may be off only outside prod"
    ]


@pytest.mark.parametrize(
    ("path", "value", "flagged"),
    [
        ("password", "hunter2hunter2", True),
        ("bmc.api_key", "abc123", True),
        ("platform.token_path", "prod/platform/admin#token", False),
        ("maas_api_key_path", "prod/maas/dal1#api_key", False),
        ("token", "prod/platform/admin#token", False),  # a Vault reference under a bare name
        ("notes", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl", True),
        ("user_data", "#cloud-config\nvault_token: hvs.CAESIJ0aBcDeFgHiJkLmNoPqRsTuVwXyZ", True),
        ("s3.access", "AKIAABCDEFGHIJKLMNOP", True),
        ("secret_ref", "[secret]", False),
        ("description", "token rotation runbook", False),
    ],
)
def test_plaintext_secret_detection(path: str, value: str, flagged: bool) -> None:
    props: dict[str, Any] = {}
    cur = props
    *parents, leaf = path.split(".")
    for p in parents:
        cur = cur.setdefault(p, {})
    cur[leaf] = value
    found = rules.plaintext_secrets(_res("SiteProfile", props))
    assert bool(found) is flagged, found
    assert all(value not in f for f in found)  # messages name the input, never its value


def test_prod_protection_by_environment_name() -> None:
    pool = _res("MachinePool", {"pool": "a", "machines": []})
    assert rules.unprotected_in_prod(pool, "prod") and rules.unprotected_in_prod(pool, "prod-eu")
    assert rules.unprotected_in_prod(pool, "staging") == []
    assert rules.unprotected_in_prod(_res("MachinePool", {}, protect=True), "prod") == []
    assert rules.unprotected_in_prod(_res("BootstrapBundle", {}), "prod") == []


def test_hosts_given_as_mapping_and_control_plane_flag_wins() -> None:
    hc = _res("HostConvergence", {"hosts": {"gpu-1": {"logical_role": "worker_compute", "extra_roles": ["gitlab"]}}})
    assert rules.worker_roles(hc) == [
        "host gpu-1 is worker_compute but runs gitlab; move these roles to a "
        "platform_control or app_control host (seed 003)"
    ]
    app = _res(
        "AppInstance",
        {
            "members": {
                "head": {"nodes": ["gpu-1"], "control_plane": False},
                "api": {"nodes": ["gpu-1"], "control_plane": True},
            }
        },
    )
    assert rules.control_plane_keys(app) == {"api"}
    [(urn, message)] = rules.app_members_on_workers([hc, app])
    assert urn == app.urn and "'api'" in message


def test_declared_app_control_host_is_not_a_worker_even_if_maas_deployed() -> None:
    machine = _res("MaasMachine", {"machine": {"hostname": "lab-1"}})
    hosts = _res(
        "HostConvergence", {"hosts": [{"hostname": "lab-1", "logical_role": "app_control", "roles": ["app_control"]}]}
    )
    assert rules.worker_hostnames([machine, hosts]) == set()
    assert rules.worker_hosts_with_control_roles([machine, hosts])  # but a MAAS GPU machine may not run them


def test_handoff_erase_modes() -> None:
    keep = _res(
        "SiteProfile", {"site": {"name": "h1", "customer_handoff": True}, "profile": {"release_erase_mode": "none"}}
    )
    assert rules.handoff_erase(keep) == []
    wipe = _res(
        "SiteProfile", {"site": {"name": "h1", "customer_handoff": True}, "profile": {"release_erase_mode": "secure"}}
    )
    assert "profile.release_erase_mode=secure" in rules.handoff_erase(wipe)[0]
    pool = _res("MachinePool", {"connection": {"maas": {"site": "h1"}}, "policy": {"release_erase_mode": "quick"}})
    assert len(rules.machines_erasing_on_handoff_sites([wipe, pool])) == 1
    assert rules.machines_erasing_on_handoff_sites([pool]) == []


def test_node_ssh_credentials_in_an_app_fail_the_stack() -> None:
    """Seed 000 §1: a stack whose AppInstance hands node SSH material to an app is refused by the pack."""
    from environments import rules_values

    assert rules._SSH_KEY_NAME.pattern == rules_values._SSH_KEY_NAME.pattern
    assert rules._SSH_VALUE.pattern == rules_values._SSH_VALUE.pattern
    clean = {"instance": {"name": "rke2-lab", "inputs": {"cluster_cidr": "10.42.0.0/16"}}}
    assert rules.node_ssh_credentials_in_apps(_res("AppInstance", clean)) == []
    for inputs in ({"node_ssh_key": "dev/ssh/lab#k"}, {"join": "ssh-rsa AAAAB3NzaC1yc2E operator"},
                   {"x": "-----BEGIN OPENSSH PRIVATE KEY-----\nabc"}):
        found = rules.node_ssh_credentials_in_apps(_res("AppInstance", {"instance": {"inputs": inputs}}))
        assert len(found) == 1 and "node SSH material" in found[0] and "typed tasks" in found[0]
    hosts = {"hosts": {"dev-lab-1": {"ssh_key_path": "dev/ssh/lab#k"}}}
    assert rules.node_ssh_credentials_in_apps(_res("HostConvergence", hosts)) == [], "hosts are not apps"
