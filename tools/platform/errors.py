"""Typed errors for the Model Factory HTTP API.

Every failure of a platform or traces request is raised as one subclass of
:class:`PlatformError`. The set is deliberately small; the HTTP status that produced it
is kept in ``status`` (``None`` for transport failures).

| class | code | produced by |
|---|---|---|
| :class:`CredentialsMissing` | ``credentials_missing`` | no API key resolved; nothing was sent |
| :class:`Unauthorized` | ``unauthorized`` | HTTP 401 |
| :class:`PaymentRequired` | ``payment_required`` | HTTP 402 |
| :class:`Forbidden` | ``forbidden`` | HTTP 403 |
| :class:`NotFound` | ``not_found`` | HTTP 404 |
| :class:`Conflict` | ``conflict`` | HTTP 409 |
| :class:`RateLimited` | ``rate_limited`` | HTTP 429 (``retry_after`` in seconds when the server sent ``Retry-After``) |
| :class:`Unavailable` | ``unavailable`` | HTTP 5xx, or a transport failure (``sent``: the request left this machine) |
| :class:`InvalidRequest` | ``invalid_request`` | HTTP 400/405/422 and other 4xx, or a 2xx body of the wrong shape |
| :class:`Ambiguous` | ``ambiguous`` | a non-idempotent request (run create) was sent and its outcome is unknown |

Source of the status mapping: reference/prime-api.md §1.3 (platform) and §6.1 (traces).
"""

from __future__ import annotations

from typing import ClassVar, Literal

#: The ``code`` of every class in the table above (part of ``tools.errors.ErrorCode``).
PlatformCode = Literal[
    "platform_error", "credentials_missing", "unauthorized", "payment_required", "forbidden", "not_found",
    "conflict", "rate_limited", "unavailable", "invalid_request", "ambiguous",
]


class PlatformError(Exception):
    """Base class: a Model Factory request failed.

    Attributes:
        code: stable machine code (table above).
        message: human text; never contains a secret value (callers scrub by value too).
        status: HTTP status code, or ``None`` when no response was received.
        retryable: ``True`` when repeating the same request later is safe and may succeed.
        ambiguous: ``True`` when the request may have taken effect on the server.
        retry_after: seconds the server asked us to wait (``Retry-After``), if any.
        field_errors: ``(dotted location, message)`` pairs from a 422 body.
        service_code: the service's own error code when it sent one (traces host envelope
            ``{"error": {"code": ...}}``, e.g. ``run_not_found``, ``trace_not_indexed``).
        endpoint: ``"METHOD /path"`` of the failed request (no query, no host), if known.
    """

    code: ClassVar[PlatformCode] = "platform_error"
    retryable = False
    ambiguous = False

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        field_errors: list[tuple[str, str]] | None = None,
        service_code: str | None = None,
        endpoint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.field_errors = field_errors or []
        self.service_code = service_code
        self.endpoint = endpoint


class CredentialsMissing(PlatformError):
    """No API key was found (``PRIME_API_KEY``, the active context, or ``~/.prime/config.json``)."""

    code = "credentials_missing"


class Unauthorized(PlatformError):
    """HTTP 401: the API key was rejected."""

    code = "unauthorized"


class PaymentRequired(PlatformError):
    """HTTP 402: the account or team has no credit or no billing method."""

    code = "payment_required"


class Forbidden(PlatformError):
    """HTTP 403: the key is valid but lacks access (team membership, feature gate, scope)."""

    code = "forbidden"


class NotFound(PlatformError):
    """HTTP 404: the run, trace, episode or volume does not exist for this owner."""

    code = "not_found"


class Conflict(PlatformError):
    """HTTP 409: the request conflicts with the current state (e.g. run not PAUSED)."""

    code = "conflict"


class RateLimited(PlatformError):
    """HTTP 429: too many requests; wait ``retry_after`` seconds when given."""

    code = "rate_limited"
    retryable = True


class Unavailable(PlatformError):
    """HTTP 5xx, a timeout or a connection failure.

    ``sent`` is ``False`` when the request provably never left this machine (connect
    error), which makes even a create safe to retry.
    """

    code = "unavailable"
    retryable = True

    def __init__(self, message: str, *, sent: bool = True, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.sent = sent


class InvalidRequest(PlatformError):
    """HTTP 400/405/422 (and unmapped 4xx), or a response that is not the documented shape.

    Also raised without sending anything when an argument cannot be put on the wire (an
    empty id, a traces id containing ``/``).
    """

    code = "invalid_request"


class Ambiguous(PlatformError):
    """A non-idempotent request was sent and no usable answer came back.

    The server may have acted on it. Never re-send; reconcile by reading state instead.
    """

    code = "ambiguous"
    ambiguous = True
