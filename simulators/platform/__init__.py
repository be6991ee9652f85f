"""The GPUaaS platform API simulator: `PlatformSimulator(time_scale=..., faults=...)`.

Runs standalone (`python -m simulators.platform`) or as the `platform_sim` pytest fixture
(`tests.fixtures.platform_sim`). It serves `contracts/platform-api.yaml` and a test-only admin
view under /_sim/.
"""

from .faults import ErrorBurst, FaultPlan, Latency, OperationFailure
from .server import PlatformSimulator, SimCredentials

__all__ = ["ErrorBurst", "FaultPlan", "Latency", "OperationFailure", "PlatformSimulator", "SimCredentials"]
