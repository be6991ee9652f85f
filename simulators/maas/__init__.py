"""MAAS simulator: a MAAS 2.0 API over real HTTP, for the `local` stack and the tests.

    from simulators.maas import MaasSimulator, AdminClient, SimInventory

See docs/maas-simulator.md.
"""

from .admin import AdminClient, AdminError
from .enroll import EnrollBackend, MachineBackend
from .enums import LinkMode, NodeStatus, PowerState
from .faults import ApiErrorBurst, ApiFaults, MachineFaults, SimFaults
from .inventory import InventoryError, MachineSpec, SimInventory, demo_inventory
from .lifecycle import PhaseDurations
from .simulator import MaasSimulator

__all__ = [
    "AdminClient", "AdminError", "ApiErrorBurst", "ApiFaults", "EnrollBackend", "InventoryError", "LinkMode",
    "MachineBackend", "MachineFaults",
    "MachineSpec", "MaasSimulator", "NodeStatus", "PhaseDurations", "PowerState", "SimFaults", "SimInventory",
    "demo_inventory",
]
