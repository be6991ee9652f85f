"""The environment model's base class: frozen, no unknown fields, no boolean where a number goes."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

_NAME = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"
Name = Annotated[str, Field(pattern=_NAME)]

# pydantic's lax mode reads `true` as 1 (and as the address 0.0.0.1): never what a person meant.
_NOT_BOOL = (int, int | None, ipaddress.IPv4Address, ipaddress.IPv4Network, ipaddress.IPv4Address | None,
             ipaddress.IPv4Network | None)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_int(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads `true` as 1 for an int field; in a hand-written document that is a mistake.
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and field.annotation in _NOT_BOOL:
            raise ValueError(f"{str(value).lower()} is a boolean; this field takes a number or an address")
        return value
