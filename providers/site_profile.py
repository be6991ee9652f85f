"""site_profile: the Pulumi adapter of the kind (its spec and reconciler: providers/sites/profile.py).

This module path and its Provider class are part of the state contract (Pulumi pickles them).
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, Resource
from pydantic import ValidationError

from environments.coded import line
from environments.findings import Code
from providers.base import KindProvider
from providers.common import has_unknown, plain
from providers.kind import KindDescriptor, register
from providers.sites.profile import (
    SOURCE,
    ProfileResult,
    SiteProfileArgs,
    SiteProfileReconciler,
    SiteProfileSpec,
    policy_findings,
)

DESCRIPTOR = register(KindDescriptor(
    name="SiteProfile",
    identity=("site.name", "profile.name"),
    in_place=("tier", "site", "profile", "bundles", "vault", "platform", "store"),
    delete_before_replace=True,  # the platform's names are unique per site
    summary_outputs=("site_id", "profile_id"),
    doc="a site + profile registered with the platform admin API; the profile's bundle scripts in MAAS",
    notes={"site.name": "names the platform site (a rename is a new site)",
           "profile.name": "names the platform profile", "profile": "policy fields: updated in place"},
))
INPUTS = ("tier", "site", "profile", "bundles", "vault", "platform", "store")


def _last(props: dict[str, Any]) -> ProfileResult:
    """Recorded outputs; v1 state may lack `scripts_registered` (it equalled `scripts` then)."""
    p = plain(props)
    return ProfileResult.model_validate({**p, "scripts_registered": p.get("scripts_registered") or p.get("scripts")
                                         or {}})


class SiteProfileProvider(KindProvider[SiteProfileSpec]):
    descriptor = DESCRIPTOR
    spec_model = SiteProfileSpec
    inputs = kept_inputs = INPUTS

    def _rec(self, props: dict[str, Any]) -> SiteProfileReconciler:
        return SiteProfileReconciler(self.spec_of(props), self.credentials)

    def check_inputs(self, news: dict[str, Any]) -> dict[str, Any] | None:
        # The bundles are other resources' outputs, unknown in a preview that changes them; the site and
        # profile come from the environment and are always known: validate them regardless.
        bundles_known = not has_unknown(news.get("bundles"))
        return super().check_inputs({**news, "bundles": news.get("bundles") if bundles_known else {}})

    def source(self, news: dict[str, Any]) -> str:
        return f"{SOURCE}[{(plain(news).get('site') or {}).get('name')}]"

    def check_spec(self, olds: dict[str, Any], news: dict[str, Any], spec: SiteProfileSpec) -> CheckResult:
        failures = [CheckFailure("profile", f) for f in policy_findings(spec)]
        bundles_known = not has_unknown(news.get("bundles"))
        missing = [ref for ref in spec.profile.bundle_refs() if bundles_known and ref not in spec.bundles]
        failures += [CheckFailure("bundles", line(Code.UNKNOWN_BUNDLE.value, self.source(news),
                                                  f"profile {spec.profile.name} names bundle {ref!r}, which is not "
                                                  "passed in", "declare it under bootstrap_bundles for this site"))
                     for ref in missing]
        return CheckResult(news, failures)

    def drifted(self, olds: dict[str, Any], news: dict[str, Any]) -> bool:
        try:
            return bool(self._rec(olds).drift(olds))
        except ValidationError:
            return False

    def converge(self, props: dict[str, Any], olds: dict[str, Any] | None) -> ProfileResult:
        if olds is None:
            return self._rec(props).converge()
        return self._rec(props).converge(previous_scripts=list(_last(olds).scripts_registered))

    def id_of(self, props: dict[str, Any], result: Any) -> str:
        return f"{result.site_id}/{result.profile_id}"

    def observe(self, id_: str, props: dict[str, Any]) -> ProfileResult | None:
        """Refresh: the policy as the platform has it, the scripts as MAAS has them (drift -> diff)."""
        return self._rec(props).observe(_last(props))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        last = _last(props)
        self._rec(props).release(last.site_id, last.profile_id, list(last.scripts))


class SiteProfile(Resource, module="gpuaas", name="SiteProfile"):
    site_id: pulumi.Output[str]
    profile_id: pulumi.Output[str]
    effective_policy: pulumi.Output[dict[str, Any]]
    commissioning_scripts: pulumi.Output[list[str]]
    testing_scripts: pulumi.Output[list[str]]
    commissioning_testing_scripts: pulumi.Output[list[str]]
    scripts: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: SiteProfileArgs, bundles: pulumi.Input[dict[str, Any]],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        outs = dict.fromkeys(ProfileResult.model_fields)
        super().__init__(SiteProfileProvider(), name, {**outs, **args.model_dump(mode="json"), "bundles": bundles},
                         opts)
