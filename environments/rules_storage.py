"""The storage personality against the hardware: every data device a machine's storage layout names
(`storage_layouts.<layout>.data_devices`, made /share0..N by the bundle's storage step) must be a block
device of the machine's SKU (`skus.<sku>.block_devices`). Caught at validate and preview, before any
machine is touched; on the node the step would fail at `sfdisk /dev/<missing>` after MAAS deployed it."""

from __future__ import annotations

from collections.abc import Iterator

from .findings import Code, Finding, finding
from .model import Blueprint, EnvironmentDocument


def storage_devices(doc: EnvironmentDocument, bp: Blueprint, file: str) -> Iterator[Finding]:
    sites = {s.name: s for s in doc.sites}
    for i, m in enumerate(doc.machines):
        sku, site = bp.skus.get(m.sku), sites.get(m.site)
        profile = next((p for p in site.profiles if p.name == m.profile), None) if site else None
        if sku is None or profile is None:
            continue  # unknown SKU / site / profile: the reference rules report those
        layout = bp.storage_layouts.get(profile.storage_layout_profile)
        if layout is None:
            continue
        missing = [d for d in layout.data_devices if d not in sku.block_devices]
        if not missing:
            continue
        bundle = m.bundle or profile.site_bootstrap_bundle_ref or "(none)"
        has = ", ".join(sku.block_devices) or "none declared"
        yield finding(
            Code.STORAGE_DEVICE_MISSING,
            file,
            f"machines[{i}].sku",
            f"machine {m.hostname} (SKU {m.sku!r}) uses storage layout {profile.storage_layout_profile!r} of "
            f"profile {m.site}/{m.profile}, whose data devices {', '.join(missing)} the SKU lacks (it has: {has}); "
            f"bundle {bundle!r} (steps/30-storage.sh) would format them",
            hint=f"give the machine a SKU with those devices, the profile a layout this SKU has, or declare the "
            f"devices under skus.{m.sku}.block_devices in blueprint {bp.name!r}",
        )
