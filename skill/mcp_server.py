"""``model-factory mcp``: every registry tool over MCP on stdio, with the official ``mcp`` SDK.

What a client gets:

- ``tools/list``: :func:`skill.registry.mcp_tools` (name, title, description, inputSchema,
  annotations; no outputSchema, see there).
- ``tools/call``: :func:`skill.registry.call_tool` in a worker thread. The result model
  dump is ``structuredContent``; the text block carries the same JSON without its null fields, after
  a ``NAME failed [code]`` line when it is an error (for clients that ignore ``structuredContent``, and
  most hosts show the model only the text: a null says nothing a reader needs, so the text leaves it out).
  A :class:`~tools.errors.ToolError` is an ``isError: true`` result, with structured content too. A tool with an
  ``image_field`` (``mf_plot_metrics``) also returns its PNG as an image block.
- Progress: when the request carries a ``progressToken``, ``ctx.report(done, total,
  message)`` calls from the tool become ``notifications/progress``: strictly increasing, at most
  one per :data:`PROGRESS_INTERVAL_SECONDS` (on the call Context's clock), the final one always.
- Confirmation gate: when the client declared the ``elicitation`` capability, the tool
  context gets an approver that shows the plan summary through an elicitation form and
  asks for an explicit yes (never for a secret). Without it, ``mf_dispatch_run`` returns
  ``confirmation_required`` and the user approves with ``model-factory approve PLAN_ID``.
- stdout carries protocol messages only: the SDK's stdio transport points file descriptor 1 at
  stderr while serving (stray prints land there), logs go to stderr, and no traceback reaches
  the client.

The server is the SDK's own (:func:`build_server`, served by :func:`main` with its stdio
transport): nothing answers the protocol in front of it. It starts in about a second on a
small machine (``benchmarks/bench_surfaces.py`` prints the figure), which MCP hosts wait for.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from skill import apps, registry
from skill.registry import is_error
from tools.core import Context

SERVER_NAME = "model-factory"
INSTRUCTIONS = (
    "Train models on Prime Intellect's hosted Model Factory. Start with mf_preflight. "
    "Launching is two steps: mf_plan_run (free; show its summary and cost to the user), then "
    "mf_dispatch_run, which needs the user's approval (asked here when the client supports "
    "elicitation, else the user runs `model-factory approve PLAN_ID` in a terminal). Never "
    "retry a dispatch whose outcome was ambiguous; reconcile with mf_list_launches. Secrets "
    "are passed by NAME only (WANDB_API_KEY, HF_TOKEN), never by value."
)
LOG = logging.getLogger("model_factory.mcp")
#: How long a person has to answer an approval form, in seconds.
ELICITATION_TIMEOUT_SECONDS = 600.0
#: Largest PNG returned as an image block, in bytes.
MAX_IMAGE_BYTES = 4_000_000


# -- the SDK server -----------------------------------------------------------------------


def _summary_line(name: str, payload: dict[str, Any]) -> str:
    """The line in front of a failed call's JSON (its message and fix follow there). A result that is
    not an error is its JSON alone: a line repeating its first fields would cost every call's reader."""
    return f"{name} failed [{payload.get('code')}]\n"


def without_nulls(value: Any) -> Any:
    """``value`` with every ``null`` member of its objects left out (lists keep their items)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def result_content(name: str, spec: Any, result: Any) -> Any:
    """The MCP ``CallToolResult`` for a registry result of tool ``name`` (see module docstring)."""
    error = is_error(result)
    payload = result.model_dump(mode="json", by_alias=True)
    text = (_summary_line(name, payload) if error else "") + json.dumps(without_nulls(payload), separators=(",", ":"))
    content: list[Any] = [types.TextContent(text=text)]
    path = payload.get(spec.image_field) if spec and spec.image_field and not error else None
    if isinstance(path, str) and path.lower().endswith(".png"):
        try:
            data = Path(path).read_bytes()
        except OSError:
            data = b""
        if data.startswith(b"\x89PNG") and len(data) <= MAX_IMAGE_BYTES:
            content.append(types.ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type="image/png"))
    return types.CallToolResult(content=content, structured_content=payload, is_error=error)


def _approval_message(request: Any) -> str:
    """The form's text: what is approved, the plan summary, and what answering means."""
    summary = getattr(request, "summary", None) or str(request)
    plan_id = getattr(request, "plan_id", "?")
    if getattr(request, "action", "launch") == "stop":
        head, money = f"Approve stopping a run (plan {plan_id})? Stopping cannot be undone.", ""
    else:
        high = getattr(request, "usd_high", None)
        head = f"Approve launching plan {plan_id} on Model Factory?"
        money = (f" It may cost up to about ${high:,.2f}." if isinstance(high, (int, float))
                 else " Its cost could not be estimated.") + " This spends money on the paying account."
    return (f"{head}\n\n{summary}\n\nTick 'approve' and submit to approve exactly this plan; decline to "
            f"refuse.{money} Nothing secret is asked here.")


