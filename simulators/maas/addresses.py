"""IP and MAC lookups without scanning every machine's links: the store's indexes, filled where an
address is given (set_ip) and where NICs are made (add_machine; MACs never change), and checked on
lookup, so releases, unlinks, LINK_UP clears and deletes need no bookkeeping. Callers hold the
store's lock."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .state import Interface, Link, Machine, Subnet


class Addresses:
    def __init__(self, machines: dict[str, Machine]) -> None:
        self._machines = machines  # the store's own dict, so deleted machines drop out
        self._ip_links: dict[str, list[tuple[Machine, Link]]] = {}  # ip -> links given it, in order
        self._mac_machines: dict[str, list[Machine]] = {}  # mac -> machines built with it, in order
        self._subnet_ips: dict[int, dict[str, None]] = {}  # subnet id -> addresses ever given on it (a link's
        # subnet never changes), so a subnet's listing reads its own addresses, not the region's

    def add_machine(self, m: Machine) -> None:
        for i in m.interfaces:
            self._mac_machines.setdefault(i.mac_address, []).append(m)

    def find_mac(self, mac: str) -> Machine | None:
        """The first machine (in store order) with a NIC of this MAC."""
        return next((m for m in self._mac_machines.get(mac.lower(), ()) if self._machines.get(m.system_id) is m),
                    None)

    def set_ip(self, m: Machine, lk: Link, ip: str | None) -> None:
        """Give a link its address: every assignment goes through here."""
        lk.ip_address = ip
        if ip is not None:
            self._ip_links.setdefault(ip, []).append((m, lk))
            if lk.subnet_id is not None:
                self._subnet_ips.setdefault(lk.subnet_id, {})[ip] = None

    def ip_owner(self, ip: str) -> Machine | None:
        """The machine one of whose links holds ip; links that lost it or left their machine are dropped."""
        held = [(m, lk) for m, lk in self._ip_links.pop(ip, ()) if lk.ip_address == ip
                and self._machines.get(m.system_id) is m and any(x is lk for i in m.interfaces for x in i.links)]
        if held:
            self._ip_links[ip] = held
        return held[0][0] if held else None

    def allocate_ip(self, subnet: Subnet) -> str | None:
        """Lowest free host address above .10 (MAAS leaves room for routers and racks)."""
        reserved = {subnet.gateway_ip, *subnet.dns_servers}
        # hosts() starts at network+1 and ends before broadcast; skipping 9 of them starts at +10.
        for n in range(int(subnet.cidr.network_address) + 10, int(subnet.cidr.broadcast_address)):
            text = socket.inet_ntoa(n.to_bytes(4, "big"))
            if text not in reserved and self.ip_owner(text) is None:
                return text
        return None

    def on_subnet(self, subnet: Subnet) -> list[tuple[str, Machine, str, Link]]:
        """(ip, machine, interface name, link) of every address a machine's link holds on `subnet`, by
        address: what MAAS's `Subnet.ip_addresses` lists (its StaticIPAddress rows of the subnet)."""
        out: list[tuple[str, Machine, str, Link]] = []
        # The subnet's own addresses sorted, not the region's (a pool's eight rails each ask, at every check).
        held = [(ip, m, lk) for ip in self._subnet_ips.get(subnet.id, ()) for m, lk in self._ip_links.get(ip, ())
                if lk.subnet_id == subnet.id and lk.ip_address == ip and self._machines.get(m.system_id) is m]
        for ip, m, lk in sorted(held, key=lambda row: socket.inet_aton(row[0])):
            iface = _interface_of(m, lk)
            if iface is not None:
                out.append((ip, m, iface.name, lk))
        return out


def _interface_of(m: Machine, lk: Link) -> Interface | None:
    """The interface holding this very link (identity, not equality: two links may read alike). Plain loops: a
    rail's listing asks once per address, and nested generators cost 6x (5.3 -> 0.9 ms a rail of 1,024 addresses)."""
    for iface in m.interfaces:
        for x in iface.links:
            if x is lk:
                return iface
    return None
