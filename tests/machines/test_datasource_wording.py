"""Datasource failures are recognised by the words real MAAS logs (clients/maas/vocabulary.py cites
canonical/maas), not by anything the project's simulator invents (issue 14, machines item 8)."""

from __future__ import annotations

from clients.maas import INSTALL_FAILURE_TYPE, INSTALLATION_FAILED, EventView, datasource_failure

FAILED = EventView(type="Failed deployment", description=f"Deploying -> Failed deployment: {INSTALLATION_FAILED}")
START = EventView(type="Deploying", description="Allocated -> Deploying: deploy jammy")


def test_cloud_init_network_datasource_failure_is_recognised() -> None:
    cause = EventView(type=INSTALL_FAILURE_TYPE, description="'cloudinit' searching for network datasources")
    assert datasource_failure([FAILED, cause, START]) == cause
    local = EventView(type=INSTALL_FAILURE_TYPE, description="'cloudinit' searching for local datasources")
    assert datasource_failure([FAILED, local, START]) == local


def test_a_curtin_failure_is_not_a_datasource_failure() -> None:
    curtin = EventView(type=INSTALL_FAILURE_TYPE, description="'curtin' Command Install")
    assert datasource_failure([FAILED, curtin, START]) is None


def test_the_status_message_alone_says_nothing_about_the_cause() -> None:
    assert datasource_failure([FAILED]) is None
    assert datasource_failure([EventView(type="Failed deployment", description="datasource cloud-init")]) is None


def test_a_datasource_failure_of_an_earlier_attempt_does_not_count() -> None:
    old = EventView(type=INSTALL_FAILURE_TYPE, description="'cloudinit' searching for network datasources")
    curtin = EventView(type=INSTALL_FAILURE_TYPE, description="'curtin' Command Install")
    assert datasource_failure([FAILED, curtin, START, FAILED, old, START]) is None
