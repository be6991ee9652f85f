"""Commissioning and testing on real nodes (the MAAS simulator's NSPAWN backend, simulators/maas/commissioning.py):
a commission boots an ephemeral systemd-nspawn node whose cloud-init starts MAAS's script runner; it runs the
scripts the site registered with MAAS (here: the commissioning bundle's, registered as the site profile
registers them) and MAAS's built-ins (named stand-ins), and signals each result. MAAS records the real exit
status and output (`nodes/{system_id}/results/`); a failing testing script fails the machine (Failed testing)
and the lifecycle's error names the script and shows its output, redacted.

Behind the lab gate (tests/fixtures/lab_gate.py): skipped loudly where nspawn nodes cannot run, a failure in CI."""

from __future__ import annotations

import base64
import re
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from clients.maas import MaasSiteClient
from clients.platform import PlatformClient
from environments import load_environment
from lab.node import NodeLab
from providers.machines.reconciler import failure_summary
from providers.machines.records import Context
from providers.machines.runtime import PlatformEnrollment, bundle_presigner
from providers.machines.scheduler import Scheduler
from providers.machines.spec import Deadlines, LifecyclePolicy
from providers.machines.status import MachineOutcome
from providers.sites.bundle import bundle_scripts, pack, render_bundle
from simulators.localstack import maas_inventory
from simulators.maas import EnrollBackend, MaasSimulator
from simulators.maas.nspawn import NspawnNodes
from tests.fixtures.lab_gate import require_lab
from tests.fixtures.maas_sim import TEST_TIME_SCALE as MAAS_SCALE
from tests.fixtures.platform_sim import platform_sim_factory  # noqa: F401

from .conftest import NodeWorld, bundle_spec, world_at
from .test_lifecycle_nodes import HOSTS, specs_for_world
from .test_nspawn_node import LAB_BUNDLE

INVENTORY, FABRIC = "gpuaas-lab-h200-inventory", "gpuaas-lab-h200-fabric-check"  # the h200 commissioning bundle's
# A site's burn-in check (registered beside the bundle's): it leaves on the node's disk what it printed and the
# status it exits with, so the test compares MAAS's record with what the script really did.
BURN_IN = """#!/bin/bash
# --- Start MAAS 1.0 script metadata ---
# name: gpuaas-lab-burn-in
# script_type: testing
# --- End MAAS 1.0 script metadata ---
out=/var/tmp/burn-in
echo "gpu 3: ECC errors 12 (limit 0)" | tee "$out.stdout"
echo "bmc password=hunter2" | tee "$out.stderr" >&2
echo 4 > "$out.exit"
exit 4
"""


@pytest.fixture
def lab_maas(tmp_path: Path, platform_sim_factory: Any) -> Callable[..., Any]:  # noqa: F811
    require_lab("nspawn nodes commissioning behind the MAAS simulator")

    @contextmanager
    def make(knobs: dict[str, dict[str, str]]) -> Iterator[tuple[NspawnNodes, MaasSimulator, NodeWorld]]:
        with NodeLab(list(HOSTS)) as lab:
            platform = platform_sim_factory(host=lab.gateway)
            with world_at(tmp_path, platform, host=lab.gateway, **LAB_BUNDLE) as world:
                nodes = NspawnNodes(lab, knobs=knobs, commission_timeout_s=180)
                maas = MaasSimulator(maas_inventory(load_environment("local"), enlisted=False), time_scale=MAAS_SCALE,
                                     enroll_backend=EnrollBackend.NSPAWN, nodes=nodes)
                maas.start()
                try:
                    yield nodes, maas, world
                finally:
                    maas.stop()

    return make


