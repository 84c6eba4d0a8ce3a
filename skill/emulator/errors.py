"""One error type for every route; the app renders it in the host's error shape.

Platform routes answer FastAPI-style ``{"detail": ...}``; traces routes answer
``{"error": {"code", "message"}}`` (prime-api.md §1.3, §6.1).
"""

from __future__ import annotations

from typing import Any

#: Default traces error code per HTTP status when a route gives none.
TRACES_CODES = {
    400: "invalid_filter",
    401: "unauthenticated",
    402: "payment_required",
    403: "forbidden",
    404: "trace_not_found",
    409: "trace_not_indexed",
    422: "invalid_filter",
    429: "rate_limited",
    500: "internal_error",
    502: "storage_unavailable",
    503: "storage_unavailable",
    504: "storage_unavailable",
}

TRACES_PREFIXES = ("/api/v1/traces", "/api/v1/episodes", "/api/v1/runs")


def is_traces_path(path: str) -> bool:
    """Whether ``path`` belongs to the traces host's routes (rows 29-35)."""
    return any(path == p or path.startswith(p + "/") for p in TRACES_PREFIXES)


class ApiError(Exception):
    """An HTTP error answer: ``status``, ``message`` (a str, or a 422 item list), traces ``code``."""

    def __init__(self, status: int, message: Any, *, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.code = code
        self.headers = headers or {}

    def body(self, path: str) -> dict[str, Any]:
        """The JSON body for a request to ``path``."""
        if is_traces_path(path):
            text = self.message if isinstance(self.message, str) else str(self.message)
            return {"error": {"code": self.code or TRACES_CODES.get(self.status, "error"), "message": text}}
        return {"detail": self.message}


def not_found(what: str = "Run") -> ApiError:
    """404 ``{"detail": "<what> not found"}``."""
    return ApiError(404, f"{what} not found")
