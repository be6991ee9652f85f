"""SimCore: the simulator without its HTTP server -- state, lifecycle, faults, stats, keys and
the route table built from the handler modules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import config, handlers_events, handlers_machines, handlers_misc, handlers_nodes, script_results
from .auth import ApiKey, KeyRing
from .builtin_scripts import builtin_scripts
from .enroll import EnrollBackend
from .enums import NodeStatus
from .faults import FaultBook, SimFaults
from .inventory import SimInventory
from .lifecycle import Lifecycle, PhaseDurations
from .observe import Stats
from .render import machine_json, user_data_digest
from .routes import RouteTable
from .state import Machine, Store

if TYPE_CHECKING:
    from .nspawn import NspawnNodes


class SimCore:
    def __init__(self, inventory: SimInventory, *, time_scale: float = 1.0, faults: SimFaults | None = None,
                 durations: PhaseDurations | None = None, platform_url: str | None = None,
                 api_key: ApiKey | None = None, seed: int = 0,
                 enroll_backend: EnrollBackend = EnrollBackend.FAST, nodes: NspawnNodes | None = None) -> None:
        if (enroll_backend is EnrollBackend.NSPAWN) != (nodes is not None):
            raise ValueError("the NSPAWN machine backend takes nodes=NspawnNodes(NodeLab(...)), and only it does")
        self.store = Store(seed)
        for script in builtin_scripts():
            self.store.scripts[script.name] = script
        self.store.seed(inventory)
        self.faults = FaultBook(faults)
        self.stats = Stats()
        for m in self.store.machines.values():
            self.stats.status_changed(m.zone, None, m.status)
        self.lifecycle = Lifecycle(self.store, self.faults, self.stats, durations or PhaseDurations(),
                                   time_scale, platform_url if enroll_backend is EnrollBackend.FAST else None,
                                   nodes=nodes)
        self.api_key = api_key or ApiKey.generate()
        self.keys = KeyRing([self.api_key])
        self.deleted_events: dict[str, list[Any]] = {}
        self.routes = RouteTable()
        handlers_machines.register(self.routes, self)
        handlers_nodes.register(self.routes, self)
        handlers_misc.register(self.routes, self)
        config.register(self.routes, self)
        handlers_events.register(self.routes, self)
        script_results.register(self.routes, self)

    def enlist(self, macs: list[str], *, hostname: str | None, architecture: str, zone: str, power_type: str,
               power_parameters: dict[str, Any], description: str) -> Machine:
        """A machine created through the API. Racked hardware from the inventory (matched by PXE
        MAC) brings its SKU and site; unknown MACs get a generic-small body."""
        store = self.store
        spec = next((store.rack.pop(mac) for mac in macs if mac in store.rack), None)
        sku = spec.sku if spec else "generic-small"
        if spec is not None and zone == "default":
            zone = spec.site
        pxe = spec.pxe_mac if spec else macs[0]
        extra = [m for m in macs if m != pxe]
        m = store.build_machine(hostname=hostname or (spec.hostname if spec else None), pxe_mac=pxe, sku=sku,
                                zone=zone, status=NodeStatus.NEW, power_type=power_type,
                                power_parameters=power_parameters, architecture=architecture,
                                extra_macs=extra, description=description)
        m.known_macs = set(macs)
        m.event("CREATE", f"enlisted with {len(macs)} MAC(s), power type {power_type}")
        self.stats.status_changed(m.zone, None, m.status)
        return m

    # --- admin views ------------------------------------------------------------------------
    def events(self, system_id: str) -> list[dict[str, Any]] | None:
        with self.store.lock:
            m = self.store.machines.get(system_id)
            if m is None:
                found = self.deleted_events.get(system_id)
                return None if found is None else [e.as_dict() for e in found]
            return [e.as_dict() for e in m.events]

    def find(self, key: str) -> Machine | None:
        """A machine by system_id or hostname."""
        with self.store.lock:
            return self.store.machines.get(key) or next(
                (m for m in self.store.machines.values() if m.hostname == key), None)

    def dump(self) -> dict[str, Any]:
        """The whole state as JSON; deployed user_data only as digest (it carries tokens)."""
        with self.store.lock:
            machines = []
            for m in self.store.machines.values():
                data = machine_json(self.store, m)
                data["sim"] = {"sku": m.sku, "user_data": user_data_digest(m.user_data),
                               "storage_layout": m.storage_layout, "attempts": dict(m.attempts),
                               "events": [e.as_dict() for e in m.events]}
                machines.append(data)
            return {
                "domain": self.store.domain,
                "zones": sorted(self.store.zones),
                "fabrics": {f.id: f.name for f in self.store.fabrics.values()},
                "subnets": [{"id": s.id, "cidr": str(s.cidr), "site": s.site, "role": s.role, "rail": s.rail}
                            for s in self.store.subnets.values()],
                "tags": sorted(self.store.tags),
                "scripts": sorted(self.store.scripts),
                "machines": machines,
                "racked_not_enlisted": sorted(self.store.rack),
                "faults": self.faults.snapshot().model_dump(),
            }
