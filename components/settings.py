"""Stack settings: everything a stack adds to its environment, read from stack config in one place.

The `local` environment names its endpoints `embedded`; the demo launcher (or a test) starts the
simulators and passes their URLs as stack config. Real stacks never use `embedded`.
Also here: the provider inputs every area shares (`vault_inputs`, `store_inputs`, `platform_url`),
built one way from the environment and these settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from environments import Environment
from environments.coded import line
from environments.findings import Code, Finding, finding
from providers.common import VaultInputs
from providers.sites.bundle import StoreInputs

NAMESPACE = "gpuaas-infra"

# stack config key (without namespace) -> which embedded endpoint it fills
EMBEDDED_KEYS = {
    "maas": "embedded_maas_url",
    "platform": "embedded_platform_url",
    "vault": "embedded_vault_url",
    "s3": "embedded_s3_url",
}


APP_PARALLELISM = "app_member_parallelism"  # member operations in flight per app instance
APP_TIMEOUT = "app_operation_timeout_s"  # deadline of one platform operation
HOST_ROLES = "hostRoles"  # an object: see components/host_roles.py
PART = "part"  # which part of the environment this stack declares: all | control | site:<name>
SITE_STACKS = "siteStacks"  # control stack: site -> the stack that declares it (default <environment>-<site>)

# Every stack config key the program reads (un-namespaced); providers read theirs in configure().
CONFIG_KEYS = ("environment", *EMBEDDED_KEYS.values(), APP_PARALLELISM, APP_TIMEOUT, HOST_ROLES, PART, SITE_STACKS)
_CONFIG_NAMES = {"host_roles": HOST_ROLES, "site_stacks": SITE_STACKS}


class EmbeddedEndpointMissing(Exception):
    pass


class StackConfigInvalid(Exception):
    """Every finding of a stack's config at once (code, stack file, `gpuaas-infra:` path, hint)."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        super().__init__(f"{len(findings)} error(s) in the stack config:\n" + "\n".join(f.render() for f in findings))


def stack_file(stack: str) -> str:
    return f"stacks/Pulumi.{stack}.yaml"


def _config_path(loc: tuple[int | str, ...]) -> str:
    """('host_roles', 'artifacts', 'k3s', 'sha256') -> 'gpuaas-infra:hostRoles.artifacts.k3s.sha256'."""
    head, *rest = [_CONFIG_NAMES.get(str(p), str(p)) for p in loc] or [""]
    return ".".join([f"{NAMESPACE}:{head}", *rest])


def _settings_findings(err: ValidationError, stack: str) -> list[Finding]:
    out = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        path = _config_path(loc)
        if loc[:2] == ("host_roles", "artifacts") and (len(loc) == 3 or loc[3:] == ("sha256",)):
            message = "the pin names no sha256" if e["type"] == "missing" else f"sha256: {e['msg']}"
            if len(loc) == 3:  # the pin is not an object at all
                message = f"a pin is an object {{url, sha256}}: {e['msg']}"
            out.append(finding(Code.PIN_WITHOUT_SHA256, stack_file(stack), path, message))
        else:
            out.append(finding(Code.STACK_CONFIG_INVALID, stack_file(stack), path, e["msg"],
                               hint=f"fix the value (keys: {', '.join(CONFIG_KEYS)}; hostRoles: "
                                    "components/host_roles.py)"))
    return out


