"""The emulator's dashboard: one plain HTML page per run, at the real dashboard's path.

The platform's run page is ``{frontend_url}/dashboard/training/{run_id}`` (what ``prime``
prints after a dispatch, prime-api.md §3.6). The emulator serves a page at the same path, so
a client whose ``PRIME_FRONTEND_URL`` is the emulator's base URL links to a page that
exists: status, steps, latest metrics, env servers, checkpoints. Plain HTML, no scripts, no
external assets; it reloads itself every 5 s. Like the admin routes it answers loopback
clients only (a browser sends no API key), for any owner's run.
"""

from __future__ import annotations

from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from .routes_admin import loopback_only
from .simulator import SimRun
from .state import EmulatorState

#: Path of a run's page (format with ``run_id``); the same as the real dashboard's.
DASHBOARD_PATH = "/dashboard/training/{run_id}"

_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#f3f3f3}.status{font-weight:bold}.bad{color:#b00}.note{color:#666}code{font-size:90%}"""


def dashboard_url(base_url: str, run_id: str) -> str:
    """The page of ``run_id`` on the emulator at ``base_url`` (``http://HOST:PORT``)."""
    return base_url.rstrip("/") + DASHBOARD_PATH.format(run_id=run_id)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return '<p class="note">None yet.</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape('' if v is None else str(v))}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">'
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>{body}"
            '<p class="note">Local Model Factory emulator: simulated data. This page reloads every 5 s.</p>'
            "</body></html>")


def run_page(run: SimRun, now: float) -> str:
    """The HTML page of one run at simulated time ``now``."""
    wire = run.to_wire(now)
    status = wire["status"] + (f" (~{wire['runsAhead']} runs ahead)" if wire["runsAhead"] else "")
    latest = max(run.step_times) if run.step_times else None
    parts = [f"<h1>{escape(run.name or run.id)}</h1>",
             f'<p class="status">Status: {escape(status)}</p>']
    for key, css in (("notice", "note"), ("queueReason", "note"), ("errorMessage", "bad")):
        if wire[key]:
            parts.append(f'<p class="{css}">{escape(str(wire[key]))}</p>')
    analysis = wire["failureAnalysis"]
    if analysis:
        parts.append(f'<p class="bad">Root cause: {escape(str(analysis.get("rootCause")))} '
                     f'(confidence {round(100 * float(analysis.get("confidence") or 0))}%)</p>')
        parts.append(_table(["Evidence"], [[e] for e in analysis.get("evidence") or []]))
    if run.spec.max_steps:
        parts.append(f'<p><progress max="{run.spec.max_steps}" value="{latest or 0}"></progress> '
                     f"step {latest or 0} of {run.spec.max_steps}</p>")
    parts.append("<h2>Run</h2>" + _table(["Field", "Value"], [
        ["Run id", run.id], ["Model", wire["baseModel"]], ["Kind", f"{wire['kind']} ({wire['loss']})"],
        ["GPUs", f"{wire['gpuCount']} x {run.placement.gpu_type}"], ["Team", wire["teamId"] or "personal account"],
        ["Environments", ", ".join(run.env_names) or "-"], ["Latest step", latest], ["Max steps", wire["maxSteps"]],
        ["Created", wire["createdAt"]], ["Started", wire["startedAt"]], ["Completed", wire["completedAt"]],
    ]))
    if run.metrics:
        last = run.metrics[-1]
        parts.append(f"<h2>Latest metrics (step {last['step']})</h2>"
                     + _table(["Metric", "Value"], [[k, v] for k, v in last.items() if k not in ("step",)]))
        recent = run.metric_records(None, None, None)[-10:]
        parts.append("<h2>Recent steps</h2>" + _table(
            ["Step", "reward/all/mean", "loss", "time/step_seconds", "timestamp"],
            [[m["step"], m.get("reward/all/mean", "-"), m.get("loss"), m.get("time/step_seconds"), m.get("timestamp")]
             for m in reversed(recent)]))
    parts.append("<h2>Env servers</h2>" + _table(
        ["Env", "Pod", "Status"], [[s["env_name"], s["pod_name"], s["status"]] for s in run.env_servers()]))
    parts.append("<h2>Checkpoints</h2>" + _table(
        ["Step", "Status", "Size (bytes)", "Created"],
        [[c["step"], c["status"], c["sizeBytes"], c["createdAt"]] for c in run.checkpoint_items(now, None)]))
    return _page(f"{run.name or run.id} - {wire['status']}", "".join(parts))


def dashboard_routes(state: EmulatorState) -> list[Route]:
    """The dashboard's pages, bound to ``state``."""

    async def index(request: Request) -> Response:
        loopback_only(request)
        summary = state.summary()
        rows = "".join(f'<tr><td><a href="{escape(DASHBOARD_PATH.format(run_id=r["id"]))}">{escape(r["id"])}</a></td>'
                       f"<td>{escape(r['name'] or '')}</td><td>{escape(r['status'])}</td>"
                       f"<td>{r['latest_step']} / {r['max_steps'] or '?'}</td></tr>"
                       for r in reversed(summary["runs"]) if not r["deleted"])
        table = (f"<table><tr><th>Run</th><th>Name</th><th>Status</th><th>Step</th></tr>{rows}</table>" if rows
                 else '<p class="note">No runs yet.</p>')
        return HTMLResponse(_page("Runs", "<h1>Runs</h1>" + table))

    async def page(request: Request) -> Response:
        loopback_only(request)
        with state.lock:
            try:
                run = state.run(request.path_params["run_id"])
            except KeyError:
                run = None
            if run is None or run.deleted:
                return HTMLResponse(_page("Run not found", "<h1>Run not found</h1>"), status_code=404)
            return HTMLResponse(run_page(run, state.now()))

    return [Route("/dashboard/training", index, methods=["GET"]),
            Route(DASHBOARD_PATH, page, methods=["GET"])]