def _register_site_scripts(maas: MaasSimulator, extra: dict[str, bytes] | None = None) -> list[str]:
    """The commissioning bundle's scripts into MAAS, as SiteProfileReconciler.converge registers them."""
    blob = pack(render_bundle(bundle_spec(False, **{k: v for k, v in LAB_BUNDLE.items() if k != "packages"})))
    site = MaasSiteClient(maas.url, maas.api_key)
    registered = []
    for sc in bundle_scripts(blob, "commissioning", "commissioning"):
        site.put_script(sc.name, sc.script_type, sc.body, title=sc.title, description=sc.description,
                        tags=("gpuaas", "lab"))
        registered.append(sc.name)
    for name, body in (extra or {}).items():
        site.put_script(name, "testing", body, tags=("gpuaas", "lab"))
    return registered


def _context(world: NodeWorld, maas: MaasSimulator, testing: tuple[str, ...]) -> Context:
    platform = PlatformClient(world.platform.url, world.platform.creds.platform_admin)
    return Context(
        ops=MaasSiteClient(maas.url, maas.api_key),
        enrollment=PlatformEnrollment(platform, world.site_id, world.profile_id),
        policy=LifecyclePolicy(commissioning_scripts=(INVENTORY,), testing_scripts=testing, batch_max_parallel=2),
        # a real node commissions in seconds; on a loaded 2-core machine give each stage two minutes
        deadlines=Deadlines(commission_s=120, deploy_s=240, release_s=120, enroll_s=120, poll_initial_s=0.2,
                            poll_max_s=0.5),
        platform_url=world.platform.url,
        presign=bundle_presigner(world.store),
        log=lambda _m: None,
    )


def _results(maas: MaasSimulator, system_id: str, kind: str) -> dict[str, dict[str, Any]]:
    raw = MaasSiteClient(maas.url, maas.api_key)._call("NodeScriptResult", "read", read=True, system_id=system_id,
                                                    id=f"current-{kind}", include_output="true")
    return {r["name"]: r | {k: base64.b64decode(r[k]).decode() for k in ("output", "stdout", "stderr")}
            for r in raw["results"]}


def test_the_site_scripts_run_on_the_node_one_machine_passes_the_other_fails_testing(
    lab_maas: Callable[..., Any],
) -> None:
    """local-gpu-1: the bundle's inventory and fabric check pass on its commissioning node, then it deploys and
    is ready. local-gpu-2's RoCE ports are down (the rdma stand-in's knob) and it has 7 GPUs: the fabric check
    fails on the node, MAAS says Failed testing, the lifecycle re-commissions once (a second node), then stops
    naming the script; MAAS's record is what the scripts printed and exited with."""
    with lab_maas({"local-gpu-2": {"fabric-state": "DOWN", "gpus": "7"}}) as (nodes, maas, world):
        assert _register_site_scripts(maas) == [INVENTORY, FABRIC]
        ctx = _context(world, maas, (FABRIC,))
        results = {r.hostname: r for r in Scheduler(ctx).onboard(specs_for_world(world))}
        sids = {h: results[h].system_id or "" for h in HOSTS}
        recorded = {h: (_results(maas, sids[h], "commissioning"), _results(maas, sids[h], "testing")) for h in HOSTS}
        statuses = {m["hostname"]: m["status_name"] for m in maas.admin.machines()}
        events = maas.admin.events(sids["local-gpu-2"])
    assert not nodes.errors, nodes.errors
    good, bad = results["local-gpu-1"], results["local-gpu-2"]
    assert good.outcome is MachineOutcome.READY, good.reason
    assert statuses["local-gpu-1"] == "Deployed"
    # what the scripts did on the nodes: the inventory read 8 (7) GPUs from the node's lspci; exit statuses as run
    for host, gpus in (("local-gpu-1", 8), ("local-gpu-2", 7)):
        commissioning, testing = recorded[host]
        inventory = commissioning[INVENTORY]
        assert (inventory["status_name"], inventory["exit_status"]) == ("Passed", 0), inventory
        assert inventory["stdout"].startswith(f"gpus: {gpus}\nfabric_mode: roce\n"), inventory["stdout"]
        assert re.search(r"^lo\s+UNKNOWN", inventory["stdout"], re.M), "`ip -br link` ran on the node"
        assert commissioning["20-maas-03-machine-resources"]["exit_status"] == 0, "MAAS's built-ins (stand-ins) ran"
        assert "MAAS simulator stand-in" in commissioning["20-maas-03-machine-resources"]["output"]
        assert list(testing) == [FABRIC]
    assert (recorded["local-gpu-1"][1][FABRIC]["status_name"], recorded["local-gpu-1"][1][FABRIC]["exit_status"]) == (
        "Passed", 0)
    assert (recorded["local-gpu-2"][1][FABRIC]["status_name"], recorded["local-gpu-2"][1][FABRIC]["exit_status"]) == (
        "Failed", 1), "grep -q found no ACTIVE port: exit 1"
    # the failing machine: Failed testing in MAAS, commissioned twice on two nodes, the lifecycle names the script
    assert statuses["local-gpu-2"] == "Failed testing"
    assert bad.outcome is MachineOutcome.FAILED and bad.reason.startswith("MCH003"), bad.reason
    assert f"MAAS testing results: {FABRIC}: failed, exit 1, output: (no output)" in bad.reason, bad.reason
    assert [b.hostname for b in nodes.commissionings].count("local-gpu-2") == 2, "one automatic re-commission"
    assert [b.hostname for b in nodes.boots] == ["local-gpu-1"], "only the passing machine deployed"
    assert sum("-> Failed testing" in e["description"] for e in events) == 2