class ArtifactPin(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(min_length=1)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    version: str = ""


class HostRolesSettings(BaseModel):
    """`gpuaas-infra:hostRoles`: what host convergence needs beyond the environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pins: str | None = None
    """The environment's pins file (environments/pins/<env>.yaml, relative to the repository): operator data."""
    artifacts: dict[str, ArtifactPin] = {}
    """Pins given inline, each replacing the pins file's entry of that name (the lab: its own URLs)."""
    secret_refs: dict[str, str] = {}
    runner_tokens_path: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_./-]+$")
    """Vault path of the runners' tokens: one per runner, key `<hostname>.<tag>` (a runner is a host's tag)."""
    preview_check: bool = False
    apt_source: str = ""
    address_overrides: dict[str, str] = {}
    extra_vars: dict[str, Any] = {}

    @field_validator("secret_refs")
    @classmethod
    def _refs_only(cls, v: dict[str, str]) -> dict[str, str]:
        """Secrets stay in Vault: a value here is a reference, never the secret (which is not echoed)."""
        bad = sorted(name for name, ref in v.items() if "#" not in ref or any(c.isspace() for c in ref))
        if bad:
            names = ", ".join(f"secret_refs.{n}" for n in bad)
            raise ValueError(f"{names}: expected a Vault reference '<path>#<key>' (the value is not shown)")
        return v


class PartKind(StrEnum):
    ALL = "all"  # the whole environment in one stack (the default: today's stacks)
    CONTROL = "control"  # host convergence and app instances; machines' node ids from the site stacks
    SITE = "site"  # one site's profiles, RoCE, bundles and machines


class StackPart(BaseModel):
    """`gpuaas-infra:part`: `all` (default), `control` or `site:<site name>`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: PartKind = PartKind.ALL
    site: str | None = None

    @classmethod
    def parse(cls, text: str) -> StackPart:
        kind, sep, site = text.strip().partition(":")
        if kind not in PartKind.__members__.values() or bool(sep) != (kind == PartKind.SITE) or (sep and not site):
            raise ValueError(f"{text!r} is not a part: use all, control or site:<site name>")
        return cls(kind=PartKind(kind), site=site or None)

    def __str__(self) -> str:
        return f"site:{self.site}" if self.kind is PartKind.SITE else self.kind.value

    def declares_site(self, site: str) -> bool:
        """Sites, their machines: the site's own stack, or the single stack."""
        return self.kind is PartKind.ALL or (self.kind is PartKind.SITE and self.site == site)

    @property
    def declares_control(self) -> bool:
        """Host convergence and app instances: the control stack, or the single stack."""
        return self.kind in (PartKind.ALL, PartKind.CONTROL)


class StackSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    stack: str
    environment: str
    embedded: dict[str, str] = {}
    app_member_parallelism: int = Field(4, ge=1, le=32)
    app_operation_timeout_s: float = Field(900.0, gt=0, le=7200)
    host_roles: HostRolesSettings | None = None
    """None: the stack converges no hosts (it sets no hostRoles)."""
    part: StackPart = StackPart()
    site_stacks: dict[str, str] = {}
    """control stack: site name -> the stack reference naming its site stack (`prod-dal1`, or
    `organization/gpuaas-infra/prod-dal1`); sites not listed: `<environment name>-<site>`."""

    @field_validator("part", mode="before")
    @classmethod
    def _part(cls, v: Any) -> Any:
        return StackPart.parse(v) if isinstance(v, str) else v

    def site_stack(self, env: Environment, site: str) -> str:
        """The stack (reference name) that declares `site`, read by the control stack."""
        return self.site_stacks.get(site) or f"{env.name}-{site}"

    @classmethod
    def from_config(cls, stack: str, config: Mapping[str, Any]) -> StackSettings:
        """`config` maps un-namespaced keys (CONFIG_KEYS) to their values as Pulumi config has them
        (strings; hostRoles as a JSON string or an object)."""
        embedded = {k: v for k, key in EMBEDDED_KEYS.items() if (v := config.get(key))}
        fields: dict[str, Any] = {"stack": stack, "environment": config.get("environment") or stack,
                                  "embedded": embedded}
        for key in (APP_PARALLELISM, APP_TIMEOUT, PART):
            if config.get(key) not in (None, ""):
                fields[key] = config[key]
        for key, field in ((HOST_ROLES, "host_roles"), (SITE_STACKS, "site_stacks")):
            try:
                if value := config.get(key):
                    fields[field] = json.loads(value) if isinstance(value, str) else value
            except json.JSONDecodeError as e:
                bad = finding(Code.STACK_CONFIG_INVALID, stack_file(stack), _config_path((key,)),
                              f"not a JSON object ({e.msg})", hint=f"write {key} as a YAML mapping")
                raise StackConfigInvalid([bad]) from None
        try:
            return cls.model_validate(fields)
        except ValidationError as e:
            raise StackConfigInvalid(_settings_findings(e, stack)) from None

    def endpoint(self, value: str, kind: str) -> str:
        """The URL to use for an environment endpoint (`embedded` resolved from stack config)."""
        if value != "embedded":
            return value
        if kind not in self.embedded:
            raise EmbeddedEndpointMissing(line(
                Code.STACK_CONFIG_INVALID.value, f"{stack_file(self.stack)}: {NAMESPACE}:{EMBEDDED_KEYS[kind]}",
                f"environment {self.environment!r} uses the embedded {kind} endpoint, but the key is not set",
                f"run the stack through `make demo`, or set it: pulumi config set {EMBEDDED_KEYS[kind]} <url>"))
        return self.embedded[kind]

    def unresolved_endpoints(self, env: Environment) -> list[str]:
        wanted = {
            "maas": any(s.maas_url == "embedded" for s in env.sites),
            "platform": env.platform.url == "embedded",
            "vault": env.vault.address == "embedded",
            "s3": env.artifact_store.endpoint_url == "embedded",
        }
        return [k for k, w in wanted.items() if w and k not in self.embedded]


