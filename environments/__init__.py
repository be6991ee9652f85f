"""The environment model: validated once, compiled into an immutable `Environment`.

This package's public surface is loading and validating: `load_environment`, `validate_environment`,
`declared_environments`, the compiled `Environment` and the `EnvironmentInvalid` it raises. Every other name
is imported from the module that defines it (`environments.findings.Code`, `environments.model.HostRole`).
"""

from .findings import EnvironmentInvalid
from .loader import declared_environments, load_environment, validate_environment
from .model import Environment

__all__ = [
    "Environment",
    "EnvironmentInvalid",
    "declared_environments",
    "load_environment",
    "validate_environment",
]
