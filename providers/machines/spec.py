"""What a machine should be: the spec a MaasMachine / MachinePool resource carries as inputs.

Built by the machines component from the compiled environment; validated again at `check` (inputs
cross the Pulumi boundary as plain dicts, numbers as floats). The spec is a versioned state contract,
not the user's YAML document: its enums are its own (same values as the environment model's, which
the component converts), so a change to the environment model never changes what old state means.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from providers.common import VaultInputs
from providers.sites.bundle import StoreInputs
from providers.wire import drop_retired


class PowerType(StrEnum):
    IPMI = "ipmi"
    REDFISH = "redfish"
    MANUAL = "manual"


class TeardownMode(StrEnum):
    REIMAGE = "reimage"
    FULL_DECOMMISSION = "full_decommission"
    DETACH = "detach"


class EraseMode(StrEnum):
    NONE = "none"
    QUICK = "quick"
    SECURE = "secure"
    FULL = "full"


class MaasLayout(StrEnum):
    FLAT = "flat"
    LVM = "lvm"
    BCACHE = "bcache"
    BLANK = "blank"


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MaasSiteRef(_Spec):
    site: str
    maas_url: str
    api_key_path: str
    tls_verify: bool = True
    ca_bundle: str | None = None
    """PEM file of the CA that signs MAAS's certificate (`ca_bundles.maas`; relative: to the repo)."""


class PlatformRef(_Spec):
    url: str
    token_path: str
    """Vault ref of the token allowed to mint enrollment tokens for this site."""
    ca_bundle: str | None = None
    """PEM file of the CA that signs the platform's certificate (`ca_bundles.platform`)."""


class LifecyclePolicy(_Spec):
    """The site profile's policy fields the lifecycle reads (seed 002)."""

    strict_pxe_preflight: bool = True
    require_hw_sync: bool = True
    release_fallback_no_erase: bool = False
    enable_deploy_retry_on_datasource_failure: bool = True
    max_deploy_retry_attempts: int = Field(3, ge=1, le=10)
    auto_claim_single_new_machine: bool = False
    batch_max_parallel: int = Field(8, ge=1, le=64)
    enrollment_token_ttl_seconds: int = 3600
    release_erase_mode: EraseMode = EraseMode.QUICK
    customer_handoff: bool = False
    """The site's restricted release (seed 002, `sites[].customer_handoff`): teardown releases the
    machine to the customer as it is: it never erases and never powers off (HANDOFF_TEARDOWN_TABLE)."""
    commissioning_scripts: tuple[str, ...] = ()
    testing_scripts: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _retired_fields(cls, data: Any) -> Any:
        return drop_retired(data)


class BootDiskHint(_Spec):
    """How to pick the boot disk among a machine's block devices (e.g. the BOSS device)."""

    model_contains: str | None = None
    name: str | None = None
    smallest: bool = False


class StorageSpec(_Spec):
    layout_profile: str
    maas_layout: MaasLayout
    root_size_gb: int | None = None
    boot_disk_hint: BootDiskHint


class RoceLink(_Spec):
    interface: str
    subnet: str
    address: str
    mtu: int = 9000


class BundlePin(_Spec):
    """A published bundle version a deploy pins: its `s3://` ref, sha256 and the path-style HTTP URL of
    exactly that version (`?versionId=`), which the deploy presigns."""

    ref: str
    digest: str
    url: str


class AptKeyPin(_Spec):
    """The signing key of one vendor apt source: where it lies in the artifact store and its OpenPGP fingerprint.
    Each deploy presigns a GET of it for the node, whose packages step checks the fingerprint."""

    source: str
    ref: str
    """`s3://<bucket>/<object>`."""
    fingerprint: str


class LoginUserSpec(_Spec):
    """The profile's login user (seed 001), created by the node's cloud-init; keys and hash stay in Vault until
    the deploy reads them into the user_data."""

    name: str
    groups: tuple[str, ...] = ()
    shell: str = "/bin/bash"
    sudo: str = "none"
    ssh_key_refs: tuple[str, ...] = ()
    password_hash_ref: str | None = None
    password_expire: bool = False


class DeploySpec(_Spec):
    """Everything that, when changed, means the machine must be redeployed."""

    distro_series: str = "jammy"
    hwe_kernel: str | None = None
    bundle_ref: str
    bundle_digest: str
    launcher_url: str = ""
    mount_sets: tuple[str, ...] | None = None
    """The bundle's WEKA mount sets this machine installs (`pool-<pool>`, `machine-<hostname>`), or None:
    None, not empty, so a machine without mounts keeps the inputs and fingerprint it had before mounts."""
    validation_bundle: BundlePin | None = None
    """The profile's `post_deploy_validation_bundle_ref`, when it names a bundle other than the machine's:
    the node runs that bundle's validation scripts instead of the site bundle's. None keeps the
    fingerprint a machine had before it existed."""
    apt_keys: tuple[AptKeyPin, ...] | None = None
    """The signing keys of the profile's vendor apt sources; None (none declared) keeps earlier fingerprints."""
    login_user: LoginUserSpec | None = None
    """The profile's login user; None (none declared) keeps earlier fingerprints."""


