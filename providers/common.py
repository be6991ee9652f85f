"""Small helpers shared by the dynamic-provider adapters.

- `is_unknown` / `has_unknown`: preview sends unresolved values as Pulumi's UNKNOWN sentinel
  (`is_unknown` lives in providers/kind.py; import it from there).
- `plain`: Pulumi hands numbers over as floats (4 -> 4.0) and adds `__provider`; undo both.
- `spec_failures`: a provider input model's pydantic ValidationError as CheckFailures carrying the
  catalogue's finding codes (ENV002/ENV003/ENV004/ENV005), so `check` speaks the same language as
  `make validate` without importing the environment loader (providers own their input models).
- `VaultInputs` + `vault_reader`: Vault location comes from inputs, credentials from configure().
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi.dynamic import CheckFailure
from pydantic import BaseModel, ConfigDict, ValidationError

from clients.vault import VaultAuthMethod, VaultCredentials, VaultReader, VaultSettings, credentials_from_config
from environments.ca_paths import resolve_ca
from environments.coded import line
from environments.findings import CATALOGUE, Code, format_path
from providers.kind import UNKNOWN, is_unknown

# The SDK hands properties over as dicts, lists, str, float, bool and None: the walks below test those exact
# types first (a 1,024-machine pool's or RoCE table's properties are ~20,000 values, walked at every check and
# diff, and an ABC isinstance per value was most of the walk), then anything else as before.
_LEAVES = (str, int, bool, type(None))


def has_unknown(value: Any) -> bool:
    t = type(value)
    if t is dict:
        return any(has_unknown(v) for v in value.values())
    if t is str:
        return value == UNKNOWN
    if t in _LEAVES or t is float:
        return False
    if t is list or t is tuple:
        return any(has_unknown(v) for v in value)
    if is_unknown(value):
        return True
    if isinstance(value, Mapping):
        return any(has_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_unknown(v) for v in value)
    return False


def plain(value: Any) -> Any:
    """Integral floats back to ints, recursively; drops `__provider` and other `__` keys."""
    t = type(value)
    if t in _LEAVES:
        return value
    if t is dict or isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items() if not str(k).startswith("__")}
    if t is list or isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


_RANGE_ERRORS = {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "too_short", "too_long"}
_SECRETISH = ("_path", "token", "password", "secret", "key")  # never echo these inputs back


def spec_failures(err: ValidationError, source: str, prefix: str = "") -> list[CheckFailure]:
    """A provider input model's errors as CheckFailures with the environment's finding codes (the same
    codes `make validate` uses): `<CODE> <source>: <path>: <message>; fix: <hint>`."""
    out: list[CheckFailure] = []
    for e in err.errors(include_url=False):
        loc = [p for p in e["loc"] if not (isinstance(p, str) and p.startswith(("function-", "[key]")))]
        path = prefix + format_path(loc)
        leaf = path.rsplit(".", 1)[-1]
        if e["type"] == "missing":
            code, msg, hint = Code.MISSING_FIELD, f"required field {leaf!r} is missing", f"add {leaf}: <value>"
        elif e["type"] == "extra_forbidden":
            code, msg, hint = Code.UNKNOWN_FIELD, f"unknown field {leaf!r}", CATALOGUE[Code.UNKNOWN_FIELD][1]
        elif e["type"] in _RANGE_ERRORS:
            bound = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in (e.get("ctx") or {}).items())
            code, msg, hint = Code.OUT_OF_RANGE, e["msg"], f"use a value with {bound}"
        else:
            msg = e["msg"].removeprefix("Value error, ")
            if not any(s in leaf for s in _SECRETISH) and e["type"] != "value_error" and "input" in e:
                msg = f"{msg} (got {repr(e['input'])[:60]})"
            code, hint = Code.INVALID_VALUE, CATALOGUE[Code.INVALID_VALUE][1]
        out.append(CheckFailure(path.split(".")[0].split("[")[0] or "inputs",
                                line(code.value, f"{source}: {path}", msg, hint)))
    return out


class VaultInputs(BaseModel):
    """Where Vault is: from the environment's `vault` section, resolved by the component. Not secret."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    address: str
    kv_mount: str = "gpuaas"
    auth_method: VaultAuthMethod = VaultAuthMethod.TOKEN
    ca_bundle: str | None = None
    """PEM file of the CA that signs Vault's certificate (`ca_bundles.vault`; relative: to the repo)."""


def vault_reader(vault: VaultInputs, credentials: VaultCredentials | None) -> VaultReader:
    settings = VaultSettings(address=vault.address, kv_mount=vault.kv_mount, auth_method=vault.auth_method,
                             ca_bundle=resolve_ca(vault.ca_bundle))
    return VaultReader(settings, credentials or credentials_from_config({}))


def config_get(config: Any, key: str) -> Any:
    """A namespaced `gpuaas-infra:<key>` value from a ConfigureRequest config (or a plain mapping)."""
    if config is None:
        return None
    return config.get(f"gpuaas-infra:{key}")
