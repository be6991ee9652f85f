"""Per-kind judgement: what a change means for machines, app members and bundles.

Dynamic providers send no detailed diff, so a MachinePool's per-machine effect and an
AppInstance's member removals are computed here from old and new state.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from preview_note.changes import Action, Change
from preview_note.values import changed_paths, is_unknown, normalize, show
from providers.machines.plan import Change as MachineChange
from providers.machines.plan import changed_fields, rekey, renames, worst
from providers.machines.resource_io import machine_record, machine_spec_of, pool_machines, pool_records
from providers.machines.spec import LifecyclePolicy, MachineSpec

PROD_ENVIRONMENTS = frozenset({"prod", "production"})
# Top-level inputs shown by a kind's own view rather than as generic field rows.
OWN_VIEW_FIELDS: dict[str, frozenset[str]] = {
    "MachinePool": frozenset({"machines"}),
    # topology and placements follow from the members (which node, which platform node id).
    "AppInstance": frozenset({"members", "instance.members", "topology", "placements", "instance.ui_routes"}),
}
# Where a pool's state records its machines: `machines_state` (MachinePool provider) or `machines`.
_POOL_STATE_KEYS = ("machines_state", "machines")


def is_prod(environment: str) -> bool:
    return environment in PROD_ENVIRONMENTS or environment.startswith("prod-")


class PoolView(BaseModel):
    model_config = ConfigDict(frozen=True)

    joins: tuple[str, ...] = ()
    reidentifies: tuple[tuple[str, str], ...] = ()  # (hostname, why): other hardware under that name
    redeploys: tuple[tuple[str, str], ...] = ()  # (hostname, why)
    leaves: tuple[tuple[str, str], ...] = ()  # (hostname, system_id or "")
    updates: tuple[tuple[str, str], ...] = ()  # (hostname, fields changed in place)
    unchanged: int = 0
    unknown: bool = False  # the new machine list is only known after apply
    pending: tuple[str, ...] = ()  # staying machines whose new spec is only known after apply
    drifted: tuple[tuple[str, str], ...] = ()  # (hostname, what drifted): the refreshed state's records


class MemberView(BaseModel):
    model_config = ConfigDict(frozen=True)

    lines: tuple[str, ...] = ()
    removals_counted: tuple[tuple[str, int], ...] = ()

    @property
    def removals(self) -> tuple[str, ...]:
        return tuple(text for text, _ in self.removals_counted)


def natural(text: str) -> list[Any]:
    """`gpu-a2` before `gpu-a10`."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def _specs(value: Any) -> dict[str, MachineSpec]:
    """hostname -> typed spec of a pool's `machines` input (entries unknown or unreadable left out)."""
    out = {}
    for host, raw in pool_machines(value).items():
        try:
            out[host] = MachineSpec.model_validate(raw)
        except ValidationError:
            continue
    return out


def _why(fields: dict[str, MachineChange], what: MachineChange, old: MachineSpec | None = None,
         new: MachineSpec | None = None) -> str:
    """The fields whose change does `what`, each down to its changed leaves when both specs are known
    (`deploy.hwe_kernel`, not `deploy`)."""
    names = [f for f, c in fields.items() if c is what]
    if old is not None and new is not None:
        before, after = old.model_dump(mode="json"), new.model_dump(mode="json")
        leaves = [p for f in names for p, _, _ in changed_paths({f: before[f]}, {f: after[f]})]
        names = [p for p in dict.fromkeys(p.split("[")[0] for p in leaves)] or names
    return ", ".join(names) + " changed"


def machine_specs_of(change: Change) -> tuple[MachineSpec | None, MachineSpec | None]:
    """A MaasMachine step's (old, new) specs (None where unknown or unreadable)."""
    old_state = {**change.inputs("old"), **(change.old.outputs if change.old else {})}
    return machine_spec_of(old_state), machine_spec_of(change.inputs("new"))


def machine_change(change: Change) -> tuple[MachineChange | None, dict[str, MachineChange]]:
    """A MaasMachine step's effect on its machine, by the machines plan (providers/machines/plan.py) from the
    same state the provider's diff reads: (the change, each changed field's change); (None, {}) when the
    new spec is only known after apply or the state is unreadable."""
    new = machine_spec_of(change.inputs("new"))
    old_state = {**change.inputs("old"), **(change.old.outputs if change.old else {})}
    record = machine_record(old_state, old_state.get("system_id"))
    if new is None or record is None:
        return None, {}
    fields = changed_fields(record, new, machine_spec_of(old_state))
    return worst(fields.values()), fields


