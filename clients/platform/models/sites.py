"""Admin MAAS sites and site profiles (seeds 001/002): the site binding and the profile policy."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field, model_validator

from .common import ID_PATTERN, NAME_PATTERN, Page, RequestModel, ResponseModel

# A Vault/OpenBao path segment list: letters, digits, '_', '-', '.', '/'. No ':' so a MAAS API
# key ("consumer:token:secret") can never be registered where a reference belongs.
VAULT_PATH_PATTERN = r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$"
BUNDLE_REF_PATTERN = r"^[a-z0-9]+://[!-~]+$"
DURATION_PATTERN = r"^[1-9][0-9]{0,5}[smh]$"


class VaultCredentialRef(RequestModel):
    """Where the site's MAAS API key lives in Vault. A reference, never the key itself."""

    mount: str = Field(default="secret", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    path: str = Field(pattern=VAULT_PATH_PATTERN, max_length=256)
    field: str = Field(default="api_key", pattern=r"^[A-Za-z0-9_-]{1,64}$")


class MaasSiteCreate(RequestModel):
    name: str = Field(pattern=NAME_PATTERN, description="Unique across the platform; immutable.")
    maas_url: str = Field(pattern=r"^https?://[!-~]+$", max_length=512)
    region: str | None = Field(default=None, max_length=64)
    description: str | None = Field(default=None, max_length=512)
    credential_ref: VaultCredentialRef


class MaasSiteUpdate(RequestModel):
    """Full replacement of the mutable site fields (the name is the site's identity)."""

    maas_url: str = Field(pattern=r"^https?://[!-~]+$", max_length=512)
    region: str | None = Field(default=None, max_length=64)
    description: str | None = Field(default=None, max_length=512)
    credential_ref: VaultCredentialRef


class MaasSite(ResponseModel):
    site_id: str = Field(pattern=ID_PATTERN)
    name: str
    maas_url: str
    region: str | None
    description: str | None
    credential_ref: VaultCredentialRef
    revision: int = Field(ge=1, description="Incremented on every accepted update.")
    created_at: datetime
    updated_at: datetime


class MaasSiteList(Page):
    items: list[MaasSite]


class FabricMode(StrEnum):
    ETHERNET = "ethernet"
    ROCE = "roce"
    IB = "ib"


class SiteProfilePolicy(RequestModel):
    """The 11 policy fields of the seeds plus the four additions of seed 002."""

    # The cross-field rule below, stated in the contract too so generated clients see it.
    model_config = RequestModel.model_config | {
        "json_schema_extra": {
            "if": {"properties": {"enable_phase2_roce": {"const": True}}, "required": ["enable_phase2_roce"]},
            "then": {"properties": {"fabric_mode": {"const": "roce"}}, "required": ["fabric_mode"]},
        }
    }

    site_bootstrap_bundle_ref: str | None = Field(default=None, pattern=BUNDLE_REF_PATTERN, max_length=512)
    strict_pxe_preflight: bool = True
    enable_phase2_roce: bool = False
    require_hw_sync: bool = False
    hardware_sync_interval: str = Field(default="15m", pattern=DURATION_PATTERN)
    release_fallback_no_erase: bool = False
    enable_deploy_retry_on_datasource_failure: bool = True
    max_deploy_retry_attempts: int = Field(default=2, ge=0, le=10)
    auto_claim_single_new_machine: bool = False
    batch_max_parallel: int = Field(default=4, ge=1, le=256)
    enrollment_token_ttl_seconds: int = Field(default=3600, ge=60, le=86400)
    fabric_mode: FabricMode = FabricMode.ETHERNET
    commissioning_bundle_ref: str | None = Field(default=None, pattern=BUNDLE_REF_PATTERN, max_length=512)
    post_deploy_validation_bundle_ref: str | None = Field(default=None, pattern=BUNDLE_REF_PATTERN, max_length=512)
    storage_layout_profile: str | None = Field(default=None, pattern=NAME_PATTERN)

    @model_validator(mode="after")
    def _roce_needs_roce_fabric(self) -> SiteProfilePolicy:
        # Phase-2 RoCE addressing only means something on a RoCE fabric (seed 002, 6.1).
        if self.enable_phase2_roce and self.fabric_mode is not FabricMode.ROCE:
            raise ValueError("enable_phase2_roce=true requires fabric_mode='roce'")
        return self


class SiteProfileCreate(RequestModel):
    name: str = Field(pattern=NAME_PATTERN, description="Unique within the site; immutable.")
    policy: SiteProfilePolicy


class SiteProfileUpdate(RequestModel):
    policy: SiteProfilePolicy


class SiteProfile(ResponseModel):
    profile_id: str = Field(pattern=ID_PATTERN)
    site_id: str = Field(pattern=ID_PATTERN)
    name: str
    policy: SiteProfilePolicy
    revision: int = Field(ge=1)
    created_at: datetime
    updated_at: datetime


class SiteProfileList(Page):
    items: list[SiteProfile]