#: The approval form: one explicit yes/no, never anything secret.
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Tick to approve exactly this plan; leave unticked to refuse.",
            "default": False,
        }
    },
    "required": ["approve"],
}


class NeedsApproval(BaseException):
    """Raised by the approver on a connection without server-to-client requests (protocol
    2026-07-28): the call ends as an ``input_required`` round carrying the approval form.

    A ``BaseException`` so that no tool layer turns it into an error; only
    :func:`build_server`'s call handler catches it. Tools ask for approval before they write
    anything (the gate precedes the claim in the state store), so ending the call there is safe.
    """

    def __init__(self, request: Any) -> None:
        super().__init__("approval needed")
        self.request = request


class Approvals:
    """Approval forms asked in an ``input_required`` round and not yet answered.

    ``request_state`` is a random id the client echoes on its retry; the answer counts only
    for the same action and plan hash, once, within :data:`ELICITATION_TIMEOUT_SECONDS`.
    """

    def __init__(self) -> None:
        self._pending: dict[str, tuple[float, str, str]] = {}
        self._lock = threading.Lock()

    def ask(self, request: Any) -> str:
        """Remember a form asked for ``request`` (its action and plan hash); returns the
        ``request_state`` the client must echo. Expired entries are dropped here."""
        state = secrets.token_urlsafe(24)
        with self._lock:
            now = time.monotonic()
            self._pending = {k: v for k, v in self._pending.items() if v[0] > now}
            self._pending[state] = (now + ELICITATION_TIMEOUT_SECONDS, str(getattr(request, "action", "")),
                                    str(getattr(request, "plan_hash", "")))
        return state

    def answer(self, state: str | None, responses: Any) -> tuple[str, str, bool] | None:
        """(action, plan_hash, approved) for a retry that answers a pending form, else None."""
        with self._lock:
            pending = self._pending.pop(state, None) if state else None
        if pending is None or pending[0] < time.monotonic():
            return None
        response = (responses or {}).get("approval")
        approved = (getattr(response, "action", None) == "accept"
                    and (getattr(response, "content", None) or {}).get("approve") is True)
        return pending[1], pending[2], approved


def _elicitation_declared(session: Any) -> bool:
    caps = session.client_capabilities
    return caps is not None and caps.elicitation is not None


#: Seconds between two progress notifications of one call, at least (on the call Context's clock); the
#: update that reaches the total is always sent.
PROGRESS_INTERVAL_SECONDS = 0.25


def _tool_context(request_ctx: Any, params: Any, approvals: Approvals, make_context: Callable[[], Any]) -> Any:
    """A fresh tools Context for one call (``make_context()``), with progress and approval wired
    to the client."""
    session = request_ctx.session
    tool_ctx = make_context()
    meta = request_ctx.meta or {}
    if meta.get("progress_token", meta.get("progressToken")) is not None:
        last = [float("-inf"), float("-inf")]  # the progress and the clock reading of the last notification

        def progress(done: float, total: float | None, message: str) -> None:
            if done <= last[0]:  # the protocol wants strictly increasing progress
                return
            now = tool_ctx.clock()
            if now - last[1] < PROGRESS_INTERVAL_SECONDS and (total is None or done < total):
                return  # a few notifications a second (2,000 traces are not 2,000 messages); the last one always
            last[0], last[1] = done, now
            try:
                anyio.from_thread.run(session.report_progress, float(done),
                                      None if total is None else float(total), message)
            except Exception:  # noqa: BLE001 - a lost notification must not fail the tool
                LOG.debug("progress notification failed", exc_info=True)

        tool_ctx.progress = progress
    if not _elicitation_declared(session):
        if apps.client_has_apps(session) and getattr(params, "name", None) in apps.GATED_TOOLS:

            def show_view(request: Any) -> bool:  # the call ends with the approval view (skill.apps)
                raise apps.NeedsView(request)

            show_view.channel = "mcp_app"  # type: ignore[attr-defined]
            tool_ctx.approver = show_view
        return tool_ctx
    if session.can_send_request:  # handshake era: ask now, from the worker thread

        async def ask(request: Any) -> bool:
            with anyio.fail_after(ELICITATION_TIMEOUT_SECONDS):
                answer = await session.elicit_form(_approval_message(request), APPROVAL_SCHEMA,
                                                   related_request_id=request_ctx.request_id)
            return answer.action == "accept" and (answer.content or {}).get("approve") is True

        def approver(request: Any) -> bool:
            return anyio.from_thread.run(ask, request)

    else:  # 2026-07-28: answer a form this call's retry carries, else end the call with one
        answered = approvals.answer(getattr(params, "request_state", None), getattr(params, "input_responses", None))

        def approver(request: Any) -> bool:
            if answered is None:
                raise NeedsApproval(request)
            action, plan_hash, approved = answered
            return approved and action == request.action and plan_hash == request.plan_hash

    approver.channel = "mcp_elicitation"  # type: ignore[attr-defined]  # read by the approval record
    tool_ctx.approver = approver
    return tool_ctx


