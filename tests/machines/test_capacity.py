"""batch_max_parallel per profile, exactly (issue 14, machines item 7): bounded across pools (two
schedulers at once, as two MachinePools of one `up`) and across runs (a machine another process
drives, counted from MAAS by the profile's tag). Peaks are the MAAS simulator's own statistics."""

from __future__ import annotations

import threading
from collections.abc import Callable

from providers.machines.capacity import busy_tag
from providers.machines.scheduler import MachineResult, Scheduler
from providers.machines.status import MachineOutcome

from .conftest import World


def _peak_busy(w: World) -> int:
    return max(site["busy"] for site in w.maas.admin.peak_concurrency().values())


def test_two_pools_of_one_profile_at_limit_1_never_run_two_machines_at_once(
    world_factory: Callable[..., World],
) -> None:
    w = world_factory()
    pools = [
        [w.specs["local-gpu-1"], w.specs["local-gpu-2"]],
        [w.specs["local-gpu-3"], w.specs["local-gpu-4"]],
    ]
    results: list[MachineResult] = []
    errors: list[BaseException] = []

    def run(specs: list) -> None:
        try:
            results.extend(Scheduler(w.context(batch_max_parallel=1)).onboard(specs))
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(p,)) for p in pools]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert {r.outcome for r in results} == {MachineOutcome.READY} and len(results) == 4, [r.reason for r in results]
    assert _peak_busy(w) == 1, w.maas.admin.peak_concurrency()
    tag = busy_tag(w.specs["local-gpu-1"].site, w.specs["local-gpu-1"].profile)
    assert w.client().with_tag(tag) == [], "a machine carries the busy tag only while a run holds its slot"


def test_a_machine_another_run_drives_counts_against_the_limit(world_factory: Callable[..., World]) -> None:
    w = world_factory()
    other, mine = w.specs["local-gpu-1"], w.specs["local-gpu-2"]
    maas = w.client()
    # Another process (a concurrent `up`) commissions a machine of the same profile.
    theirs = maas.create(
        hostname=other.hostname, pxe_mac=other.pxe_mac, power_type="ipmi", power_address=other.ipmi_address,
        power_user=None, power_pass=None, commission=False,
    )
    maas.set_tags(theirs.system_id, [busy_tag(other.site, other.profile)])
    maas.commission(theirs.system_id, [], [])
    r = Scheduler(w.context(batch_max_parallel=1)).onboard([mine])[0]
    assert r.outcome is MachineOutcome.READY, r.reason
    assert _peak_busy(w) == 1, w.maas.admin.peak_concurrency()
