"""The environment model: validated once, compiled into an immutable `Environment`.

This package's public surface is loading and validating: `load_environment`, `validate_environment`,
`declared_environments`, the compiled `Environment` and the `EnvironmentInvalid` it raises. Every other name
is imported from the module that defines it (`environments.findings.Code`, `environments.model.HostRole`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .findings import EnvironmentInvalid
    from .loader import declared_environments, load_environment, validate_environment
    from .model import Environment

# Loaded when first named (PEP 562): the providers import `environments.coded`, `findings`, `ca_paths` and
# `rules_policy`, and importing a submodule runs this file first; a provider plugin never loads an environment,
# so the loader, YAML and the model stay out of its imports (issue 29).
_LAZY = {"EnvironmentInvalid": ".findings", "declared_environments": ".loader", "load_environment": ".loader",
         "validate_environment": ".loader", "Environment": ".model"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "Environment",
    "EnvironmentInvalid",
    "declared_environments",
    "load_environment",
    "validate_environment",
]
