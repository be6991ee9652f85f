"""What the demo shows after `up`: tables built from the stack outputs (the state), not JSON dumps.

- machines: hostname, pool, system id, MAAS status, outcome, platform node id, time per stage (the
  stage times come from the run's per-machine report lines; state keeps no timings);
- app members: instance, component, member id, status, node, last operation;
- bootstrap bundles: site, bundle, digest, URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cli.table import render_table
from providers.machines.progress import stage_times

MACHINE_HEADS = ("hostname", "pool", "system id", "status", "outcome", "node id", "time per stage")
MEMBER_HEADS = ("instance", "component", "member id", "status", "node", "last operation")
BUNDLE_HEADS = ("site", "bundle", "digest", "url")


def duration(seconds: float) -> str:
    """0.4s, 12s, 12m03s, 1h02m: MAAS stages take minutes, simulated ones fractions of a second."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _seconds(times: Mapping[str, float]) -> str:
    """Stages that took a visible time, in the order the machine went through them."""
    return " ".join(f"{stage} {duration(secs)}" for stage, secs in times.items() if secs >= 0.05) or "-"


def machine_rows(outputs: Mapping[str, Any], times: Mapping[str, Mapping[str, float]]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for key, value in sorted((outputs.get("machines") or {}).items()):
        members = value.items() if key.startswith("pool:") else [(key, value)]
        pool = key.removeprefix("pool:") if key.startswith("pool:") else "-"
        for host, rec in sorted(members):
            rows.append((host, pool, rec.get("system_id") or "-", rec.get("status") or "-",
                         rec.get("outcome") or "-", rec.get("node_id") or "-", _seconds(times.get(host, {}))))
    return rows


def member_rows(outputs: Mapping[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for name, inst in sorted((outputs.get("app_instances") or {}).items()):
        for m in sorted(inst.get("members") or [], key=lambda m: (m.get("component_key", ""), m.get("member_id", ""))):
            last = m.get("last_operation_status") or "-"
            rows.append((name, m.get("component_key") or "-", m.get("member_id") or "-", m.get("status") or "-",
                         m.get("hostname") or "-", last))
    return rows


def bundle_rows(outputs: Mapping[str, Any]) -> list[tuple[str, ...]]:
    return [(site, name, (b.get("digest") or "-")[:16], b.get("url") or "-")
            for site, s in sorted((outputs.get("sites") or {}).items())
            for name, b in sorted((s.get("bundles") or {}).items())]


def render_outputs(outputs: Mapping[str, Any], log: Iterable[str] = ()) -> str:
    """The three tables, each under its title (an empty table says so)."""
    times = stage_times(log)
    out: list[str] = []
    for title, heads, rows in (
        ("machines", MACHINE_HEADS, machine_rows(outputs, times)),
        ("app members", MEMBER_HEADS, member_rows(outputs)),
        ("bootstrap bundles", BUNDLE_HEADS, bundle_rows(outputs)),
    ):
        out += [f"{title} ({len(rows)})", *(render_table(heads, rows) if rows else ["  none"]), ""]
    return "\n".join(out)
