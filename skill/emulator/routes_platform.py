"""Platform routes under ``/api/v1`` (prime-api.md §2.1 rows 1-28).

Team scoping is per endpoint, as on the real platform: ``team_id`` (query) on ``/rft/runs``
and the two ``/training/available-*`` routes; ``teamId`` (query) on ``/training/volumes`` and
``/user/whoami``; ``teamId`` in the body of creates and prepare; none on per-run routes,
where ownership comes from the run.
"""

from __future__ import annotations

import json
from typing import Any, overload

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .errors import ApiError
from .state import EmulatorState


@overload
def _int(request: Request, name: str) -> int | None: ...
@overload
def _int(request: Request, name: str, default: int) -> int: ...
def _int(request: Request, name: str, default: int | None = None) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ApiError(422, [{"loc": ["query", name], "msg": "Input should be a valid integer",
                              "type": "int_parsing"}]) from None


async def _json(request: Request) -> Any:
    raw = await request.body()
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        raise ApiError(422, [{"loc": ["body"], "msg": "JSON decode error", "type": "json_invalid"}]) from None


def platform_routes(state: EmulatorState) -> list[Route]:
    """The platform's routes, bound to ``state``."""

    def user(request: Request) -> Any:
        return state.authenticate(request.headers.get("authorization"))

    def run_of(request: Request) -> Any:
        return state.get_run(user(request), request.path_params["run_id"])

    async def prepare(request: Request) -> Response:
        who = user(request)
        return JSONResponse(state.prepare(who, await _json(request)))

    async def create_run(request: Request) -> Response:
        who = user(request)
        return JSONResponse(state.create_run(who, await _json(request)))

    async def resume_run(request: Request) -> Response:
        who = user(request)
        return JSONResponse(state.resume_run(who, request.path_params["run_id"], await _json(request)))

    async def pause_run(request: Request) -> Response:
        return JSONResponse(state.pause_run(user(request), request.path_params["run_id"]))

    async def delete_training_run(request: Request) -> Response:
        state.delete_run(user(request), request.path_params["run_id"])
        return JSONResponse({"runId": request.path_params["run_id"], "deleted": True})

    async def transfer(request: Request) -> Response:
        who = user(request)
        root = f"{request.url.scheme}://{request.url.netloc}"
        return JSONResponse(state.transfer_route(who, request.path_params["name"], await _json(request), root))

    async def fft_models(request: Request) -> Response:
        return JSONResponse(state.available_models(user(request), request.query_params.get("team_id") or None))

    async def gpu_types(request: Request) -> Response:
        return JSONResponse(state.available_gpu_types(user(request), request.query_params.get("team_id") or None))

    async def volumes(request: Request) -> Response:
        who = user(request)
        if request.method == "POST":
            return JSONResponse(state.create_volume(who, await _json(request)))
        return JSONResponse(state.list_volumes(who, request.query_params.get("teamId") or None))

    async def list_runs(request: Request) -> Response:
        who = user(request)
        return JSONResponse(state.list_runs(
            who, request.query_params.get("team_id") or None, _int(request, "page", 1), _int(request, "limit", 20),
            request.query_params.get("mine", "").lower() == "true"))

    async def get_run(request: Request) -> Response:
        with state.lock:
            run = run_of(request)
            return JSONResponse({"run": run.to_wire(state.now())})

    async def stop_run(request: Request) -> Response:
        with state.lock:
            run = state.stop_run(user(request), request.path_params["run_id"])
            return JSONResponse({"run": run.to_wire(state.now())})

    async def restart_run(request: Request) -> Response:
        with state.lock:
            run = state.restart_run(user(request), request.path_params["run_id"])
            return JSONResponse({"run": run.to_wire(state.now())})

    async def delete_run(request: Request) -> Response:
        state.delete_run(user(request), request.path_params["run_id"])
        return Response(status_code=204)

    async def logs(request: Request) -> Response:
        with state.lock:
            run = run_of(request)
            return JSONResponse({"logs": run.read_logs(state.now(), dict(request.query_params))})

    async def env_server_logs(request: Request) -> Response:
        with state.lock:
            run = run_of(request)
            params = dict(request.query_params)
            if _int(request, "env_index", 0) != 0:
                raise ApiError(404, f"No env server {params.get('env_name')}/{params['env_index']} for this run")
            params["component"] = "env-server"
            return JSONResponse({"logs": run.read_logs(state.now(), params)})

    async def env_servers(request: Request) -> Response:
        with state.lock:
            return JSONResponse({"env_servers": run_of(request).env_servers()})

    async def metrics(request: Request) -> Response:
        with state.lock:
            run = run_of(request)
            return JSONResponse({"metrics": run.metric_records(
                _int(request, "min_step"), _int(request, "max_step"), _int(request, "limit"))})

    async def samples(request: Request) -> Response:
        with state.lock:
            run = run_of(request)
            step = _int(request, "step")
            if step is None:
                raise ApiError(422, [{"loc": ["query", "step"], "msg": "Field required", "type": "missing"}])
            page, limit = _int(request, "page", 1), _int(request, "limit", 100)
            if page < 1 or not 1 <= limit <= 1000:
                raise ApiError(422, [{"loc": ["query", "page"], "msg": "Input should be >= 1",
                                      "type": "greater_than_equal"}])
            return JSONResponse(run.samples(step, page, limit))

    async def progress(request: Request) -> Response:
        with state.lock:
            return JSONResponse(run_of(request).progress())

    async def distributions(request: Request) -> Response:
        with state.lock:
            run = run_of(request)
            return JSONResponse(run.distribution(request.query_params.get("type") or "rewards", _int(request, "step")))

    async def checkpoints(request: Request) -> Response:
        with state.lock:
            run = run_of(request)
            return JSONResponse({"checkpoints": run.checkpoint_items(
                state.now(), request.query_params.get("status_filter"))})

    async def usage(request: Request) -> Response:
        with state.lock:
            return JSONResponse(run_of(request).usage(state.now()))

    async def feedback(request: Request) -> Response:
        user(request)
        body = await _json(request)
        if not isinstance(body, dict) or not body.get("message"):
            raise ApiError(422, [{"loc": ["body", "message"], "msg": "Field required", "type": "missing"}])
        return JSONResponse({"status": "received"})

    async def teams(request: Request) -> Response:
        return JSONResponse(state.teams(user(request), _int(request, "offset", 0), _int(request, "limit", 100)))

    async def members(request: Request) -> Response:
        return JSONResponse(state.members(user(request), request.path_params["team_id"]))

    async def whoami(request: Request) -> Response:
        return JSONResponse(state.whoami(user(request), request.query_params.get("teamId") or None))

    p = "/api/v1"
    run = p + "/rft/runs/{run_id}"
    return [
        Route(p + "/training/runs/prepare", prepare, methods=["POST"]),
        Route(p + "/training/runs", create_run, methods=["POST"]),
        Route(p + "/training/runs/{run_id}/resume", resume_run, methods=["POST"]),
        Route(p + "/training/runs/{run_id}/pause", pause_run, methods=["POST"]),
        Route(p + "/training/runs/{run_id}", delete_training_run, methods=["DELETE"]),
        Route(p + "/training/available-fft-models", fft_models, methods=["GET"]),
        Route(p + "/training/available-gpu-types", gpu_types, methods=["GET"]),
        Route(p + "/training/volumes", volumes, methods=["GET", "POST"]),
        Route(p + "/training/volumes/{name}/transfer", transfer, methods=["POST"]),
        Route(p + "/rft/runs", list_runs, methods=["GET"]),
        Route(run, get_run, methods=["GET"]),
        Route(run, delete_run, methods=["DELETE"]),
        Route(run + "/stop", stop_run, methods=["PUT"]),
        Route(run + "/restart", restart_run, methods=["PUT"]),
        Route(run + "/logs", logs, methods=["GET"]),
        Route(run + "/env-server-logs", env_server_logs, methods=["GET"]),
        Route(run + "/env-servers", env_servers, methods=["GET"]),
        Route(run + "/metrics", metrics, methods=["GET"]),
        Route(run + "/samples", samples, methods=["GET"]),
        Route(run + "/progress", progress, methods=["GET"]),
        Route(run + "/distributions", distributions, methods=["GET"]),
        Route(run + "/checkpoints", checkpoints, methods=["GET"]),
        Route(p + "/billing/runs/{run_id}/usage", usage, methods=["GET"]),
        Route(p + "/feedback", feedback, methods=["POST"]),
        Route(p + "/user/teams", teams, methods=["GET"]),
        Route(p + "/teams/{team_id}/members", members, methods=["GET"]),
        Route(p + "/user/whoami", whoami, methods=["GET"]),
    ]