class Deadlines(_Spec):
    """Per-stage deadlines (customTimeouts don't reach dynamic providers) and polling back-off."""

    commission_s: float = 45 * 60
    deploy_s: float = 60 * 60
    release_s: float = 45 * 60
    enroll_s: float = 30 * 60
    poll_initial_s: float = 5.0
    poll_max_s: float = 15.0
    progress_s: float = 10.0
    """A many-machine run prints a progress line at least this often (progress.py)."""

    def scaled(self, factor: float) -> Deadlines:
        return Deadlines(**{k: v * factor for k, v in self.model_dump().items()})


class MachineIdentity(_Spec):
    """What a pool's state keeps of a machine's spec (issue 18: no spec stored twice): enough to find
    it in MAAS, see a rename (same PXE MAC), apply in-place changes against it and tear it down."""

    hostname: str
    ipmi_address: str
    pxe_mac: str
    power_type: PowerType = PowerType.IPMI
    power_user_path: str | None = None
    site: str
    profile: str
    tags: tuple[str, ...] = ()
    teardown_mode: TeardownMode = TeardownMode.FULL_DECOMMISSION

    def teardown_spec(self) -> MachineSpec:
        """A MachineSpec for the teardown path only: release reads these fields and nothing else
        (storage, deploy, RoCE are absent, and touching them fails loudly rather than guessing)."""
        return MachineSpec.model_construct(**dict(self))


class MachineSpec(_Spec):
    hostname: str
    ipmi_address: str
    pxe_mac: str
    power_type: PowerType = PowerType.IPMI
    power_user_path: str | None = None
    sku: str
    site: str
    profile: str
    pxe_interface: str
    tags: tuple[str, ...] = ()
    teardown_mode: TeardownMode = TeardownMode.FULL_DECOMMISSION
    storage: StorageSpec
    roce_links: tuple[RoceLink, ...] = ()
    deploy: DeploySpec
    retry_generation: int = Field(default=0, ge=0)
    """Operator input: raise it to give a machine whose deploy retry budget is spent a fresh budget
    (the spent count is kept in MAAS owner data, per deploy fingerprint and generation)."""

    @field_validator("pxe_mac")
    @classmethod
    def _lower(cls, v: str) -> str:
        return v.lower()

    def identity(self) -> MachineIdentity:
        return MachineIdentity.model_validate({k: getattr(self, k) for k in MachineIdentity.model_fields})

    def wire(self) -> str:
        """The spec as a pool's input carries it: one canonical JSON string, defaults left out (see
        PoolInputs.machines)."""
        plain = self.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        return json.dumps(plain, sort_keys=True, separators=(",", ":"))

    def spec_fingerprint(self) -> str:
        """Digest of the whole spec (a pool's diff compares it, instead of keeping old specs in state)."""
        plain = self.model_dump(mode="json")
        for late in ("apt_keys", "login_user"):  # fields added later: absent, a spec keeps the fingerprint it had
            if plain["deploy"].get(late) is None:
                plain["deploy"].pop(late, None)
        return hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()[:32]

    def deploy_fingerprint(self) -> str:
        """Digest of every input whose change redeploys the machine (stored in MAAS owner data)."""
        material = {
            "deploy": self.deploy.model_dump(mode="json", exclude={
                *(() if self.deploy.mount_sets else ("mount_sets",)),
                *(() if self.deploy.validation_bundle else ("validation_bundle",)),
                *(() if self.deploy.apt_keys else ("apt_keys",)),
                *(() if self.deploy.login_user else ("login_user",)),
            }),
            "storage": self.storage.model_dump(mode="json"),
            "roce": [link.model_dump(mode="json") for link in self.roce_links],
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


class Connection(_Spec):
    """How a resource reaches its systems; none of it is secret (secrets are Vault refs)."""

    maas: MaasSiteRef
    platform: PlatformRef
    vault: VaultInputs
    platform_site_id: str
    platform_profile_id: str
    store: StoreInputs | None = None
    """The artifact store holding the bundles: each deploy presigns a short-lived GET URL of the machine's
    bundle version with its credentials (the URL, never a key, reaches the node). None (older state):
    the user_data carries no URL and a real node's launcher stops at its fetch step."""
