"""The world the convergence property drives: the `local` stack, its declared environment file, the
actions (declared changes, hand drift in MAAS and on the platform, kills) and the invariant checks."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from clients.maas import MaasClient
from clients.platform import PlatformClient
from clients.platform import models as pm
from simulators.localstack import LocalStack
from tools.pulumi_cli.results import StepOp

REPO = Path(__file__).resolve().parents[2]
POOL = "local-h200"
STANDALONE = "local-gpu-1"  # the Slurm worker is pinned to it
SPARES = ({"hostname": "local-gpu-5", "ipmi_address": "172.16.20.15", "pxe_mac": "b0:7b:25:20:00:15"},
          {"hostname": "local-gpu-6", "ipmi_address": "172.16.20.16", "pxe_mac": "b0:7b:25:20:00:16"})
APP = "slurm-local"
# The neighbour: a second stack on the same site and profile (one batch_max_parallel lease, the same RoCE
# pools), with a pool of its own machines; it runs at the same time as the stack under test.
NEIGHBOUR_POOL = "local-h200-n"
NEIGHBOURS = ({"hostname": "local-gpu-7", "ipmi_address": "172.16.20.17", "pxe_mac": "b0:7b:25:20:00:17"},
              {"hostname": "local-gpu-8", "ipmi_address": "172.16.20.18", "pxe_mac": "b0:7b:25:20:00:18"})


def _spare_doc(spare: dict[str, str], pool: str = POOL) -> dict[str, Any]:
    return {**spare, "sku": "h200", "site": "local", "profile": "h200-lab", "pool": pool}


@dataclass
class World:
    stack: LocalStack
    engine: Any
    env_file: Path
    rng: random.Random
    log: list[str] = field(default_factory=list)
    node_ids: dict[str, str] = field(default_factory=dict)
    redeployed: set[str] = field(default_factory=set)
    outputs: dict[str, Any] = field(default_factory=dict)
    make_neighbour: Callable[[], Any] | None = None  # the second stack's engine factory
    neighbour: Any = None  # the second stack's engine, once it has been started
    neighbour_file: Path | None = None
    neighbour_kernel: dict[str, str] = field(default_factory=dict)  # its machines' hwe_kernel, flipped to redeploy
    pending: Any = None  # the neighbour's `up` running while the stack under test converges

    # --- set-up ---------------------------------------------------------------------------------
    @classmethod
    @contextmanager
    def start(cls, engine_factory: Any, tmp: Path, seed: int) -> Iterator[World]:
        declared = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
        racked = {**declared, "machines": declared["machines"] + [_spare_doc(s) for s in SPARES]
                  + [_spare_doc(n, NEIGHBOUR_POOL) for n in NEIGHBOURS],
                  "machine_pools": declared["machine_pools"] + [_neighbour_pool()]}
        (tmp / "racked.yaml").write_text(yaml.safe_dump(racked, sort_keys=False))
        env_file = tmp / "local.yaml"
        env_file.write_text(yaml.safe_dump(declared, sort_keys=False))
        with LocalStack(str(tmp / "racked.yaml")) as stack:
            cfg = stack.stack_config()
            cfg["gpuaas-infra:environment"] = str(env_file)
            engine = engine_factory(REPO, "local", config=cfg, backend=tmp / "backend")
            world = cls(stack, engine, env_file, random.Random(seed))
            world.make_neighbour = lambda: engine_factory(
                REPO, "local-n", config={**cfg, "gpuaas-infra:environment": str(tmp / "neighbour.yaml")},
                backend=tmp / "backend")
            world.neighbour_file = tmp / "neighbour.yaml"
            try:
                yield world
            except BaseException:
                print("actions so far:", " -> ".join(world.log))
                raise

    def note(self, what: str) -> None:
        self.log.append(what)

    # --- the declared document -------------------------------------------------------------------
    def doc(self) -> dict[str, Any]:
        return yaml.safe_load(self.env_file.read_text())

    def save(self, doc: dict[str, Any]) -> None:
        self.env_file.write_text(yaml.safe_dump(doc, sort_keys=False))

    def declared(self) -> list[str]:
        return [m["hostname"] for m in self.doc()["machines"]]

    def pool_members(self) -> list[str]:
        return [m["hostname"] for m in self.doc()["machines"] if m.get("pool") == POOL]

    # --- the real systems ------------------------------------------------------------------------
    @property
    def maas(self) -> MaasClient:
        """A MAAS client with the site's current API key (Vault's: it is rotated by an action)."""
        assert self.stack.maas is not None
        return MaasClient(self.stack.maas.url, self.secret(self.stack.env.sites[0].maas_api_key_path))

    def secret(self, ref: str) -> str:
        """The current value of a Vault reference (`path#key`)."""
        assert self.stack.vault is not None
        path, key = ref.split("#", 1)
        data = self.stack.vault.client().secrets.kv.v2.read_secret_version(
            path=path, mount_point=self.stack.env.vault.kv_mount, raise_on_deleted_version=True)["data"]["data"]
        return str(data[key])

    def put_secret(self, ref: str, value: str) -> None:
        """A new version of a Vault reference's secret (its other keys kept), as an operator rotates it."""
        assert self.stack.vault is not None
        path, key = ref.split("#", 1)
        kv = self.stack.vault.client().secrets.kv.v2
        data = kv.read_secret_version(path=path, mount_point=self.stack.env.vault.kv_mount,
                                      raise_on_deleted_version=True)["data"]["data"]
        kv.create_or_update_secret(path=path, mount_point=self.stack.env.vault.kv_mount,
                                   secret={**data, key: value})

    def maas_machines(self) -> list[dict[str, Any]]:
        assert self.stack.maas is not None
        return list(self.stack.maas.admin.dump_state()["machines"])  # MAAS's own machine JSON

    def maas_by_host(self) -> dict[str, dict[str, Any]]:
        return {m["hostname"]: m for m in self.maas_machines()}

    def system_id(self, hostname: str) -> str:
        sid = self.state_machine(hostname).get("system_id")
        assert sid, f"{hostname} has no system_id in the stack outputs"
        return str(sid)

    def platform_api(self) -> PlatformClient:
        assert self.stack.platform is not None
        pid = self.stack.env.app_instances[0].project_id
        token = self.stack.platform.issue_token(pm.Role.SERVICE_ACCOUNT, project_id=pid)
        return PlatformClient(self.stack.platform.url, token)

    def instances(self) -> list[Any]:
        assert self.stack.platform is not None
        return [i for i in self.stack.platform.store.instances.values()
                if i.name == APP and i.status is not pm.InstanceStatus.DECOMMISSIONED]

    def members(self) -> list[Any]:
        assert self.stack.platform is not None
        ids = {i.instance_id for i in self.instances()}
        return [x for x in self.stack.platform.store.members.values()
                if x.instance_id in ids and x.status is not pm.MemberStatus.REMOVED]

    # --- outputs -----------------------------------------------------------------------------------
    def state_machine(self, hostname: str) -> dict[str, Any]:
        machines = self.outputs.get("machines") or {}
        if hostname in machines:
            return dict(machines[hostname] or {})
        pool = machines.get(f"pool:{POOL}") or {}
        return dict(pool.get(hostname) or {})

    def recover(self) -> None:
        """What an operator runs after a killed `pulumi up` (docs/recovery.md, "A run was killed"):
        `pulumi cancel` for the lock the killed run left, then `pulumi refresh --clear-pending-creates`
        (the next `up` creates those resources again and the providers adopt what they find)."""
        self.engine.cancel()
        cleared = self.engine.refresh(flags=["--clear-pending-creates"])
        assert cleared.ok, f"refresh --clear-pending-creates after a kill failed: {cleared.errors()}"

    # --- converge and check ------------------------------------------------------------------------
    def up_and_check(self, label: str) -> None:
        # `pulumi up --refresh`, what the deploy jobs run: hand drift is only seen through a refresh
        # (Pulumi diffs against state); the refresh is part of the one converging run.
        pre = self.engine.refresh()
        assert pre.ok, f"{label}: the refresh of up --refresh failed: {pre.errors()}"
        # the neighbour's `up --refresh` and this `up` start together: two CLIs, each with its providers
        pending, self.pending = (self.neighbour.start_up(flags=["--refresh"]) if self.pending else None), None
        up = self.engine.up()
        assert up.ok, f"{label}: up failed: {up.errors()}\n{up.log[-3000:]}"
        self.outputs = dict(up.outputs or {})
        if pending is not None:
            result = pending.wait(timeout=600)
            assert result.ok, f"{label}: the neighbour's up failed: {result.errors()}\n{result.log[-3000:]}"
            neighbour = self.neighbour.preview(expect_no_changes=True)
            changed = {u: op.value for u, op in neighbour.ops().items() if op is not StepOp.SAME}
            assert neighbour.ok and not changed, f"{label}: the neighbour's next preview is not clean: {changed}"
        self.assert_clean_then_no_drift(label)
        again = self.engine.preview(expect_no_changes=True)
        changed = {u: op.value for u, op in again.ops().items() if op is not StepOp.SAME}
        assert again.ok and not changed, f"{label}: preview after refresh is not clean: {changed}"
        self.check_invariants(label)

    def assert_clean_then_no_drift(self, label: str) -> None:
        """After a converging `up`: `preview --expect-no-changes` is clean and a refresh reports no drift."""
        preview = self.engine.preview(expect_no_changes=True)
        changed = {u: op.value for u, op in preview.ops().items() if op is not StepOp.SAME}
        assert preview.ok and not changed, f"{label}: the next preview is not clean: {changed} {preview.errors()}"
        refresh = self.engine.refresh()
        assert refresh.ok, f"{label}: refresh failed: {refresh.errors()}"
        summary = refresh.changeSummary or {}
        assert not summary.get("update") and not summary.get("delete"), (
            f"{label}: refresh right after a clean up reports drift: {summary}")

    def check_invariants(self, label: str) -> None:
        machines = self.maas_machines()
        for key in ("hostname", "system_id"):
            dup = [k for k, n in Counter(m[key] for m in machines).items() if n > 1]
            assert not dup, f"{label}: duplicate MAAS machines by {key}: {dup}"
        macs = Counter(i["mac_address"].lower() for m in machines for i in m["interface_set"])
        assert not [k for k, n in macs.items() if n > 1], f"{label}: a MAC on two machines"
        by_host = {m["hostname"]: m for m in machines}
        assert self.stack.maas is not None
        peak = self.stack.maas.admin.peak_concurrency()
        bound = self.doc()["sites"][0]["profiles"][0]["batch_max_parallel"]
        assert all(site["busy"] <= bound for site in peak.values()), (
            f"{label}: more machines commissioning/deploying at once than batch_max_parallel {bound}: {peak}")
        for hostname in self.neighbour_kernel:  # the neighbour's machines stay deployed, whatever the other does
            status = by_host[hostname]["status_name"]
            assert status == "Deployed", f"{label}: the neighbour's {hostname} is {status}"
        assert self.stack.platform is not None
        nodes = self.stack.platform.store.nodes
        seen: dict[str, str] = {}
        for hostname in self.declared():
            m = by_host.get(hostname)
            assert m is not None, f"{label}: declared machine {hostname} is not in MAAS under its name"
            assert m["status_name"] == "Deployed", f"{label}: {hostname} is {m['status_name']}"
            record = self.state_machine(hostname)
            node_id = record.get("node_id")
            assert node_id, f"{label}: {hostname} has no node id in the stack outputs: {record}"
            assert (m.get("owner_data") or {}).get("gpuaas_node_id") == node_id, f"{label}: owner data vs state"
            assert nodes[node_id].status.value == "active", f"{label}: node of {hostname} not active"
            old = self.node_ids.get(hostname)
            assert old is None or old == node_id or hostname in self.redeployed, (
                f"{label}: {hostname} lost its node id {old} -> {node_id} without a redeploy")
            seen[hostname] = node_id
        self.node_ids, self.redeployed = seen, set()
        assert len(self.instances()) == 1, f"{label}: {len(self.instances())} instances of {APP}"
        counts = Counter(x.component_key for x in self.members())
        assert counts == Counter({"controller": 1, "worker": 1}), f"{label}: members {counts}"
        worker = next(x for x in self.members() if x.component_key == "worker")
        bound = worker.node.node_id if worker.node is not None else None
        assert bound == seen[STANDALONE], f"{label}: the worker is not on {STANDALONE}'s node"


