"""Admin routes under ``/_emulator`` (never under ``/api/v1``, never faulted).

They let another process (the real ``prime`` CLI tests, the demo, a benchmark, a person with
curl) drive the emulator; ``README.md`` (section Admin routes) lists them. Their only
protection is the loopback: requests from any other address get 403. Bodies and answers are
JSON.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .errors import ApiError
from .faults import SETTABLE, FaultInjector, FaultRule
from .scenarios import DEFAULTS, SUMMARIES
from .state import EmulatorState


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and a loopback address (127.0.0.0/8, ``::1``, bracketed or not); False for
    anything else, ``0.0.0.0`` and ``::`` (every interface) included. A name is not resolved."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def loopback_only(request: Request) -> None:
    """403 unless the client is on the loopback."""
    host = request.client.host if request.client else ""
    if not (is_loopback(host) or host == "testclient"):
        raise ApiError(403, "Admin routes answer loopback clients only")


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        raise ApiError(400, "body must be JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "body must be a JSON object")
    return body


def admin_routes(state: EmulatorState, faults: FaultInjector) -> list[Route]:
    """The admin routes, bound to ``state`` and ``faults``."""

    async def show_state(request: Request) -> Response:
        loopback_only(request)
        summary = state.summary()
        summary["faults"] = [r.to_json() for r in faults.rules()]
        return JSONResponse(summary)

    async def reset(request: Request) -> Response:
        loopback_only(request)
        state.reset()
        faults.clear()
        return JSONResponse({"ok": True})

    async def speed(request: Request) -> Response:
        loopback_only(request)
        body = await _body(request)
        try:
            state.set_speed(float(body["speed"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(400, f"speed: {exc}") from None
        return JSONResponse({"speed": state.clock.speed})

    async def advance(request: Request) -> Response:
        loopback_only(request)
        body = await _body(request)
        try:
            now = state.advance(float(body["seconds"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(400, f"seconds: {exc}") from None
        return JSONResponse({"now": now, "now_iso": state.clock.iso(now)})

    async def fault_rules(request: Request) -> Response:
        loopback_only(request)
        if request.method == "GET":
            return JSONResponse({"faults": [r.to_json() for r in faults.rules()]})
        if request.method == "DELETE":
            faults.clear()
            return JSONResponse({"faults": []})
        body = await _body(request)
        specs = body["faults"] if isinstance(body.get("faults"), list) else [body]
        try:
            rules = [FaultRule(**{k: v for k, v in spec.items() if k in SETTABLE}) for spec in specs]
        except (TypeError, ValueError) as exc:
            raise ApiError(400, f"bad fault rule: {exc}") from None
        return JSONResponse({"faults": [faults.add(rule).to_json() for rule in rules]})

    async def remove_fault(request: Request) -> Response:
        loopback_only(request)
        if not faults.remove(int(request.path_params["rule_id"])):
            raise ApiError(404, "no such fault rule")
        return JSONResponse({"removed": int(request.path_params["rule_id"])})

    async def set_scenario(request: Request) -> Response:
        loopback_only(request)
        if request.method == "DELETE":
            try:
                state.clear_scenarios(request.query_params.get("run_id"))
            except KeyError:
                raise ApiError(404, "Run not found") from None
            return JSONResponse({"ok": True})
        body = await _body(request)
        every_run = body.get("every_run") is True
        params = body.get("params") or {k: v for k, v in body.items() if k not in ("name", "run_id", "every_run")}
        try:
            applied = state.set_scenario(str(body.get("name")), body.get("run_id"), every_run=every_run, **params)
        except KeyError:
            raise ApiError(404, "Run not found") from None
        except (TypeError, ValueError) as exc:
            raise ApiError(400, str(exc)) from None
        return JSONResponse({"name": body.get("name"), "run_id": body.get("run_id"), "every_run": every_run,
                             "params": applied})

    async def scenarios(request: Request) -> Response:
        loopback_only(request)
        return JSONResponse({"scenarios": [{"name": name, "summary": SUMMARIES[name], "params": DEFAULTS[name]}
                                           for name in DEFAULTS]})

    async def timing(request: Request) -> Response:
        loopback_only(request)
        if request.method == "POST":
            try:
                state.set_timing(**await _body(request))
            except (TypeError, ValueError) as exc:
                raise ApiError(400, str(exc)) from None
        return JSONResponse(dataclasses.asdict(state.timing))

    async def prepare(request: Request) -> Response:
        loopback_only(request)
        body = await _body(request)
        with state.lock:
            if "submission_supported" in body:
                state.prepare_submission_supported = bool(body["submission_supported"])
            if "available" in body:
                state.prepare_available = bool(body["available"])
            return JSONResponse({"available": state.prepare_available,
                                 "submission_supported": state.prepare_submission_supported})

    a = "/_emulator"
    return [
        Route(a + "/state", show_state, methods=["GET"]),
        Route(a + "/reset", reset, methods=["POST"]),
        Route(a + "/speed", speed, methods=["POST"]),
        Route(a + "/advance", advance, methods=["POST"]),
        Route(a + "/faults", fault_rules, methods=["GET", "POST", "DELETE"]),
        Route(a + "/faults/{rule_id:int}", remove_fault, methods=["DELETE"]),
        Route(a + "/scenario", set_scenario, methods=["POST", "DELETE"]),
        Route(a + "/scenarios", scenarios, methods=["GET"]),
        Route(a + "/timing", timing, methods=["GET", "POST"]),
        Route(a + "/prepare", prepare, methods=["POST"]),
    ]
