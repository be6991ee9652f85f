"""Words of the environment model that the providers share with its validation (`rules_policy`): the tier,
a profile's fabric mode and its release erase mode (values are the seeds' own words). Importing them does not
load the model (a provider plugin never validates an environment; issue 29)."""

from __future__ import annotations

from enum import StrEnum


class Tier(StrEnum):
    """Promotion order is local -> dev -> staging -> prod (seed 003)."""

    LOCAL = "local"
    DEV = "dev"
    STAGING = "staging"
    PROD = "prod"


class FabricMode(StrEnum):
    ETHERNET = "ethernet"
    ROCE = "roce"
    IB = "ib"


class EraseMode(StrEnum):
    """How MAAS wipes disks on release: none, quick (wipe signatures), secure (ATA secure erase), full."""

    NONE = "none"
    QUICK = "quick"
    SECURE = "secure"
    FULL = "full"
