"""Stateful property-based contract test: schemathesis follows the contract's OpenAPI links
(create site -> profile -> read, create instance -> operation -> members -> member operation ...)
and validates every response of every sequence against the document. Bounded in examples and steps;
each example gets a fresh simulator so a sequence's outcome depends only on its own steps.

Simulated time stands still (a real second is a nanosecond of it) and moves a fixed STEP_SIM_S before each
call: operations still go pending -> running -> succeeded along a sequence, but at the same step in every
run. On the wall clock a request's answer (409 operation_in_progress or 202, hence which links and rules are
open next) depended on how fast the host ran, so the same choices could draw differently and hypothesis
stopped the run with FlakyStrategyDefinition ("Inconsistent data generation")."""

from __future__ import annotations

import os
import uuid
from typing import Any

import hypothesis
import schemathesis
from hypothesis import HealthCheck
from schemathesis.generation import GenerationMode

from clients.platform import PlatformClient
from clients.platform import models as m
from clients.platform.catalogue import BY_OPERATION_ID
from clients.platform.contract import CONTRACT_PATH
from simulators.platform import PlatformSimulator

from .test_contract_schemathesis import schema_valid_data_accepted

# 50, not 25: fixed draws are fixed per process, not per run (below); at 25 a draw followed links 0-5 times.
MAX_EXAMPLES = 50
STEP_COUNT = 8
STILL_TIME_SCALE = 1e9  # real seconds per simulated second: the clock moves only when the test moves it
STEP_SIM_S = 2.0  # simulated seconds before each call: an instance create (~8.5 s) ends within a sequence


def test_linked_sequences_honour_the_contract() -> None:
    schema = schemathesis.openapi.from_path(CONTRACT_PATH)
    hits: dict[str, int] = {}

    class Machine(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            super().setup()
            self.sim = PlatformSimulator(time_scale=STILL_TIME_SCALE).start()
            self.creds = self.sim.bootstrap()
            with PlatformClient(self.sim.url, self.creds.platform_admin) as admin:
                self.site_id = admin.create_site(
                    m.MaasSiteCreate(
                        name="stateful-site",
                        maas_url="http://maas/MAAS",
                        credential_ref=m.VaultCredentialRef(path="maas/s"),
                    )
                ).site_id

        def teardown(self) -> None:
            for op, n in self.sim.store.hits.items():
                hits[op] = hits.get(op, 0) + n
            self.sim.stop()
            super().teardown()

        def before_call(self, case: schemathesis.Case) -> None:
            self.sim.advance(STEP_SIM_S)  # time moves by steps, not by the host's speed
            # Aim at real scopes: links carry ids forward, roots get the bootstrapped project/site.
            meta = case._meta
            if meta is None or meta.generation.mode is not GenerationMode.POSITIVE:
                return  # negative cases go out as generated: steering could make them valid
            params = case.path_parameters or {}
            if "project_id" in params:
                params["project_id"] = self.creds.project_id
            if "site_id" in params and params["site_id"] not in self.sim.store.sites:
                params["site_id"] = self.site_id
            # Steer app bodies to the Slurm adapter's components (still schema-valid) so sequences
            # get past creation and follow the links to operations, members and member operations.
            op_id, body = case.operation.definition.raw["operationId"], case.body
            if op_id == "createAppInstance" and isinstance(body, dict):
                body["components"] = [
                    {"component_key": "controller", "count": 1},
                    {"component_key": "worker", "count": 2},
                ]
            if op_id == "requestMemberOperation" and isinstance(body, dict) and body.get("operation") == "add":
                body["component_key"] = "worker"

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            ep = BY_OPERATION_ID[case.operation.definition.raw["operationId"]]
            headers: dict[str, str] = {}
            meta = case._meta
            positive = meta is not None and meta.generation.mode is GenerationMode.POSITIVE
            if ep.roles and (positive or "Authorization" in (case.headers or {})):
                # Negative cases that drop the Authorization header on purpose keep it dropped.
                token = self.creds.tenant_admin if ep.project_scoped else self.creds.platform_admin
                headers["Authorization"] = f"Bearer {token}"
            if ep.mutation and positive:  # negative cases keep their (broken or missing) key
                headers[m.IDEMPOTENCY_HEADER] = f"stateful-{uuid.uuid4().hex}"
            return {"base_url": self.sim.url, "headers": headers}

        def validate_response(self, response: Any, case: schemathesis.Case, *args: Any, **kwargs: Any) -> None:
            case.validate_response(
                response,
                additional_checks=[schema_valid_data_accepted],
                excluded_checks=[schemathesis.checks.positive_data_acceptance],
                transport_kwargs=kwargs or None,
                recorder=self.recorder,
            )

    Machine.run(
        settings=hypothesis.settings(
            max_examples=MAX_EXAMPLES,
            stateful_step_count=STEP_COUNT,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[hypothesis.Phase.generate],
            # Fixed draws in the suite: the coverage checks below held in ~71 of 72 random runs, and a
            # test that fails by luck is a defect. GPUAAS_CONTRACT_EXPLORE=1 draws afresh each run.
            # "Fixed" holds for one process's history only: the sequences drawn change with what the process
            # imported before this test (not with the global random or the hash seed), so another file's
            # imports, or a worker that ran other files first, draws differently. At 25 examples one such
            # draw (a `-n 2 --dist load` run, 2026-11-28) followed no link, and the usual order followed 2;
            # at 50 the orders tried followed 6-18.
            derandomize=not os.environ.get("GPUAAS_CONTRACT_EXPLORE"),
        )
    )
    # Sequences went past the roots: things were created and then reached through links.
    assert hits.get("createMaasSite", 0) + hits.get("createAppInstance", 0) > MAX_EXAMPLES  # + setup's sites
    assert (
        sum(
            hits.get(op, 0)
            for op in ("getMaasSite", "getSiteProfile", "getOperation", "getAppInstance", "listMembers", "getNode")
        )
        > 0
    ), hits
