"""gpuaas-infra policy pack: each seed rule as a mandatory CrossGuard policy.

Started by the Pulumi CLI (`pulumi preview --policy-pack policy`) as
`<virtualenv>/bin/python -u -m pulumi.policy <engine address> .` in this directory; it prints its
gRPC port and serves the Analyzer service. The rules themselves are pure functions in
`gpuaas_rules.py` (tested on their own and through a running analyzer in tests/policy/).
"""

from __future__ import annotations

import json
import os

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

PACK = "gpuaas-policies"
ENVIRONMENT_KEY = "gpuaas-infra:environment"


def environment() -> str:
    """The stack's environment: the `gpuaas-infra:environment` config, else the stack name (as the program does)."""
    try:
        config = json.loads(os.environ.get("PULUMI_CONFIG") or "{}")
    except ValueError:
        config = {}
    return str(config.get(ENVIRONMENT_KEY) or os.environ.get("PULUMI_STACK", ""))


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
