"""Stack settings: what a stack adds to its environment (embedded endpoints for the local stack).

The `local` environment names its endpoints `embedded`; the demo launcher (or a test) starts the
simulators and passes their URLs as stack config. Real stacks never use `embedded`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from environments import Environment

NAMESPACE = "gpuaas-infra"

# stack config key (without namespace) -> which embedded endpoint it fills
EMBEDDED_KEYS = {
    "maas": "embedded_maas_url",
    "platform": "embedded_platform_url",
    "vault": "embedded_vault_url",
    "s3": "embedded_s3_url",
}


class EmbeddedEndpointMissing(Exception):
    pass


class StackSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    stack: str
    environment: str
    embedded: dict[str, str] = {}

    @classmethod
    def from_config(cls, stack: str, config: Mapping[str, str | None]) -> StackSettings:
        """`config` maps un-namespaced keys (environment, embedded_maas_url, ...) to values."""
        embedded = {k: v for k, key in EMBEDDED_KEYS.items() if (v := config.get(key))}
        return cls(stack=stack, environment=config.get("environment") or stack, embedded=embedded)

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
