"""site_profile: the Pulumi adapter of the kind (its spec and reconciler: providers/sites/profile.py).

This module path and its Provider class are part of the state contract (Pulumi pickles them).
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    Resource,
    ResourceProvider,
    UpdateResult,
)
from pydantic import ValidationError

from clients.vault import credentials_from_config
from providers.common import has_unknown, plain, spec_failures
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


class SiteProfileProvider(ResourceProvider):
    serialize_as_secret_always = False  # pickled by reference; holds nothing secret

    def configure(self, req: ConfigureRequest) -> None:
        self._credentials = credentials_from_config(req.config)

    def _rec(self, props: dict[str, Any]) -> SiteProfileReconciler:
        return SiteProfileReconciler(SiteProfileSpec.model_validate(plain(props)), getattr(self, "_credentials", None))

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        # The bundles are other resources' outputs, unknown in a preview that changes them; the site and
        # profile come from the environment and are always known: validate them regardless.
        bundles_known = not has_unknown(news.get("bundles"))
        inputs = plain({**news, "bundles": news.get("bundles") if bundles_known else {}})
        if has_unknown(inputs):
            return CheckResult(news, [])
        name = (inputs.get("site") or {}).get("name")
        try:
            spec = SiteProfileSpec.model_validate(inputs)
        except ValidationError as e:
            return CheckResult(news, spec_failures(e, f"{SOURCE}[{name}]"))
        failures = [CheckFailure("profile", f) for f in policy_findings(spec)]
        missing = [ref for ref in spec.profile.bundle_refs() if bundles_known and ref not in spec.bundles]
        failures += [CheckFailure("bundles", f"REF003 {SOURCE}[{name}]: profile {spec.profile.name} names bundle "
                                  f"{ref!r}, which is not passed in; fix: declare it under bootstrap_bundles for "
                                  "this site") for ref in missing]
        return CheckResult(news, failures)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        d = DESCRIPTOR.diff(olds, news, inputs=INPUTS)
        try:
            drift = self._rec(olds).drift(olds)
        except ValidationError:
            drift = []
        return DiffResult(changes=d.changed or bool(drift), replaces=list(d.replaces),
                          delete_before_replace=DESCRIPTOR.delete_before_replace)

    @staticmethod
    def _outs(props: dict[str, Any], r: ProfileResult) -> dict[str, Any]:
        p = plain(props)
        return {**{k: p[k] for k in INPUTS if k in p}, **r.model_dump(mode="json")}

    def create(self, props: dict[str, Any]) -> CreateResult:
        r = self._rec(props).converge()
        return CreateResult(f"{r.site_id}/{r.profile_id}", self._outs(props, r))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        r = self._rec(news).converge(previous_scripts=list(_last(olds).scripts_registered))
        return UpdateResult(self._outs(news, r))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """Refresh: the policy as the platform has it, the scripts as MAAS has them (drift -> diff)."""
        r = self._rec(props).observe(_last(props))
        return ReadResult(id_, self._outs(props, r)) if r else ReadResult("", {})

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
