"""MAAS settings through python-libmaas and the simulator (MaasHandler get_config / set_config): the
region's `hardware_sync_interval`, which each hardware-sync machine's `sync_interval` follows at once."""

from __future__ import annotations

from typing import Any

import pytest

from clients.maas import MaasClient, MaasError, MaasSiteClient, timespan, timespan_seconds
from simulators.maas.enums import NodeStatus


@pytest.mark.parametrize(("seconds", "text"), [(900, "15m"), (5400, "1h30m"), (90, "1m30s"), (60, "1m"),
                                               (86400, "24h"), (61, "1m1s")])
def test_timespan_round_trips(seconds: int, text: str) -> None:
    assert timespan(seconds) == text
    assert timespan_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "15", "15 minutes", "often", "1h x", "-5m"])
def test_an_unreadable_span_is_none(text: str) -> None:
    assert timespan_seconds(text) is None


def test_the_interval_is_read_set_and_followed_by_each_machines_sync_interval(maas_sim: Any) -> None:
    c = MaasSiteClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    assert c.hardware_sync_interval() == 900  # MAAS's default, 15m
    c.set_hardware_sync_interval(1800)
    assert c.hardware_sync_interval() == 1800
    assert timespan_seconds(c._call("MAAS", "get_config", read=True, name="hardware_sync_interval")) == 1800
    m = MaasClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    sid = m.by_hostnames(["gpu-a-001"])[0].system_id
    m.deploy(sid, user_data=b"#cloud-config\n", distro_series="jammy", hwe_kernel=None, enable_hw_sync=True)
    maas_sim.admin.wait_for_status(sid, NodeStatus.DEPLOYED)
    assert _machine(m, sid)["sync_interval"] == 1800
    c.set_hardware_sync_interval(600)  # a deployed machine's interval follows the region's setting at once
    raw = _machine(m, sid)
    assert raw["sync_interval"] == 600 and raw["is_sync_healthy"] is True


def _machine(c: MaasClient, sid: str) -> dict[str, Any]:
    return dict(c._call("Machine", "read", read=True, system_id=sid))


def test_a_bad_value_and_an_unknown_setting_are_refused(maas_sim: Any) -> None:
    c = MaasSiteClient(maas_sim.url, maas_sim.api_key, tls_verify=False)
    with pytest.raises(MaasError) as bad:
        c._call("MAAS", "set_config", read=False, name="hardware_sync_interval", value="often")
    assert bad.value.status == 400 and "time span" in str(bad.value)
    with pytest.raises(MaasError) as unknown:
        c._call("MAAS", "get_config", read=True, name="no_such_setting")
    assert unknown.value.status == 400
    assert c.hardware_sync_interval() == 900, "a refused write changes nothing"
