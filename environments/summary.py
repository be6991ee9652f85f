"""A human summary of a compiled environment (printed by `make validate`)."""

from __future__ import annotations

from collections import Counter

from .model import Environment, LogicalRole


def render_summary(env: Environment) -> str:
    lines = [f"environment {env.name} ({env.tier.value}, blueprint {env.blueprint}) — {env.source}: valid"]
    lines.append(f"  sites ({len(env.sites)}):")
    for s in env.sites:
        n = sum(1 for m in env.machines if m.site == s.name)
        profiles = ", ".join(f"{p.name} [{p.fabric_mode.value}, batch {p.batch_max_parallel}]" for p in s.profiles)
        flags = [] if s.tls_verify else ["TLS verify OFF"]
        if s.customer_handoff:
            flags.append("customer handoff")
        lines.append(
            f"    {s.name}: {s.maas_url} — {n} machines; profiles: {profiles}"
            + (f" ({'; '.join(flags)})" if flags else "")
        )
    lines.append(f"  hosts ({len(env.hosts)}) by role:")
    for role, hosts in env.hosts_by_role().items():
        shown = ", ".join(f"{h.hostname} {h.address}" for h in hosts) or "-"
        if role is LogicalRole.WORKER_COMPUTE:
            linked = {h.machine for h in hosts if h.machine}
            gpu_nodes = sum(1 for m in env.machines if m.hostname not in linked)
            if gpu_nodes:
                shown += f" (+ {gpu_nodes} MAAS-deployed GPU nodes)"
        lines.append(f"    {role.value}: {shown}")
    skus = Counter(m.sku for m in env.machines)
    pools = Counter(m.pool or "(standalone)" for m in env.machines)
    lines.append(
        f"  machines ({len(env.machines)}): "
        + ", ".join(f"{n}x {sku}" for sku, n in sorted(skus.items()))
        + ("; " + ", ".join(f"{p}: {n}" for p, n in sorted(pools.items())) if pools else "")
    )
    lines.append(
        f"  RoCE pools ({len(env.roce_pools)}):"
        + "".join(
            f"\n    {p.site} rail {p.rail}: {p.subnet} {p.range.start}-{p.range.end} mtu {p.mtu}"
            for p in sorted(env.roce_pools, key=lambda p: (p.site, p.rail))
        )
    )
    lines.append(f"  bootstrap bundles: {', '.join(b.name for b in env.bootstrap_bundles) or '-'}")
    lines += _mounts(env)
    for a in env.app_instances:
        members = ", ".join(f"{k} x{v.count}" for k, v in a.members.items())
        lines.append(f"  app instance {a.name}: {a.app.slug} {a.app.version} in project {a.project_id} ({members})")
    return "\n".join(lines)


def _mounts(env: Environment) -> list[str]:
    """WEKA mounts, saying what mounts them and with what: the client package, or the lab's stand-in (no WEKA)."""
    out = [f"  WEKA mounts ({len(env.storage_mounts)}):"] if env.storage_mounts else []
    filesystems = {f.name: f for f in env.filesystems}
    for mnt in env.storage_mounts:
        fs = filesystems[mnt.filesystem]
        who = [f"{r} hosts" for r in mnt.roles] + [f"pool {p}" for p in mnt.pools] + list(mnt.machines)
        if fs.lab_stand_in is not None:
            how = f"LAB STAND-IN {fs.lab_stand_in.value} (no WEKA cluster in the lab)"
        elif fs.client is not None:
            how = f"WEKA client {fs.client.package} (apt source {fs.client.apt_source})"
        else:
            how = "WEKA (client installed by the host roles)"
        out.append(f"    {mnt.mount_point} ({mnt.purpose.value}, {fs.fs_name}) on {', '.join(who)}: {how}")
    return out
