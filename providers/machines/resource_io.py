"""Inputs and outputs shared by the MaasMachine and MachinePool adapters (one reconciler, two shapes)."""

from __future__ import annotations

from typing import Any

from pulumi.dynamic import CheckFailure
from pydantic import BaseModel, ConfigDict, ValidationError

from providers.common import has_unknown, plain, spec_failures

from .cloud_init import user_data_digest
from .scheduler import MachineResult
from .spec import Connection, LifecyclePolicy, MachineSpec
from .status import MachineOutcome


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


def machine_state(
    spec: MachineSpec, result: MachineResult | None, conn: Connection, prior: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What state records per machine: enough to diff, refresh and resume; never a secret."""
    prior = prior or {}
    out: dict[str, Any] = {
        "hostname": spec.hostname,
        "system_id": (result.system_id if result else None) or prior.get("system_id"),
        "deploy_fingerprint": spec.deploy_fingerprint(),
        "user_data_digest": user_data_digest(spec, conn.platform.url),
        "bundle_digest": spec.deploy.bundle_digest,
    }
    if result is not None:
        out.update(
            {
                "status": result.maas_status,
                "stage": result.stage.value,
                "outcome": result.outcome.value,
                "node_id": result.node_id,
                "deploy_attempts": result.deploy_attempts,
                "adopted": result.adopted,
                "notes": list(result.notes),
                "stage_seconds": result.stage_seconds,
            }
        )
    return {k: v for k, v in out.items() if v is not None}


def failure_report(results: list[MachineResult]) -> str:
    failed = [r for r in results if r.outcome in (MachineOutcome.FAILED, MachineOutcome.TIMED_OUT)]
    lines = [f"{len(failed)} of {len(results)} machine(s) did not converge:"]
    lines += [
        f"  - {r.reason or f'{r.hostname}: {r.outcome.value} in {r.stage.value} (MAAS: {r.maas_status})'}"
        for r in failed
    ]
    lines.append("Machines that converged are recorded; the next `up` resumes the others (nothing is duplicated).")
    return "\n".join(lines)


def any_failed(results: list[MachineResult]) -> bool:
    return any(r.outcome in (MachineOutcome.FAILED, MachineOutcome.TIMED_OUT) for r in results)
