"""roce_assignment: the Pulumi adapter of the kind (its spec and reconciler: providers/sites/roce.py).

This module path and its Provider class are part of the state contract (Pulumi pickles them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)
from pydantic import ValidationError

from clients.vault import credentials_from_config
from providers.common import has_unknown, plain, spec_failures
from providers.kind import KindDescriptor, register
from providers.sites.roce import (
    MISSING,
    SOURCE,
    AllocationError,
    RoceReconciler,
    RoceSpec,
)
from providers.sites.roce_table import canonical_table, carried_table, grouped

DESCRIPTOR = register(KindDescriptor(
    name="RoceAssignment",
    identity=("site",),
    in_place=("pools", "groups", "table", "maas", "vault", "stack"),
    delete_before_replace=True,  # one assignment per site
    summary_outputs=("link_status",),
    doc="the static RoCE addresses of one site's phase-2 machines, linked in MAAS",
    notes={"table": "planned at check from the recorded table and MAAS's holdings of the pools' subnets "
                    "(the preview shows it); applied addresses are never renumbered",
           "stack": "whose machines MAAS owner data names as this stack's (a renamed machine keeps its addresses)",
           "groups": "the machines by profile and fabric interfaces; adding a machine adds its addresses, the "
                     "other machines' stay equal"},
))
INPUTS = ("site", "pools", "groups", "table", "maas", "vault", "stack")


def _comparable(props: Mapping[str, Any]) -> dict[str, Any]:
    # State written before listed every machine and recorded rows (with MACs): the same groups and addresses.
    out = grouped(plain(props))
    if isinstance(out.get("table"), Mapping) and not has_unknown(out["table"]):
        out["table"] = canonical_table(out["table"])
    return out


class RoceAssignmentProvider(ResourceProvider):
    serialize_as_secret_always = False  # pickled by reference; holds nothing secret

    def configure(self, req: ConfigureRequest) -> None:
        self._credentials = credentials_from_config(req.config)

    def _rec(self, props: dict[str, Any]) -> RoceReconciler:
        return RoceReconciler(RoceSpec.model_validate(plain(props)), getattr(self, "_credentials", None))

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        if has_unknown(news):
            return CheckResult(news, [])
        try:
            spec = RoceSpec.model_validate(plain(news))
        except ValidationError as e:
            return CheckResult(news, spec_failures(e, f"{SOURCE}[site={news.get('site')}]"))
        if refused := spec.refusals():
            return CheckResult(news, [CheckFailure("machines", r) for r in refused])
        try:  # the update's allocation, planned (collisions and exhausted pools are refused here)
            rec = RoceReconciler(spec, getattr(self, "_credentials", None))
            table = rec.plan(carried_table(plain(olds), spec.machines))
        except AllocationError as e:
            return CheckResult(news, [CheckFailure("pools", str(e))])
        return CheckResult({**news, "table": table}, [])

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        d = DESCRIPTOR.diff(_comparable(olds), _comparable(news), inputs=INPUTS)
        # a refresh found links removed by hand: update re-links them
        relink = any(str(v).startswith(MISSING) for v in (olds.get("link_status") or {}).values())
        return DiffResult(changes=d.changed or relink, replaces=list(d.replaces),
                          delete_before_replace=DESCRIPTOR.delete_before_replace)

    def create(self, props: dict[str, Any]) -> CreateResult:
        table, status = self._rec(props).converge(None)
        return CreateResult(f"roce-{props['site']}", {**plain(props), "table": table, "link_status": status})

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        rec = self._rec(news)
        table, status = rec.converge(carried_table(plain(olds), rec.spec.machines))
        return UpdateResult({**plain(news), "table": table, "link_status": status})

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """The table lives in state; refresh checks that linked machines still have their links.
        Outputs keep exactly the shape create/update wrote (a refresh after up shows no drift)."""
        props = {**plain(props), "table": canonical_table(props.get("table"))}
        status = self._rec(props).observe(props["table"], props.get("link_status") or {})
        return ReadResult(id_, {**props, "link_status": status})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        self._rec(props).release(props.get("table") or {})


class RoceAssignment(Resource, module="gpuaas", name="RoceAssignment"):
    table: pulumi.Output[dict[str, list[dict[str, Any]]]]
    link_status: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, spec: RoceSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        props = spec.model_dump(mode="json", exclude_none=True)  # Pulumi drops None values anyway
        super().__init__(RoceAssignmentProvider(), name, {"table": None, "link_status": None, **props}, opts)
