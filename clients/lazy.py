"""Attributes of a client package that load their submodule on first use (PEP 562).

The HTTP clients pull in heavy stacks (python-libmaas with aiohttp; httpx with rich and pygments) that the
program and a preview's provider plugin mostly never call, so their packages name them here and import them
only when a caller first reaches for one (issues 18 and 29).
"""

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, namespace: dict[str, Any], table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: `table` maps each lazy name to the relative submodule defining it.

    The first lookup imports the submodule and stores the value in `namespace` (the package's globals), so
    later lookups never reach this function.
    """

    def __getattr__(name: str) -> Any:
        submodule = table.get(name)
        if submodule is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(submodule, package), name)
        namespace[name] = value
        return value

    return __getattr__
