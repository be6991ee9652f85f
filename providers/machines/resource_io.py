"""Inputs shared by the MaasMachine and MachinePool adapters (one reconciler, two shapes), and the
translations between Pulumi's plain dicts and the typed inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from pulumi.dynamic import CheckFailure
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from providers.common import has_unknown, plain, spec_failures

from .spec import Connection, LifecyclePolicy, MachineSpec

# Output keys older versions wrote into state and this one no longer keeps (notes and stage timings
# go to the run's output); refresh drops them.
DROPPED_OUTPUTS = ("notes", "stage_seconds")


class MachineInputs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    machine: MachineSpec
    connection: Connection
    policy: LifecyclePolicy


class PoolInputs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    pool: str
    machines: tuple[MachineSpec, ...]
    connection: Connection
    policy: LifecyclePolicy


def check_inputs(
    model: type[BaseModel], news: dict[str, Any], source: str
) -> tuple[dict[str, Any], list[CheckFailure]]:
    """Validate inputs at `check`; unknowns (preview) are accepted as they are."""
    if has_unknown(news):
        return news, []
    try:
        model.model_validate(plain(news))
    except ValidationError as e:
        return news, spec_failures(e, source)
    return news, []


M = TypeVar("M", bound=BaseModel)


def typed_inputs(model: type[M], props: Mapping[str, Any]) -> M:
    """The model's fields out of inputs or state (state also holds outputs)."""
    raw = plain(props)
    return model.model_validate({k: raw[k] for k in model.model_fields if k in raw})


def canonical(model: type[BaseModel], props: Mapping[str, Any], only: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Each input section as its model writes it (defaults filled, enums and numbers normalised),
    so `diff` compares meaning, not spelling; a section holding an unknown (preview) or not valid
    for the model is left as it is, and the descriptor compares it raw (unknown = changed). `only`: these
    sections (a pool's machine specs are compared by fingerprint, not here)."""
    wanted = model.model_fields if only is None else only
    raw = plain({k: v for k, v in props.items() if k in wanted})
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name not in raw:
            continue
        value = raw[name]
        if has_unknown(value):
            out[name] = value
            continue
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(cast(Any, info.annotation))
            out[name] = adapter.dump_python(adapter.validate_python(value), mode="json", exclude_none=True)
        except ValidationError:
            out[name] = value
    return out
