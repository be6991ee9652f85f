"""The machine lifecycle with nodes that run their own launcher: the MAAS simulator's NODE enrollment
backend posts nothing for them; a node runner (below) boots each machine MAAS reports Deployed from
exactly the user_data MAAS was given. The lifecycle ends each machine by what its node reported."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from clients.maas import MaasSiteClient
from clients.platform import PlatformClient
from environments import load_environment
from providers.machines.records import Context
from providers.machines.runtime import PlatformEnrollment, bundle_presigner
from providers.machines.scheduler import Scheduler
from providers.machines.spec import Deadlines, LifecyclePolicy, MachineSpec
from providers.machines.status import MachineOutcome
from simulators.localstack import maas_inventory
from simulators.maas import EnrollBackend, MaasSimulator, PhaseDurations
from tests.fixtures.maas_sim import TEST_TIME_SCALE as MAAS_SCALE
from tests.machines.conftest import specs_for

from .conftest import Node, NodeWorld

HOSTS = ("local-gpu-1", "local-gpu-2")


class NodeRunner:
    """Boots every machine the MAAS simulator shows Deployed, once per user_data, with `boot`: each node in its own
    thread, as real nodes boot side by side (one node's launcher never waits for another's)."""

    def __init__(self, maas: MaasSimulator, boot: Callable[[str, bytes], None]) -> None:
        self.maas, self.boot = maas, boot
        self._seen: set[bytes] = set()
        self._stop = threading.Event()
        self._nodes: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def _run(self, hostname: str, user_data: bytes) -> None:
        try:
            self.boot(hostname, user_data)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for m in self.maas.admin.machines():
                    if m["hostname"] in HOSTS and m["status"] == 6:  # Deployed
                        ud = self.maas.admin.user_data(m["system_id"]) or b""
                        if ud not in self._seen:
                            self._seen.add(ud)
                            t = threading.Thread(target=self._run, args=(m["hostname"], ud), daemon=True,
                                                 name=f"node-{m['hostname']}")
                            self._nodes.append(t)
                            t.start()
            except BaseException as e:  # noqa: BLE001 - reported by the test
                self.errors.append(e)
                return
            self._stop.wait(0.05)

    @contextmanager
    def running(self) -> Iterator[NodeRunner]:
        t = threading.Thread(target=self._loop, name="node-runner", daemon=True)
        t.start()
        try:
            yield self
        finally:
            self._stop.set()
            t.join(timeout=120)
            for node in self._nodes:
                node.join(timeout=120)
            self._stop.clear()


class TempRootNodes:
    """`boot` for NodeRunner: the launcher against a fresh temporary root per deploy (tests/node/conftest.py)."""

    def __init__(self, tmp: Path, env: dict[str, dict[str, str]]) -> None:
        self.tmp, self.env = tmp, env
        self.nodes: dict[str, list[Node]] = {}
        self._boots: dict[str, int] = {}
        self._lock = threading.Lock()

    def __call__(self, hostname: str, user_data: bytes) -> None:
        files = {f["path"]: f["content"] for f in yaml.safe_load(user_data)["write_files"]}
        enrollment = json.loads(files["/etc/gpuaas/enrollment.json"])
        bundle = json.loads(files["/etc/gpuaas/bundle.json"])
        with self._lock:  # numbered as boots start: a redeploy's boot may start while the last one still runs
            n = self._boots[hostname] = self._boots.get(hostname, -1) + 1
        root = self.tmp / f"{hostname}-{n}"  # a reimage: a fresh disk
        root.mkdir()
        node = Node(root=root, node_id=enrollment["node_id"], token=enrollment["enrollment_token"],
                    url=bundle["url"], user_data=user_data)
        node.boot()
        node.run(**self.env.get(hostname, {}))
        self.nodes.setdefault(hostname, []).append(node)


def specs_for_world(node_world: NodeWorld) -> list[MachineSpec]:
    specs = specs_for(load_environment("local"), roce=False)
    deploy = {"bundle_ref": node_world.bundle_ref, "bundle_digest": node_world.bundle_digest,
              "launcher_url": node_world.launcher_url}
    return [specs[h].model_copy(update={"deploy": specs[h].deploy.model_copy(update=deploy)}) for h in HOSTS]


def _deadlines(time_scale: float) -> Deadlines:
    scaled = Deadlines().scaled(time_scale)
    return scaled.model_copy(update={"enroll_s": max(45.0, scaled.enroll_s)})


def context_for(node_world: NodeWorld, maas: MaasSimulator, time_scale: float = 1e-2) -> Context:
    """`time_scale`: of MAAS's deadlines. Real nspawn nodes take NSPAWN_MACHINE_TIME_SCALE (deploy 180 s, as the
    NSPAWN stack): a real node's deploy took over 20 s on CI's slower host under the suite's load, and 1e-2's 36 s
    expired before the never-reporting node's 60 s MAAS wall clock (test_nspawn_node.py), giving MCH014."""
    platform = PlatformClient(node_world.platform.url, node_world.platform.creds.platform_admin)
    return Context(
        ops=MaasSiteClient(maas.url, maas.api_key),
        enrollment=PlatformEnrollment(platform, node_world.site_id, node_world.profile_id),
        policy=LifecyclePolicy(commissioning_scripts=(), batch_max_parallel=2),
        # enrollment: 45 s. The launcher alone runs in a few seconds, but on a 2-core host running the suite's three
        # workers it took over 18 s (the 1e-2 scale), and the lifecycle redeployed nodes whose launchers were still
        # running (run20 on a slower host).
        deadlines=_deadlines(time_scale),
        platform_url=node_world.platform.url,
        presign=bundle_presigner(node_world.store),
        log=lambda _m: None,
    )