def build_server(make_context: Callable[[], Any] | None = None) -> Any:
    """The low-level SDK server over the registry (every tool module is imported for the listing).

    ``make_context``: builds the tools Context of each call (default: one over the process
    environment); in-process harnesses pass one with their own env, folders, clock and sleep."""
    make_context = make_context or Context.from_environment
    tools = registry.mcp_tools()
    listing = types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])
    with_apps = types.ListToolsResult(tools=[types.Tool.model_validate(apps.linked(t)) for t in tools]
                                      + [types.Tool.model_validate(apps.answer_tool())])
    approvals, nonces = Approvals(), apps.ViewNonces()

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return with_apps if apps.client_has_apps(ctx.session) else listing

    async def on_list_resources(ctx: Any, params: Any) -> Any:
        return types.ListResourcesResult(resources=[types.Resource.model_validate(r) for r in apps.view_resources()])

    async def on_read_resource(ctx: Any, params: Any) -> Any:
        if str(params.uri) not in apps.VIEWS:
            from mcp.shared.exceptions import MCPError

            raise MCPError(code=-32002, message=f"No resource {params.uri}; this server has {', '.join(apps.VIEWS)}.")
        return types.ReadResourceResult.model_validate(apps.view_contents(str(params.uri)))

    async def on_answer(ctx: Any, params: Any) -> Any:
        from tools.errors import ToolError

        if not apps.client_has_apps(ctx.session):  # the view exists only where the client renders MCP Apps
            return result_content(params.name, None, ToolError(
                code="unknown_tool", message=f"No tool named {params.name!r}.",
                fix="List the tools (MCP tools/list or `model-factory tools export`)."))
        tool_ctx = make_context()
        try:
            result = await anyio.to_thread.run_sync(apps.answer, params.arguments or {}, nonces, tool_ctx)
        finally:
            tool_ctx.close()
        return result_content(params.name, None, result)

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        if params.name == apps.ANSWER_TOOL:
            return await on_answer(ctx, params)
        try:
            spec = registry.get(params.name)
        except KeyError:
            spec = None
        try:
            tool_ctx = _tool_context(ctx, params, approvals, make_context)
            try:
                result = await anyio.to_thread.run_sync(functools.partial(registry.call_tool, surface="mcp"),
                                                        params.name, params.arguments or {}, tool_ctx,
                                                        abandon_on_cancel=True)
            finally:
                tool_ctx.close()
            return result_content(params.name, spec, result)
        except NeedsApproval as needed:
            form = types.ElicitRequest(params=types.ElicitRequestFormParams(
                message=_approval_message(needed.request), requested_schema=APPROVAL_SCHEMA))
            return types.InputRequiredResult(input_requests={"approval": form},
                                             request_state=approvals.ask(needed.request))
        except apps.NeedsView as needed:  # the person answers in the view shown with this result
            error = apps.view_error(params.name, needed.request)
            recorder = make_context()
            try:
                registry.audit(recorder, "mcp", params.name, params.arguments or {}, error)
            finally:
                recorder.close()
            shown = result_content(params.name, spec, error)
            meta = apps.view_meta(params.name, needed.request, nonces.mint(params.name, needed.request))
            return shown.model_copy(update={"meta": meta})
        except Exception as exc:  # noqa: BLE001 - never a traceback to the client
            LOG.exception("tools/call %s failed", params.name)
            from tools.errors import ToolError

            return result_content(params.name, spec, ToolError(
                code="internal_error", message=f"{params.name} failed unexpectedly: {type(exc).__name__}",
                fix="This is a bug in model-factory-skill; retry once, then report it with the server's stderr log."))

    server = Server(SERVER_NAME, version=_version(), title="Model Factory", instructions=INSTRUCTIONS,
                    on_list_tools=on_list_tools, on_call_tool=on_call_tool, on_list_resources=on_list_resources,
                    on_read_resource=on_read_resource)
    server.extensions[apps.EXTENSION_ID] = {}  # MCP Apps: the approval view (skill.apps)
    return server


def _version() -> str:
    try:
        return version("model-factory-skill")
    except PackageNotFoundError:
        return "0+unknown"


# -- entry point ------------------------------------------------------------------------------


def _configure_logging() -> None:
    level = os.environ.get("MODEL_FACTORY_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level, logging.WARNING),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")


def main() -> None:
    """Serve MCP on stdio until the client closes stdin (``model-factory mcp``)."""
    _configure_logging()
    server = build_server()

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
