"""The policy rules a site profile's provider applies to its own inputs at check, the same functions the
environment's validation runs (`rules.policy_combinations`): one rule, one place. Narrow signatures (plain
values), and no import of the environment model, so a provider plugin does not load it (issue 29)."""

from __future__ import annotations

from collections.abc import Iterator

from .findings import Code, Finding, Level, finding
from .vocabulary import EraseMode, FabricMode, Tier


def site_tls(site: str, tls_verify: bool, tier: str, file: str, path: str) -> Iterator[Finding]:
    """POL: TLS verification off in prod. Narrow signature: providers call it with their own values."""
    if not tls_verify and Tier(tier) is Tier.PROD:
        yield finding(Code.TLS_OFF_IN_PROD, file, path, f"site {site} disables TLS verification in prod")


def profile_policy(
    site: str,
    profile: str,
    *,
    fabric_mode: str,
    enable_phase2_roce: bool,
    retry_enabled: bool,
    retry_attempts_set: bool,
    customer_handoff: bool,
    release_erase_mode: str,
    file: str,
    base: str,
) -> Iterator[Finding]:
    """One profile's policy combinations (base: the profile's path). Providers call it too."""
    if enable_phase2_roce and FabricMode(fabric_mode) is not FabricMode.ROCE:
        yield finding(
            Code.ROCE_NEEDS_ROCE_FABRIC,
            file,
            f"{base}.enable_phase2_roce",
            f"profile {profile} enables phase-2 RoCE with fabric_mode {FabricMode(fabric_mode).value}",
        )
    if not retry_enabled and retry_attempts_set:
        yield finding(
            Code.RETRY_ATTEMPTS_UNUSED,
            file,
            f"{base}.max_deploy_retry_attempts",
            "max_deploy_retry_attempts has no effect while retry is disabled",
            level=Level.WARNING,
        )
    if customer_handoff and EraseMode(release_erase_mode) is not EraseMode.NONE:
        yield finding(
            Code.HANDOFF_SITE_ERASES,
            file,
            f"{base}.release_erase_mode",
            f"site {site} is a customer-handoff site but profile {profile} erases "
            f"({EraseMode(release_erase_mode).value})",
        )
