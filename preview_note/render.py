"""The Markdown note: summary line per stack, destructive steps first, then one section per kind.

Deterministic by construction (sorted kinds, names, paths) so golden files can pin it exactly.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, ConfigDict

from preview_note.changes import (
    ACTION_ORDER,
    Action,
    Change,
    FieldChange,
    field_changes,
    group_changes,
    kind_of,
    parse_urn,
)
from preview_note.kinds import (
    OWN_VIEW_FIELDS,
    Destructive,
    Harm,
    by_reason,
    destructive,
    host_ranges,
    member_view,
    members_of,
    route_lines,
)
from preview_note.machines import pool_view, redeploy_terms
from preview_note.model import Diagnostic, EnforcementLevel, PolicyViolation, PreviewDigest, Severity
from preview_note.values import ABSENT, show

# The resource kinds in the order a reviewer reads them (site first, workloads last).
KIND_ORDER = (
    "SiteProfile",
    "BootstrapBundle",
    "RoceAssignment",
    "MaasMachine",
    "MachinePool",
    "AppInstance",
    "HostConvergence",
)
SUMMARY_ACTIONS = (
    Action.CREATE,
    Action.UPDATE,
    Action.REPLACE,
    Action.DELETE,
    Action.IMPORT,
    Action.DISCARD,
    Action.DRIFT,
)
_SUMMARY_WORD = {
    Action.CREATE: "to create",
    Action.UPDATE: "to update",
    Action.REPLACE: "to replace",
    Action.DELETE: "to delete",
    Action.IMPORT: "to import",
    Action.DISCARD: "to forget",
    Action.DRIFT: "drifted",
}
ENVIRONMENT_CONFIG_KEY = "gpuaas-infra:environment"
MAX_CREATE_FIELDS = 8  # a create lists what identifies it; past this a reviewer stops reading
# What identifies a new resource of each kind (paths into its inputs, in reading order). Kinds not
# listed, or whose inputs have none of these, show their top-level scalar inputs.
CREATE_FIELDS: dict[str, tuple[str, ...]] = {
    "SiteProfile": (
        "tier",
        "site.name",
        "profile.name",
        "profile.fabric_mode",
        "site.tls_verify",
        "site.customer_handoff",
        "profile.release_erase_mode",
        "profile.batch_max_parallel",
    ),
    "BootstrapBundle": ("name", "site", "template_set", "digest"),
    "RoceAssignment": ("site",),
    "MaasMachine": (
        "machine.hostname",
        "machine.site",
        "machine.profile",
        "machine.sku",
        "machine.teardown_mode",
        "machine.deploy.distro_series",
        "machine.deploy.hwe_kernel",
        "machine.deploy.bundle_digest",
    ),
    "MachinePool": ("pool", "connection.maas.site", "policy.batch_max_parallel", "policy.release_erase_mode"),
    "AppInstance": (
        "instance.name",
        "instance.project_id",
        "instance.app.slug",
        "instance.app.version",
        "instance.runtime.runtime_backend",
        "project_id",
        "app",
        "version",
    ),
    "HostConvergence": ("environment",),
}
MAX_MESSAGE_LINES = 30
MAX_NAMED_LEAVES = 12  # past this, leaving machines are shown as hostname ranges without system ids
COLLAPSE_OVER = 25  # a kind with more changed resources than this is folded into <details>
_SECRETISH = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)"
    r"|\bhvs\.[A-Za-z0-9_-]{20,}|\bglpat-[A-Za-z0-9_-]{20}",
    re.S,
)


class StackPreview(BaseModel):
    """One stack's preview as handed to the renderer."""

    model_config = ConfigDict(frozen=True)

    stack: str
    digest: PreviewDigest

    @property
    def environment(self) -> str:
        """The stack's environment: `gpuaas-infra:environment` (a name, or an environment file's path: its
        stem, as `environments/<name>.yaml` is named), else the stack name."""
        env = self.digest.config.get(ENVIRONMENT_CONFIG_KEY)
        if not isinstance(env, str) or not env:
            return self.stack
        return PurePath(env).stem if env.endswith((".yaml", ".yml")) else env


def _label(urn: str) -> str:
    type_, name = parse_urn(urn)
    return f"{kind_of(type_)} `{name}`" if type_ else f"`{name}`"


def _hostname(inputs: dict[str, Any]) -> Any:
    machine = inputs.get("machine")
    return (machine if isinstance(machine, dict) else inputs).get("hostname")


def _kind_key(kind: str) -> tuple[int, str]:
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), kind)


def _scrub(text: str) -> str:
    return _SECRETISH.sub("[redacted]", text)


def _fenced(text: str, indent: str) -> list[str]:
    lines = _scrub(text).rstrip("\n").splitlines() or [""]
    if len(lines) > MAX_MESSAGE_LINES:
        lines = lines[:MAX_MESSAGE_LINES] + [f"... ({len(lines) - MAX_MESSAGE_LINES} more lines)"]
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{indent}{fence}text"] + [f"{indent}{line}" for line in lines] + [f"{indent}{fence}"]