def test_each_machine_ends_by_its_own_nodes_report(node_world: NodeWorld, tmp_path: Path) -> None:
    maas = MaasSimulator(maas_inventory(load_environment("local"), enlisted=False), time_scale=MAAS_SCALE,
                         enroll_backend=EnrollBackend.NODE)
    maas.start()
    try:
        specs = specs_for_world(node_world)
        nodes = TempRootNodes(tmp_path, {"local-gpu-2": {"GPUAAS_LAB_GPUS": "7"}})
        runner = NodeRunner(maas, nodes)
        with runner.running():
            results = {r.hostname: r for r in Scheduler(context_for(node_world, maas)).onboard(specs)}
        assert not runner.errors, runner.errors
        good, bad = results["local-gpu-1"], results["local-gpu-2"]
        assert good.outcome is MachineOutcome.READY, good.reason
        record = node_world.admin.get_node(good.node_id or "")
        assert record.bootstrap is not None and record.bootstrap.bundle_digest == specs[0].deploy.bundle_digest
        assert record.bootstrap.runner.value == "launcher", "the node itself reported, not the simulator"
        assert not (nodes.nodes["local-gpu-1"][0].root / "etc/gpuaas/enrollment.json").exists()
        # the failed validation ends that machine alone, naming the script and its output tail
        assert bad.outcome is MachineOutcome.VALIDATION_FAILED
        assert bad.reason.startswith("MCH021") and "validate-gpu-check" in bad.reason
        assert "expected 8 GPUs, found 7" in bad.reason
        token = nodes.nodes["local-gpu-2"][0].token
        assert token not in bad.reason
        # fixed (the GPU is back): the next up releases the machine, deploys it afresh and it enrolls
        nodes.env.clear()
        with runner.running():
            again = Scheduler(context_for(node_world, maas)).onboard([specs[1]], {"local-gpu-2": bad.system_id or ""})
        assert again[0].outcome is MachineOutcome.READY, again[0].reason
        assert len(nodes.nodes["local-gpu-2"]) == 2, "a fresh node: new root, new token, new URL"
    finally:
        maas.stop()