def pool_view(change: Change) -> PoolView:
    """A MachinePool step per machine, by the machines plan from the pool's records (what its provider's
    diff reads) and, to name the fields, its old inputs' specs."""
    old_in, new_in = change.inputs("old"), change.inputs("new")
    old_out = change.old.outputs if change.old else {}
    records = pool_records({**old_in, **old_out})
    old_specs = _specs(old_in.get("machines"))
    system_ids = {h: r.system_id or "" for h, r in records.items()}
    known = records.keys() | old_specs.keys()
    if change.action is Action.DELETE:
        return PoolView(leaves=tuple((h, system_ids.get(h, "")) for h in sorted(known, key=natural)))
    new_raw = new_in.get("machines")
    if is_unknown(new_raw):
        return PoolView(unknown=True)
    new = _specs(new_raw)
    # One spec per hostname: a spec known only after apply still says which machine it is (its key).
    unknown = {h for h, v in new_raw.items() if is_unknown(v)} if isinstance(new_raw, dict) else set()
    if change.action is Action.CREATE:
        return PoolView(joins=tuple(sorted(new.keys() | unknown, key=natural)))
    moved = renames({h: i for h, r in records.items() if (i := r.identity()) is not None}, new.values())
    prior = rekey(records, moved)
    back = {v: k for k, v in moved.items()}
    wanted = new.keys() | unknown
    drifted = tuple((h, "; ".join(r.drift) or "drifted")
                    for h, r in sorted(prior.items(), key=lambda kv: natural(kv[0]))
                    if r.outcome is not None and r.outcome.value == "drifted" and h in wanted)
    joins, reidentifies, redeploys, updates, unchanged = [], [], [], [], 0
    for host, spec in sorted(new.items(), key=lambda kv: natural(kv[0])):
        rec = prior.get(host)
        if rec is None or not rec.system_id:
            joins.append(host)
            continue
        old_spec = old_specs.get(back.get(host, host))
        fields = changed_fields(rec, spec, old_spec)
        if host in back:
            fields = {"hostname": MachineChange.IN_PLACE, **fields}
        what = worst(fields.values())
        if what is MachineChange.REIDENTIFY:
            reidentifies.append((host, _why(fields, what, old_spec, spec)))
        elif what is MachineChange.REDEPLOY:
            redeploys.append((host, _why(fields, what, old_spec, spec)))
        elif what is MachineChange.IN_PLACE:
            updates.append((host, ", ".join(fields)))
        elif host not in dict(drifted):
            unchanged += 1
    return PoolView(
        joins=tuple(joins),
        reidentifies=tuple(reidentifies),
        redeploys=tuple(redeploys),
        updates=tuple(updates),
        leaves=tuple((h, system_ids.get(back.get(h, h), "")) for h in sorted(prior.keys() - wanted, key=natural)),
        unchanged=unchanged,
        pending=tuple(sorted(unknown & prior.keys(), key=natural)),
        drifted=drifted,
    )


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
    for host, why in pairs:
        groups.setdefault(why, []).append(host)
    return "; ".join(f"{host_ranges(hosts)} ({why})" for why, hosts in sorted(groups.items()))


def redeploy_terms(change: Change) -> str:
    """What a redeploy does to data disks and how fast it rolls: the new policy's release erase mode and
    batch_max_parallel (the lifecycle's own defaults when the policy does not say)."""
    policy = change.inputs("new").get("policy")
    policy = policy if isinstance(policy, dict) else {}
    erase = policy.get("release_erase_mode") or LifecyclePolicy().release_erase_mode.value
    batch = normalize(policy.get("batch_max_parallel") or LifecyclePolicy().batch_max_parallel)
    disks = "data disks kept" if erase == "none" else f"data disks erased ({erase} erase)"
    return f"{disks}; rolling, at most {batch} at once"


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
            cause = _why(fields, MachineChange.REIDENTIFY, *machine_specs_of(change))
            text = (f"MaasMachine {name}: machine `{host}` is **released**{mode_txt}, then the hardware its spec "
                    f"names now is found (or created) and **deployed**; cause: {cause}")
        elif what is MachineChange.REDEPLOY:
            text = (f"MaasMachine {name}: machine `{host}` is **released and redeployed** ({redeploy_terms(change)}); "
                    f"cause: {_why(fields, what, *machine_specs_of(change))}")
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