def _inline(text: str) -> str:
    text = _scrub(text).replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(text.split())


def _harm_text(items: list[Destructive]) -> str:
    counts: Counter[Harm] = Counter()
    for d in items:
        counts[d.harm] += d.count
    return ", ".join(f"{counts[h]} {h.value}{'' if counts[h] == 1 else 's'}" for h in Harm if counts[h])


def summary_line(stack: str, changes: list[Change], harmful: list[Destructive], errors: int) -> str:
    parts = []
    for act in SUMMARY_ACTIONS:
        kinds = Counter(c.kind for c in changes if c.action is act)
        if kinds:
            detail = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda kv: _kind_key(kv[0])))
            parts.append(f"{sum(kinds.values())} {_SUMMARY_WORD[act]} ({detail})")
    head = []
    if errors:
        head.append(f"**preview failed: {errors} error(s)**")
    if harmful:
        head.append(f"**destructive: {_harm_text(harmful)}**")
    body = " · ".join(head + (parts or ["no changes"]))
    return f"- **`{stack}`**: {body}"


def _resource_lines(change: Change, steps: list, environment: str) -> list[str]:
    # size: a reviewer's lines for one resource, top to bottom as the note prints them
    extra = ""
    if change.action is Action.REPLACE and change.delete_before_replace:
        extra = " (delete before replace)"
    host = _hostname(change.inputs("new")) or _hostname(change.inputs("old"))
    label = f"`{change.name}`" + (f" (`{host}`)" if isinstance(host, str) and host != change.name else "")
    out = [f"- **{change.action.value}** {label}{extra}"]
    if change.kind == "MachinePool":
        view = pool_view(change)
        if view.unknown:
            out.append("  - machines: known after apply")
        if view.joins:
            out.append(f"  - joins ({len(view.joins)}): " + host_ranges(list(view.joins)))
        if view.reidentifies:
            out.append(f"  - other hardware under the name, released then deployed anew ({len(view.reidentifies)}): "
                       + by_reason(view.reidentifies))
        if view.redeploys:
            out.append(f"  - redeploys ({len(view.redeploys)}, {redeploy_terms(change)}): "
                       + by_reason(view.redeploys))
        if view.updates:
            out.append(f"  - updated in place ({len(view.updates)}): " + by_reason(view.updates))
        if view.pending:
            out.append(f"  - spec known after apply, may redeploy ({len(view.pending)}): "
                       + host_ranges(list(view.pending)))
        if view.leaves:
            out.append(
                f"  - leaves ({len(view.leaves)}): "
                + (
                    ", ".join(f"`{h}`" + (f" ({sid})" if sid else "") for h, sid in view.leaves)
                    if len(view.leaves) <= MAX_NAMED_LEAVES
                    else host_ranges([h for h, _ in view.leaves])
                )
            )
        if view.drifted:
            out.append(f"  - drifted, brought back by this update ({len(view.drifted)}): " + by_reason(view.drifted))
        if change.action is Action.UPDATE and not (view.redeploys or view.reidentifies or view.leaves
                                                   or view.unknown or view.pending or view.drifted):
            out.append("  - no machine redeploys or leaves")
        if view.unchanged and change.action is not Action.CREATE:
            out.append(f"  - unchanged machines: {view.unchanged}")
    if change.kind == "AppInstance" and change.action is Action.CREATE:
        out += [
            f"  - members: `{key}` ×{count}" + (f" on {host_ranges(nodes)}" if nodes else "")
            for key, (count, nodes) in sorted(members_of(change.inputs("new")).items())
        ]
    elif change.kind == "AppInstance":
        members = member_view(change)
        out += [f"  - members: {line}" for line in members.removals + members.lines]
    if change.kind == "AppInstance":
        out += [f"  - {line}" for line in route_lines(change)]
    rows = field_changes(change, steps, OWN_VIEW_FIELDS.get(change.kind, frozenset()))
    creating = change.action in (Action.CREATE, Action.IMPORT)
    shown = _create_rows(change.kind, rows) if creating else rows
    for f in shown:
        mark = " (forces replace)" if f.forces_replace else ""
        if creating:
            out.append(f"  - `{f.path}` = {show(f.after, f.path)}")
        elif f.after is ABSENT:
            out.append(f"  - `{f.path}`: {show(f.before, f.path)} → (removed){mark}")
        else:
            out.append(f"  - `{f.path}`: {show(f.before, f.path)} → {show(f.after, f.path)}{mark}")
    if len(shown) < len(rows):
        more = "input(s)" if not creating else "input(s) (see the preview artifact)"
        out.append(f"  - ... and {len(rows) - len(shown)} more {more}")
    if change.action is Action.DELETE and change.old is not None and change.old.id:
        out.append(f"  - id: {show(change.old.id)}")
    return out


