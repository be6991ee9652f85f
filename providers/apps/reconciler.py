"""AppInstance reconciler: converge one project-scoped app instance through the platform's public contract.

Only `PlatformClient` (the public API) is used, with the project's service-account token read from
Vault at call time (seed 004: an app team's automation needs no hidden internal access).

`converge`, in this order (`observe` is step 5 alone, `release` drains then decommissions):
  1. find the instance (by the id in state, else by name: a create whose response was lost, or a
     run killed mid-create, is adopted, never duplicated); create it if there is none, with an
     idempotency key derived from stack, project, name and how many instances of that name were
     decommissioned before; wait until it is ready. A failed instance is decommissioned and recreated.
  2. wait for operations a previous (killed) run left in flight;
  3. upgrade in place when the app version differs;
  4. plan member operations (`plan.plan_members`) and run them phase by phase, at most
     `max_parallel` at once, each awaited with a deadline; a phase with a failure stops the run and
     reports every failure with code, message, correlation id and operation id;
  5. observe: members as the platform reports them, with their last operation's status.
Every mutation carries an idempotency key derived from what it changes, so a retried request (5xx
after commit) replays the original operation instead of starting a second one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel

import clients.platform
from clients.platform import PlatformApiError
from clients.platform import models as pm
from clients.platform.models import ErrorCode
from clients.vault import VaultCredentials, VaultError
from environments.ca_paths import resolve_ca
from environments.coded import coded_errors
from providers.common import vault_reader

from .failures import REFUSED, AppFail, AppInstanceFailed, OpFailure, idempotency_key
from .plan import Action, ActionKind, Observed, Phase, plan_members
from .routes import converge_routes
from .spec import AppInstanceSpec

if TYPE_CHECKING:  # the HTTP client loads when a call first makes one (clients/platform)
    from clients.platform import PlatformClient

S = pm.InstanceStatus


class Entry(StrEnum):
    USE = "use"  # converge it
    WAIT = "wait"  # an instance-level operation is in flight: await it, then look again
    REBUILD = "rebuild"  # failed: decommission it, then create a new one
    GONE = "gone"  # decommissioned: create a new one


# What `apply` does with an instance it finds, per platform status.
ENTRY: dict[pm.InstanceStatus, Entry] = {
    S.PROVISIONING: Entry.WAIT,
    S.READY: Entry.USE,
    S.DEGRADED: Entry.USE,  # members failed: the member plan heals them
    S.UPGRADING: Entry.WAIT,
    S.DECOMMISSIONING: Entry.WAIT,
    S.DECOMMISSIONED: Entry.GONE,
    S.FAILED: Entry.REBUILD,
}
Result = tuple[Action, "pm.Operation | None", "OpFailure | None"]


class MemberOut(BaseModel):
    member_id: str
    component_key: str
    status: pm.MemberStatus
    node_id: str | None
    hostname: str | None
    host: str | None
    """The declared host of the slot this member fills (None: placed by the platform)."""
    last_operation_id: str | None
    last_operation_status: pm.OperationStatus | None
    last_correlation_id: str | None


class InstanceOut(BaseModel):
    instance_id: str
    status: pm.InstanceStatus
    app_version: str
    members: list[MemberOut]
    endpoints: dict[str, str] = {}
    """What the app publishes (name -> URL): other instances consume these as inputs."""
    ui_routes: dict[str, str] = {}
    """UI routes on the platform gateway (name -> URL of the route's own subdomain)."""


class AppInstanceReconciler:
    def __init__(self, spec: AppInstanceSpec, credentials: VaultCredentials | None) -> None:
        self.spec, self._credentials = spec, credentials

    @property
    def where(self) -> str:
        return f"app instance {self.spec.name} (project {self.spec.project_id})"

    # --- credentials: a project-scoped service account, read at call time ------------------------
    @contextmanager
    def client(self) -> Iterator[PlatformClient]:
        path = self.spec.instance.service_account_token_path
        with coded_errors(self.where, {VaultError: AppFail.VAULT}):
            token = vault_reader(self.spec.vault, self._credentials).read(path)
        ca_bundle = resolve_ca(self.spec.platform_ca_bundle)
        with clients.platform.PlatformClient(self.spec.platform_url, token, ca_bundle=ca_bundle) as api:
            try:
                yield api
            except PlatformApiError as e:
                if e.status in REFUSED:
                    raise AppFail.TOKEN_REFUSED(
                        self.where, f"the platform refused the service-account token read from Vault path {path!r} "
                        f"({e.status} {e.code}: {e.message}; correlation_id={e.correlation_id})",
                        f"store there a token of a service account of project {self.spec.project_id}") from None
                raise AppFail.PLATFORM(self.where, str(e)) from None

    # --- small effectful steps ---------------------------------------------------------------------
    def _await(self, api: PlatformClient, op: pm.Operation, action: str) -> tuple[pm.Operation, OpFailure | None]:
        try:
            done = api.wait_for_operation(self.spec.project_id, op.operation_id,
                                          timeout_s=self.spec.operation_timeout_s, raise_on_failure=False)
        except PlatformApiError as e:
            return op, OpFailure(action=action, code=e.code, message=e.message,
                                 correlation_id=e.correlation_id or op.correlation_id, operation_id=op.operation_id)
        if done.status is pm.OperationStatus.FAILED:
            err = done.error or pm.OperationError(code=ErrorCode.OPERATION_FAILED, message="no error detail")
            return done, OpFailure(action=action, code=err.code, message=err.message,
                                   correlation_id=done.correlation_id, operation_id=done.operation_id)
        return done, None

    def _instance_op(self, api: PlatformClient, action: str, start: Callable[[], pm.Operation]) -> pm.Operation:
        try:
            op = start()
        except PlatformApiError as e:
            if e.status in REFUSED:
                raise
            raise AppInstanceFailed(self.where, [OpFailure(action=action, code=e.code, message=e.message,
                                                           correlation_id=e.correlation_id)],
                                    "fix the cause and run up again") from None
        done, failure = self._await(api, op, action)
        if failure:
            raise AppInstanceFailed(self.where, [failure], "run up again to retry")
        return done

    def _settle(self, api: PlatformClient, instance_id: str) -> None:
        """Wait for operations a previous run started and never saw finish (killed, timed out)."""
        for op in api.list_operations(self.spec.project_id, instance_id):
            if not op.status.terminal:
                self._await(api, op, f"{op.kind.value} left in flight")

    def _create(self, api: PlatformClient, generation: int) -> pm.AppInstance:
        s = self.spec
        components = [
            pm.ComponentSpec(component_key=k, count=s.instance.members[k].count,
                             node_ids=[x.node_id for x in s.slots() if x.component_key == k and x.node_id],
                             allocation=_allocation(s, k))
            for k in sorted(s.instance.members)
        ]
        body = pm.AppInstanceCreate(name=s.name, app_type=pm.AppType(s.instance.app.slug),
                                    app_version=s.instance.app.version, components=components, config=s.config())
        key = idempotency_key(s.stack, s.project_id, s.name, "create", str(generation))
        op = self._instance_op(api, "create instance",
                               lambda: api.create_instance(s.project_id, body, idempotency_key=key))
        return api.get_instance(s.project_id, op.instance_id)

    def _decommission(self, api: PlatformClient, inst: pm.AppInstance) -> None:
        key = idempotency_key(inst.instance_id, "decommission", inst.last_operation_id or "-")
        self._instance_op(api, "decommission instance", lambda: api.decommission_instance(
            self.spec.project_id, inst.instance_id, "managed by gpuaas-infra", idempotency_key=key))

    def _get(self, api: PlatformClient, instance_id: str) -> pm.AppInstance | None:
        try:
            return api.get_instance(self.spec.project_id, instance_id)
        except PlatformApiError as e:
            if e.code == ErrorCode.APP_INSTANCE_NOT_FOUND:
                return None
            raise

    def _enter(self, api: PlatformClient, inst: pm.AppInstance) -> pm.AppInstance | None:
        """The instance to converge, or None when it is (now) gone; see ENTRY."""
        if ENTRY[inst.status] is Entry.WAIT:
            self._settle(api, inst.instance_id)
            inst = self._get(api, inst.instance_id) or inst
        entry = ENTRY[inst.status]
        if entry is Entry.WAIT:
            raise AppFail.STILL_BUSY(self.where, f"instance {inst.instance_id} is still {inst.status.value} after its "
                                     f"operations' deadline ({self.spec.operation_timeout_s:.0f}s)")
        if entry is Entry.REBUILD:
            self._decommission(api, inst)
            return None
        return inst if entry is Entry.USE else None

    def _ensure(self, api: PlatformClient, instance_id: str | None) -> pm.AppInstance:
        """The instance from state, else the live one of that name (adopted: a lost create response, a
        killed run, a lost state file), else a new one."""
        pid = self.spec.project_id
        known = self._get(api, instance_id) if instance_id else None
        if known is not None and (inst := self._enter(api, known)):
            return inst
        for named in api.list_instances(pid, name=self.spec.name):
            if ENTRY[named.status] is not Entry.GONE and (inst := self._enter(api, named)):
                return inst
        # The key counts this name's earlier (decommissioned) instances: a recreate is a new request.
        return self._create(api, generation=len(api.list_instances(pid, name=self.spec.name)))

    def _upgrade(self, api: PlatformClient, inst: pm.AppInstance) -> None:
        """A new version, or new config (an input changed, e.g. the vLLM endpoint OpenClaw consumes): the
        platform's upgrade carries both; with the same version it is a reconfiguration in place."""
        to, config = self.spec.instance.app.version, self.spec.config()
        key = idempotency_key(inst.instance_id, "upgrade", inst.app_version, to, inst.last_operation_id or "-",
                              idempotency_key(*(f"{k}={v}" for k, v in sorted(config.items()))))
        what = f"upgrade {inst.app_version} -> {to}" if to != inst.app_version else "reconfigure"
        self._instance_op(api, what, lambda: api.upgrade_instance(
            self.spec.project_id, inst.instance_id, pm.AppInstanceUpgrade(app_version=to, config=self.spec.config()),
            idempotency_key=key))

    def _member_op(self, api: PlatformClient, iid: str, a: Action, generation: str) -> Result:
        pid = self.spec.project_id
        try:
            # add and replace fill a slot: the same slot filled again later (a member removed by hand a
            # second time) is a new intent, so their keys carry the observed generation.
            if a.kind is ActionKind.ADD:
                assert a.slot is not None
                key = idempotency_key(iid, "add", a.component_key, str(a.slot.index), a.node_id or "-", generation)
                op = api.add_member(pid, iid, a.component_key, a.node_id, idempotency_key=key)
            elif a.kind is ActionKind.REPLACE:
                key = idempotency_key(iid, "replace", a.member_id or "", a.node_id or "-", generation)
                op = api.replace_member(pid, iid, a.member_id or "", a.node_id, idempotency_key=key)
            elif a.kind is ActionKind.DRAIN:
                key = idempotency_key(iid, "drain", a.member_id or "")
                op = api.drain_member(pid, iid, a.member_id or "", idempotency_key=key)
            else:
                key = idempotency_key(iid, "remove", a.member_id or "")
                op = api.remove_member(pid, iid, a.member_id or "", idempotency_key=key)
        except PlatformApiError as e:
            if e.status in REFUSED:
                raise
            if a.kind is ActionKind.DRAIN and e.code == ErrorCode.OPERATION_NOT_SUPPORTED:
                return a, None, None  # the app cannot drain this component: the remove that follows suffices
            return a, None, OpFailure(action=a.describe(), code=e.code, message=e.message,
                                      correlation_id=e.correlation_id)
        done, failure = self._await(api, op, a.describe())
        return a, done, failure

    def _converge(self, api: PlatformClient, iid: str, hosts: dict[str, str | None]) -> dict[str, str | None]:
        reported = api.list_members(self.spec.project_id, iid)
        members = [_observed(m) for m in reported]
        plan = plan_members(self.spec.slots(), members, hosts, self.spec.control_plane_keys(),
                            self.spec.drainable_keys())
        hosts = dict(plan.assigned)
        generation = observed_generation(api.get_instance(self.spec.project_id, iid), reported)
        for phase in Phase:
            actions = plan.phase(phase)
            if not actions:
                continue
            with ThreadPoolExecutor(max_workers=min(self.spec.max_parallel, len(actions))) as pool:
                results = list(pool.map(lambda a: self._member_op(api, iid, a, generation), actions))
            for a, op, _ in results:
                new = op and (op.replacement_member_id if a.kind is ActionKind.REPLACE else op.member_id)
                if a.slot is not None and new:
                    hosts[new] = a.slot.host
            failures = [f for _, _, f in results if f]
            if failures:
                raise AppInstanceFailed(self.where, failures,
                                        "run up again: only the operations not yet done are retried")
        return hosts

    def _observe(self, api: PlatformClient, iid: str, hosts: dict[str, str | None]) -> InstanceOut | None:
        pid = self.spec.project_id
        try:
            inst = api.get_instance(pid, iid)
        except PlatformApiError as e:
            if e.code == ErrorCode.APP_INSTANCE_NOT_FOUND:
                return None
            raise
        if inst.status is S.DECOMMISSIONED:
            return None
        ops = {o.operation_id: o for o in api.list_operations(pid, iid)}
        members = []
        for m in api.list_members(pid, iid):
            if m.status is pm.MemberStatus.REMOVED:
                continue
            last = ops.get(m.last_operation_id or "")
            members.append(MemberOut(
                member_id=m.member_id, component_key=m.component_key, status=m.status,
                node_id=m.node.node_id if m.node else None, hostname=m.node.hostname if m.node else None,
                host=hosts.get(m.member_id), last_operation_id=m.last_operation_id,
                last_operation_status=last.status if last else None, last_correlation_id=m.last_correlation_id))
        members.sort(key=lambda x: (x.component_key, x.host or "~", x.member_id))
        routes = {r.name: r.url for r in api.list_ui_routes(pid, iid)}
        return InstanceOut(instance_id=iid, status=inst.status, app_version=inst.app_version, members=members,
                           endpoints={e.name: e.url for e in inst.endpoints}, ui_routes=routes)

    def _drain_all(self, api: PlatformClient, instance_id: str, keys: frozenset[str]) -> None:
        drains = [Action(kind=ActionKind.DRAIN, phase=Phase.DRAIN, component_key=m.component_key, member_id=m.member_id)
                  for m in api.list_members(self.spec.project_id, instance_id)
                  if m.status is pm.MemberStatus.ACTIVE and m.component_key in keys]
        if not drains:
            return
        with ThreadPoolExecutor(max_workers=min(self.spec.max_parallel, len(drains))) as pool:
            results = list(pool.map(lambda a: self._member_op(api, instance_id, a, "-"), drains))
        failures = [f for _, _, f in results if f]
        if failures:
            raise AppInstanceFailed(self.where, failures, "run destroy again")

    # --- the lifecycle -----------------------------------------------------------------------------
    def _require_endpoints(self) -> None:
        """An input naming another instance's endpoint needs its URL: the consumer never runs without it."""
        for key, ref in self.spec.endpoint_inputs().items():
            if not self.spec.input_endpoints.get(key):
                raise AppFail.ENDPOINT_MISSING(self.where, f"input {key!r} needs endpoint {ref.endpoint!r} of instance "
                                               f"{ref.instance!r}, which publishes none yet",
                                               f"run up again once {ref.instance} runs")

    def converge(self, instance_id: str | None = None, hosts: dict[str, str | None] | None = None) -> InstanceOut:
        self._require_endpoints()
        with self.client() as api:
            inst = self._ensure(api, instance_id)
            self._settle(api, inst.instance_id)  # member operations a killed run left in flight
            if inst.app_version != self.spec.instance.app.version or inst.config != self.spec.config():
                self._upgrade(api, inst)
            kept = self._converge(api, inst.instance_id, dict(hosts or {}))
            converge_routes(api, self.spec, inst.instance_id, self.where)
            out = self._observe(api, inst.instance_id, kept)
        if out is None:
            raise AppFail.VANISHED(self.where, f"instance {inst.instance_id} vanished while it was converged")
        return out

    apply = converge  # the name benchmarks/bench_apps.py still calls

    def observe(self, instance_id: str, hosts: dict[str, str | None]) -> InstanceOut | None:
        with self.client() as api:
            return self._observe(api, instance_id, hosts)

    def release(self, instance_id: str) -> None:
        """Drain the members (the app moves work off them), then decommission the instance."""
        pid = self.spec.project_id
        with self.client() as api:
            try:
                inst = api.get_instance(pid, instance_id)
            except PlatformApiError as e:
                if e.code == ErrorCode.APP_INSTANCE_NOT_FOUND:
                    return
                raise
            if inst.status is S.DECOMMISSIONED:
                return
            self._settle(api, instance_id)
            if inst.status in (S.READY, S.DEGRADED):
                # Workers first; control-plane members the app can drain (RKE2 servers) last.
                cp, drainable = self.spec.control_plane_keys(), self.spec.drainable_keys()
                for wave in (drainable - cp, drainable & cp):
                    self._drain_all(api, instance_id, wave)
            self._decommission(api, api.get_instance(pid, instance_id))


def _allocation(spec: AppInstanceSpec, key: str) -> pm.Allocation | None:
    alloc = spec.instance.members[key].allocation
    return pm.Allocation.model_validate(alloc.model_dump(mode="json")) if alloc else None


def observed_generation(inst: pm.AppInstance, members: list[pm.Member]) -> str:
    """What the plan was made from: the instance's last operation (any member operation, ours or by
    hand, moves it) and every member the platform reports, removed ones included (a member removed
    by hand a second time adds its id). A retry of the same plan gets the same value; a later,
    separate intent (the same slot emptied again) gets a new one."""
    return idempotency_key(inst.last_operation_id or "-", *sorted(f"{m.member_id}:{m.status.value}" for m in members))


def _observed(m: pm.Member) -> Observed:
    return Observed(member_id=m.member_id, component_key=m.component_key, status=m.status,
                    node_id=m.node.node_id if m.node else None, hostname=m.node.hostname if m.node else None)
