"""Per-kind judgement: what a change means for machines, app members and bundles.

Dynamic providers send no detailed diff, so a MachinePool's per-machine effect and an
AppInstance's member removals are computed here from old and new state.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict

from preview_note.changes import Action, Change
from preview_note.machines import machine_change, machine_specs_of, pool_view, redeploy_terms, why
from preview_note.values import is_unknown, natural, normalize, show
from providers.machines.plan import Change as MachineChange

PROD_ENVIRONMENTS = frozenset({"prod", "production"})
# Top-level inputs shown by a kind's own view rather than as generic field rows.
OWN_VIEW_FIELDS: dict[str, frozenset[str]] = {
    "MachinePool": frozenset({"machines"}),
    # topology and placements follow from the members (which node, which platform node id).
    "AppInstance": frozenset({"members", "instance.members", "topology", "placements", "instance.ui_routes"}),
}


def is_prod(environment: str) -> bool:
    return environment in PROD_ENVIRONMENTS or environment.startswith("prod-")


class MemberView(BaseModel):
    model_config = ConfigDict(frozen=True)

    lines: tuple[str, ...] = ()
    removals_counted: tuple[tuple[str, int], ...] = ()

    @property
    def removals(self) -> tuple[str, ...]:
        return tuple(text for text, _ in self.removals_counted)


def _members(value: Any) -> dict[str, tuple[int, list[str]]]:
    out = {}
    if isinstance(value, dict):
        for key, spec in value.items():
            spec = spec if isinstance(spec, dict) else {}
            count = normalize(spec.get("count", 0))
            raw_nodes = spec.get("nodes")
            nodes: list[Any] = raw_nodes if isinstance(raw_nodes, list) else []
            out[key] = (count if isinstance(count, int) else 0, [str(n) for n in nodes])
    return out


def _member_input(inputs: dict[str, Any]) -> Any:
    """`instance.members` (the AppInstance provider's shape) or `members`."""
    instance = inputs.get("instance")
    return instance.get("members") if isinstance(instance, dict) else inputs.get("members")


def members_of(inputs: dict[str, Any]) -> dict[str, tuple[int, list[str]]]:
    """component key -> (count, nodes) of an AppInstance's inputs."""
    return _members(_member_input(inputs))


def member_view(change: Change) -> MemberView:
    old = _members(_member_input(change.inputs("old")))
    new = {} if change.action is Action.DELETE else _members(_member_input(change.inputs("new")))
    if change.action is Action.REPLACE:
        new = {}  # the instance is recreated: every current member goes, the new ones come fresh
    outputs = change.old.outputs.get("members") if change.old else None
    ids_on: dict[tuple[str, str], list[str]] = {}
    for m in outputs if isinstance(outputs, list) else []:
        if isinstance(m, dict):
            node = m.get("node") or m.get("host") or m.get("hostname")
            ids_on.setdefault((str(m.get("component_key")), str(node)), []).append(str(m.get("member_id")))
    lines: list[str] = []
    removals: list[tuple[str, int]] = []
    for key in sorted(old.keys() | new.keys()):
        (oc, on), (nc, nn) = old.get(key, (0, [])), new.get(key, (0, []))
        gone = [n for n in on if n not in nn]
        added = [n for n in nn if n not in on]
        if nc != oc:
            lines.append(f"`{key}`: count {oc} → {nc}")
        for node in gone:
            ids = ", ".join(ids_on.get((key, node), [])) or "member"
            removals.append((f"`{key}` on node `{node}` removed ({ids})", max(1, len(ids_on.get((key, node), [])))))
        # Members removed beyond those named by node: a lowered count with no node list.
        unnamed = (oc - nc) - (len(gone) - len(added))
        if unnamed > 0:
            removals.append((f"`{key}`: {unnamed} member(s) removed (count {oc} → {nc})", unnamed))
        for node in added:
            lines.append(f"`{key}` added on node `{node}`")
    if change.action is Action.REPLACE:
        lines.append("instance replaced: members are recreated from the new inputs")
    if change.action is Action.UPDATE:
        lines += _placement_lines(change.inputs("old").get("placements"), change.inputs("new").get("placements"))
    return MemberView(lines=tuple(lines), removals_counted=tuple(removals))


def _placement_lines(old: Any, new: Any) -> list[str]:
    """Placements are the members' platform node ids: they change when a member's machine is replaced
    (known only after apply) even though no member moves."""
    if old == new or not isinstance(old, dict):
        return []
    if is_unknown(new):
        return ["placements (platform node ids) known after apply"]
    new = new if isinstance(new, dict) else {}
    out = []
    for key in sorted(old.keys() | new.keys()):
        if key in old and key in new and old[key] != new[key]:
            what = "known after apply" if is_unknown(new[key]) else f"{show(old[key])} → {show(new[key])}"
            out.append(f"`{key}` placement (platform node ids): {what}")
    return out


def _routes(inputs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    instance = inputs.get("instance")
    routes = instance.get("ui_routes") if isinstance(instance, dict) else None
    return {str(r["name"]): r for r in routes if isinstance(r, dict) and "name" in r} if isinstance(
        routes, list) else {}


def route_lines(change: Change) -> list[str]:
    """UI routes on the platform gateway added, removed or changed (seed 000 §4)."""
    old = _routes(change.inputs("old")) if change.action is not Action.CREATE else {}
    new = {} if change.action is Action.DELETE else _routes(change.inputs("new"))

    def what(r: dict[str, Any]) -> str:
        ws = ", WebSocket" if r.get("websocket") else ""
        return f"`{r.get('component')}`:{normalize(r.get('port'))}, {r.get('frame_policy', 'embed')}{ws}"

    lines = [f"UI route `{n}` added ({what(new[n])})" for n in sorted(new.keys() - old.keys())]
    lines += [f"UI route `{n}` removed" for n in sorted(old.keys() - new.keys())]
    lines += [f"UI route `{n}` changed ({what(old[n])} → {what(new[n])})"
              for n in sorted(old.keys() & new.keys()) if normalize(old[n]) != normalize(new[n])]
    return lines


class Harm(StrEnum):
    """What a destructive step does, for the summary line ("3 machine redeploys, ...")."""

    REDEPLOY = "machine redeploy"
    RELEASE = "machine release"
    MEMBER_REMOVAL = "app member removal"
    BUNDLE_REPLACE = "prod bundle replacement"


class Destructive(BaseModel):
    model_config = ConfigDict(frozen=True)

    harm: Harm
    count: int
    text: str  # Markdown, one bullet


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def host_ranges(hosts: list[str], limit: int = 30) -> str:
    """`a-001`–`a-032`, `b-7`: consecutively numbered hostnames folded into ranges."""
    runs: list[list[str]] = []
    for host in sorted(set(hosts), key=natural):
        m = _NUMBERED.match(host)
        prev = _NUMBERED.match(runs[-1][-1]) if runs else None
        if (
            m
            and prev
            and m.group(1) == prev.group(1)
            and len(m.group(2)) == len(prev.group(2))
            and int(m.group(2)) == int(prev.group(2)) + 1
        ):
            runs[-1].append(host)
        else:
            runs.append([host])
    parts = [", ".join(f"`{h}`" for h in run) if len(run) < 3 else f"`{run[0]}`–`{run[-1]}`" for run in runs]
    if len(parts) > limit:
        parts = parts[:limit] + [f"and {len(parts) - limit} more"]
    return ", ".join(parts)


def by_reason(pairs: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> str:
    """Hosts grouped by why: `a-1`–`a-9` (deploy.hwe_kernel changed); `b-2` (tags)."""
    groups: dict[str, list[str]] = {}
    for host, reason in pairs:
        groups.setdefault(reason, []).append(host)
    return "; ".join(f"{host_ranges(hosts)} ({reason})" for reason, hosts in sorted(groups.items()))


def _hosts(items: list[str]) -> str:
    return host_ranges(items)


def destructive(change: Change, environment: str) -> list[Destructive]:
    """Why this change destroys something; empty when it does not."""
    # size: one branch per kind that can destroy something (machine, pool, app instance, prod bundle)
    name, kind, act = f"`{change.name}`", change.kind, change.action
    old_in = change.inputs("old")
    if kind == "MaasMachine" and act in (Action.REPLACE, Action.UPDATE, Action.DELETE):
        nested = old_in.get("machine")
        spec: dict[str, Any] = nested if isinstance(nested, dict) else old_in
        host = spec.get("hostname") or change.name
        mode = spec.get("teardown_mode")
        mode_txt = f" (teardown_mode {show(mode)})" if mode else ""
        if act is Action.DELETE:
            text = f"MaasMachine {name}: machine `{host}` is **released**{mode_txt}"
            return [Destructive(harm=Harm.RELEASE, count=1, text=text)]
        what, fields = machine_change(change)
        if what is None:
            text = f"MaasMachine {name}: machine `{host}`: spec known after apply, **may redeploy**"
        elif what is MachineChange.REIDENTIFY or act is Action.REPLACE:
            cause = why(fields, MachineChange.REIDENTIFY, *machine_specs_of(change))
            text = (f"MaasMachine {name}: machine `{host}` is **released**{mode_txt}, then the hardware its spec "
                    f"names now is found (or created) and **deployed**; cause: {cause}")
        elif what is MachineChange.REDEPLOY:
            text = (f"MaasMachine {name}: machine `{host}` is **released and redeployed** ({redeploy_terms(change)}); "
                    f"cause: {why(fields, what, *machine_specs_of(change))}")
        else:
            return []
        return [Destructive(harm=Harm.REDEPLOY, count=1, text=text)]
    if kind == "MachinePool" and act in (Action.UPDATE, Action.REPLACE, Action.DELETE):
        view = pool_view(change)
        out = []
        if view.redeploys:
            whys = sorted({why for _, why in view.redeploys})
            out.append(
                Destructive(
                    harm=Harm.REDEPLOY,
                    count=len(view.redeploys),
                    text=(
                        f"MachinePool {name}: **{len(view.redeploys)} machine(s) redeploy** ({'; '.join(whys)}; "
                        f"{redeploy_terms(change)}): " + _hosts([h for h, _ in view.redeploys])
                    ),
                )
            )
        if view.reidentifies:
            out.append(
                Destructive(
                    harm=Harm.REDEPLOY,
                    count=len(view.reidentifies),
                    text=(
                        f"MachinePool {name}: **{len(view.reidentifies)} machine(s) name other hardware**: released, "
                        "then the new hardware found (or created) and deployed: "
                        + by_reason(view.reidentifies)
                    ),
                )
            )
        if view.leaves:
            out.append(
                Destructive(
                    harm=Harm.RELEASE,
                    count=len(view.leaves),
                    text=(
                        f"MachinePool {name}: **{len(view.leaves)} machine(s) leave the pool** (released): "
                        + _hosts([h for h, _ in view.leaves])
                    ),
                )
            )
        return out
    if kind == "AppInstance" and act in (Action.UPDATE, Action.REPLACE, Action.DELETE):
        if act is Action.UPDATE:
            return [
                Destructive(harm=Harm.MEMBER_REMOVAL, count=n, text=f"AppInstance {name}: {r}")
                for r, n in member_view(change).removals_counted
            ]
        outputs = change.old.outputs.get("members") if change.old else None
        n = (
            len(outputs)
            if isinstance(outputs, list)
            else max(1, sum(c for c, _ in _members(_member_input(old_in)).values()))
        )
        verb = "deleted" if act is Action.DELETE else "replaced (members recreated)"
        return [
            Destructive(
                harm=Harm.MEMBER_REMOVAL,
                count=n,
                text=f"AppInstance {name}: instance {verb}, **all {n} member(s) removed**",
            )
        ]
    if kind == "BootstrapBundle" and act in (Action.REPLACE, Action.DELETE) and is_prod(environment):
        site = old_in.get("site") or (change.inputs("new").get("site"))
        old_digest = change.old.outputs.get("digest") if change.old else None
        verb = "replaced" if act is Action.REPLACE else "deleted"
        return [
            Destructive(
                harm=Harm.BUNDLE_REPLACE,
                count=1,
                text=(
                    f"BootstrapBundle {name}: bundle **{verb}** on prod site {show(site)} "
                    f"(nodes verify digest {show(old_digest)})"
                ),
            )
        ]
    return []
