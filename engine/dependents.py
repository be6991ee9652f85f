"""Delete-before-replace reaches dependents: which of them must go first (Pulumi's dependent replacements).

When a resource is replaced delete-before-replace, anything still referring to it would point at a
deleted object. For each dependent (in dependency order) the engine asks that dependent's provider:
"if the properties that come from the replaced resources become unknown, is that a replacement?"
Those that say yes are deleted first (reverse dependency order) and created again when the program
registers them; the others are simply diffed and updated afterwards, as usual.
"""

from __future__ import annotations

from engine.graph import dependents_of, topo_order
from engine.model import ResourceState, StepOp
from engine.planner import decide
from engine.provider_host import ProviderHost
from engine.values import UNKNOWN, strip_secrets


def dependents_to_replace(
    host: ProviderHost, replaced: ResourceState, live: list[ResourceState]
) -> list[ResourceState]:
    """The dependents of ``replaced`` that must be replaced with it, in dependency order."""
    gone = {replaced.urn}
    out: list[ResourceState] = []
    for res in topo_order(dependents_of(replaced.urn, live)):
        if not res.custom or res.external:
            continue
        keys = [k for k, urns in res.propertyDependencies.items() if gone & set(urns)]
        if not keys:  # only ordered after it (depends_on / parent): nothing it holds becomes stale
            continue
        news = {**res.inputs, **{k: UNKNOWN for k in keys}}
        diff = host.diff(res.urn, res.id, strip_secrets(res.outputs), strip_secrets(news), strip_secrets(res.inputs))
        decision = decide(
            res.inputs, news, diff.changes, diff.replaces, diff.diffs, diff.delete_before_replace, [], None
        )
        if decision.op is StepOp.REPLACE:
            out.append(res)
            gone.add(res.urn)
    return out