def vault_inputs(env: Environment, settings: StackSettings) -> VaultInputs:
    """Where Vault is, for every provider (credentials come from each provider's configure())."""
    return VaultInputs.model_validate({  # the auth method by value: the provider's model owns its enum
        "address": settings.endpoint(env.vault.address, "vault"), "kv_mount": env.vault.kv_mount,
        "auth_method": env.vault.auth_method.value, "ca_bundle": env.ca_bundles.vault})


def store_inputs(env: Environment, settings: StackSettings) -> StoreInputs:
    a = env.artifact_store
    return StoreInputs(endpoint_url=settings.endpoint(a.endpoint_url, "s3"), bucket=a.bucket, region=a.region,
                       path_style=a.path_style, credentials_path=a.credentials_path, ca_bundle=env.ca_bundles.s3)


def platform_url(env: Environment, settings: StackSettings) -> str:
    return settings.endpoint(env.platform.url, "platform")


def part_findings(env: Environment, settings: StackSettings) -> list[Finding]:
    """Before anything runs: the part names a site of the environment, and siteStacks (read only by a
    control stack) lists only the environment's sites."""
    sites = [s.name for s in env.sites]
    part, file, out = settings.part, stack_file(settings.stack), []
    if part.kind is PartKind.SITE and part.site not in sites:
        out.append(finding(Code.PART_UNKNOWN_SITE, file, f"{NAMESPACE}:{PART}",
                           f"site {part.site!r} is not a site of environment {env.name} (sites: {', '.join(sites)})",
                           hint=f"use one of: {', '.join(f'site:{s}' for s in sites)}, control, all"))
    for site in sorted(settings.site_stacks):
        if part.kind is not PartKind.CONTROL:
            out.append(finding(Code.SITE_STACKS_INVALID, file, f"{NAMESPACE}:{SITE_STACKS}.{site}",
                               f"only a control stack reads site stacks; this stack's part is {part}",
                               hint=f"remove {NAMESPACE}:{SITE_STACKS} or set {NAMESPACE}:{PART}: control"))
        elif site not in sites:
            out.append(finding(Code.SITE_STACKS_INVALID, file, f"{NAMESPACE}:{SITE_STACKS}.{site}",
                               f"{site!r} is not a site of environment {env.name} (sites: {', '.join(sites)})"))
    return out
