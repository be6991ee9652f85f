"""Inputs shared by the MaasMachine and MachinePool adapters (one reconciler, two shapes), and the
translations between Pulumi's plain dicts and the typed inputs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Json, TypeAdapter, ValidationError, model_validator

from providers.common import has_unknown, plain

from .plan import MachineRecord, parse_records, written_for
from .spec import Connection, LifecyclePolicy, MachineSpec

# Output keys older versions wrote into state and this one no longer keeps (notes and stage timings
# go to the run's output); refresh drops them.
DROPPED_OUTPUTS = ("notes", "stage_seconds")


class MachineInputs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    machine: MachineSpec
    connection: Connection
    policy: LifecyclePolicy
    owner: str | None = None
    """This resource, "<stack>/<resource name>" (MAAS owner data `gpuaas_resource`); None in older state."""


class PoolInputs(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    pool: str
    machines: dict[str, Json[MachineSpec]]
    """hostname -> the machine's spec as one canonical JSON string: one leaf per machine, because the SDK
    (de)serialises every leaf at each gRPC hop (issue 18). With `template`, each string holds only what the
    machine does not share with the template (`spec_delta`, issue 29: the deploy block, storage and RoCE
    interfaces once per pool); without it (older state), the whole spec (`MachineSpec.wire`)."""
    template: Json[MachineSpec] | None = None
    """One of the pool's specs, whole (`MachineSpec.wire`): what the machines' strings are written against."""
    connection: Connection
    policy: LifecyclePolicy
    owner: str | None = None
    """This resource, "<stack>/<resource name>" (MAAS owner data `gpuaas_resource`); None in older state."""

    @model_validator(mode="before")
    @classmethod
    def _whole_specs(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("machines"), Mapping) and data.get("template"):
            whole = expand_specs(data["machines"], data["template"])
            return {**data, "machines": {h: json.dumps(v) if isinstance(v, Mapping) else v
                                         for h, v in whole.items()}}
        return data

    @model_validator(mode="after")
    def _keyed_by_hostname(self) -> PoolInputs:
        for key, spec in self.machines.items():
            if key != spec.hostname:
                raise ValueError(f"machines.{key}: the spec's hostname is {spec.hostname!r}; "
                                 "key each spec by its hostname")
        return self

    @property
    def specs(self) -> tuple[MachineSpec, ...]:
        return tuple(self.machines.values())


# --- a pool's specs against its template (issue 29: what every machine shares, written once) ---------------
# Sections compared key by key: a machine writes only the keys in which it differs from the template.
_SECTIONS = ("deploy", "storage")
# A machine whose RoCE links are the template's but for their addresses writes the addresses only.
ROCE_ADDRESSES = "roce_addresses"


def spec_delta(spec: MachineSpec, template: MachineSpec) -> str:
    """`spec` as a pool's `machines` entry written against `template`: its hostname and every field that differs
    (None and defaults written out where the template has another value), as one canonical JSON string.
    `expand_specs` gives back exactly `spec`."""
    return _delta(spec, template.model_dump(mode="json"))


def spec_deltas(specs: Iterable[MachineSpec], template: MachineSpec) -> dict[str, str]:
    """hostname -> `spec_delta` of each spec (the template read once for all of them)."""
    theirs = template.model_dump(mode="json")
    return {s.hostname: _delta(s, theirs) for s in specs}


def _delta(spec: MachineSpec, theirs: dict[str, Any]) -> str:
    mine = spec.model_dump(mode="json")
    out: dict[str, Any] = {"hostname": spec.hostname}
    for key, value in mine.items():
        if value == theirs.get(key):
            continue
        if key in _SECTIONS and isinstance(value, dict) and isinstance(theirs.get(key), dict):
            out[key] = {k: v for k, v in value.items() if theirs[key].get(k, _ABSENT) != v}
        elif key == "roce_links" and _same_links(value, theirs.get(key)):
            out[ROCE_ADDRESSES] = [link["address"] for link in value]
        else:
            out[key] = value
    return json.dumps(out, sort_keys=True, separators=(",", ":"))


_ABSENT = object()


def _same_links(mine: Any, theirs: Any) -> bool:
    """Whether two link lists differ in their addresses only (same rails, interfaces, subnets, MTUs)."""
    if not isinstance(mine, list) or not isinstance(theirs, list) or len(mine) != len(theirs):
        return False
    return all({**a, "address": ""} == {**b, "address": ""} for a, b in zip(mine, theirs, strict=True))


def expand_specs(machines: Mapping[str, Any], template: Any) -> dict[str, Any]:
    """hostname -> the whole plain spec of each entry of a pool's `machines` written against `template` (a
    `MachineSpec.wire` string, or None: the entries are whole already). Entries that are unknown (preview) or
    unreadable are passed through as they are, for the readers that check."""
    base = _template_plain(template)
    if base is None:
        return dict(machines)
    out: dict[str, Any] = {}
    for host, raw in machines.items():
        try:
            entry = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            out[host] = raw
            continue
        whole = {**base}
        for key, value in entry.items():
            links = base["roce_links"]
            if key == ROCE_ADDRESSES and isinstance(value, list) and len(value) == len(links):
                whole["roce_links"] = [{**link, "address": a} for link, a in zip(links, value, strict=True)]
            elif key in _SECTIONS and isinstance(value, dict):
                whole[key] = {**base[key], **value}
            else:
                whole[key] = value
        out[host] = whole
    return out


def _template_plain(template: Any) -> dict[str, Any] | None:
    if isinstance(template, MachineSpec):
        return template.model_dump(mode="json")
    if not isinstance(template, str) or not template:
        return None
    try:
        return MachineSpec.model_validate_json(template).model_dump(mode="json")
    except ValidationError:
        return None


def wire_machines(specs: Iterable[MachineSpec | Mapping[str, Any]]) -> dict[str, str]:
    """A pool's `machines` input from typed or plain specs."""
    typed = (s if isinstance(s, MachineSpec) else MachineSpec.model_validate(s) for s in specs)
    return {s.hostname: s.wire() for s in typed}