# --- actions ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Action:
    name: str
    apply: Callable[[World], None]

    def __repr__(self) -> str:
        return self.name


def join(w: World) -> None:
    doc = w.doc()
    spare = next((s for s in SPARES if s["hostname"] not in w.declared()), None)
    if spare is None:
        return redeploy(w)
    doc["machines"].append(_spare_doc(spare))
    w.save(doc)
    w.redeployed.add(spare["hostname"])


def leave(w: World) -> None:
    pool = w.pool_members()
    if len(pool) <= 1:
        return join(w)
    gone = w.rng.choice(pool)
    doc = w.doc()
    doc["machines"] = [m for m in doc["machines"] if m["hostname"] != gone]
    w.save(doc)
    w.note(f"  ({gone} leaves)")


def redeploy(w: World) -> None:
    doc = w.doc()
    m = w.rng.choice(doc["machines"])
    m["hwe_kernel"] = None if m.get("hwe_kernel") else "ga-22.04"
    if m["hwe_kernel"] is None:
        del m["hwe_kernel"]
    w.save(doc)
    w.redeployed.add(m["hostname"])
    w.note(f"  ({m['hostname']} redeploys)")


def hand_release(w: World) -> None:
    hostname = w.rng.choice(w.declared())
    w.maas.release(w.system_id(hostname), erase=False, secure_erase=False, quick_erase=False, force=False)
    w.redeployed.add(hostname)
    w.note(f"  ({hostname} released by hand)")


