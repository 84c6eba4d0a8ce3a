"""Model Factory HTTP API: settings, httpx clients, wire models, errors.

- :mod:`tools.platform.settings` - :func:`resolve_settings` -> :class:`Settings` (read-only,
  ``prime`` 0.18.0 precedence).
- :mod:`tools.platform.client` - :class:`PlatformClient` (``{base}/api/v1``) and
  :class:`TracesClient` (``{traces_url}/api/v1``).
- :mod:`tools.platform.bounds` - :class:`Timeouts`, :class:`Deadline`, :class:`RetryPolicy` (no httpx).
- :mod:`tools.platform.wire` - pydantic wire models and the request-body builders
  (:func:`build_create_body`, :func:`build_prepare_body`).
- :mod:`tools.platform.errors` - the typed error set.
- :mod:`tools.platform.files` - :func:`~tools.platform.files.write_atomic` (a file appears whole or not at all).
- :mod:`tools.platform.paging` - walks over paged lists that always end (:class:`~tools.platform.paging.CursorWalk`,
  :class:`~tools.platform.paging.NumberedWalk`).

Imports nothing from ``tools`` outside ``tools.platform``. Importing this package is
cheap: the client module (httpx, tenacity) loads on first access to ``PlatformClient`` or
``TracesClient`` (httpx and tenacity cost ~60 ms of a local tool's start; none of them needs it).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from tools.platform.bounds import Deadline, RetryPolicy, Timeouts
from tools.platform.errors import (
    Ambiguous,
    Conflict,
    CredentialsMissing,
    Forbidden,
    InvalidRequest,
    NotFound,
    PaymentRequired,
    PlatformError,
    RateLimited,
    Unauthorized,
    Unavailable,
)
from tools.platform.settings import Settings, resolve_settings

# httpx imports its optional command-line client (click, rich, pygments: ~40 ms) when those
# happen to be installed; we never use it. A None entry makes that import fail as if they were
# absent, so httpx falls back to its stub ``httpx.main``. Nothing else changes.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

if TYPE_CHECKING:
    from tools.platform.client import PlatformClient, TracesClient

__all__ = [
    "Ambiguous",
    "Conflict",
    "CredentialsMissing",
    "Deadline",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "PaymentRequired",
    "PlatformClient",
    "PlatformError",
    "RateLimited",
    "RetryPolicy",
    "Settings",
    "Timeouts",
    "TracesClient",
    "Unauthorized",
    "Unavailable",
    "resolve_settings",
]


def __getattr__(name: str) -> Any:
    if name in ("PlatformClient", "TracesClient"):
        from tools.platform import client

        return getattr(client, name)
    raise AttributeError(f"module 'tools.platform' has no attribute {name!r}")
