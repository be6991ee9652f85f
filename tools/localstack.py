"""The local stack's world: the embedded simulators, seeded from the `local` environment.

`maas_inventory(env)` turns an environment into the MAAS simulator's inventory (sites as zones, a
PXE subnet per site, the RoCE pools' subnets per rail, the machines racked with their BMC and PXE
MAC). `LocalStack` (used by `make demo` and the end-to-end tests) starts the MAAS and platform
simulators, OpenBao and an S3 server, seeds Vault with the environment's secrets, and returns the
stack config the engine (or the real CLI) needs.
"""

from __future__ import annotations

from environments import Environment
from simulators.maas import SimInventory

# Environment SKU -> simulator hardware model.
SIM_SKU = {"h200": "h200", "cpu-small": "generic-small"}


def maas_inventory(env: Environment, *, enlisted: bool = False) -> SimInventory:
    """`enlisted=False`: machines are racked but unknown to MAAS until the provider creates them."""
    sites, fabrics, subnets, machines = [], [], [], []
    for i, site in enumerate(env.sites):
        sites.append({"name": site.name})
        fabrics.append({"name": f"pxe-{site.name}"})
        subnets.append({"cidr": f"192.168.{100 + i}.0/24", "fabric": f"pxe-{site.name}", "site": site.name,
                        "role": "pxe", "gateway_ip": f"192.168.{100 + i}.1"})
        pools = env.roce_pools_of(site.name)
        if pools:
            vids = sorted({p.vlan or 0 for p in pools} | {0})
            fabrics.append({"name": f"roce-{site.name}", "vlans": [{"vid": v, "mtu": 9000} for v in vids]})
            subnets += [{"cidr": str(p.subnet), "fabric": f"roce-{site.name}", "vid": p.vlan or 0, "site": site.name,
                         "role": "roce", "rail": p.rail} for p in pools]
    for m in env.machines:
        machines.append({"hostname": m.hostname, "pxe_mac": m.pxe_mac, "ipmi_address": str(m.ipmi_address),
                         "sku": SIM_SKU.get(m.sku, "generic-small"), "site": m.site, "status": "New",
                         "enlisted": enlisted})
    return SimInventory.model_validate({"sites": sites, "fabrics": fabrics, "subnets": subnets, "machines": machines})
