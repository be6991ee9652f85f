"""MachinesProvider: what the MaasMachine and MachinePool adapters share (a MaasMachine is a pool of
one): the machine time scale read at configure, the machines runtime loaded there, a session per call,
MAAS alone for refresh, and the update sequence after a rename: converge -> in place -> identity
repair -> claim. Each adapter keeps only its own shape (one spec or a pool of them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from pulumi.dynamic import ConfigureRequest

from providers.base import KindProvider, S

from . import reconciler as rc
from .drift import repair_identity
from .plan import MachineRecord
from .resource_io import time_scale_from
from .spec import Connection, LifecyclePolicy, MachineIdentity, MachineSpec


def _runtime() -> ModuleType:
    """The machines runtime (MAAS, platform, Vault and S3 clients): imported by the provider's
    `configure`, never by the program (importing the clients cost each program process ~0.5 s)."""
    from . import runtime

    return runtime


class MachinesProvider(KindProvider[S]):
    """The machines adapters' shared part; `source` (check's) is the kind's name."""

    def configure(self, req: ConfigureRequest) -> None:
        super().configure(req)
        self._time_scale = time_scale_from(req.config)
        # The clients load here, not in the first call needing them: the SDK configures under its lock,
        # and calls run concurrently; a first import racing another provider's unpickling can meet a
        # half-initialised module ("partially initialized module ... circular import", seen in refresh).
        _runtime()

    @property
    def time_scale(self) -> float:
        return float(getattr(self, "_time_scale", 1.0))

    def session(self, connection: Connection, policy: LifecyclePolicy, label: str, owner: str | None) -> Any:
        """The lifecycle's context (MAAS, platform, Vault, S3) for one call; `label` names it in reports."""
        return _runtime().session(connection, policy, self.credentials, self.time_scale, label=label, owner=owner)

    def maas(self, connection: Connection) -> Any:
        """MAAS alone, for refresh."""
        return _runtime().maas_client(connection, self.credentials, time_scale=self.time_scale)

    @staticmethod
    def update_sequence(
        ctx: Any,
        label: str,
        specs: Sequence[MachineSpec],
        prior: Mapping[str, MachineRecord],
        old: Mapping[str, MachineIdentity | None],
        *,
        leaving: Sequence[tuple[Any, MachineRecord | None]] = (),
        system_ids: Mapping[str, str] | None = None,
        claim: bool = False,
    ) -> rc.Converged:
        """An update after the rename (`prior` and `old` keyed by the new hostnames): converge, raise the
        machines' failures, then per machine the in-place edits from its `old` identity, the identity repair
        (renamed or a declared tag removed by hand: one bulk read) and, when the resource's name was not
        recorded yet (`claim`), the owner data. `system_ids`: hostname -> system_id (default: the records')."""
        done = rc.converge(ctx, specs, prior, leaving)
        rc.raise_failures(label, done.results)
        ids: dict[str, str | None] = dict(system_ids) if system_ids is not None else {
            s.hostname: done.records[s.hostname].system_id for s in specs}
        for spec in specs:
            if (sid := ids.get(spec.hostname)) and spec.hostname in old:
                rc.apply_in_place(ctx, old[spec.hostname], spec, sid)
        repair_identity(ctx.ops, [(s, sid) for s in specs if (sid := ids.get(s.hostname))])
        if claim:
            rc.claim(ctx, [sid for sid in ids.values() if sid])
        return done
