"""Rules about the app runtime of seed 000: allocation shapes, app inputs (no node SSH material, no
secrets, endpoints other instances publish), UI routes through the platform-owned gateway, and WEKA
mounts. The narrow functions take plain values: the AppInstance provider's `check` calls them too."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from .findings import Code, Finding, finding
from .model import Blueprint, EnvironmentDocument, LogicalRole
from .model_runtime import CapacityShape, CookiePolicy, EndpointRef, FramePolicy, MountPurpose, StoragePath
from .rules_values import looks_like_ssh_material, looks_secret

SLICE_GPUS = (1, 2, 4)
WHOLE_NODE_GPUS = 8
FILE_PURPOSES = frozenset(MountPurpose)  # every purpose needs file semantics: none may ride on S3


def member_allocation(key: str, allocation: Mapping[str, Any] | None, *, cpu_only_offered: bool, file: str,
                      path: str) -> Iterator[Finding]:
    """One component's allocation shape (`allocation` as the model dumps it, or None: a whole node)."""
    if allocation is None:
        return
    shape, gpus, cpu_only = CapacityShape(allocation["capacity_shape"]), int(allocation["gpu_count"]), bool(
        allocation["cpu_only"])
    if cpu_only and gpus != 0:
        yield finding(Code.ALLOCATION_SHAPE_INVALID, file, f"{path}.gpu_count",
                      f"{key}: a CPU-only allocation with {gpus} GPU(s)", hint="set gpu_count: 0 or cpu_only: false")
    elif not cpu_only and shape is CapacityShape.GPU_SLICE and gpus not in SLICE_GPUS:
        yield finding(Code.ALLOCATION_SHAPE_INVALID, file, f"{path}.gpu_count",
                      f"{key}: a GPU slice of {gpus} GPU(s)",
                      hint=f"a slice has {', '.join(map(str, SLICE_GPUS))} GPUs; use whole_node for {WHOLE_NODE_GPUS}")
    elif not cpu_only and shape is CapacityShape.WHOLE_NODE and gpus != WHOLE_NODE_GPUS:
        yield finding(Code.ALLOCATION_SHAPE_INVALID, file, f"{path}.gpu_count",
                      f"{key}: a whole node with {gpus} GPU(s)", hint=f"a whole node has {WHOLE_NODE_GPUS} GPUs")
    if cpu_only and not cpu_only_offered:
        yield finding(Code.CPU_ONLY_NOT_OFFERED, file, f"{path}.cpu_only",
                      f"{key}: a CPU-only allocation, but this environment's platform offers none "
                      "(platform.cpu_only_allocations is false)")


def app_inputs(inputs: Mapping[str, Any], *, file: str, base: str) -> Iterator[Finding]:
    """Inputs are plain config: never node SSH material (seed 000 §1), never a secret. Values are not echoed."""
    for key, value in inputs.items():
        path = f"{base}.{key}"
        if isinstance(value, Mapping):  # an endpoint reference: checked against the document
            continue
        if looks_like_ssh_material(key, value):
            yield finding(Code.SSH_MATERIAL_IN_APP_INPUT, file, path,
                          f"input {key!r} looks like node SSH material; no app receives node SSH credentials")
        elif looks_secret(key, value):
            yield finding(Code.SECRET_IN_APP_INPUT, file, path, f"input {key!r} looks like a secret")


def ui_routes(routes: Sequence[Mapping[str, Any]], components: Iterable[str], *, file: str,
              base: str) -> Iterator[Finding]:
    """Seed 000 §4: the platform owns auth, session, cookies and CSP; no pure iframe; a link-out says why."""
    keys, seen = set(components), set()
    for i, r in enumerate(routes):
        path = f"{base}[{i}]"
        if r["name"] in seen:
            yield finding(Code.DUPLICATE_NAME, file, f"{path}.name", f"route {r['name']!r} is declared twice")
        seen.add(r["name"])
        if r["component"] not in keys:
            yield finding(Code.ROUTE_UNKNOWN_COMPONENT, file, f"{path}.component",
                          f"route {r['name']!r} names component {r['component']!r}",
                          hint=f"use one of: {', '.join(sorted(keys))}")
        if CookiePolicy(r["cookies"]) is CookiePolicy.SHARED:
            yield finding(Code.ROUTE_SHARED_COOKIES, file, f"{path}.cookies",
                          f"route {r['name']!r} asks to share the shell's cookies")
        if FramePolicy(r["frame_policy"]) is FramePolicy.IFRAME:
            yield finding(Code.ROUTE_PURE_IFRAME, file, f"{path}.frame_policy",
                          f"route {r['name']!r} asks for a pure iframe of the app's own origin")
        fallback = r.get("link_out_fallback")
        if FramePolicy(r["frame_policy"]) is FramePolicy.LINK_OUT and not (fallback and fallback.get("reason")):
            yield finding(Code.LINK_OUT_WITHOUT_REASON, file, f"{path}.link_out_fallback",
                          f"route {r['name']!r} links out without saying why")