def pool_machines(value: Any, template: Any = None) -> dict[str, dict[str, Any]]:
    """hostname -> plain spec (defaults filled) of a pool's `machines` input as state holds it: JSON strings keyed by
    hostname, written against the pool's `template` when it has one, or (inputs written before issue 18's one-leaf
    form) a list of spec dicts. Entries that are unknown (preview) or unreadable are left out; readers that must
    see them check `has_unknown`."""
    out: dict[str, dict[str, Any]] = {}
    if isinstance(value, Mapping) and template and not has_unknown(template):
        value = expand_specs(value, template)
    items = value.items() if isinstance(value, Mapping) else ((None, v) for v in value) if isinstance(
        value, list | tuple) else ()
    for key, item in items:
        if isinstance(item, str):
            try:
                item = json.loads(item)
            except ValueError:
                continue
        if isinstance(item, Mapping) and isinstance(host := item.get("hostname", key), str):
            out[host] = _as_written({**plain(item), "hostname": host})
    return out


def _as_written(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec with its defaults filled (the one-leaf form leaves them out, older inputs wrote them), so
    readers compare meaning; a spec this version can't read stays as it is."""
    try:
        return MachineSpec.model_validate(spec).model_dump(mode="json", exclude_none=True)
    except ValidationError:
        return spec


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


def time_scale_from(config: Any) -> float:
    """`gpuaas-infra:machine_time_scale` (tests and the demo shrink MAAS-scale deadlines with it). Read at
    `configure`, here and not in the runtime module, so a preview never loads the client libraries."""
    value = config.get("gpuaas-infra:machine_time_scale") if config is not None else None
    return float(value) if value else 1.0


def pool_records(state: Mapping[str, Any]) -> dict[str, MachineRecord]:
    """A pool's records from its state (outputs). State written before issue 18 kept each machine's spec
    in the outputs (`machines`) and no identity in the record: the identity and spec fingerprint come from
    that spec, so old state diffs, renames, releases and refreshes exactly as new state does."""
    raw = plain(state)
    records = parse_records(raw.get("machines_state"))
    for item in raw.get("machines") or ():
        try:
            spec = MachineSpec.model_validate(item)
        except ValidationError:
            continue  # a spec this version can't read: its record stays without identity
        rec = records.get(spec.hostname)
        if rec is not None and rec.identity() is None:
            records[spec.hostname] = written_for(rec, spec)
    return records


def machine_spec_of(state: Mapping[str, Any]) -> MachineSpec | None:
    """A MaasMachine's spec from its inputs or state (None: unknown in a preview, or unreadable)."""
    raw = state.get("machine")
    if raw is None or has_unknown(raw):
        return None
    try:
        return MachineSpec.model_validate(plain(raw))
    except ValidationError:
        return None


def machine_record(state: Mapping[str, Any], system_id: str | None = None) -> MachineRecord | None:
    """A MaasMachine's record from its state: the record fields at the top of its outputs, the identity
    and spec fingerprint of the spec it was written for (its `machine` input); None when unreadable."""
    raw = plain(state)
    spec = machine_spec_of(raw)
    hostname = spec.hostname if spec is not None else str(raw.get("hostname") or "")
    record = MachineRecord.parse(hostname, {**raw, "system_id": system_id or raw.get("system_id")})
    return written_for(record, spec) if record is not None and spec is not None else record