def hand_rename(w: World) -> None:
    hostname = w.rng.choice(w.declared())
    w.maas.set_hostname(w.system_id(hostname), f"{hostname}-renamed")
    w.note(f"  ({hostname} renamed by hand)")


def tag_edit(w: World) -> None:
    sid = w.system_id(STANDALONE)
    w.maas.set_tags(sid, ["stray"], remove=["gpu"])
    w.note(f"  ({STANDALONE}: tag gpu removed, stray added by hand)")


def member_removal(w: World) -> None:
    with w.platform_api() as api:
        pid = w.stack.env.app_instances[0].project_id
        worker = next(x for x in w.members() if x.component_key == "worker")
        api.wait_for_operation(pid, api.remove_member(pid, worker.instance_id, worker.member_id).operation_id)


def kill(w: World) -> None:
    """A declared redeploy whose `up` is killed at a random moment, then the operator's recovery."""
    redeploy(w)
    handle = w.engine.start_up()
    time.sleep(w.rng.uniform(0.3, 9.0))  # `up` previews first (a few seconds), then updates
    handle.kill()
    handle.wait(timeout=60)
    w.recover()


def enroll_burst(w: World) -> None:
    """The platform answers 502 to the next enrollment, and a machine redeploys: its node never enrolls (what
    posts it does not retry), so the lifecycle redeploys it again once the enroll deadline passes."""
    from simulators.platform import ErrorBurst, FaultPlan

    assert w.stack.platform is not None
    w.stack.platform.inject(FaultPlan(error_bursts=[ErrorBurst(status=502, count=1, methods=["POST"],
                                                               path_prefix="/api/v1/node-bootstrap/enroll")]))
    redeploy(w)


