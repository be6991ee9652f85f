"""Stack settings: everything a stack adds to its environment, read from stack config in one place.

The `local` environment names its endpoints `embedded`; the demo launcher (or a test) starts the
simulators and passes their URLs as stack config. Real stacks never use `embedded`.
Also here: the provider inputs every area shares (`vault_inputs`, `store_inputs`, `platform_url`),
built one way from the environment and these settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from environments import Environment
from environments.findings import Code, Finding, finding
from providers.bootstrap_bundle import StoreInputs
from providers.common import VaultAuthMethod, VaultInputs

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

# Every stack config key the program reads (un-namespaced); providers read theirs in configure().
CONFIG_KEYS = ("environment", *EMBEDDED_KEYS.values(), APP_PARALLELISM, APP_TIMEOUT, HOST_ROLES)


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
    head, *rest = [HOST_ROLES if p == "host_roles" else str(p) for p in loc] or [""]
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


class HostRolesSettings(BaseModel):
    """`gpuaas-infra:hostRoles`: what host convergence needs beyond the environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    artifacts: dict[str, ArtifactPin] = {}
    secret_refs: dict[str, str] = {}
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


class StackSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    stack: str
    environment: str
    embedded: dict[str, str] = {}
    app_member_parallelism: int = Field(4, ge=1, le=32)
    app_operation_timeout_s: float = Field(900.0, gt=0, le=7200)
    host_roles: HostRolesSettings | None = None
    """None: the stack converges no hosts (it sets no hostRoles)."""

    @classmethod
    def from_config(cls, stack: str, config: Mapping[str, Any]) -> StackSettings:
        """`config` maps un-namespaced keys (CONFIG_KEYS) to their values as Pulumi config has them
        (strings; hostRoles as a JSON string or an object)."""
        embedded = {k: v for k, key in EMBEDDED_KEYS.items() if (v := config.get(key))}
        fields: dict[str, Any] = {"stack": stack, "environment": config.get("environment") or stack,
                                  "embedded": embedded}
        for key in (APP_PARALLELISM, APP_TIMEOUT):
            if config.get(key) not in (None, ""):
                fields[key] = config[key]
        roles = config.get(HOST_ROLES)
        try:
            if roles:
                fields["host_roles"] = json.loads(roles) if isinstance(roles, str) else roles
            return cls.model_validate(fields)
        except json.JSONDecodeError as e:
            bad = finding(Code.STACK_CONFIG_INVALID, stack_file(stack), _config_path((HOST_ROLES,)),
                          f"not a JSON object ({e.msg})", hint="write hostRoles as a YAML mapping")
            raise StackConfigInvalid([bad]) from None
        except ValidationError as e:
            raise StackConfigInvalid(_settings_findings(e, stack)) from None

    def endpoint(self, value: str, kind: str) -> str:
        """The URL to use for an environment endpoint (`embedded` resolved from stack config)."""
        if value != "embedded":
            return value
        if kind not in self.embedded:
            raise EmbeddedEndpointMissing(
                f"environment {self.environment!r} uses the embedded {kind} endpoint, but stack config "
                f"{NAMESPACE}:{EMBEDDED_KEYS[kind]} is not set; run the stack through `make demo`, "
                f"or set it: pulumi config set {EMBEDDED_KEYS[kind]} <url>"
            )
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
    return VaultInputs(address=settings.endpoint(env.vault.address, "vault"), kv_mount=env.vault.kv_mount,
                       auth_method=VaultAuthMethod(env.vault.auth_method.value), ca_bundle=env.ca_bundles.vault)


def store_inputs(env: Environment, settings: StackSettings) -> StoreInputs:
    a = env.artifact_store
    return StoreInputs(endpoint_url=settings.endpoint(a.endpoint_url, "s3"), bucket=a.bucket, region=a.region,
                       path_style=a.path_style, credentials_path=a.credentials_path, ca_bundle=env.ca_bundles.s3)


def platform_url(env: Environment, settings: StackSettings) -> str:
    return settings.endpoint(env.platform.url, "platform")
