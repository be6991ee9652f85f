"""Hardware a machine enlists with, per SKU.

An `h200` node (modelled on an 8-GPU HGX H200 server) has a BOSS boot device (a small RAID-1
M.2 volume), eight NVMe data disks, one onboard PXE NIC and eight single-port 400G RoCE NICs,
one per GPU rail, named like `ens1f0np0`. `generic-small` is a 1U box with one disk and two NICs.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict

GiB = 1024**3
GB = 1000**3


class DiskSpec(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    model: str
    size: int
    block_size: int = 512
    id_path: str
    tags: tuple[str, ...] = ()
    boot: bool = False  # the disk MAAS picks as boot disk at commissioning


class NicSpec(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    vendor: str
    product: str
    speed_mbps: int
    mtu: int = 1500
    role: Literal["pxe", "roce", "data"]
    rail: int | None = None  # RoCE rail index; binds the NIC to the site's subnet for that rail


class SkuSpec(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str
    architecture: str = "amd64/generic"
    cpu_count: int
    cpu_speed_mhz: int
    cpu_model: str
    memory_mib: int
    system_vendor: str
    system_product: str
    disks: tuple[DiskSpec, ...]
    nics: tuple[NicSpec, ...]


def _h200() -> SkuSpec:
    disks = [
        DiskSpec(name="sda", model="DELLBOSS VD", size=480 * GB, block_size=512,
                 id_path="/dev/disk/by-id/ata-DELLBOSS_VD", tags=("ssd", "boss"), boot=True),
    ]
    for i in range(8):
        disks.append(DiskSpec(
            name=f"nvme{i}n1", model="Dell Ent NVMe CM7 RI 3.84TB", size=3840 * GB, block_size=4096,
            id_path=f"/dev/disk/by-id/nvme-Dell_Ent_NVMe_CM7_RI_3.84TB_{i}", tags=("ssd", "nvme"),
        ))
    nics = [NicSpec(name="eno8303", vendor="Broadcom Inc. and subsidiaries",
                    product="NetXtreme BCM5720 Gigabit Ethernet PCIe", speed_mbps=1000, role="pxe")]
    for rail in range(8):
        nics.append(NicSpec(name=f"ens{rail + 1}f0np0", vendor="Mellanox Technologies",
                            product="MT2910 Family [ConnectX-7]", speed_mbps=400000, mtu=9000,
                            role="roce", rail=rail))
    return SkuSpec(
        name="h200", cpu_count=224, cpu_speed_mhz=2000,
        cpu_model="Intel(R) Xeon(R) Platinum 8480+", memory_mib=2 * 1024 * 1024,
        system_vendor="Dell Inc.", system_product="PowerEdge XE9680",
        disks=tuple(disks), nics=tuple(nics),
    )


def _generic_small() -> SkuSpec:
    return SkuSpec(
        name="generic-small", cpu_count=16, cpu_speed_mhz=2400,
        cpu_model="AMD EPYC 7313P 16-Core Processor", memory_mib=64 * 1024,
        system_vendor="Supermicro", system_product="AS-1114S-WN10RT",
        disks=(DiskSpec(name="sda", model="SAMSUNG MZ7L3480", size=480 * GB,
                        id_path="/dev/disk/by-id/ata-SAMSUNG_MZ7L3480", tags=("ssd",), boot=True),),
        nics=(
            NicSpec(name="eno1", vendor="Intel Corporation", product="Ethernet Controller X710",
                    speed_mbps=10000, role="pxe"),
            NicSpec(name="eno2", vendor="Intel Corporation", product="Ethernet Controller X710",
                    speed_mbps=10000, role="data"),
        ),
    )


SKUS: dict[str, SkuSpec] = {s.name: s for s in (_h200(), _generic_small())}


def derived_mac(pxe_mac: str, index: int) -> str:
    """A stable, locally administered MAC for the index-th non-PXE NIC of a machine.

    Derived from the PXE MAC so a machine's NICs keep their MACs across simulator restarts.
    """
    digest = hashlib.sha256(f"{pxe_mac.lower()}/{index}".encode()).digest()
    octets = [0x02 | (digest[0] & 0xFC), *digest[1:6]]
    return ":".join(f"{o:02x}" for o in octets)


def serial_for(hostname_or_mac: str, disk: DiskSpec) -> str:
    digest = hashlib.sha256(f"{hostname_or_mac}/{disk.name}".encode()).hexdigest()
    return digest[:16].upper()