def erase_mode(w: World) -> None:
    """The profile's release erase mode flips (an in-place policy change; the next release uses it)."""
    doc = w.doc()
    profile = doc["sites"][0]["profiles"][0]
    profile["release_erase_mode"] = "none" if profile.get("release_erase_mode", "quick") == "quick" else "quick"
    w.save(doc)
    w.note(f"  (release_erase_mode {profile['release_erase_mode']})")


def bundle_tamper(w: World) -> None:
    """The published bundle's pinned version is deleted from the store and other bytes put under its key
    with its metadata copied: `up --refresh` finds it drifted, publishes it again and every machine
    redeploys with the new version."""
    assert w.stack.s3 is not None
    s3, bucket = w.stack.s3.client(), w.stack.env.artifact_store.bucket
    for v in s3.list_object_versions(Bucket=bucket).get("Versions") or []:
        if v["Key"].startswith("bundles/") and v["IsLatest"]:
            meta = s3.head_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Metadata"]
            s3.delete_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])
            s3.put_object(Bucket=bucket, Key=v["Key"], Body=b"tampered", Metadata=meta)
    w.redeployed.update(w.declared())


def _neighbour_pool() -> dict[str, str]:
    return {"name": NEIGHBOUR_POOL, "site": "local", "profile": "h200-lab", "description": "the neighbour stack"}