def endpoint_refs(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    """An input naming another instance's endpoint: an instance of the same project whose app publishes it."""
    by_name = {a.name: a for a in doc.app_instances}
    for ai, a in enumerate(doc.app_instances):
        for key, value in a.inputs.items():
            if not isinstance(value, EndpointRef):
                continue
            ref = value.model_dump()
            path, target = f"app_instances[{ai}].inputs.{key}", by_name.get(ref["instance"])
            app = bp.apps.get(target.app.slug) if target else None
            if target is None or target.name == a.name or target.project_id != a.project_id:
                why = "is this instance" if target is not None and target.name == a.name else (
                    "is in another project" if target is not None else "is not declared")
                yield finding(Code.UNKNOWN_ENDPOINT, file, f"{path}.instance",
                              f"input {key!r} names instance {ref['instance']!r}, which {why}")
            elif app is None or ref["endpoint"] not in app.publishes:
                yield finding(Code.UNKNOWN_ENDPOINT, file, f"{path}.endpoint",
                              f"{target.app.slug} instance {target.name!r} publishes no endpoint {ref['endpoint']!r}",
                              hint=f"use one of: {', '.join(app.publishes) if app else 'none'}")


def storage_mounts(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    # size: one pass over the mounts, each check in the order a reader meets the fields
    filesystems = {f.name: f for f in doc.filesystems}
    pools = {p.name for p in doc.machine_pools}
    machines = {m.hostname for m in doc.machines}
    where: dict[tuple[str, str], int] = {}
    for i, mnt in enumerate(doc.storage_mounts):
        base = f"storage_mounts[{i}]"
        fs = filesystems.get(mnt.filesystem)
        if fs is None:
            yield finding(Code.UNKNOWN_FILESYSTEM, file, f"{base}.filesystem",
                          f"filesystem {mnt.filesystem!r} is not declared",
                          hint="declare it under filesystems or use one of: "
                          f"{', '.join(sorted(filesystems)) or 'none'}")
        elif mnt.via not in fs.paths:
            yield finding(Code.PATH_NOT_OFFERED, file, f"{base}.via",
                          f"filesystem {fs.name!r} offers {', '.join(p.value for p in fs.paths)}, not {mnt.via.value}")
        if mnt.via is StoragePath.S3 and mnt.purpose in FILE_PURPOSES:
            yield finding(Code.MOUNT_ON_S3, file, f"{base}.via",
                          f"a {mnt.purpose.value} mount at {mnt.mount_point} declared on the S3 path")
        if not (mnt.roles or mnt.pools or mnt.machines):
            yield finding(Code.MOUNT_WITHOUT_TARGET, file, base, f"nobody mounts {mnt.mount_point}")
        for j, role in enumerate(mnt.roles):
            if role not in {r.value for r in LogicalRole}:
                yield finding(Code.INVALID_VALUE, file, f"{base}.roles[{j}]", f"{role!r} is not a logical role",
                              hint=f"use one of: {', '.join(r.value for r in LogicalRole)}")
        for j, pool in enumerate(mnt.pools):
            if pool not in pools:
                yield finding(Code.UNKNOWN_POOL, file, f"{base}.pools[{j}]", f"machine pool {pool!r} is not declared")
        for j, machine in enumerate(mnt.machines):
            if machine not in machines:
                yield finding(Code.UNKNOWN_MACHINE, file, f"{base}.machines[{j}]",
                              f"machine {machine!r} is not declared")
        for target in (*mnt.roles, *mnt.pools, *mnt.machines):
            first = where.setdefault((target, mnt.mount_point), i)
            if first != i:
                yield finding(Code.DUPLICATE_MOUNT_POINT, file, f"{base}.mount_point",
                              f"{mnt.mount_point} is already mounted on {target} by storage_mounts[{first}]")
