"""MachinesHandler, AnonMachinesHandler and MachineHandler: the machine collection and the
per-machine lifecycle ops (canonical/maas `maasserver/api/machines.py`, `nodes.py`)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import TYPE_CHECKING, Any

from . import errors
from .enums import OWNED, POWER_ON_OWNED, NodeStatus, PowerState, StorageLayout
from .render import machine_json, machine_list_body
from .routes import Request, Response, RouteTable, deleted

if TYPE_CHECKING:
    from .core import SimCore
    from .state import Machine

S = NodeStatus
ANON_FIELDS = ("system_id", "hostname", "domain", "fqdn", "architecture", "status", "power_type",
               "power_state", "zone", "status_action", "status_message", "status_name", "node_type")
LAYOUT_CHOICES = ("flat", "lvm", "bcache", "blank", "vmfs6", "vmfs7", "custom")


def _power_parameters(req: Request) -> dict[str, Any] | None:
    """power_parameters as one JSON string, or as power_parameters_<name> fields."""
    raw = req.get("power_parameters")
    if raw:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise errors.field_error("power_parameters", "Enter valid JSON.") from None
        if not isinstance(value, dict):
            raise errors.field_error("power_parameters", "Power parameters must be a JSON object.")
        return value
    flat = req.fields_with_prefix("power_parameters_")
    return flat or None


_UNITS = {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4, "P": 1000**5}


def _size(field: str, text: str, whole: int) -> int:
    """MAAS's BytesOrPercentageField: bytes, a K/M/G/T/P suffix, or a percentage of `whole`."""
    value = text.strip().upper()
    try:
        if value.endswith("%"):
            return int(whole * float(value[:-1]) / 100)
        unit = value[-1] if value and value[-1] in _UNITS else ""
        return int(float(value[: len(value) - len(unit)]) * _UNITS[unit])
    except ValueError:
        raise errors.field_error(field, f"{text} is not a valid size.") from None


def _scripts(core: SimCore, req: Request, field: str, script_type: int, allow_none: bool) -> list[str]:
    raw = req.get_list(field)
    names = [n.strip() for v in raw for n in v.split(",") if n.strip()]
    if allow_none and names == ["none"]:
        return ["none"]
    with core.store.lock:
        known = {s.name for s in core.store.scripts.values() if s.script_type == script_type}
        known |= {t for s in core.store.scripts.values() if s.script_type == script_type for t in s.tags}
    for n in names:
        if n not in known:
            raise errors.invalid_choice(field, n)
    return names