def neighbour(w: World) -> None:
    """The second stack on the same site runs `up --refresh` at the same time as the stack under test's `up`,
    both deploying: its first run deploys its two machines, later runs redeploy one of them, and a machine of the
    stack under test redeploys too (so both want the profile's batch_max_parallel slots at once). It declares what
    the other declares of the site (profiles, RoCE pools, bundles: the same document's) and its own pool; no
    hosts, no apps."""
    doc = w.doc()
    if not w.neighbour_kernel:
        assert w.make_neighbour is not None
        w.neighbour = w.make_neighbour()
        w.neighbour_kernel = {n["hostname"]: "" for n in NEIGHBOURS}
        w.note("  (the neighbour stack deploys its machines)")
    else:
        host = w.rng.choice(sorted(w.neighbour_kernel))
        w.neighbour_kernel[host] = "" if w.neighbour_kernel[host] else "ga-22.04"
        w.note(f"  (the neighbour redeploys {host})")
    machines = [_spare_doc(n, NEIGHBOUR_POOL) for n in NEIGHBOURS]
    for m in machines:
        if w.neighbour_kernel[m["hostname"]]:
            m["hwe_kernel"] = w.neighbour_kernel[m["hostname"]]
    doc.update(machines=machines, machine_pools=[_neighbour_pool()], hosts=[], app_instances=[])
    assert w.neighbour_file is not None
    w.neighbour_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    w.pending = True
    redeploy(w)


def rotate_maas_key(w: World) -> None:
    """An operator rotates the site's MAAS API key: a new key made through MAAS's account API, written to Vault,
    the old key deleted in MAAS (refused from then on). The next run reads the new one."""
    from maas.client import connect
    from maas.client.bones import CallError
    from maas.client.utils.creds import Credentials

    assert w.stack.maas is not None
    ref = w.stack.env.sites[0].maas_api_key_path
    old = w.secret(ref)
    new = connect(w.stack.maas.url, apikey=old).account.create_credentials()
    w.put_secret(ref, str(new))
    connect(w.stack.maas.url, apikey=str(new)).account.delete_credentials(Credentials.parse(old))
    try:
        connect(w.stack.maas.url, apikey=old).users.whoami()
    except CallError as refused:
        assert refused.status == 401, refused
    else:
        raise AssertionError("the old MAAS key still works after its deletion")


def rotate_platform_tokens(w: World) -> None:
    """An operator rotates the platform admin token and every app's service-account token: a new token for the
    same principal, written to Vault, the old one revoked (refused from then on)."""
    assert w.stack.platform is not None
    env = w.stack.env
    for ref in (env.platform.admin_token_path, *(app.service_account_token_path for app in env.app_instances)):
        old = w.secret(ref)
        w.put_secret(ref, w.stack.platform.reissue_token(old))
        w.stack.platform.revoke_token(old)
        record = w.stack.platform.store.bearer_record(old)
        assert record is not None and record.revoked, ref


ACTIONS = [Action(f.__name__, f) for f in (join, leave, redeploy, hand_release, hand_rename, tag_edit,
                                           member_removal, kill, enroll_burst, erase_mode, bundle_tamper,
                                           neighbour, rotate_maas_key, rotate_platform_tokens)]
