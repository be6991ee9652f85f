"""WEKA mounts (seed 000 §2) compiled from the environment for the two ways they reach nodes.

- Lab hosts, through the host roles: `role_mounts(env, logical_role)` -> the host's `mounts` in the
  HostConvergence inventory (`gpuaas_mounts`, installed by the `common` role).
- MAAS machines, through the node bundle: `bundle_mount_sets(env, bundle)` -> the bundle's `mounts`
  (one set per pool or standalone machine that uses the bundle and mounts something), and
  `machine_mount_sets(env, machine)` -> which of them a machine installs (its deploy spec's `mount_sets`).

A pool's set goes into its profile's bootstrap bundle and into every bundle one of its machines uses, so a
machine finds its pool's set whichever bundle it deploys with. Validation (MOUNT001..005) has run before.
"""

from __future__ import annotations

from environments import Environment
from environments.model import MaasMachine
from environments.model_runtime import StorageMount
from providers.hosts.mounts import MountDecl, MountSet
from providers.wire import LabStandIn, MountPurpose


def decl(env: Environment, mnt: StorageMount) -> MountDecl:
    fs = next(f for f in env.filesystems if f.name == mnt.filesystem)
    return MountDecl(fs_name=fs.fs_name, backends=fs.backends, mount_point=mnt.mount_point,
                     purpose=MountPurpose(mnt.purpose.value), options=mnt.options, read_only=mnt.read_only,
                     stand_in=LabStandIn(fs.lab_stand_in.value) if fs.lab_stand_in else None,
                     client_package=fs.client.package if fs.client and not fs.lab_stand_in else None)


def role_mounts(env: Environment, logical_role: str) -> tuple[MountDecl, ...]:
    return tuple(decl(env, m) for m in env.storage_mounts if logical_role in m.roles)


def _pool_bundles(env: Environment, pool: str) -> set[str]:
    p = next(p for p in env.machine_pools if p.name == pool)
    return {env.profile(p.site, p.profile).site_bootstrap_bundle_ref,
            *(env.machine_bundle(m).name for m in env.machines_in_pool(pool))}


def _sets(env: Environment) -> dict[str, tuple[set[str], list[MountDecl]]]:
    """set name -> (bundles that carry it, its mounts), in declaration order."""
    out: dict[str, tuple[set[str], list[MountDecl]]] = {}
    for mnt in env.storage_mounts:
        for pool in mnt.pools:
            out.setdefault(f"pool-{pool}", (_pool_bundles(env, pool), []))[1].append(decl(env, mnt))
        for host in mnt.machines:
            m = next(m for m in env.machines if m.hostname == host)
            out.setdefault(f"machine-{host}", ({env.machine_bundle(m).name}, []))[1].append(decl(env, mnt))
    return out


def bundle_mount_sets(env: Environment, bundle: str) -> tuple[MountSet, ...]:
    return tuple(MountSet(name=name, mounts=tuple(mounts))
                 for name, (bundles, mounts) in sorted(_sets(env).items()) if bundle in bundles)


def machine_mount_sets(env: Environment, m: MaasMachine) -> tuple[str, ...] | None:
    """The sets `m` installs, or None when it mounts nothing."""
    sets = _sets(env)
    mine = [n for n in (f"pool-{m.pool}" if m.pool else "", f"machine-{m.hostname}") if n in sets]
    return tuple(mine) or None
