"""Traces host routes (prime-api.md §2.1 rows 29-33, §6), served on the same app.

The owner is the team in ``X-Prime-Team-ID``, else the caller's personal account. Errors
use the traces envelope ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .state import EmulatorState
from .traces import Owner, Params


def traces_routes(state: EmulatorState) -> list[Route]:
    """The traces host's read routes, bound to ``state``."""

    def ask(request: Request) -> tuple[Owner, float, Params]:
        user = state.authenticate(request.headers.get("authorization"))
        owner = state.traces_owner(user, request.headers.get("x-prime-team-id"))
        params = {key: request.query_params.getlist(key) for key in request.query_params}
        return owner, state.advance_all(), params

    def raw_wanted(params: Params) -> bool:
        return (params.get("raw") or [""])[-1].lower() == "true"

    async def list_traces(request: Request) -> Response:
        with state.lock:
            owner, now, params = ask(request)
            return JSONResponse(state.store.list_traces(owner, now, params))

    async def get_trace(request: Request) -> Response:
        with state.lock:
            owner, now, params = ask(request)
            trace = state.store.get_trace(owner, now, request.path_params["trace_id"])
            if raw_wanted(params):
                return Response(trace.raw, media_type="application/json")
            return JSONResponse(trace.summary(state.clock.iso))

    async def list_episodes(request: Request) -> Response:
        with state.lock:
            owner, now, params = ask(request)
            return JSONResponse(state.store.list_episodes(owner, now, params))

    async def get_episode(request: Request) -> Response:
        with state.lock:
            owner, now, params = ask(request)
            episode_id = request.path_params["episode_id"]
            if raw_wanted(params):
                return Response(state.store.get_episode(owner, now, episode_id).raw(), media_type="application/json")
            return JSONResponse(state.store.episode_detail(owner, now, episode_id))

    async def episode_traces(request: Request) -> Response:
        with state.lock:
            owner, now, params = ask(request)
            return JSONResponse(state.store.list_episode_traces(owner, now, request.path_params["episode_id"], params))

    async def list_runs(request: Request) -> Response:
        with state.lock:
            owner, now, params = ask(request)
            return JSONResponse(state.store.list_runs(owner, now, params))

    async def get_run(request: Request) -> Response:
        with state.lock:
            owner, now, _ = ask(request)
            return JSONResponse(state.store.run_summary(owner, now, request.path_params["run_id"]))

    async def run_steps(request: Request) -> Response:
        with state.lock:
            owner, now, _ = ask(request)
            return JSONResponse(state.store.run_steps(owner, now, request.path_params["run_id"]))

    async def search(request: Request) -> Response:
        with state.lock:
            owner, now, params = ask(request)
            return JSONResponse(state.store.search(owner, now, request.path_params["run_id"], params))

    p = "/api/v1"
    return [
        Route(p + "/traces", list_traces, methods=["GET"]),
        Route(p + "/traces/{trace_id}", get_trace, methods=["GET"]),
        Route(p + "/episodes", list_episodes, methods=["GET"]),
        Route(p + "/episodes/{episode_id}", get_episode, methods=["GET"]),
        Route(p + "/episodes/{episode_id}/traces", episode_traces, methods=["GET"]),
        Route(p + "/runs", list_runs, methods=["GET"]),
        Route(p + "/runs/{run_id}", get_run, methods=["GET"]),
        Route(p + "/runs/{run_id}/steps", run_steps, methods=["GET"]),
        Route(p + "/runs/{run_id}/search", search, methods=["GET"]),
    ]
