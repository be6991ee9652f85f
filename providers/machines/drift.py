"""Identity drift: a machine renamed in MAAS by hand, or a declared tag removed from it.

`identity_drift(spec, view)` says what differs (refresh records it, so the next preview shows an
update); `repair_identity(ops, items)` puts it back during `up` and reads it back.

Tags: only *declared tags missing* are drift. Tags on the machine that the environment does not
declare are left alone: MAAS adds tags of its own (tag definitions with an XPath, `virtual`, ...)
that the API does not tell apart from tags added by hand, and removing one of MAAS's tags would
fight MAAS on every run. A tag removed from the environment is removed by the in-place update
(`apply_in_place`: old declared tags minus new), never by drift repair.
"""

from __future__ import annotations

from collections.abc import Sequence

from clients.maas import MachineView

from .ports import MachineOps
from .records import FailCode
from .spec import MachineIdentity, MachineSpec


class IdentityNotApplied(Exception):
    """MAAS still shows another hostname or lacks a declared tag after the repair (read back)."""


def identity_drift(spec: MachineSpec | MachineIdentity, view: MachineView) -> list[str]:
    """What differs between the declared identity and MAAS's (empty: nothing)."""
    out: list[str] = []
    if view.hostname != spec.hostname:
        out.append(f"hostname is {view.hostname!r} in MAAS, declared {spec.hostname!r}")
    missing = sorted(set(spec.tags) - set(view.tags))
    if missing:
        out.append("declared tag(s) missing in MAAS: " + ", ".join(missing))
    return out


def repair_identity(
    ops: MachineOps, items: Sequence[tuple[MachineSpec | MachineIdentity, str]]
) -> dict[str, list[str]]:
    """Rename back and re-add missing declared tags (one bulk read, then a read back of the machines
    changed). Returns hostname -> what was repaired; raises if MAAS did not take it."""
    if not items:
        return {}
    views = {v.system_id: v for v in ops.read_many([sid for _, sid in items])}
    repaired: dict[str, list[str]] = {}
    for spec, sid in items:
        view = views.get(sid)
        if view is None or not (what := identity_drift(spec, view)):
            continue
        if view.hostname != spec.hostname:
            ops.set_hostname(sid, spec.hostname)
        missing = sorted(set(spec.tags) - set(view.tags))
        if missing:
            ops.set_tags(sid, missing)
        repaired[spec.hostname] = what
    if not repaired:
        return repaired
    changed = [(s, sid) for s, sid in items if s.hostname in repaired]
    back = {v.system_id: v for v in ops.read_many([sid for _, sid in changed])}
    still = [
        f"{s.hostname} (system_id {sid}): " + "; ".join(left)
        for s, sid in changed
        if (v := back.get(sid)) is not None and (left := identity_drift(s, v))
    ]
    if still:
        raise IdentityNotApplied(
            FailCode.IDENTITY_NOT_APPLIED(
                "MAAS did not take the hostname/tag repair: "
                + " | ".join(still)
                + ". Check the machine in MAAS (a name taken by another machine?), then run up again."
            )
        )
    return repaired
