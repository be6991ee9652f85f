"""MAAS: the one package that talks to a MAAS region (python-libmaas over HTTP).

`client.MaasClient` (machines), `site.MaasSiteClient` (node scripts, subnets, static links), and
`vocabulary` (statuses, views, `MaasError`). Import from here: `from clients.maas import MaasClient`.
"""

from .client import MaasClient
from .retry import DEFAULT_BUDGET, MaasUnavailable, RetryBudget
from .site import MaasSiteClient, MachineNics, NicView, ScriptView, StaticHolding, SubnetView
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
)

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
]
