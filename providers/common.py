"""Small helpers shared by the dynamic-provider adapters of this area (sites, bundles, RoCE).

- `is_unknown` / `has_unknown`: preview sends unresolved values as Pulumi's UNKNOWN sentinel.
- `plain`: Pulumi hands numbers over as floats (4 -> 4.0) and adds `__provider`; undo both.
- `spec_failures`: a pydantic ValidationError as CheckFailures carrying the environment model's
  finding codes (ENV003/ENV004/ENV005 ...), so `check` speaks the same language as `make validate`.
- `VaultInputs` + `vault_reader`: Vault location comes from inputs, credentials from configure().
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.dynamic import CheckFailure
from pydantic import BaseModel, ConfigDict, ValidationError

from clients.vault import VaultCredentials, VaultReader, VaultSettings, credentials_from_config
from environments.loader import schema_findings  # the model's own error -> code mapping
from environments.model import VaultAuthMethod

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # pulumi.runtime.rpc.UNKNOWN


def is_unknown(value: Any) -> bool:
    # The string sentinel over gRPC; the provider server may also hand over pulumi.output.Unknown.
    return (isinstance(value, str) and value == UNKNOWN) or type(value).__name__ == "Unknown"



def has_unknown(value: Any) -> bool:
    if is_unknown(value):
        return True
    if isinstance(value, Mapping):
        return any(has_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_unknown(v) for v in value)
    return False


def plain(value: Any) -> Any:
    """Integral floats back to ints, recursively; drops `__provider` and other `__` keys."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items() if not str(k).startswith("__")}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def spec_failures(err: ValidationError, source: str, prefix: str = "") -> list[CheckFailure]:
    """Validation errors as CheckFailures: `<CODE> <source>: <path>: <message>; fix: <hint>`."""
    out: list[CheckFailure] = []
    for f in schema_findings(err, source):
        path = f"{prefix}{f.path}" if prefix else f.path
        out.append(CheckFailure(path.split(".")[0] or "inputs",
                                f"{f.code.value} {source}: {path}: {f.message}; fix: {f.hint}"))
    return out


class VaultInputs(BaseModel):
    """Where Vault is: from the environment's `vault` section, resolved by the component. Not secret."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    address: str
    kv_mount: str = "gpuaas"
    auth_method: VaultAuthMethod = VaultAuthMethod.TOKEN


def vault_reader(vault: VaultInputs, credentials: VaultCredentials | None) -> VaultReader:
    settings = VaultSettings(address=vault.address, kv_mount=vault.kv_mount, auth_method=vault.auth_method)
    return VaultReader(settings, credentials or credentials_from_config({}))


def config_get(config: Any, key: str) -> Any:
    """A namespaced `gpuaas-infra:<key>` value from a ConfigureRequest config (or a plain mapping)."""
    if config is None:
        return None
    return config.get(f"gpuaas-infra:{key}")