def test_a_failed_deployment_ends_by_the_failed_step_its_node_reported(node_world: NodeWorld, tmp_path: Path) -> None:
    """On a real node a failed launcher step makes runcmd, hence cloud-init's final stage, fail: MAAS says
    Failed deployment (tests/node/test_nspawn_stack.py). Here the node's launcher runs while MAAS deploys
    and reports a failed validation; MAAS's deploy then fails with a datasource failure (injected), which
    alone the lifecycle would retry: the node's own report decides (MCH021 naming the script), no retry."""
    maas = MaasSimulator(maas_inventory(load_environment("local"), enlisted=False), time_scale=MAAS_SCALE,
                         # 30 s of Deploying: the node's launcher (a few seconds, more on a loaded 2-core host:
                         # 5 s was once too short, and 15 s on a slower host running the suite) reports before
                         # MAAS's injected deploy failure
                         enroll_backend=EnrollBackend.NODE, durations=PhaseDurations(deploying=300_000),
                         faults={"per_machine": {"local-gpu-2": {"deploy_failures": 1}}})
    maas.start()
    nodes = TempRootNodes(tmp_path, {"local-gpu-2": {"GPUAAS_LAB_GPUS": "7"}})
    seen: set[bytes] = set()
    stop = threading.Event()

    def run_while_deploying() -> None:  # the node boots during Deploying, as a real one does
        while not stop.is_set():
            for m in maas.admin.machines():
                if m["hostname"] == "local-gpu-2" and m["status"] == 9:  # Deploying
                    ud = maas.admin.user_data(m["system_id"]) or b""
                    if ud not in seen:
                        seen.add(ud)
                        nodes(m["hostname"], ud)
            stop.wait(0.05)

    runner = threading.Thread(target=run_while_deploying, daemon=True)
    runner.start()
    try:
        spec = specs_for_world(node_world)[1]
        results = {r.hostname: r for r in Scheduler(context_for(node_world, maas)).onboard([spec])}
        events = maas.admin.events(results["local-gpu-2"].system_id or "")
    finally:
        stop.set()
        runner.join(timeout=30)
        maas.stop()
    bad = results["local-gpu-2"]
    assert bad.outcome is MachineOutcome.VALIDATION_FAILED, bad.reason
    assert bad.reason.startswith("MCH021") and "validate-gpu-check" in bad.reason and "found 7" in bad.reason
    assert "status Failed deployment" in bad.reason
    assert sum("-> Deploying" in e["description"] for e in events) == 1, "no datasource retry"


def test_a_node_whose_agent_the_platform_never_sees_is_not_ready(node_world: NodeWorld, tmp_path: Path) -> None:
    """The launcher succeeds and reports; the node agent is installed but never heartbeats: the platform keeps
    the node enrolling, and the lifecycle never calls the machine ready; its deadline names what it waited for.
    The other machine's agent heartbeats: ready."""
    maas = MaasSimulator(maas_inventory(load_environment("local"), enlisted=False), time_scale=MAAS_SCALE,
                         enroll_backend=EnrollBackend.NODE)
    maas.start()
    try:
        specs = specs_for_world(node_world)
        nodes = TempRootNodes(tmp_path, {"local-gpu-2": {"GPUAAS_TEST_AGENT_DEAD": "1"}})
        with NodeRunner(maas, nodes).running():  # the enrollment deadline: 45 s (context_for)
            results = {r.hostname: r for r in Scheduler(context_for(node_world, maas)).onboard(specs)}
    finally:
        maas.stop()
    good, dead = results["local-gpu-1"], results["local-gpu-2"]
    assert good.outcome is MachineOutcome.READY, good.reason
    assert node_world.admin.get_node(good.node_id or "").agent is not None
    record = node_world.admin.get_node(dead.node_id or "")
    assert record.bootstrap is not None and record.bootstrap.outcome.value == "succeeded", "the launcher finished"
    assert record.status.value == "enrolling" and record.agent is None
    assert dead.outcome is MachineOutcome.TIMED_OUT, dead.reason
    assert dead.reason.startswith("MCH014") and "node's agent alive" in dead.reason, dead.reason
