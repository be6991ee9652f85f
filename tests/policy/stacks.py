"""The resources a stack declares, as the engine would hand them to the policy pack.

Resources come from previews by the CLI-free engine (same JSON as `pulumi preview --json`): of the
project itself, and, for the kinds whose inputs a first preview can't know yet (machines, pools, app
instances), of `tests/policy/program`, which declares them through the same components with those
values known. HostConvergence gets the inputs `components.host_roles.spec_for` builds (the project
declares it only for stacks with `hostRoles` config). Only if the project's own preview fails in
another area are SiteProfiles built from the compiled environment instead (with a warning).
"""

from __future__ import annotations

import tempfile
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from components.host_roles import spec_for
from components.settings import HostRolesSettings, StackSettings
from engine.api import Engine
from engine.crypto import TEST_PASSPHRASE
from environments import Environment, load_environment
from tests.policy.analyzer import REPO, Resource

DYNAMIC = "pulumi-python:dynamic/gpuaas:"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # how the engine (and the CLI) spell an unknown value
MACHINE_KINDS = ("MaasMachine", "MachinePool")
# Kinds whose first-preview inputs wait on other resources' outputs; the stand-in program knows them.
STAND_IN_KINDS = (*MACHINE_KINDS, "AppInstance")
STAND_IN_PROGRAM = REPO / "tests" / "policy" / "program"


class PreviewFailed(RuntimeError):
    def __init__(self, message: str, first_error: str) -> None:
        super().__init__(message)
        self.first_error = first_error


def _preview_resources(project_dir: Path, stack: str) -> list[Resource]:
    return list(_preview_cached(project_dir, stack))


@lru_cache(maxsize=8)
def _preview_cached(project_dir: Path, stack: str) -> tuple[Resource, ...]:
    with tempfile.TemporaryDirectory(prefix="policy-preview-") as tmp:
        result = Engine(project_dir, stack, Path(tmp) / "state.json", passphrase=TEST_PASSPHRASE).preview(timeout=300)
    if not result.ok:
        errors = [d.message for d in result.diagnostics if d.severity == "error"]
        raise PreviewFailed(
            f"preview of {stack} in {project_dir} failed:\n" + "\n".join(errors)[:3000] + "\n" + result.log[-2000:],
            (errors or ["no error diagnostic"])[0][:300],
        )
    out: list[Resource] = []
    for step in result.steps:
        state = step.newState or {}
        if state.get("custom") and str(state.get("type", "")).startswith(DYNAMIC):
            out.append(
                Resource(
                    urn=state["urn"],
                    type=state["type"],
                    inputs=dict(state.get("inputs") or {}),
                    protect=bool(state.get("protect")),
                    parent=str(state.get("parent") or ""),
                )
            )
    return tuple(out)


def _kind(r: Resource) -> str:
    return r.type.rsplit(":", 1)[-1]


def _has_unknown(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_unknown(v) for k, v in value.items() if not k.startswith("__"))
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return value == UNKNOWN


def declared_resources(stack: str) -> tuple[list[Resource], str]:
    """(gpuaas resources of the stack's preview, where each kind came from).

    The project's own program first; the stand-in kinds it can't show with known inputs come from
    the stand-in program, which declares them through the same components.
    """
    try:
        own = _preview_resources(REPO, stack)
    except PreviewFailed as exc:
        # Another area's resource is broken at preview: that is its own tests' failure, not the policy
        # pack's. Say so loudly and judge what the components declare through the stand-in program.
        warnings.warn(f"policy tests fall back to the stand-in program: {exc.first_error}", stacklevel=2)
        own = []
    out = [r for r in own if _kind(r) not in STAND_IN_KINDS]
    sources = [f"{k}: project" for k in sorted({_kind(r) for r in out})]
    stand_in: list[Resource] | None = None
    for kind in STAND_IN_KINDS:
        mine = [r for r in own if _kind(r) == kind]
        if mine and not any(_has_unknown(r.inputs) for r in mine):
            out += mine
            sources.append(f"{kind}: project")
            continue
        # A first preview knows no bundle digest, platform or node id yet: those inputs are unknown
        # and CrossGuard can't judge them, so take the stand-in program's declarations of the kind.
        if stand_in is None:
            stand_in = _preview_resources(STAND_IN_PROGRAM, stack)
        theirs = [r for r in stand_in if _kind(r) == kind]
        out += theirs
        sources.append(f"{kind}: stand-in" if theirs else f"{kind}: none")
    return out, "; ".join(sources)


def _urn(env: Environment, kind: str, name: str) -> str:
    return f"urn:pulumi:{env.name}::gpuaas-infra::{DYNAMIC}{kind}::{name}"


def environment_site_profiles(env: Environment) -> list[Resource]:
    """SiteProfiles in the SiteProfile provider's shape, built from the compiled environment; used only
    while the project's own preview fails in another area (the stand-in program declares no sites)."""
    out = []
    for site in env.sites:
        for p in site.profiles:
            inputs: dict[str, Any] = {
                "tier": env.tier.value,
                "site": {
                    "name": site.name,
                    "maas_url": site.maas_url,
                    "maas_api_key_path": site.maas_api_key_path,
                    "tls_verify": site.tls_verify,
                    "customer_handoff": site.customer_handoff,
                },
                "profile": p.model_dump(mode="json"),
            }
            out.append(
                Resource(_urn(env, "SiteProfile", f"profile-{site.name}-{p.name}"), DYNAMIC + "SiteProfile", inputs)
            )
    return out


def host_convergence(env: Environment, stack: str) -> Resource:
    """HostConvergence with the inputs `components.host_roles.spec_for` gives it (the project declares
    it only for stacks with `hostRoles` config, which prod has not yet)."""
    spec = spec_for(env, StackSettings.from_config(stack, {"environment": env.name}), HostRolesSettings())
    return Resource(
        f"urn:pulumi:{stack}::gpuaas-infra::gpuaas:index:HostRoles${DYNAMIC}HostConvergence::"
        f"{env.name}-host-roles-convergence",
        DYNAMIC + "HostConvergence",
        spec.model_dump(mode="json"),
    )


def stack_resources(stack: str) -> tuple[list[Resource], str]:
    """Declared resources, plus what no program declares for the stack yet (see the functions above)."""
    declared, source = declared_resources(stack)
    env = load_environment(stack)
    kinds = {_kind(r) for r in declared}
    if "SiteProfile" not in kinds:
        declared += environment_site_profiles(env)
        source += "; SiteProfile: environment"
    if "HostConvergence" not in kinds and env.hosts:
        declared.append(host_convergence(env, stack))
        source += "; HostConvergence: components.host_roles.spec_for"
    return declared, source


def project_resources(stack: str) -> list[Resource]:
    """What the project's own program declares for the stack at preview (unknowns as the CLI sends them)."""
    return _preview_resources(REPO, stack)
