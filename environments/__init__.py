"""The environment model: validated once, compiled into an immutable `Environment`."""

from .findings import CATALOGUE, Code, EnvironmentInvalid, Finding, Level
from .loader import declared_environments, load_environment, validate_environment
from .model import (
    Environment,
    FabricMode,
    HostRole,
    LogicalRole,
    Tier,
)

__all__ = [
    "CATALOGUE",
    "Code",
    "Environment",
    "EnvironmentInvalid",
    "FabricMode",
    "Finding",
    "HostRole",
    "Level",
    "LogicalRole",
    "Tier",
    "declared_environments",
    "load_environment",
    "validate_environment",
]
