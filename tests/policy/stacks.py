"""The resources a stack declares, as the engine would hand them to the policy pack.

Machines and pools come from a preview (the CLI-free engine, same JSON as `pulumi preview --json`)
of the project itself when it declares them, otherwise of `tests/policy/program`, which runs the real
`components.machines` over the compiled environment (the sites area is not in BUILDERS yet).

SiteProfile, HostConvergence and AppInstance have no provider yet, so no program can declare them:
`environment_resources` builds them from the compiled environment, field for field (interim; replace
with the preview's resources when those providers land).
"""

from __future__ import annotations

import tempfile
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from environments import Environment, load_environment
from tests.policy.analyzer import REPO, Resource
from tools.engine.api import Engine
from tools.engine.crypto import TEST_PASSPHRASE

DYNAMIC = "pulumi-python:dynamic/gpuaas:"
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # how the engine (and the CLI) spell an unknown value
MACHINE_KINDS = ("MaasMachine", "MachinePool")
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


def declared_resources(stack: str) -> tuple[list[Resource], str]:
    """(gpuaas resources of the stack's preview, which program declared the machines).

    The project's own program first; machines from the stand-in program while the project declares none.
    """
    try:
        own = _preview_resources(REPO, stack)
    except PreviewFailed as exc:
        # Another area's resource is broken at preview: that is its own tests' failure, not the policy
        # pack's. Say so loudly and judge what the machines component declares.
        warnings.warn(f"policy tests fall back to the stand-in program: {exc.first_error}", stacklevel=2)
        own = []
    machines = [r for r in own if _kind(r) in MACHINE_KINDS]
    if machines and not any(_has_unknown(r.inputs) for r in machines):
        return own, "project"
    # A first preview of a stack knows no bundle digest or platform id yet, so the machines' inputs
    # are unknown and CrossGuard can't judge them; the stand-in program declares the same machines
    # with those values known.
    rest = [r for r in own if _kind(r) not in MACHINE_KINDS]
    stand_in = [r for r in _preview_resources(STAND_IN_PROGRAM, stack) if _kind(r) in MACHINE_KINDS]
    return rest + stand_in, "project + stand-in machines" if own else "stand-in"


def _has_unknown(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_unknown(v) for k, v in value.items() if not k.startswith("__"))
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return value == UNKNOWN


def _urn(env: Environment, kind: str, name: str) -> str:
    return f"urn:pulumi:{env.name}::gpuaas-infra::{DYNAMIC}{kind}::{name}"


def environment_resources(env: Environment) -> list[Resource]:
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
            out.append(Resource(_urn(env, "SiteProfile", f"{site.name}-{p.name}"), DYNAMIC + "SiteProfile", inputs))
    hosts = [
        {
            "hostname": h.hostname,
            "logical_role": h.logical_role.value,
            "roles": [r.value for r in h.roles],
            "runner_tags": [t.value for t in h.runner_tags],
            "ssh_key_path": h.ssh_key_path,
        }
        for h in env.hosts
    ]
    out.append(
        Resource(
            _urn(env, "HostConvergence", f"{env.name}-hosts"),
            DYNAMIC + "HostConvergence",
            {"environment": env.name, "hosts": hosts},
        )
    )
    for a in env.app_instances:
        keys = env.blueprint_model.apps[a.app.slug].component_keys
        members = {
            k: {"count": m.count, "nodes": list(m.nodes), "control_plane": keys[k].control_plane}
            for k, m in a.members.items()
        }
        out.append(
            Resource(
                _urn(env, "AppInstance", a.name),
                DYNAMIC + "AppInstance",
                {
                    "project_id": a.project_id,
                    "app": a.app.slug,
                    "version": a.app.version,
                    "service_account_token_path": a.service_account_token_path,
                    "members": members,
                },
            )
        )
    return out


def stack_resources(stack: str) -> tuple[list[Resource], str]:
    """Declared resources, plus environment-built ones for the kinds no program declares yet."""
    declared, source = declared_resources(stack)
    have = {_kind(r) for r in declared}
    interim = [r for r in environment_resources(load_environment(stack)) if _kind(r) not in have]
    return declared + interim, source


def project_resources(stack: str) -> list[Resource]:
    """What the project's own program declares for the stack at preview (unknowns as the CLI sends them)."""
    return _preview_resources(REPO, stack)
