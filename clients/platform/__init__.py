"""Typed client of the GPUaaS platform API.

from clients.platform import PlatformClient, PlatformApiError, models
with PlatformClient(url, token) as api:
    site = api.find_site("site-a") or api.create_site(models.MaasSiteCreate(...))
"""

from clients.platform.transport import new_idempotency_key

from . import models
from .client import CLIENT_METHODS, PlatformClient
from .errors import PlatformApiError
from .retry import RetryPolicy

__all__ = [
    "CLIENT_METHODS",
    "PlatformApiError",
    "PlatformClient",
    "RetryPolicy",
    "models",
    "new_idempotency_key",
]
