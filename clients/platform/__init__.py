"""Typed client of the GPUaaS platform API.

from clients.platform import PlatformClient, PlatformApiError, models
with PlatformClient(url, token) as api:
    site = api.find_site("site-a") or api.create_site(models.MaasSiteCreate(...))
"""

from typing import TYPE_CHECKING

from clients.lazy import lazy_attributes

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

__getattr__ = lazy_attributes(__name__, globals(), _LAZY)

__all__ = [
    "CLIENT_METHODS",
    "PlatformApiError",
    "PlatformClient",
    "RetryPolicy",
    "models",
    "new_idempotency_key",
]
