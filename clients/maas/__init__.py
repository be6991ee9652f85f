"""MAAS: the one package that talks to a MAAS region (python-libmaas over HTTP).

`client.MaasClient` (machines), `site.MaasSiteClient` (node scripts, subnets, static links), and
`vocabulary` (statuses, views, `MaasError`). Import from here: `from clients.maas import MaasClient`.
"""

from typing import TYPE_CHECKING

from clients.lazy import lazy_attributes

from .budget import DEFAULT_BUDGET, MaasUnavailable, RetryBudget
from .vocabulary import (
    INSTALL_FAILURE_TYPE,
    INSTALLATION_FAILED,
    MAAS_LABELS,
    BlockDeviceView,
    EventView,
    InterfaceView,
    MaasError,
    MaasStatus,
    MachineDetail,
    MachineView,
    PortError,
    PowerSettings,
    ScriptResultView,
    ScriptStatus,
    datasource_failure,
    timespan,
    timespan_seconds,
)

if TYPE_CHECKING:
    from .client import MaasClient
    from .site import MaasSiteClient, MachineNics, NicView, ScriptView, StaticHolding, SubnetView

# The clients (python-libmaas with its aiohttp, httpx: ~0.3 s to import) load on first use: a preview of a large stack
# imports every provider module and talks to no MAAS (issue 18).
_LAZY = {"MaasClient": ".client", "MaasSiteClient": ".site", "MachineNics": ".site", "NicView": ".site",
         "ScriptView": ".site", "StaticHolding": ".site", "SubnetView": ".site"}

__getattr__ = lazy_attributes(__name__, globals(), _LAZY)

__all__ = [
    "DEFAULT_BUDGET",
    "INSTALLATION_FAILED",
    "INSTALL_FAILURE_TYPE",
    "EventView",
    "datasource_failure",
    "MAAS_LABELS",
    "MaasUnavailable",
    "RetryBudget",
    "BlockDeviceView",
    "InterfaceView",
    "MaasClient",
    "MaasError",
    "MaasSiteClient",
    "MaasStatus",
    "MachineDetail",
    "MachineNics",
    "MachineView",
    "NicView",
    "PortError",
    "PowerSettings",
    "ScriptResultView",
    "ScriptStatus",
    "ScriptView",
    "StaticHolding",
    "SubnetView",
    "timespan",
    "timespan_seconds",
]
