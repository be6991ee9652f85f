"""Property-based contract test: schemathesis generates requests from contracts/platform-api.yaml
and checks every simulator response against it (status codes, envelope, schemas, headers).

Bounded: a fixed number of examples per operation, no shrinking, so the run stays well under a minute.
Positive cases are aimed at real resources (the bootstrapped project, a real site) so they go past
the authorization layer; negative cases are sent as generated.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import schemathesis
from schemathesis.generation import GenerationMode

from clients.platform import PlatformClient
from clients.platform import models as m
from clients.platform.catalogue import BY_OPERATION_ID
from clients.platform.contract import CONTRACT_PATH
from simulators.platform import PlatformSimulator, SimCredentials

MAX_EXAMPLES = 12
# 422 codes for rules a JSON Schema cannot state (state- or adapter-dependent). Schema-valid data may
# meet these; any other rejection of schema-valid data (e.g. validation_failed) is a contract bug.
SEMANTIC_REJECTIONS = frozenset(
    {
        "unknown_component_key",
        "component_cardinality",
        "component_missing",
        "duplicate_component_key",
        "too_many_placements",
        "duplicate_placement",
        "profile_not_in_site",
        "node_not_available",
        "operation_not_supported",
        "invalid_cursor",
        # registerUiRoute: a component the app's adapter does not have, or a port it does not expose there.
        "route_rejected",
    }
)

schema = schemathesis.openapi.from_path(CONTRACT_PATH)
schema.config.generation.update(
    max_examples=MAX_EXAMPLES,
    no_shrink=True,
    deterministic=True,
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
)


class World:
    def __init__(self, sim: PlatformSimulator, creds: SimCredentials, site_id: str) -> None:
        self.sim, self.creds, self.site_id = sim, creds, site_id


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with PlatformSimulator(time_scale=0.01) as sim:
        creds = sim.bootstrap()
        with PlatformClient(sim.url, creds.platform_admin) as admin:
            site = admin.create_site(
                m.MaasSiteCreate(
                    name="contract-site",
                    maas_url="http://maas:5240/MAAS",
                    credential_ref=m.VaultCredentialRef(path="maas/contract"),
                )
            )
        yield World(sim, creds, site.site_id)


def schema_valid_data_accepted(ctx: object, response: schemathesis.Response, case: schemathesis.Case) -> None:
    """positive_data_acceptance, minus the documented semantic rejections."""
    meta = case._meta
    if (
        meta is None
        or meta.generation.mode is not GenerationMode.POSITIVE
        or response.status_code not in (400, 415, 422)
    ):
        return
    code = response.json().get("code")
    assert code in SEMANTIC_REJECTIONS, f"schema-valid request rejected with {response.status_code} {code}"


@schema.parametrize()
def test_simulator_honours_the_contract(case: schemathesis.Case, world: World) -> None:
    endpoint = BY_OPERATION_ID[case.operation.definition.raw["operationId"]]
    headers = {}
    meta = case._meta
    positive = meta is not None and meta.generation.mode is GenerationMode.POSITIVE
    if endpoint.roles and (positive or "Authorization" in (case.headers or {})):
        # Negative cases that drop the Authorization header on purpose keep it dropped.
        token = world.creds.tenant_admin if endpoint.project_scoped else world.creds.platform_admin
        headers["Authorization"] = f"Bearer {token}"
    if positive:
        if "project_id" in case.path_parameters:
            case.path_parameters["project_id"] = world.creds.project_id
        if "site_id" in case.path_parameters:
            case.path_parameters["site_id"] = world.site_id
    if positive and endpoint.mutation:
        # Key uniqueness is server state the generator cannot know: a reused key with another body is
        # (correctly) 422 idempotency_key_reused. Idempotency itself is tested in test_idempotency.py.
        headers[m.IDEMPOTENCY_HEADER] = f"contract-{uuid.uuid4().hex}"
    case.call_and_validate(
        base_url=world.sim.url,
        headers=headers,
        excluded_checks=[schemathesis.checks.positive_data_acceptance],
        additional_checks=[schema_valid_data_accepted],
    )
