"""A machine world: the MAAS simulator seeded from an environment, the platform simulator with the
site and profile registered, and machine specs built the way the machines component builds them.
The lifecycle runs against both over real HTTP (python-libmaas, httpx)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from clients.maas import MaasSiteClient
from clients.platform import PlatformClient, models
from environments import Environment, load_environment
from providers.machines.records import Context
from providers.machines.runtime import PlatformEnrollment
from providers.machines.scheduler import Scheduler
from providers.machines.spec import Deadlines, LifecyclePolicy, MachineSpec
from simulators.localstack import maas_inventory, machine_specs
from simulators.maas import MaasSimulator, SimInventory
from tests.fixtures.maas_sim import TEST_TIME_SCALE as MAAS_SCALE
from tests.fixtures.platform_sim import platform_sim_factory  # noqa: F401

DEADLINE_SCALE = 1e-3  # MAAS-scale deadlines (45 min commissioning) -> 2.7 s


@dataclass
class World:
    env: Environment
    maas: MaasSimulator
    platform: Any
    site_id: str
    profile_id: str
    specs: dict[str, MachineSpec]

    def client(self) -> MaasSiteClient:
        return MaasSiteClient(self.maas.url, self.maas.api_key)

    def context(self, maas: MaasSiteClient | None = None, logs: list[str] | None = None, **policy: Any) -> Context:
        base = {"commissioning_scripts": [], "batch_max_parallel": 2, **policy}
        platform = PlatformClient(self.platform.url, self.platform.creds.platform_admin)
        return Context(
            ops=maas or self.client(),
            enrollment=PlatformEnrollment(platform, self.site_id, self.profile_id),
            policy=LifecyclePolicy(**base),
            deadlines=Deadlines().scaled(DEADLINE_SCALE),
            platform_url=self.platform.url,
            log=(logs.append if logs is not None else lambda _m: None),
        )

    def scheduler(self, **kw: Any) -> Scheduler:
        return Scheduler(self.context(**kw))


def specs_for(env: Environment, roce: bool = True) -> dict[str, MachineSpec]:
    specs = machine_specs(env)
    if not roce:
        specs = {h: {**s, "roce_links": []} for h, s in specs.items()}
    return {h: MachineSpec.model_validate(s) for h, s in specs.items()}


@pytest.fixture
def world_factory(platform_sim_factory: Callable[..., Any]) -> Iterator[Callable[..., World]]:  # noqa: F811
    sims: list[MaasSimulator] = []

    def make(
        env_name: str = "local", *, enlisted: bool = False, faults: dict[str, Any] | None = None, roce: bool = True
    ) -> World:
        env = load_environment(env_name)
        platform = platform_sim_factory()
        inv: SimInventory = maas_inventory(env, enlisted=enlisted)
        sim = MaasSimulator(inv, time_scale=MAAS_SCALE, platform_url=platform.url, faults=faults)
        sim.start()
        sims.append(sim)
        admin = PlatformClient(platform.url, platform.creds.platform_admin)
        site_doc = env.sites[0]
        site = admin.create_site(
            models.MaasSiteCreate(
                name=site_doc.name,
                maas_url=sim.url,
                credential_ref=models.VaultCredentialRef(path=site_doc.maas_api_key_path.split("#")[0]),
            )
        )
        profile = admin.create_profile(
            site.site_id,
            models.SiteProfileCreate(name=site_doc.profiles[0].name, policy=models.SiteProfilePolicy()),
        )
        return World(
            env=env,
            maas=sim,
            platform=platform,
            site_id=site.site_id,
            profile_id=profile.profile_id,
            specs=specs_for(env, roce),
        )

    yield make
    for sim in sims:
        sim.stop()
