"""roce_assignment: the Pulumi adapter of the kind (its spec and reconciler: providers/sites/roce.py).

This module path and its Provider class are part of the state contract (Pulumi pickles them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, Resource

from providers.base import KindProvider
from providers.common import has_unknown, plain
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


class RoceAssignmentProvider(KindProvider[RoceSpec]):
    descriptor = DESCRIPTOR
    spec_model = RoceSpec
    inputs = INPUTS

    def _rec(self, props: dict[str, Any]) -> RoceReconciler:
        return RoceReconciler(self.spec_of(props), self.credentials)

    def source(self, news: dict[str, Any]) -> str:
        return f"{SOURCE}[site={news.get('site')}]"

    def check_spec(self, olds: dict[str, Any], news: dict[str, Any], spec: RoceSpec) -> CheckResult:
        if refused := spec.refusals():
            return CheckResult(news, [CheckFailure("machines", r) for r in refused])
        try:  # the update's allocation, planned (collisions and exhausted pools are refused here)
            table = RoceReconciler(spec, self.credentials).plan(carried_table(plain(olds), spec.machines))
        except AllocationError as e:
            return CheckResult(news, [CheckFailure("pools", str(e))])
        return CheckResult({**news, "table": table}, [])

    def comparable(self, props: Mapping[str, Any]) -> dict[str, Any]:
        # State written before listed every machine and recorded rows (with MACs): the same groups and addresses.
        out = grouped(plain(props))
        if isinstance(out.get("table"), Mapping) and not has_unknown(out["table"]):
            out["table"] = canonical_table(out["table"])
        return out

    def drifted(self, olds: dict[str, Any], news: dict[str, Any]) -> bool:
        # a refresh found links removed by hand: update re-links them
        return any(str(v).startswith(MISSING) for v in (olds.get("link_status") or {}).values())

    def converge(self, props: dict[str, Any], olds: dict[str, Any] | None) -> dict[str, Any]:
        rec = self._rec(props)
        table, status = rec.converge(None if olds is None else carried_table(plain(olds), rec.spec.machines))
        return {"table": table, "link_status": status}

    def id_of(self, props: dict[str, Any], result: Any) -> str:
        return f"roce-{props['site']}"

    def observe(self, id_: str, props: dict[str, Any]) -> dict[str, Any]:
        """The table lives in state; refresh reads which of its links MAAS has (`RoceReconciler.observe`).
        Outputs keep exactly the shape create/update wrote (a refresh after up shows no drift)."""
        table = canonical_table(props.get("table"))
        status = self._rec({**plain(props), "table": table}).observe(table, props.get("link_status") or {})
        return {"table": table, "link_status": status}

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        self._rec(props).release(props.get("table") or {})


class RoceAssignment(Resource, module="gpuaas", name="RoceAssignment"):
    table: pulumi.Output[dict[str, list[dict[str, Any]]]]
    link_status: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, spec: RoceSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        props = spec.model_dump(mode="json", exclude_none=True)  # Pulumi drops None values anyway
        super().__init__(RoceAssignmentProvider(), name, {"table": None, "link_status": None, **props}, opts)
