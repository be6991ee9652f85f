"""What the lifecycle needs from MAAS and from the platform, as narrow protocols.

`clients.maas.MaasClient` implements `MachineOps` (the views and `MaasError` are MAAS's vocabulary
and live there); `runtime.PlatformEnrollment` backs `Enrollment` over the platform client. The
lifecycle calls only these protocols, so tests can drive it with the simulators or with fakes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, ConfigDict, SecretStr

from clients.maas import (
    EventView,
    MachineDetail,
    MachineView,
    PortError,
    PowerSettings,
    ScriptResultView,
)

if TYPE_CHECKING:  # clients/maas/site.py loads python-libmaas: the HTTP stack loads when a call makes a client
    from clients.maas import StaticHolding


class _View(BaseModel):
    model_config = ConfigDict(frozen=True)


class EnrollmentError(PortError):
    """A platform API call failed (message carries the envelope's code and correlation id)."""


class MachineOps(Protocol):
    # Bulk lookups: one request for many keys, never a list of all machines per machine.
    def by_hostnames(self, hostnames: list[str]) -> list[MachineView]: ...
    def by_macs(self, macs: list[str]) -> list[MachineView]: ...
    def by_power_addresses(self, addresses: list[str]) -> dict[str, str]:
        """power address -> system_id."""
        ...

    def power_address_matches(self, addresses: list[str]) -> dict[str, list[str]]:
        """power address -> every system_id with it (several: an ambiguous match)."""
        ...

    def read_many(self, system_ids: list[str]) -> list[MachineView]: ...
    def poll_many(
        self, system_ids: list[str], detail_when: Callable[[MachineView], bool]
    ) -> list[tuple[MachineView, MachineDetail | None]]:
        """`read_many`, plus interfaces and block devices for the machines `detail_when` picks (the same
        one request: MAAS's machine list carries them; parsing them for every machine is not free)."""
        ...

    def with_tag(self, tag: str) -> list[MachineView]: ...
    def detail(self, system_id: str) -> MachineDetail: ...
    def create(
        self,
        *,
        hostname: str,
        pxe_mac: str,
        power_type: str,
        power_address: str,
        power_user: str | None,
        power_pass: str | None,
        commission: bool,
    ) -> MachineView: ...
    def accept(self, system_id: str) -> None: ...
    def commission(self, system_id: str, commissioning_scripts: list[str], testing_scripts: list[str]) -> None: ...
    def set_hostname(self, system_id: str, hostname: str) -> None: ...
    def set_boot_disk(self, system_id: str, block_device_id: int) -> None: ...
    def set_storage_layout(
        self, system_id: str, layout: str, boot_device_id: int, root_size_gb: int | None
    ) -> None: ...
    def link_static(self, system_id: str, interface_id: int, subnet_cidr: str, address: str) -> None: ...
    def static_holdings(self, cidrs: set[str]) -> list[StaticHolding]:
        """Every STATIC address MAAS holds on these subnets (who holds a RoCE address that a link was refused)."""
        ...

    def unlink(self, system_id: str, interface_id: int, link_id: int) -> None: ...
    def set_owner_data(self, system_id: str, data: dict[str, str | None]) -> None: ...
    def deploy(
        self, system_id: str, *, user_data: bytes, distro_series: str, hwe_kernel: str | None, enable_hw_sync: bool
    ) -> None: ...
    def release(self, system_id: str, *, erase: bool, secure_erase: bool, quick_erase: bool, force: bool) -> None: ...
    def power_off(self, system_id: str) -> None: ...
    def abort(self, system_id: str) -> None: ...
    def last_event(self, system_id: str) -> str: ...
    def recent_events(self, system_id: str, limit: int = 10) -> list[EventView]: ...
    def script_results(self, system_id: str, kind: str = "testing") -> list[ScriptResultView]:
        """Each script's result in the machine's current commissioning or testing run ([] if unknown)."""
        ...
    def set_tags(self, system_id: str, tags: list[str], remove: list[str] | None = None) -> None: ...
    def tag_machines(self, tag: str, *, add: Sequence[str] = (), remove: Sequence[str] = ()) -> None:
        """One tag added to and removed from many machines in one request."""
        ...

    def set_power(
        self, system_id: str, *, power_type: str, power_address: str, power_user: str | None, power_pass: str | None
    ) -> None: ...
    def power_settings(self, system_id: str) -> PowerSettings: ...


class EnrollmentToken(_View):
    node_id: str
    token: SecretStr
    expires_at: float


class BootstrapView(_View):
    """The node's own bootstrap report, as the platform's node record holds it."""

    bundle_digest: str
    ok: bool
    failed_step: str | None = None
    output_tail: str = ""
    """The failed step's output tail (empty when ok)."""
    runner: str = "launcher"
    steps: tuple[str, ...] = ()
    pending: bool = False
    """Enrolled, the launcher's post-enrollment steps (node agent install) still running: not ok, not failed."""
    validation_digest: str | None = None
    """The digest of the bundle whose validation scripts the node ran (None: a report from before it was sent)."""


class NodeState(_View):
    status: str
    bootstrap: BootstrapView | None = None
    agent_seen: bool = False
    """The platform has taken a heartbeat of the node's agent since this deploy (a node is ready only then)."""


class Enrollment(Protocol):
    def mint_token(self, *, site: str, hostname: str, system_id: str, ttl_seconds: int) -> EnrollmentToken: ...
    def node_status(self, node_id: str) -> str:
        """The platform's node status (bootstrap_issued, enrolling, active, ...; "unknown" if none)."""
        ...

    def node_state(self, node_id: str) -> NodeState:
        """The node's status and the bootstrap report its launcher sent (None until it sent one)."""
        ...

    def remove_node(self, node_id: str) -> None:
        """Ask the platform to remove the node record (idempotent)."""
        ...

    def find_node(self, *, system_id: str) -> str | None:
        """The node id the platform holds for this MAAS machine (None if it has none): how a run
        killed between the deploy call and the owner-data write finds its node again."""
        ...