def _create_rows(kind: str, rows: list[FieldChange]) -> list[FieldChange]:
    by_path = {f.path: f for f in rows}
    picked = [by_path[p] for p in CREATE_FIELDS.get(kind, ()) if p in by_path]
    # Then the top-level scalars (a resource's own settings), until the budget is spent.
    picked += [f for f in rows if "." not in f.path and "[" not in f.path and f not in picked]
    return picked[:MAX_CREATE_FIELDS]


def _diagnostics(diags: list[Diagnostic], names: dict[str, str]) -> list[str]:
    loud = [d for d in diags if d.severity in (Severity.ERROR, Severity.WARNING)]
    quiet = [d for d in diags if d.severity in (Severity.INFO, Severity.INFOERR)]
    out: list[str] = []
    if loud:
        out += ["", "#### Diagnostics", ""]
        for d in sorted(loud, key=lambda d: d.severity is not Severity.ERROR):
            where = f" {names.get(d.urn, _label(d.urn))}" if d.urn else ""
            msg = (d.prefix or "") + d.message
            if not d.prefix:  # the CLI's JSON folds the prefix into the message: "error: ..."
                msg = msg.removeprefix(f"{d.severity.value}: ")
            if "\n" in msg.strip():
                out.append(f"- **{d.severity.value}**{where}:")
                out += _fenced(msg, "  ")
            else:
                out.append(f"- **{d.severity.value}**{where}: {_inline(msg)}")
    if quiet:
        out += ["", f"<details><summary>Program output ({len(quiet)} line(s))</summary>", ""]
        out += _fenced("\n".join(((d.prefix or "") + d.message).rstrip("\n") for d in quiet), "")
        out += ["", "</details>"]
    return out


def _violations(items: list[PolicyViolation], names: dict[str, str]) -> list[str]:
    if not items:
        return []
    order = {
        EnforcementLevel.MANDATORY: 0,
        EnforcementLevel.REMEDIATE: 1,
        EnforcementLevel.ADVISORY: 2,
        EnforcementLevel.DISABLED: 3,
    }
    out = ["", "#### Policy violations", ""]
    for v in sorted(items, key=lambda v: (order[v.enforcement_level], v.policy_name, v.resource_urn or "")):
        pack = v.policy_pack_name + (f"@{v.policy_pack_version}" if v.policy_pack_version else "")
        where = f" on {names.get(v.resource_urn, _label(v.resource_urn))}" if v.resource_urn else ""
        out.append(f"- **{v.enforcement_level.value}** `{v.policy_name}` ({pack}){where}: {_inline(v.message)}")
    return out


def render_stack(sp: StackPreview) -> tuple[str, list[str]]:
    """(summary line, section lines) for one stack."""
    changes, steps = group_changes(sp.digest)
    changes.sort(key=lambda c: (_kind_key(c.kind), c.name, ACTION_ORDER[c.action]))
    names = {urn: _label(urn) for urn in steps}
    loud = [d for c in changes for d in destructive(c, sp.environment)]
    errors = sum(1 for d in sp.digest.diagnostics if d.severity is Severity.ERROR)
    mandatory = sum(1 for v in sp.digest.policy_violations if v.enforcement_level is EnforcementLevel.MANDATORY)
    summary = summary_line(sp.stack, changes, loud, errors)
    if mandatory:
        summary += f" · **{mandatory} mandatory policy violation(s)**"
    env = f" (environment `{sp.environment}`)" if sp.environment != sp.stack else ""
    out = ["", f"### `{sp.stack}`{env}"]
    if sp.digest.maybe_corrupt:
        out += ["", "> **Warning:** the engine reports that some resources may be corrupt; do not apply."]
    if loud:
        out += ["", f"#### :warning: Destructive steps ({len(loud)})", ""]
        out += [f"- {d.text}" for d in loud]
    for kind in sorted({c.kind for c in changes}, key=_kind_key):
        of_kind = [c for c in changes if c.kind == kind]
        body = [line for c in of_kind for line in _resource_lines(c, steps[c.urn], sp.environment)]
        if len(of_kind) > COLLAPSE_OVER:
            out += ["", f"<details><summary>{kind} ({len(of_kind)})</summary>", ""] + body + ["", "</details>"]
        else:
            out += ["", f"#### {kind}", ""] + body
    if not changes:
        out += ["", "No resource changes."]
    out += _diagnostics(sp.digest.diagnostics, names)
    out += _violations(sp.digest.policy_violations, names)
    return summary, out


def render_note(stacks: list[StackPreview], title: str = "Pulumi preview") -> str:
    """The whole note for one or more stacks, ending with a newline."""
    summaries, sections = [], []
    for sp in stacks:
        summary, body = render_stack(sp)
        summaries.append(summary)
        sections += body
    lines = [f"## {title}", ""] + summaries + sections
    return "\n".join(lines) + "\n"
