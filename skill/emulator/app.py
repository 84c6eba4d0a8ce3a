"""The ASGI app: platform, traces, admin and dashboard routes, error rendering, faults, the Date header.

Layers, outermost first: :class:`~skill.emulator.faults.FaultMiddleware` (injected
faults), :class:`SimDateMiddleware` (``Date`` = the simulated now), then the Starlette
router. Every error leaves as the host's JSON shape (see :mod:`skill.emulator.errors`).
"""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from .dashboard import dashboard_routes
from .errors import ApiError
from .faults import FaultInjector, FaultMiddleware
from .routes_admin import admin_routes
from .routes_platform import platform_routes
from .routes_storage import storage_routes
from .routes_traces import traces_routes
from .state import EmulatorState


class SimDateMiddleware:
    """Sets every response's ``Date`` header to the simulated now.

    With a fast clock, served timestamps run ahead of the wall clock; a client that measures
    ages against the response's ``Date`` (robust against clock skew on the real platform
    too) sees them consistently.
    """

    def __init__(self, app: Any, state: EmulatorState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def dated(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                stamp = formatdate(self.state.clock.epoch + self.state.now(), usegmt=True).encode()
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"date"]
                message = {**message, "headers": [*headers, (b"date", stamp)]}
            await send(message)

        await self.app(scope, receive, dated)


def create_app(state: EmulatorState, faults: FaultInjector | None = None) -> Any:
    """The emulator's ASGI app over ``state`` (and ``faults``, a fresh injector by default)."""
    faults = faults or FaultInjector()

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return JSONResponse(exc.body(request.url.path), status_code=exc.status, headers=exc.headers)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        error = ApiError(exc.status_code, exc.detail, code="not_found" if exc.status_code == 404 else None)
        return JSONResponse(error.body(request.url.path), status_code=exc.status_code, headers=exc.headers)

    router = Starlette(
        routes=[*admin_routes(state, faults), *platform_routes(state), *storage_routes(state), *traces_routes(state),
                *dashboard_routes(state)],
        exception_handlers={ApiError: api_error, HTTPException: http_error},
    )
    app = FaultMiddleware(SimDateMiddleware(router, state), faults, routes=router.routes)
    app.state = state  # type: ignore[attr-defined]
    return app
