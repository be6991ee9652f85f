"""gpuaas-infra policy pack: each seed rule as a mandatory CrossGuard policy.

Started by the Pulumi CLI (`pulumi preview --policy-pack policy`) as
`<virtualenv>/bin/python -u -m pulumi.policy <engine address> .` in this directory; it prints its
gRPC port and serves the Analyzer service. A CLI without the Python language host runs it through
`run-policy-pack` beside this file (`--policy-pack <abs path>/policy/run-policy-pack`). The rules
themselves are pure functions in `gpuaas_rules.py` (tested on their own, and through the real CLI's
previews in tests/policy/).
"""

from __future__ import annotations

import json
import os
from typing import Any

import gpuaas_rules as rules
from pulumi_policy import (
    EnforcementLevel,
    PolicyPack,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy import policy as _sdk
from pulumi_policy.deserialize import SPECIAL_SECRET_SIG, SPECIAL_SIG_KEY
from pulumi_policy.policy import _PolicyAnalyzerServicer

PACK = "gpuaas-policies"
ENVIRONMENT_KEY = "gpuaas-infra:environment"


# The stack the CLI is running, from its ConfigureStack call: current CLIs (3.274) send the stack's name and
# config only there (PULUMI_CONFIG/PULUMI_STACK are no longer set for a pack), and pulumi-policy 1.21 keeps
# nothing of that call but the stack's tags. Secret config values are not kept.
STACK: dict[str, Any] = {}
_configure_stack = _PolicyAnalyzerServicer.ConfigureStack


def _keep_stack(self: Any, request: Any, context: Any) -> Any:
    secret = set(request.config_secret_keys)
    STACK.update(stack=request.stack, config={k: v for k, v in request.config.items() if k not in secret})
    return _configure_stack(self, request, context)


_PolicyAnalyzerServicer.ConfigureStack = _keep_stack  # type: ignore[method-assign]


# Values the engine marks secret arrive wrapped; pulumi-policy 1.21 unwraps them to plain values before any
# policy sees them, so a secret-marked config value (a provider resource's inputs are the stack config, e.g.
# `gpuaas-infra:vault_token` set with --secret) would read as a plaintext secret. The pack sees them as the
# CLI displays them, "[secret]" (what the rules skip); a value not marked secret is still judged.
_deserialize_properties = _sdk.deserialize_properties


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        if value.get(SPECIAL_SIG_KEY) == SPECIAL_SECRET_SIG:
            return "[secret]"
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _deserialize_masking_secrets(props: dict[str, Any], proxy_secrets: bool = False) -> dict[str, Any]:
    return _deserialize_properties(props if proxy_secrets else _masked(props), proxy_secrets)


_sdk.deserialize_properties = _deserialize_masking_secrets


def environment() -> str:
    """The stack's environment: the `gpuaas-infra:environment` config, else the stack name (as the program does).
    From the CLI's ConfigureStack call; older CLIs set PULUMI_CONFIG and PULUMI_STACK instead."""
    try:
        config = json.loads(os.environ.get("PULUMI_CONFIG") or "{}")
    except ValueError:
        config = {}
    config = {**config, **STACK.get("config", {})}
    return str(config.get(ENVIRONMENT_KEY) or STACK.get("stack") or os.environ.get("PULUMI_STACK", ""))


def _res(args: ResourceValidationArgs) -> rules.Res:
    return rules.Res(urn=args.urn, type=args.resource_type, props=args.props, protect=bool(args.opts.protect))


def _stack(args: StackValidationArgs) -> list[rules.Res]:
    return [
        rules.Res(urn=r.urn, type=r.resource_type, props=r.props, protect=bool(r.opts.protect)) for r in args.resources
    ]


def _resource_policy(name: str, description: str, check) -> ResourceValidationPolicy:  # type: ignore[no-untyped-def]
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        for message in check(_res(args)):
            report(message, None)

    return ResourceValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=EnforcementLevel.MANDATORY
    )


def _stack_policy(name: str, description: str, check) -> StackValidationPolicy:  # type: ignore[no-untyped-def]
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        for urn, message in check(_stack(args)):
            report(message, urn)

    return StackValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=EnforcementLevel.MANDATORY
    )


POLICIES = [
    _resource_policy(
        "no-control-plane-or-ci-on-worker",
        "No control-plane or CI role on a worker_compute host (seed 003).",
        rules.worker_roles,
    ),
    _stack_policy(
        "no-control-plane-or-ci-on-gpu-machine",
        "A MAAS GPU machine never runs control-plane or CI roles (seed 003).",
        rules.worker_hosts_with_control_roles,
    ),
    _stack_policy(
        "app-control-plane-not-on-workers",
        "App control-plane members are never placed on worker_compute hosts (seeds 003, 004).",
        rules.app_members_on_workers,
    ),
    _resource_policy(
        "prod-machines-protected",
        "Machines and machine pools in prod are protected.",
        lambda r: rules.unprotected_in_prod(r, environment()),
    ),
    _resource_policy(
        "no-plaintext-secrets",
        "No input that looks like a secret in plaintext: secrets are Vault references.",
        rules.plaintext_secrets,
    ),
    _resource_policy(
        "maas-tls-verify-outside-prod-only",
        "MAAS TLS verification may be off only outside prod.",
        lambda r: rules.tls_off_in_prod(r, environment()),
    ),
    _resource_policy(
        "customer-handoff-never-erases",
        "Profiles on customer-handoff sites must not erase on release (seed 002).",
        rules.handoff_erase,
    ),
    _resource_policy(
        "no-node-ssh-credentials-in-apps",
        "No app instance receives node SSH credentials (seed 000 §1: the non-negotiable rule).",
        rules.node_ssh_credentials_in_apps,
    ),
    _stack_policy(
        "customer-handoff-machines-never-erase",
        "Machines on customer-handoff sites must not erase on release (seed 002).",
        rules.machines_erasing_on_handoff_sites,
    ),
]

PolicyPack(name=PACK, enforcement_level=EnforcementLevel.MANDATORY, policies=POLICIES)
