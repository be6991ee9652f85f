"""The runtime failure catalogues of the site kinds: SiteProfile (SPR), RoceAssignment (ROC) and
BootstrapBundle (BND). docs/sites-bundles-roce.md lists each code with its meaning and fix (a test checks
they agree); `environments.coded` writes the line."""

from __future__ import annotations

from enum import unique

from clients.maas import MaasError
from clients.platform import PlatformApiError
from clients.s3 import S3Error
from clients.vault import VaultError
from environments.coded import FailureCode


@unique
class SiteProfileFail(FailureCode):
    MAAS_KEY_REJECTED = ("SPR001", "MAAS rejected the API key read from Vault",
                         "write a valid key at the site's maas_api_key_path (MAAS UI > API keys)")
    MAAS_UNREACHABLE = ("SPR002", "MAAS did not answer the key check",
                        "check the site's maas_url and that MAAS is up, then run up again")
    BUNDLE_DIGEST = ("SPR003", "a bundle in the store does not match the digest the profile pins",
                     "run up again: the bundle resource republishes it")
    SCRIPT_CONFLICT = ("SPR004", "a MAAS script of that name was registered meanwhile with other content",
                       "two bundles name one script: rename one of them, then run up again")
    VAULT = ("SPR005", "Vault could not be read (MAAS key, platform token or store credentials)",
             "the message names the address, path and cause; fix that, then run up again")
    STORE = ("SPR006", "the artifact store did not give the bundle", "check the store and its credentials")
    PLATFORM = ("SPR007", "the platform API refused or failed a site/profile call",
                "the message has the platform's code and correlation id; fix the cause, then run up again")
    MAAS = ("SPR008", "MAAS refused or failed a call (scripts, settings)",
            "see MAAS's answer in the message; run up again")
    SETTING_NOT_HELD = ("SPR009", "MAAS holds another hardware_sync_interval right after setting it",
                        "find who else sets this MAAS's hardware_sync_interval (another stack of the site with "
                        "another interval?), make them agree, then run up again")


@unique
class RoceFail(FailureCode):
    NOT_ROCE = ("ROC001", "a machine's profile is not a phase-2 RoCE profile",
                "set fabric_mode: roce and enable_phase2_roce: true on the profile, or leave the machine out")
    RAIL_WITHOUT_POOL = ("ROC002", "an interface is on a rail that has no pool", "declare a roce_pools entry for it")
    OUTSIDE_RANGE = ("ROC003", "an assigned address is outside its pool's range now",
                     "widen the range back to include it (assignments are never renumbered)")
    ADDRESS_TWICE = ("ROC004", "two interfaces of the table hold one address",
                     "remove one assignment from the stack state, then run up again")
    ADDRESS_HELD = ("ROC005", "an assigned address is held in MAAS by another interface",
                    "unlink the other interface in MAAS or release its address")
    POOL_EXHAUSTED = ("ROC006", "no free address left in the rail's pool", "widen the pool's range")
    INTERFACE_MISSING = ("ROC007", "MAAS has no such interface on the machine",
                         "commission the machine or correct the SKU's fabric_interfaces")
    VAULT = ("ROC008", "the MAAS key could not be read from Vault", "the message names the path and cause")
    MAAS = ("ROC009", "MAAS refused or failed a call (reads, links)", "see MAAS's answer in the message; run up again")
    RECORD_NOT_ADDRESS = ("ROC010", "an address recorded in the stack state is not an IPv4 address",
                          "correct or remove the interface's entry in the RoceAssignment's table in the state "
                          "(pulumi stack export / import), then run up again")


@unique
class BundleFail(FailureCode):
    """BND001-005 are what a rendered bundle must be (providers/sites/bundle_checks.py, checked at preview)."""

    NOT_CLOUD_CONFIG = ("BND001", "a cloud-init part does not start with `#cloud-config` (cloud-init would skip it)",
                        "make `#cloud-config` its first line")
    CLOUD_CONFIG_YAML = ("BND002", "a cloud-init part is not valid YAML",
                         "fix the template (quote values that contain `: ` or `#`)")
    CLOUD_CONFIG_SHAPE = ("BND003", "a cloud-init part is not a mapping of modules", "fix the template")
    CLOUD_CONFIG_KEY = ("BND004", "a cloud-init part uses a module the launcher's cloud-init step does not apply",
                        "use the field of the environment the message names, or runcmd / write_files")
    NO_INTERPRETER = ("BND005", "a script a node runs (launcher step, validation, MAAS commissioning/testing) "
                      "has no interpreter line", "start it with `#!/bin/bash` (or another interpreter)")
    NO_TEMPLATE_SET = ("BND006", "the template set does not exist", "use one of the sets listed")
    UNDEFINED = ("BND007", "a template uses an undefined variable",
                 "define it in the bundle's values or fix the template")
    SYNTAX = ("BND008", "a template has a syntax error", "fix the template at the line shown")
    VAULT = ("BND009", "the store credentials could not be read from Vault", "the message names the path and cause")
    STORE = ("BND010", "the artifact store refused or failed the publish", "the message has the store's advice")


# Client errors each kind's reconciler turns into its codes (a subclass before its base).
PROFILE_CLIENTS: dict[type[Exception], SiteProfileFail] = {
    VaultError: SiteProfileFail.VAULT, S3Error: SiteProfileFail.STORE, PlatformApiError: SiteProfileFail.PLATFORM,
    MaasError: SiteProfileFail.MAAS}
ROCE_CLIENTS: dict[type[Exception], RoceFail] = {VaultError: RoceFail.VAULT, MaasError: RoceFail.MAAS}
BUNDLE_CLIENTS: dict[type[Exception], BundleFail] = {VaultError: BundleFail.VAULT, S3Error: BundleFail.STORE}
