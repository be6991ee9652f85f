"""HostConvergence: the Pulumi adapter (spec, planning and the run: providers/hosts/convergence.py).

This module path and its Provider class are part of the state contract (Pulumi pickles them).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CheckFailure, CheckResult, DiffResult, ReadResult
from pydantic import ValidationError

from environments.coded import CodedError
from providers.base import KindProvider
from providers.common import spec_failures, vault_reader
from providers.hosts.convergence import (
    SOURCE,
    ConvergenceFailed,
    ConvergenceResult,
    HostConvergenceSpec,
    HostOutcome,
    RoleRulesViolated,
    SecretReader,
    converge,
    plan,
    where,
)
from providers.hosts.failures import HostFail
from providers.kind import KindDescriptor, register

DESCRIPTOR = register(KindDescriptor(
    name="HostConvergence",
    identity=("environment",),
    in_place=("hosts", "ssh_key_ref", "artifacts", "apt_source", "secret_refs", "runner_token_refs", "extra_vars",
              "vault", "timeout_s", "machines", "content_hash"),
    ignored=("preview_check",),  # changes what a preview prints, not the hosts
    summary_outputs=("changed_total",),
    doc="ansible-runner converged the environment's hosts to their roles",
    notes={"content_hash": "roles, playbook, inventory and vars: a change of any reruns the playbook",
           "hosts": "the compiled inventory: an address or role change shows here",
           "machines": "system_id and deploy fingerprint of each host that is a MAAS machine: a reimage reconverges"},
))


def _outputs(spec: HostConvergenceSpec, result: ConvergenceResult) -> dict[str, Any]:
    return {**spec.model_dump(mode="json"), "content_hash": result.content_hash,
            "host_reports": {h: r.model_dump(mode="json") for h, r in result.hosts.items()},
            "changed_total": sum(r.changed for r in result.hosts.values()), "duration_s": result.duration_s}


INPUTS = (*HostConvergenceSpec.model_fields, "content_hash")


class HostConvergenceProvider(KindProvider[HostConvergenceSpec]):
    """Thin adapter. Nothing on self but the configure()d Vault credentials config (DESIGN 3.1)."""

    serialize_as_secret_always = True  # as state written before holds this provider (a secret)
    descriptor = DESCRIPTOR
    spec_model = HostConvergenceSpec
    inputs = INPUTS

    def _reader(self, spec: HostConvergenceSpec) -> SecretReader:
        if spec.vault is None:
            raise HostFail.NO_VAULT(where(spec), "HostConvergence needs the environment's vault settings")
        return vault_reader(spec.vault, getattr(self, "_credentials", None)).read

    def check_inputs(self, news: dict[str, Any]) -> dict[str, Any] | None:
        raw = super().check_inputs(news)  # the outputs recorded next to the inputs are not the spec's
        return None if raw is None else {k: v for k, v in raw.items() if k in HostConvergenceSpec.model_fields}

    def source(self, news: dict[str, Any]) -> str:
        return f"{SOURCE}[{news.get('environment')}]"

    def check_spec(self, olds: dict[str, Any], news: dict[str, Any], spec: HostConvergenceSpec) -> CheckResult:
        try:
            p = plan(spec)
        except ValidationError as e:
            return CheckResult(news, spec_failures(e, self.source(news)))
        except RoleRulesViolated as e:
            return CheckResult(news, [CheckFailure("hosts", str(e))])
        except CodedError as e:  # HST002: a machine identity for a host the inventory lacks (plan())
            return CheckResult(news, [CheckFailure("machines", str(e))])
        if spec.preview_check and not olds:
            # A first creation has no diff() call: its preview is the check-mode run, here.
            self._print_preview(self._check_run(spec))
        return CheckResult({**news, "content_hash": p.content_hash}, [])

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        result = super().diff(id_, olds, news)
        if result.changes and self.check_inputs(news) is not None and (spec := self.spec_of(news)).preview_check:
            self._print_preview(self._check_run(spec))
        return result

    @staticmethod
    def _print_preview(result: ConvergenceResult) -> None:
        for c in result.changes:
            print(f"[host-convergence preview] {c.host}: would change: {c.task}"
                  + (f"\n{c.diff}" if c.diff else ""), file=sys.stderr, flush=True)
        changed_hosts = sorted(h for h, r in result.hosts.items() if r.changed)
        bad = sorted(f"{h} ({r.outcome.value})" for h, r in result.hosts.items()
                     if r.outcome in (HostOutcome.FAILED, HostOutcome.UNREACHABLE))
        print(f"[host-convergence preview] hosts that would change: {', '.join(changed_hosts) or 'none'}"
              + (f"; check run failed on: {', '.join(bad)}" if bad else ""), file=sys.stderr, flush=True)

    def _check_run(self, spec: HostConvergenceSpec) -> ConvergenceResult:
        try:
            return converge(spec, self._reader(spec), check=True, on_event=None)
        except ConvergenceFailed as e:
            return e.result  # a preview reports; the real run is the one that fails

    def converge(self, props: dict[str, Any], olds: dict[str, Any] | None) -> ConvergenceResult:
        spec = self.spec_of(props)
        return converge(spec, self._reader(spec))

    def id_of(self, props: dict[str, Any], result: Any) -> str:
        return f"hostconvergence-{self.spec_of(props).environment}"

    def outputs(self, props: Mapping[str, Any], result: Any) -> dict[str, Any]:
        return _outputs(self.spec_of(props), result)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, props)  # nothing to read back: the next up's check-mode run is the observation

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        # Hosts are not un-configured: rebuilding a host is reimaging it (MaasMachine), not an ansible run.
        return None


class HostConvergence(pulumi.dynamic.Resource, module="gpuaas", name="HostConvergence"):
    content_hash: pulumi.Output[str]
    host_reports: pulumi.Output[dict[str, Any]]
    """hostname -> ok/changed/failed/unreachable counts and outcome of the last run."""
    changed_total: pulumi.Output[int]

    def __init__(self, name: str, spec: HostConvergenceSpec, opts: pulumi.ResourceOptions | None = None,
                 machines: Mapping[str, Any] | None = None) -> None:
        """`machines`: hostname -> Output of {system_id, deploy_fingerprint} of the MAAS machine a host is (the
        machine's own outputs, so this resource depends on it); replaces `spec.machines`."""
        props = {**spec.model_dump(mode="json"), "content_hash": None, "host_reports": None, "changed_total": None,
                 "duration_s": None}
        if machines:
            props["machines"] = dict(machines)
        super().__init__(HostConvergenceProvider(), name, props, opts)
