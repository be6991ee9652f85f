"""Builds, per provider call, what the lifecycle runs with: a MAAS client keyed from Vault, the
platform's enrollment port, the policy and deadlines. Nothing here is kept on a provider object
(it would be pickled into state); all of it is made fresh for each call.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import clients.maas
import clients.platform
from clients.maas import DEFAULT_BUDGET
from clients.platform import PlatformApiError, models
from clients.s3 import ArtifactStore, s3_credentials
from clients.vault import VaultCredentials, VaultReader
from environments.ca_paths import resolve_ca
from providers.common import vault_reader
from providers.machines.records import Context

from .capacity import BUSY
from .lease import LeaseTimes, SlotLease, lease_path
from .node_trust import node_ca_bundle
from .ports import BootstrapView, EnrollmentError, EnrollmentToken, NodeState
from .records import Presign
from .spec import BundlePin, Connection, Deadlines, LifecyclePolicy, MachineSpec

if TYPE_CHECKING:  # the HTTP clients load when a call first makes one (clients/maas, clients/platform)
    from clients.maas import MaasSiteClient
    from clients.platform import PlatformClient


class PlatformEnrollment:
    """The lifecycle's `Enrollment` port over the platform API client."""

    def __init__(self, client: PlatformClient, site_id: str, profile_id: str) -> None:
        self._client, self._site_id, self._profile_id = client, site_id, profile_id

    def mint_token(self, *, site: str, hostname: str, system_id: str, ttl_seconds: int) -> EnrollmentToken:
        try:
            grant = self._client.mint_enrollment_token(
                self._site_id,
                models.EnrollmentTokenRequest(profile_id=self._profile_id, hostname=hostname, system_id=system_id),
            )
        except PlatformApiError as e:
            raise _port_error(e, system_id) from None
        return EnrollmentToken(
            node_id=grant.node_id, token=grant.enrollment_token, expires_at=grant.expires_at.timestamp()
        )

    def node_status(self, node_id: str) -> str:
        try:
            return self._client.get_node(node_id).status.value
        except PlatformApiError as e:
            if e.status == 404:
                return "unknown"
            raise _port_error(e, None) from None

    def node_state(self, node_id: str) -> NodeState:
        try:
            node = self._client.get_node(node_id)
        except PlatformApiError as e:
            if e.status == 404:
                return NodeState(status="unknown")
            raise _port_error(e, None) from None
        return NodeState(status=node.status.value, bootstrap=_bootstrap_view(node.bootstrap),
                         agent_seen=node.agent is not None)

    def find_node(self, *, system_id: str) -> str | None:
        try:
            nodes = self._client.list_nodes(site_id=self._site_id, system_id=system_id)
        except PlatformApiError as e:
            raise _port_error(e, system_id) from None
        live = [n for n in nodes if n.status.value != "deleted"]
        return live[0].node_id if live else None

    def remove_node(self, node_id: str) -> None:
        try:
            self._client.remove_node(node_id)
        except PlatformApiError as e:
            if e.status != 404:
                raise _port_error(e, None) from None


def _bootstrap_view(report: models.BootstrapReport | None) -> BootstrapView | None:
    if report is None:
        return None
    failed = next((st for st in report.steps if st.step == report.failed_step), None)
    return BootstrapView(
        bundle_digest=report.bundle_digest,
        ok=report.outcome is models.BootstrapOutcome.SUCCEEDED,
        failed_step=report.failed_step,
        output_tail=failed.output_tail if failed else "",
        runner=report.runner.value,
        steps=tuple(st.step for st in report.steps),
        pending=report.outcome is models.BootstrapOutcome.ENROLLED,
        validation_digest=report.validation_bundle_digest,
    )


def bundle_presigner(store: ArtifactStore) -> Presign:
    """(spec, ttl[, pin]) -> a presigned GET URL of exactly the spec's bundle version (`s3://bucket/key`
    ref, version from its `launcher_url`), or of the pinned bundle `pin` (its validation bundle).
    Signing is local; the URL lives `ttl` seconds."""

    def presign(spec: MachineSpec, ttl_seconds: int, pin: BundlePin | None = None) -> str:
        ref_text, url = (pin.ref, pin.url) if pin is not None else (spec.deploy.bundle_ref, spec.deploy.launcher_url)
        ref = urlsplit(ref_text)
        version = parse_qs(urlsplit(url).query).get("versionId", [None])[0]
        if ref.scheme != "s3" or ref.netloc != store.location.bucket:
            raise EnrollmentError(
                f"bundle ref {ref_text} is not in the artifact store's bucket "
                f"{store.location.bucket!r}; fix artifact_store.bucket or the bundle"
            )
        return store.presign_get(ref.path.lstrip("/"), version, ttl_seconds)

    return presign


def _port_error(e: PlatformApiError, system_id: str | None) -> EnrollmentError:
    return EnrollmentError(f"platform API: {e}", status=e.status, system_id=system_id)


def log(message: str) -> None:
    """Provider stderr reaches the Pulumi CLI (pulumi.log has no engine connection here)."""
    print(message, file=sys.stderr, flush=True)


def progress(line: str) -> None:
    """Progress lines go to provider stdout, which the Pulumi CLI shows while the step runs."""
    print(line, file=sys.stdout, flush=True)


