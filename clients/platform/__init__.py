"""Typed client of the GPUaaS platform API.

from clients.platform import PlatformClient, PlatformApiError, models
with PlatformClient(url, token) as api:
    site = api.find_site("site-a") or api.create_site(models.MaasSiteCreate(...))
"""

from typing import TYPE_CHECKING, Any

from . import models
from .errors import PlatformApiError
from .retry import RetryPolicy

if TYPE_CHECKING:
    from .client import CLIENT_METHODS, PlatformClient
    from .transport import new_idempotency_key

# The client and its transport (httpx, which with its CLI extra imports rich and pygments: ~0.1 s) load on
# first use: the program and a preview's provider plugin import every provider module and most talk to no
# platform (issue 29; as clients/maas does).
_LAZY = {"CLIENT_METHODS": ".client", "PlatformClient": ".client", "new_idempotency_key": ".transport"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CLIENT_METHODS",
    "PlatformApiError",
    "PlatformClient",
    "RetryPolicy",
    "models",
    "new_idempotency_key",
]