def register(routes: RouteTable, core: SimCore) -> None:
    # size: one closure per MAAS machine handler/op over the core: the route table reads in one place
    store, life = core.store, core.lifecycle
    machines = routes.handler("MachinesHandler", "machines/",
                              doc="Manage the collection of all the machines in the MAAS.")
    anon = routes.handler("AnonMachinesHandler", "machines/", anon=True, doc="Anonymous access to Machines.")
    machine = routes.handler("MachineHandler", "machines/{system_id}/", doc="Manage an individual machine.")

    def get(req: Request) -> Any:
        m = store.machines.get(req.params["system_id"])
        if m is None:
            raise errors.not_found("Machine")
        return m

    # --- collection -----------------------------------------------------------------------
    @machines.action("read", "GET")
    def list_machines(req: Request) -> Any:
        """List machines, optionally filtered by hostname, mac_address, id (system_id), zone or tags
        (MAAS: only machines carrying every given tag)."""
        hostnames = set(req.get_list("hostname"))
        tags = set(req.get_list("tags"))
        macs = {m.lower() for m in req.get_list("mac_address")}
        ids = set(req.get_list("id"))
        zone = req.get("zone")
        with store.lock:
            out: list[tuple[Machine, dict[str, Any]]] = []
            for m in store.machines.values():
                if hostnames and m.hostname not in hostnames:
                    continue
                if macs and not macs & {i.mac_address for i in m.interfaces}:
                    continue
                if ids and m.system_id not in ids:
                    continue
                if zone and m.zone != zone:
                    continue
                if tags and not tags <= set(m.tags):
                    continue
                out.append((m, machine_json(store, m)))
        return Response(200, machine_list_body(out))

    def create(req: Request, anonymous: bool) -> Any:
        macs = [m.strip().lower() for m in req.get_list("mac_addresses") if m.strip()]
        if not macs:
            raise errors.field_error("mac_addresses", "This field is required.")
        arch = req.get("architecture") or "amd64/generic"
        if "/" not in arch:
            arch = f"{arch}/generic"
        hostname = req.get("hostname") or None
        with store.lock:
            for mac in macs:
                owner = store.addresses.find_mac(mac)
                if owner is not None:
                    raise errors.field_error("mac_addresses", f"MAC address {mac} already in use on {owner.hostname}.")
            if hostname and any(x.hostname == hostname for x in store.machines.values()):
                raise errors.field_error("hostname", "Node with this Hostname already exists.")
            zone = req.get("zone") or "default"
            if zone not in store.zones:
                raise errors.invalid_choice("zone", zone)
            m = core.enlist(macs, hostname=hostname, architecture=arch, zone=zone,
                            power_type=req.get("power_type") or "manual",
                            power_parameters=_power_parameters(req) or {},
                            description=req.get("description") or "")
            if not anonymous and req.get_bool("commission", True) and not req.get_bool("deployed", False):
                life.commission(m, _scripts(core, req, "commissioning_scripts", 0, False),
                                _scripts(core, req, "testing_scripts", 2, True))
            data = machine_json(store, m)
        return {k: data[k] for k in ANON_FIELDS} if anonymous else data

    @machines.action("create", "POST")
    def create_machine(req: Request) -> Any:
        """Create a machine; admins' machines start commissioning unless commission=false."""
        return create(req, anonymous=False)

    @machines.action("accept", "POST", "accept")
    def accept(req: Request) -> Any:
        """Accept declared (New) machines: they start commissioning."""
        ids = req.get_list("machines")
        with store.lock:
            unknown = [i for i in ids if i not in store.machines]
            if unknown:
                raise errors.bad_request(f"Unknown machine(s): {', '.join(unknown)}.")
            accepted = [store.machines[i] for i in ids if life.accept(store.machines[i])]
            return [machine_json(store, m) for m in accepted]

    @machines.action("power_parameters", "GET", "power_parameters")
    def bulk_power_parameters(req: Request) -> Any:
        """Power parameters of many machines, keyed by system_id (filter with id=...)."""
        ids = set(req.get_list("id"))
        with store.lock:
            return {m.system_id: dict(m.power_parameters) for m in store.machines.values()
                    if not ids or m.system_id in ids}

    @anon.action("create", "POST")
    def anon_create(req: Request) -> Any:
        """Anonymous enlistment: the machine is held in New until an admin accepts it."""
        return create(req, anonymous=True)

    @anon.action("accept", "POST", "accept")
    def anon_accept(req: Request) -> Any:
        """Accepting enlistment is not allowed anonymously."""
        raise errors.ApiError(401, "You must be logged in to accept machines.")  # maasserver Unauthorized

    @anon.action("is_registered", "GET", "is_registered")
    def is_registered(req: Request) -> Any:
        """Whether a MAC address belongs to a known machine."""
        mac = req.get("mac_address")
        if not mac:
            raise errors.field_error("mac_address", "This field is required.")
        with store.lock:
            return store.addresses.find_mac(mac) is not None

    # --- one machine ----------------------------------------------------------------------
    @machine.action("read", "GET")
    def read(req: Request) -> Any:
        """Read a machine."""
        with store.lock:
            return machine_json(store, get(req))

    @machine.action("update", "PUT")
    def update(req: Request) -> Any:
        """Update hostname, description, zone, architecture, kernel or power settings."""
        with store.lock:
            m = get(req)
            hostname = req.get("hostname")
            if hostname and hostname != m.hostname:
                if any(x.hostname == hostname for x in store.machines.values()):
                    raise errors.field_error("hostname", "Node with this Hostname already exists.")
                m.hostname = hostname
            zone = req.get("zone")
            if zone:
                if zone not in store.zones:
                    raise errors.invalid_choice("zone", zone)
                m.zone = zone
            for name in ("description", "architecture", "min_hwe_kernel"):
                value = req.get(name)
                if value is not None:
                    setattr(m, name, value)
            if req.get("power_type"):
                m.power_type = req.get("power_type") or m.power_type
            params = _power_parameters(req)
            if params is not None:
                m.power_parameters = params if req.get("power_parameters") else {**m.power_parameters, **params}
            m.event("UPDATE", "machine updated")
            return machine_json(store, m)

    @machine.action("delete", "DELETE")
    def delete(req: Request) -> Any:
        """Delete a machine (any status)."""
        with store.lock:
            m = get(req)
            core.stats.status_changed(m.zone, m.status, S.NEW)  # no longer busy, if it was
            m.phase_token += 1
            del store.machines[m.system_id]
            core.deleted_events[m.system_id] = [*m.events]
        return deleted()

    @machine.action("commission", "POST", "commission")
    def commission(req: Request) -> Any:
        """Start commissioning (with commissioning_scripts / testing_scripts)."""
        with store.lock:
            m = get(req)
            cs = _scripts(core, req, "commissioning_scripts", 0, False)
            ts = _scripts(core, req, "testing_scripts", 2, True)
            life.commission(m, cs, ts)
            return machine_json(store, m)

    @machine.action("deploy", "POST", "deploy")
    def deploy(req: Request) -> Any:
        """Deploy (base64 user_data, distro_series, hwe_kernel, enable_hw_sync)."""
        raw = req.get_bytes("user_data")
        user_data = None
        if raw:
            try:
                user_data = base64.b64decode(b"".join(raw.split()), validate=True)
            except (binascii.Error, ValueError):
                raise errors.field_error("user_data", "Invalid base64 user_data.") from None
        with store.lock:
            m = get(req)
            life.deploy(m, user_data, req.get("distro_series") or "jammy", req.get("hwe_kernel") or None,
                        req.get_bool("enable_hw_sync", False), req.user or "admin")
            return machine_json(store, m)

    @machine.action("release", "POST", "release")
    def release(req: Request) -> Any:
        """Release (erase / secure_erase / quick_erase / force)."""
        with store.lock:
            m = get(req)
            life.release(m, req.get_bool("erase"), req.get_bool("secure_erase"), req.get_bool("quick_erase"),
                         req.get_bool("force"))
            return machine_json(store, m)

    @machine.action("abort", "POST", "abort")
    def abort(req: Request) -> Any:
        """Abort commissioning, testing, deploying or disk erasing."""
        with store.lock:
            m = get(req)
            life.abort(m)
            return machine_json(store, m)

    @machine.action("mark_broken", "POST", "mark_broken")
    def mark_broken(req: Request) -> Any:
        """Mark a machine Broken."""
        with store.lock:
            m = get(req)
            life.mark_broken(m, req.get("comment") or req.get("error_description") or "")
            return machine_json(store, m)

    @machine.action("mark_fixed", "POST", "mark_fixed")
    def mark_fixed(req: Request) -> Any:
        """Mark a Broken machine fixed (Ready, or Deployed if it was)."""
        with store.lock:
            m = get(req)
            life.mark_fixed(m, req.get("comment") or "")
            return machine_json(store, m)

    @machine.action("power_on", "POST", "power_on")
    def power_on(req: Request) -> Any:
        """Power on an allocated machine."""
        with store.lock:
            m = get(req)
            if m.owner is None or m.status not in POWER_ON_OWNED:
                raise errors.power_on_refused()
            err = core.faults.power_error(m.system_id, m.hostname)
            if err:
                m.power_state = PowerState.ERROR
                m.event("POWER_ERROR", f"power on failed: {err}")
                raise errors.power_problem(f"{m.hostname}: Power on failed: {err}")
            m.power_state = PowerState.ON
            m.event("POWER", "powered on")
            life.power_node(m, on=True)  # NSPAWN: the node boots its disk again
            return machine_json(store, m)

    @machine.action("power_off", "POST", "power_off")
    def power_off(req: Request) -> Any:
        """Power off; a `manual` machine gets `null` (MAAS cannot send the action)."""
        with store.lock:
            m = get(req)
            err = core.faults.power_error(m.system_id, m.hostname)
            if err:
                m.power_state = PowerState.ERROR
                m.event("POWER_ERROR", f"power off failed: {err}")
                raise errors.power_problem(f"{m.hostname}: Power off failed: {err}")
            if m.power_type == "manual":
                return None
            m.power_state = PowerState.OFF
            m.event("POWER", f"powered off ({req.get('stop_mode') or 'hard'})")
            life.power_node(m, on=False)  # NSPAWN: the node halts, its disk stays
            return machine_json(store, m)

    @machine.action("query_power_state", "GET", "query_power_state")
    def query_power_state(req: Request) -> Any:
        """Ask the BMC for the power state."""
        with store.lock:
            m = get(req)
            err = core.faults.power_error(m.system_id, m.hostname)
            if err:
                m.power_state = PowerState.ERROR
                raise errors.power_problem(f"Failed to query node's BMC - {err}")
            if m.power_type == "manual":
                return {"state": PowerState.UNKNOWN.value}
            if m.power_state == PowerState.ERROR:
                m.power_state = PowerState.ON if m.status in OWNED else PowerState.OFF
            return {"state": m.power_state.value}

    @machine.action("power_parameters", "GET", "power_parameters")
    def power_parameters(req: Request) -> Any:
        """This machine's power parameters."""
        with store.lock:
            return dict(get(req).power_parameters)

    @machine.action("set_storage_layout", "POST", "set_storage_layout")
    def set_storage_layout(req: Request) -> Any:
        """Apply a named storage layout to a Ready machine."""
        with store.lock:
            m = get(req)
            if m.status != S.READY:
                raise errors.storage_layout_refused()
            layout = req.get("storage_layout")
            if not layout:
                raise errors.field_error("storage_layout", "This field is required.")
            if layout not in LAYOUT_CHOICES:
                raise errors.invalid_choice("storage_layout", layout)
            if m.boot_disk_id is None:
                raise errors.bad_request("Machine is missing a boot disk; no storage layout can be applied.")
            if layout not in {s.value for s in StorageLayout}:
                raise errors.bad_request(f"Failed to configure storage layout '{layout}': "
                                         "not supported by this machine.")
            root = m.disk(m.boot_disk_id)
            root_device = req.get("root_device")
            if root_device:
                root = next((d for d in m.block_devices if str(d.id) == root_device), None)
                if root is None:
                    raise errors.invalid_choice("root_device", root_device)
            assert root is not None
            for field, reserved in (("boot_size", 0), ("root_size", 512 * 1024**2)):
                text = req.get(field)
                if text:
                    maximum = root.size - reserved
                    if _size(field, text, root.size) > maximum:
                        raise errors.field_error(field, f"Size is too large. Maximum size is {maximum}.")
            m.storage_layout = layout
            m.event("STORAGE", f"storage layout set to {layout} (root on {root.name}"
                    + (f", root_size {req.get('root_size')}" if req.get("root_size") else "") + ")")
            return machine_json(store, m)

    @machine.action("set_owner_data", "POST", "set_owner_data")
    def set_owner_data(req: Request) -> Any:
        """Set (or with an empty value, clear) owner data keys on an acquired machine."""
        with store.lock:
            m = get(req)
            if m.owner != (req.user or "admin"):
                raise errors.owner_data_refused()
            for key in sorted(set(req.form) | set(req.query)):
                if key == "op":
                    continue
                value = req.get(key) or ""
                if value == "":
                    m.owner_data.pop(key, None)
                else:
                    m.owner_data[key] = value
            return machine_json(store, m)

