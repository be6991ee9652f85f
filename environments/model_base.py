"""The environment model's base class: frozen, no unknown fields, no boolean where a number goes."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

_NAME = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
Name = Annotated[str, Field(pattern=_NAME)]

# pydantic's lax mode reads `true` as 1 (and as the address 0.0.0.1): never what a person meant.
_NOT_BOOL = (int, int | None, ipaddress.IPv4Address, ipaddress.IPv4Network, ipaddress.IPv4Address | None,
             ipaddress.IPv4Network | None)


class _Model(BaseModel):
    # defer_build: validators are built on first use; the apps' and host roles' provider plugins import the model
    # (the rules they share with validation name its types) and never validate an environment (issue 29).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_int(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads `true` as 1 for an int field; in a hand-written document that is a mistake. The field is
        # looked up only for a boolean: this runs for every field of every machine (22,774 calls at 1,024).
        if isinstance(value, bool):
            field = cls.model_fields.get(info.field_name or "")
            if field is not None and field.annotation in _NOT_BOOL:
                raise ValueError(f"{str(value).lower()} is a boolean; this field takes a number or an address")
        return value


_VAULT_REF = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*#[A-Za-z0-9_.-]+$")


def _vault_ref(value: str) -> str:
    path = value.split("#", 1)[0]
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise ValueError("a Vault path has no '.', '..' or empty segments; name the secret's own path under the mount")
    if not _VAULT_REF.match(value):
        raise ValueError(
            "not a Vault reference; write '<path under the KV mount>#<key>', "
            "e.g. 'prod/maas/dal1#api_key' (secrets never go in environment files)"
        )
    return value


def _endpoint(value: str) -> str:
    if value == "embedded" or re.match(r"^https?://[^\s/]+(/\S*)?$", value):
        return value
    raise ValueError(f"{value!r} is not an http(s) URL or 'embedded'")


VaultRef = Annotated[str, AfterValidator(_vault_ref)]
"""A secret's location: `<path under the KV v2 mount>#<key>`; the value is read at operation time."""

Endpoint = Annotated[str, AfterValidator(_endpoint)]
"""An http(s) URL, or `embedded` (the local stack: the demo's simulators supply the URL)."""
