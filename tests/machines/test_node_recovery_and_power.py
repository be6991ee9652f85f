"""Issue 14 bug 3: a run that dies (or keeps getting 503s) between the MAAS deploy call and the
owner-data write must not lose the platform node id; and power settings really change in place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from clients.maas import MaasClient
from clients.platform import PlatformClient
from providers.machines import reconciler as rc
from providers.machines.records import OWNER_NODE_ID
from providers.machines.scheduler import Scheduler
from providers.machines.status import MachineOutcome
from simulators.maas.faults import ApiErrorBurst, ApiFaults

from .conftest import World


class Killed(BaseException):
    """The provider process dying (not an Exception: nothing in the lifecycle may catch it)."""


class DiesOnOwnerData(MaasClient):
    def set_owner_data(self, system_id: str, data: dict[str, str | None]) -> None:
        raise Killed


def _platform_nodes(w: World, system_id: str) -> list[Any]:
    platform = PlatformClient(w.platform.url, w.platform.creds.platform_admin)
    return [n for n in platform.list_nodes(system_id=system_id) if n.status.value != "deleted"]


def _rerun_finds_the_node(w: World, system_id: str) -> None:
    spec = w.specs["local-gpu-1"]
    again = Scheduler(w.context()).onboard([spec], {spec.hostname: system_id})[0]
    nodes = _platform_nodes(w, system_id)
    assert len(nodes) == 1, "no second node minted for the machine"
    assert again.outcome is MachineOutcome.READY and again.node_id == nodes[0].node_id
    assert not any("outside gpuaas-infra" in n for n in again.notes), again.notes
    assert any("recovered from the platform" in n for n in again.notes), again.notes
    assert w.client().read_many([system_id])[0].owner_data[OWNER_NODE_ID] == nodes[0].node_id


def test_kill_between_deploy_and_owner_data_keeps_the_node_id(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    spec = w.specs["local-gpu-1"]
    with pytest.raises(Killed):
        Scheduler(w.context(maas=DiesOnOwnerData(w.maas.url, w.maas.api_key))).onboard([spec])
    system_id = w.client().by_hostnames([spec.hostname])[0].system_id
    assert w.maas.admin.status(system_id).label in ("Deploying", "Deployed")
    assert OWNER_NODE_ID not in w.client().read_many([system_id])[0].owner_data
    _rerun_finds_the_node(w, system_id)


def test_owner_data_503s_until_the_run_gives_up_then_the_rerun_finds_the_node(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    spec = w.specs["local-gpu-1"]
    w.maas.admin.set_api_faults(
        ApiFaults(errors=[ApiErrorBurst(status=503, count=10_000, handler="MachineHandler", op="set_owner_data")])
    )
    first = Scheduler(w.context()).onboard([spec])[0]
    assert first.outcome.failed and first.system_id
    assert OWNER_NODE_ID not in w.client().read_many([first.system_id])[0].owner_data
    w.maas.admin.set_api_faults(ApiFaults())
    _rerun_finds_the_node(w, first.system_id)


def test_power_settings_change_in_place_and_are_read_back(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    old = w.specs["local-gpu-1"]
    r = Scheduler(w.context()).onboard([old])[0]
    assert r.outcome is MachineOutcome.READY and r.system_id
    new = old.model_copy(update={"ipmi_address": "10.250.0.99"})
    assert rc.apply_in_place(w.context(), old, new, r.system_id) == ["power"]
    params = w.client()._call("Machines", "power_parameters", read=True)[r.system_id]
    assert params["power_address"] == "10.250.0.99"
    assert w.maas.admin.status(r.system_id).label == "Deployed", "no redeploy"


def test_power_change_maas_ignores_fails_loudly(world_factory: Callable[..., World]) -> None:
    class Ignores(MaasClient):
        def set_power(self, system_id: str, **kw: Any) -> None:
            return None  # MAAS answered 200 and changed nothing

    w = world_factory()
    old = w.specs["local-gpu-1"]
    r = Scheduler(w.context()).onboard([old])[0]
    assert r.system_id
    new = old.model_copy(update={"ipmi_address": "10.250.0.99"})
    with pytest.raises(rc.InPlaceError, match="did not apply the power settings"):
        rc.apply_in_place(w.context(maas=Ignores(w.maas.url, w.maas.api_key)), old, new, r.system_id)