def maas_client(
    conn: Connection, credentials: VaultCredentials | None, vault: VaultReader | None = None, time_scale: float = 1.0
) -> MaasSiteClient:
    """MAAS alone (refresh, in-place edits): one Vault read for its key, no platform client. Safe
    calls ride out outages within `DEFAULT_BUDGET` (scaled with the machine time scale)."""
    reader = vault or vault_reader(conn.vault, credentials)
    key = reader.read(conn.maas.api_key_path)
    return clients.maas.MaasSiteClient(
        conn.maas.maas_url,
        key.get_secret_value(),
        tls_verify=conn.maas.tls_verify,
        ca_bundle=resolve_ca(conn.maas.ca_bundle),
        site=conn.maas.site,
        retry=DEFAULT_BUDGET.scaled(time_scale),
    )


def bmc_reader(vault: VaultReader) -> Callable[[str], tuple[str, str]]:
    def bmc_credentials(ref: str) -> tuple[str, str]:
        # The ref holds JSON {"user": ..., "password": ...} (one secret, one reference).
        blob = vault.read_json(ref)
        return blob["user"].get_secret_value(), blob["password"].get_secret_value()

    return bmc_credentials


def build_context(
    conn: Connection,
    policy: LifecyclePolicy,
    credentials: VaultCredentials | None,
    time_scale: float,
    label: str = "machines",
    owner: str | None = None,
) -> tuple[Context, MaasSiteClient, PlatformClient]:
    vault = vault_reader(conn.vault, credentials)
    maas = maas_client(conn, credentials, vault, time_scale)
    platform = clients.platform.PlatformClient(
        conn.platform.url, vault.read(conn.platform.token_path), ca_bundle=resolve_ca(conn.platform.ca_bundle)
    )
    ctx = Context(
        bmc_credentials=bmc_reader(vault),
        ops=maas,
        enrollment=PlatformEnrollment(platform, conn.platform_site_id, conn.platform_profile_id),
        policy=policy,
        deadlines=Deadlines().scaled(time_scale),
        platform_url=conn.platform.url,
        clock=time.monotonic,
        log=log,
        progress=progress,
        label=label,
        presign=_presigner(conn, vault),
        owner=owner,
        node_ca=node_ca(conn),
        read_secret=lambda ref: vault.read(ref).get_secret_value(),
        lease=slot_leases(vault, maas, lease_holder(owner or label), LeaseTimes().scaled(time_scale)),
    )
    return ctx, maas, platform


def lease_holder(owner: str) -> str:
    """Who holds a slot: the provider process (`<stack>@<host>:<pid>`; owner is `<stack>/<resource>`), the
    same for every resource it serves, so its one renewer and any of its calls can renew and give back."""
    return f"{owner.split('/')[0]}@{socket.gethostname()}:{os.getpid()}"


def slot_leases(
    vault: VaultReader, maas: MaasSiteClient, holder: str, times: LeaseTimes
) -> Callable[[str, str], SlotLease]:
    """(site, profile) -> its batch_max_parallel lease in Vault (`<kv mount>/leases/<site>/<profile>`).
    An expired holder's machine that MAAS still shows in a heavy stage keeps its slot (one bulk read)."""
    made: dict[str, SlotLease] = {}

    def still_busy(system_ids: set[str]) -> set[str]:
        return {v.system_id for v in maas.read_many(sorted(system_ids)) if v.status in BUSY}

    def lease(site: str, profile: str) -> SlotLease:
        path = lease_path(site, profile)
        if path not in made:
            where = f"{vault.settings.address} mount {vault.settings.kv_mount!r} path {path!r}"
            made[path] = SlotLease(vault, path, holder, times, where=where, still_busy=still_busy)
        return made[path]

    return lease


def node_ca(conn: Connection) -> str:
    """The CAs a node needs for its first https calls: the platform's and the artifact store's (the files the
    environment's ca_bundles name, read now: a deploy carries the CA as it is when the machine deploys)."""
    store = conn.store.ca_bundle if conn.store is not None else None
    return node_ca_bundle({"ca_bundles.platform": resolve_ca(conn.platform.ca_bundle),
                           "ca_bundles.s3": resolve_ca(store)})


def _presigner(conn: Connection, vault: VaultReader) -> Presign | None:
    """Lazy: the store's credentials are read from Vault at the first deploy of the call, not for
    calls that deploy nothing (refresh, teardown)."""
    store_inputs = conn.store
    if store_inputs is None:
        return None
    made: list[Presign] = []

    def presign(spec: MachineSpec, ttl_seconds: int, pin: BundlePin | None = None) -> str:
        if not made:
            creds = s3_credentials(vault, store_inputs.credentials_path)
            made.append(bundle_presigner(ArtifactStore(store_inputs.location(), creds)))
        return made[0](spec, ttl_seconds, pin)

    return presign


@contextmanager
def session(
    conn: Connection,
    policy: LifecyclePolicy,
    credentials: VaultCredentials | None,
    time_scale: float,
    label: str = "machines",
    owner: str | None = None,
) -> Iterator[Context]:
    """One provider call's context (closed at the end: nothing is kept on the provider object)."""
    ctx, _, platform = build_context(conn, policy, credentials, time_scale, label, owner)
    try:
        yield ctx
    finally:
        platform.close()
