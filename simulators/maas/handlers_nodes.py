"""A machine's interfaces (read, link_subnet, unlink_subnet) and block devices (read,
set_boot_disk) -- canonical/maas `maasserver/api/interfaces.py`, `blockdevices.py`,
`forms/interface_link.py`."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import TYPE_CHECKING, Any

from . import errors
from .enums import NETWORK_EDITABLE, LinkMode, NodeStatus
from .render import block_device_json, interface_json
from .routes import Request, RouteTable, ok_text
from .state import Interface, Link, Machine, Store, Subnet

if TYPE_CHECKING:
    from .core import SimCore


def resolve_subnet(store: Store, spec: str | None) -> Subnet | None:
    """MAAS subnet specifiers: an id, `cidr:` or a bare CIDR, or `name:`/a name."""
    if not spec:
        return None
    text = spec.strip()
    if text.isdigit():
        return store.subnets.get(int(text))
    for prefix in ("cidr:", "name:", "id:"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    if text.isdigit():
        return store.subnets.get(int(text))
    for s in store.subnets.values():
        try:
            if IPv4Network(text, strict=False) == s.cidr:
                return s
        except ValueError:
            pass
        if s.name == text:
            return s
    return None


def _link(core: SimCore, m: Machine, iface: Interface, req: Request) -> None:
    store = core.store
    mode_text = (req.get("mode") or "").strip().lower()
    try:
        mode = LinkMode(mode_text)
    except ValueError:
        raise errors.invalid_choice("mode", mode_text or "''") from None
    force = req.get_bool("force")
    subnet_spec = req.get("subnet")
    subnet = resolve_subnet(store, subnet_spec)
    if subnet_spec and subnet is None:
        raise errors.invalid_choice("subnet", subnet_spec)
    if mode in (LinkMode.AUTO, LinkMode.STATIC) and subnet is None:
        raise errors.field_error("subnet", "This field is required.")
    if subnet is not None and iface.vlan_id not in (None, subnet.vlan_id) and not force and mode != LinkMode.LINK_UP:
        raise errors.invalid_choice("subnet", subnet_spec)
    if mode == LinkMode.DHCP and any(lk.mode == LinkMode.DHCP for lk in iface.links):
        raise errors.field_error("mode", "Interface is already set to DHCP.")
    if mode == LinkMode.LINK_UP and any(lk.mode != LinkMode.LINK_UP for lk in iface.links) and not force:
        raise errors.field_error("mode", "Cannot configure interface to link up (with no IP address) while other "
                                 "links are already configured. Specify force=True to override this behavior "
                                 "and delete all links.")
    ip = None
    if mode == LinkMode.STATIC:
        assert subnet is not None
        wanted = req.get("ip_address")
        if wanted:
            addr = store.parse_ip(wanted)
            if addr is None:
                raise errors.field_error("ip_address", "Enter a valid IPv4 or IPv6 address.")
            if addr not in subnet.cidr:
                raise errors.field_error("ip_address", f"IP address is not in the given subnet '{subnet.cidr}'.")
            holder = store.addresses.ip_owner(str(addr))
            if holder is not None or str(addr) in (subnet.gateway_ip, *subnet.dns_servers):
                raise errors.field_error("ip_address", "IP address is already in use.")
            ip = str(addr)
        else:
            ip = store.addresses.allocate_ip(subnet)
            if ip is None:
                raise errors.ApiError(503, f"{m.system_id}: Unable to allocate static IP due to address exhaustion.")
    if mode == LinkMode.LINK_UP or force:
        iface.links.clear()
    if subnet is not None:
        iface.vlan_id = subnet.vlan_id
    lk = Link(store.next_id("link"), mode, subnet.id if subnet else None)
    store.addresses.set_ip(m, lk, ip)
    if mode == LinkMode.AUTO and m.status in (NodeStatus.DEPLOYING, NodeStatus.DEPLOYED) and subnet:
        store.addresses.set_ip(m, lk, store.addresses.allocate_ip(subnet))
    iface.links.append(lk)
    m.event("NETWORK", f"{iface.name}: linked {mode.value}" + (f" to {subnet.cidr}" if subnet else "")
            + (f" as {ip}" if ip else ""))


def register(routes: RouteTable, core: SimCore) -> None:
    # size: one closure per MAAS handler/op over the core: the route table reads in one place
    store = core.store
    interfaces = routes.handler("InterfacesHandler", "nodes/{system_id}/interfaces/",
                                doc="Manage interfaces on a node.")
    interface = routes.handler("InterfaceHandler", "nodes/{system_id}/interfaces/{id}/",
                               doc="Manage a node's or device's interface.")
    disks = routes.handler("BlockDevicesHandler", "nodes/{system_id}/blockdevices/",
                           doc="Manage block devices on a machine.")
    disk = routes.handler("BlockDeviceHandler", "nodes/{system_id}/blockdevices/{id}/",
                          doc="Manage a block device on a machine.")

    def machine(req: Request) -> Machine:
        return store.node(req.params["system_id"])

    def iface_of(req: Request) -> tuple[Machine, Interface]:
        m = store.machines.get(req.params["system_id"])
        i = m.iface(int(req.params["id"])) if m and req.params["id"].isdigit() else None
        if m is None or i is None:
            # MAAS also finds interfaces by name.
            i = next((x for x in m.interfaces if x.name == req.params["id"]), None) if m else None
            if m is None or i is None:
                raise errors.not_found("Interface")
        return m, i

    @interfaces.action("read", "GET")
    def list_interfaces(req: Request) -> Any:
        """List a node's interfaces."""
        with store.lock:
            m = machine(req)
            return [interface_json(store, m, i) for i in m.interfaces]

    @interface.action("read", "GET")
    def read_interface(req: Request) -> Any:
        """Read an interface."""
        with store.lock:
            m, i = iface_of(req)
            return interface_json(store, m, i)

    @interface.action("link_subnet", "POST", "link_subnet")
    def link_subnet(req: Request) -> Any:
        """Link an interface to a subnet: mode AUTO, DHCP, STATIC (ip_address) or LINK_UP."""
        with store.lock:
            m, i = iface_of(req)
            if m.status not in NETWORK_EDITABLE:
                raise errors.interface_refused("link subnet")
            _link(core, m, i, req)
            return interface_json(store, m, i)

    @interface.action("unlink_subnet", "POST", "unlink_subnet")
    def unlink_subnet(req: Request) -> Any:
        """Remove the link `id` from an interface."""
        with store.lock:
            m, i = iface_of(req)
            if m.status not in NETWORK_EDITABLE:
                raise errors.interface_refused("unlink subnet")
            link_id = req.get("id")
            lk = next((x for x in i.links if str(x.id) == link_id), None)
            if lk is None:
                if not link_id:
                    raise errors.field_error("id", "This field is required.")
                raise errors.invalid_choice("id", link_id)
            i.links.remove(lk)
            m.event("NETWORK", f"{i.name}: unlinked {lk.mode.value} link {lk.id}")
            return interface_json(store, m, i)

    @disks.action("read", "GET")
    def list_disks(req: Request) -> Any:
        """List a machine's block devices."""
        with store.lock:
            m = machine(req)
            return [block_device_json(m, d) for d in m.block_devices]

    def disk_of(req: Request) -> tuple[Machine, Any]:
        m = store.machines.get(req.params["system_id"])
        key = req.params["id"]
        d = None
        if m is not None:
            d = next((x for x in m.block_devices if str(x.id) == key or x.name == key), None)
        if m is None or d is None:
            raise errors.not_found("BlockDevice")
        return m, d

    @disk.action("read", "GET")
    def read_disk(req: Request) -> Any:
        """Read a block device."""
        with store.lock:
            m, d = disk_of(req)
            return block_device_json(m, d)

    @disk.action("set_boot_disk", "POST", "set_boot_disk")
    def set_boot_disk(req: Request) -> Any:
        """Make this physical block device the machine's boot disk (machine must be Ready)."""
        with store.lock:
            m, d = disk_of(req)
            if m.status != NodeStatus.READY:
                raise errors.boot_disk_refused()
            m.boot_disk_id = d.id
            m.event("STORAGE", f"boot disk set to {d.name} ({d.model})")
            return ok_text()
