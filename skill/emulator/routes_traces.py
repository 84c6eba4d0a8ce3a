"""Traces host routes (prime-api.md §2.1 rows 29-33, §6), served on the same app.

The owner is the team in ``X-Prime-Team-ID``, else the caller's personal account. Errors
use the traces envelope ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .state import EmulatorState
from .traces import Owner, Params


def traces_routes(state: EmulatorState) -> list[Route]:
    """The traces host's read routes, bound to ``state`` (its store read per request: a reset
    replaces it)."""

    def read(answer: Callable[[Request, Owner, float, Params], Any]) -> Callable[[Request], Awaitable[Response]]:
        """An endpoint: authenticate, resolve the owner, advance the clock, then ``answer`` (a
        JSON-able value, or a ready Response), all under the state lock."""

        async def endpoint(request: Request) -> Response:
            with state.lock:
                user = state.authenticate(request.headers.get("authorization"))
                owner = state.traces_owner(user, request.headers.get("x-prime-team-id"))
                params = {key: request.query_params.getlist(key) for key in request.query_params}
                result = answer(request, owner, state.advance_all(), params)
                return result if isinstance(result, Response) else JSONResponse(result)

        return endpoint

    def raw_wanted(params: Params) -> bool:
        return (params.get("raw") or [""])[-1].lower() == "true"

    def get_trace(request: Request, owner: Owner, now: float, params: Params) -> Any:
        trace = state.store.get_trace(owner, now, request.path_params["trace_id"])
        if not raw_wanted(params):
            return trace.summary(state.clock.iso)
        if trace.raw is not None:
            return Response(trace.raw, media_type="application/json")
        # a generated trace: streamed chunk by chunk, with its length announced
        return StreamingResponse(iter(trace.raw_chunks()), media_type="application/json",
                                 headers={"content-length": str(trace.size_bytes)})

    def get_episode(request: Request, owner: Owner, now: float, params: Params) -> Any:
        episode_id = request.path_params["episode_id"]
        if raw_wanted(params):
            return Response(state.store.get_episode(owner, now, episode_id).raw(), media_type="application/json")
        return state.store.episode_detail(owner, now, episode_id)

    def path(request: Request, name: str) -> str:
        return request.path_params[name]

    p = "/api/v1"
    return [
        Route(p + "/traces", read(lambda r, o, now, q: state.store.list_traces(o, now, q)), methods=["GET"]),
        Route(p + "/traces/{trace_id}", read(get_trace), methods=["GET"]),
        Route(p + "/episodes", read(lambda r, o, now, q: state.store.list_episodes(o, now, q)), methods=["GET"]),
        Route(p + "/episodes/{episode_id}", read(get_episode), methods=["GET"]),
        Route(p + "/episodes/{episode_id}/traces", read(
            lambda r, o, now, q: state.store.list_episode_traces(o, now, path(r, "episode_id"), q)), methods=["GET"]),
        Route(p + "/runs", read(lambda r, o, now, q: state.store.list_runs(o, now, q)), methods=["GET"]),
        Route(p + "/runs/{run_id}", read(lambda r, o, now, q: state.store.run_summary(o, now, path(r, "run_id"))),
              methods=["GET"]),
        Route(p + "/runs/{run_id}/steps", read(lambda r, o, now, q: state.store.run_steps(o, now, path(r, "run_id"))),
              methods=["GET"]),
        Route(p + "/runs/{run_id}/search", read(lambda r, o, now, q: state.store.search(o, now, path(r, "run_id"), q)),
              methods=["GET"]),
    ]