def test_a_failing_site_script_is_recorded_as_it_ran_and_its_output_reaches_the_error_redacted(
    lab_maas: Callable[..., Any],
) -> None:
    with lab_maas({}) as (nodes, maas, world):
        _register_site_scripts(maas, {"gpuaas-lab-burn-in": BURN_IN.encode()})
        ctx = _context(world, maas, (FABRIC, "gpuaas-lab-burn-in"))
        bad = Scheduler(ctx).onboard(specs_for_world(world)[1:])[0]
        testing = _results(maas, bad.system_id or "", "testing")
        node = nodes.commissionings[-1].node  # the last commissioning node's disk, read from the host
        did = {k: (node.root / f"var/tmp/burn-in.{k}").read_text() for k in ("stdout", "stderr", "exit")}
        drop_in = node.root / "etc/cloud/cloud.cfg.d/90_maas_datasource.cfg"
        assert stat.S_IMODE(drop_in.stat().st_mode) == 0o600 and "token_secret" in drop_in.read_text()
        seed = (node.root / "var/lib/cloud/seed/nocloud/user-data").read_text()
        assert "maas-run-scripts" in seed and "token_secret" not in seed, "the node key is not in the user_data"
    assert not nodes.errors, nodes.errors
    burn = testing["gpuaas-lab-burn-in"]
    assert (burn["status_name"], burn["exit_status"]) == ("Failed", int(did["exit"]))
    assert (burn["stdout"], burn["stderr"]) == (did["stdout"], did["stderr"]), "MAAS recorded what the script printed"
    assert sorted(burn["output"].splitlines()) == sorted((did["stdout"] + did["stderr"]).splitlines())
    assert testing[FABRIC]["status_name"] == "Passed"
    assert bad.outcome is MachineOutcome.FAILED and bad.reason.startswith("MCH003"), bad.reason
    assert "gpuaas-lab-burn-in: failed, exit 4, output: " in bad.reason, bad.reason
    assert "gpu 3: ECC errors 12 (limit 0)" in bad.reason and "bmc password=[redacted]" in bad.reason
    assert "hunter2" not in bad.reason and all("hunter2" not in n for n in bad.notes)
    assert FABRIC not in bad.reason, "only the failing script is named"
    summary = failure_summary("pool local-h200", [bad])  # the error Pulumi shows (bounded; the full one: stderr)
    assert summary is not None and "gpuaas-lab-burn-in: failed, exit 4" in summary, summary
    assert "gpu 3: ECC errors 12 (limit 0) | bmc password=[redacted]" in summary and " ... " not in summary, summary
