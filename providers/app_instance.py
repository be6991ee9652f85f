"""AppInstance: a project-scoped app instance (Slurm first) converged through member operations (seed 004).

A thin adapter: Pulumi's dicts -> `AppInstanceSpec` (providers/apps/spec.py) -> `AppInstanceReconciler`
(providers/apps/reconciler.py) -> outputs. Planning lives in providers/apps/plan.py.

- `check`: the spec model, then the environment's own app-instance rules (APP001..APP004, REF005,
  ROLE002) over this instance; unresolved node ids at preview are accepted.
- `diff`: name, project, app slug or runtime metadata changed -> replace (delete first: names are unique
  per project); any other input -> update; and drift: the members a refresh found (`members`) planned
  against the desired slots give operations to run, or the version differs -> update.
- `create`/`update`: converge (see the reconciler); `read`: the instance and members as the platform
  reports them (refresh shows a member removed out of band); `delete`: drain, then decommission.
The resource id is `<project_id>/<name>`; the platform's instance id is the `instance_id` output.
Outputs: instance_id, status, app_version, members[{member_id, component_key, status, node_id,
hostname, host, last_operation_id, last_operation_status, last_correlation_id}], endpoints (what the app
publishes: name -> URL; another instance's `input_endpoints` reads them), ui_routes (name -> the route's
URL on the platform gateway) — nothing secret.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, ReadResult, Resource
from pydantic import ValidationError

from providers.apps.plan import outstanding
from providers.apps.reconciler import AppInstanceReconciler, InstanceOut
from providers.apps.spec import SOURCE, AppInstanceArgs, AppInstanceSpec, parse_spec, rule_failures
from providers.base import KindProvider
from providers.common import has_unknown, plain
from providers.kind import KindDescriptor, is_unknown, register

INPUT_KEYS = tuple(AppInstanceSpec.model_fields)
OUTPUT_KEYS = ("instance_id", "status", "app_version", "members", "endpoints", "ui_routes")
DESCRIPTOR = register(KindDescriptor(
    name="AppInstance",
    identity=("instance.name", "instance.project_id"),
    replaces=("instance.app.slug", "instance.runtime"),  # the platform cannot change an instance's app type
    in_place=("instance", "stack", "blueprint", "topology", "placements", "platform_url", "platform_ca_bundle", "vault",
              "max_parallel", "operation_timeout_s", "cpu_only_offered", "input_endpoints"),
    delete_before_replace=True,  # names are unique per project
    summary_outputs=("instance_id", "status", "app_version"),
    doc="a project-scoped app instance converged through idempotent member operations",
    notes={"instance.app.version": "an in-place upgrade", "instance.members": "member operations, in place",
           "placements": "node ids of the machines members bind to (unknown until they enroll)",
           "input_endpoints": "URLs other instances publish, consumed as inputs: a reconfiguration in place",
           "instance.inputs": "app config: a reconfiguration in place"},
))


def _get(d: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


def _inputs(props: dict[str, Any]) -> dict[str, Any]:
    p = plain(props)
    return {k: p[k] for k in INPUT_KEYS if k in p}


def _hosts(props: dict[str, Any]) -> dict[str, str | None]:
    return {m["member_id"]: m.get("host") for m in (plain(props).get("members") or [])}


def drift(olds: dict[str, Any], news: dict[str, Any]) -> list[str]:
    """What the last observation (create/update/refresh) says still needs doing for the desired spec."""
    try:
        spec = parse_spec(_inputs(news))
    except ValidationError:
        return []
    return outstanding(spec, plain(olds))


class AppInstanceProvider(KindProvider[AppInstanceSpec]):
    descriptor = DESCRIPTOR
    spec_model = AppInstanceSpec
    inputs = kept_inputs = INPUT_KEYS

    def _rec(self, props: dict[str, Any]) -> AppInstanceReconciler:
        return AppInstanceReconciler(self.spec_of(props), self.credentials)

    def check_inputs(self, news: dict[str, Any]) -> dict[str, Any] | None:
        # Node ids of machines not created yet and other instances' endpoints are unknown at preview:
        # check everything else.
        inputs = _inputs(news)
        if has_unknown({k: v for k, v in inputs.items() if k not in ("placements", "input_endpoints")}):
            return None
        members = _get(inputs, "instance.members") or {}
        raw = {} if is_unknown(inputs.get("placements")) else (inputs.get("placements") or {})
        placements = {k: [None] * len((members.get(k) or {}).get("nodes") or ()) if is_unknown(v)
                      else [None if is_unknown(i) else i for i in v] if isinstance(v, list) else v
                      for k, v in raw.items()}
        raw_ep = inputs.get("input_endpoints")
        endpoints = {} if is_unknown(raw_ep) or not isinstance(raw_ep, dict) else {
            k: None if is_unknown(v) else v for k, v in raw_ep.items()}
        return {**inputs, "placements": placements, "input_endpoints": endpoints}

    def source(self, news: dict[str, Any]) -> str:
        return f"{SOURCE}[{_get(_inputs(news), 'instance.name')}]"

    def check_spec(self, olds: dict[str, Any], news: dict[str, Any], spec: AppInstanceSpec) -> CheckResult:
        return CheckResult(news, [CheckFailure(p, msg) for p, msg in rule_failures(spec)])

    def drifted(self, olds: dict[str, Any], news: dict[str, Any]) -> bool:
        return not has_unknown(_inputs(news)) and bool(drift(olds, news))

    def converge(self, props: dict[str, Any], olds: dict[str, Any] | None) -> InstanceOut:
        if olds is None:
            return self._rec(props).converge()
        return self._rec(props).converge(plain(olds).get("instance_id"), _hosts(olds))

    def id_of(self, props: dict[str, Any], result: Any) -> str:
        spec = self.spec_of(props)
        return f"{spec.project_id}/{spec.name}"

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        if not plain(props).get("instance_id"):
            return ReadResult(id_, props)  # never created: nothing to read
        return super().read(id_, props)

    def observe(self, id_: str, props: dict[str, Any]) -> InstanceOut | None:
        # None: decommissioned or deleted outside the stack
        return self._rec(props).observe(plain(props)["instance_id"], _hosts(props))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        state = plain(props)
        if state.get("instance_id"):
            self._rec(props).release(state["instance_id"])


class AppInstance(Resource, module="gpuaas", name="AppInstance"):
    instance_id: pulumi.Output[str]
    status: pulumi.Output[str]
    app_version: pulumi.Output[str]
    members: pulumi.Output[list[dict[str, Any]]]
    endpoints: pulumi.Output[dict[str, str]]
    ui_routes: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: AppInstanceArgs, placements: pulumi.Input[dict[str, Any]],
                 opts: pulumi.ResourceOptions | None = None,
                 input_endpoints: pulumi.Input[dict[str, Any]] | None = None) -> None:
        declared = args.model_dump(mode="json")
        if declared["platform_ca_bundle"] is None:  # absent, as in state written before the field existed
            del declared["platform_ca_bundle"]
        props = {**dict.fromkeys(OUTPUT_KEYS), **declared, "placements": placements,
                 "input_endpoints": input_endpoints or {}}
        super().__init__(AppInstanceProvider(), name, props, opts)
