"""Split stacks: one stack per site plus a control stack, all from one environment document.

`gpuaas-infra:part` (components/settings.py `StackPart`) picks what a stack declares:

    all           everything (the default: the stacks of before, same URNs)
    site:<name>   that site's SiteProfiles, RoCE assignment, bootstrap bundles and machines; exports
                  `node_ids` (hostname -> the platform node id each of its machines enrolled as)
    control       host convergence and app instances; a member on a machine binds to the node id the
                  machine's site stack exports, read through a `pulumi.StackReference` (never copied)

The control stack reads `<environment>-<site>` for each site whose machines are app members, or the
stack `gpuaas-infra:siteStacks.<site>` names. The Pulumi CLI resolves the reference on the control stack's
own backend (the site stacks must share it): on a file or S3 backend a bare name is the project's stack,
`organization/gpuaas-infra/<name>`, which may also be written out. A site stack that does not exist fails
the preview or update in the CLI (`unknown stack "prod-dal1"`); one that exists without the machine's node
id yet is unknown in a preview and stops an update here (`SiteStackNotDeployed`, naming the stack).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pulumi

from environments import Environment

from .settings import StackSettings

NODE_IDS = "node_ids"  # the site stack output the control stack reads
MACHINE_IDENTITIES = "machine_identities"  # {system_id, deploy_fingerprint} of the site's machines that are hosts


class SiteStackNotDeployed(pulumi.RunError):
    pass


async def _value(v: Any) -> Any:
    return v


def _unknown() -> pulumi.Output[Any]:
    """What a preview knows of a node id its site stack has not exported yet (as in a single stack)."""
    return pulumi.Output(set(), _value(None), _value(False))


def _node_id(stack: str, hostname: str, output: str = NODE_IDS) -> Any:
    def pick(ids: dict[str, Any] | None) -> Any:
        ids = ids or {}
        if hostname in ids:
            return ids[hostname]
        if pulumi.runtime.is_dry_run():
            return _unknown()
        raise SiteStackNotDeployed(
            f"site stack {stack} exports nothing for machine {hostname} (its output {output!r} "
            f"lacks it): run `pulumi up` of {stack} first; the control stack deploys after its site stacks")

    return pick


def referenced(env: Environment, settings: StackSettings,
               wanted: Mapping[str, Iterable[str]]) -> dict[str, dict[str, pulumi.Output[Any]]]:
    """output name (NODE_IDS, MACHINE_IDENTITIES) -> machine hostname -> its value, read from the machine's
    site stack's output: one `pulumi.StackReference` per site stack, shared by every output read."""
    site_of = {m.hostname: m.site for m in env.machines}
    refs: dict[str, pulumi.StackReference] = {}
    out: dict[str, dict[str, pulumi.Output[Any]]] = {}
    for output, machines in wanted.items():
        out[output] = {}
        for hostname in sorted(set(machines)):
            stack = settings.site_stack(env, site_of[hostname])
            if stack not in refs:
                refs[stack] = pulumi.StackReference(stack)
            out[output][hostname] = refs[stack].get_output(output).apply(_node_id(stack, hostname, output))
    return out


def referenced_node_ids(env: Environment, settings: StackSettings,
                        machines: Iterable[str]) -> dict[str, pulumi.Output[Any]]:
    """hostname -> its node id, read from its site stack's `node_ids` output (one reference per site)."""
    return referenced(env, settings, {NODE_IDS: machines})[NODE_IDS]
