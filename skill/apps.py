"""The approval view for hosts that render MCP Apps (extension ``io.modelcontextprotocol/ui``).

When a client negotiated MCP Apps (``capabilities.extensions["io.modelcontextprotocol/ui"].mimeTypes``
lists ``text/html;profile=mcp-app``; see ``mcp.server.apps.client_supports_apps``) and did not declare
elicitation, the MCP server (:mod:`skill.mcp_server`) offers a third human channel beside elicitation
and the terminal:

- ``tools/list`` links ``mf_check_progress`` and ``mf_run_report`` to the run card (:data:`CARD_URI`: status,
  verdict, learning, spend against the plan, and the metrics plot when the person clicks for it, through
  ``mf_plot_metrics``), and the gated tools (:data:`GATED_TOOLS`: ``mf_dispatch_run``, ``mf_resume_run``,
  ``mf_stop_run``, ``mf_pause_run``, ``mf_restart_run``) to the view :data:`VIEW_URI`
  (``_meta.ui.resourceUri``) and lists :data:`ANSWER_TOOL`, whose ``_meta.ui.visibility`` is
  ``["app"]``: a host that honours MCP Apps keeps it out of the model's tool list and refuses it to the
  model; only the view calls it. Other clients see neither.
- A gated call that needs a person (no code given, no budget policy covering it) ends with
  ``confirmation_required`` as at the terminal, and the result's ``_meta`` (:data:`META_KEY`, which the
  spec keeps out of the model's context) carries what the view shows: the plan summary recorded at
  planning, exactly as the terminal prints it (owner, GPUs x price, cost range, secret names, steps), and
  a **nonce** minted now for this view of this plan (:class:`ViewNonces`: 192 random bits, bound to the
  plan id, plan hash and action, valid :data:`NONCE_TTL_SECONDS`, single use).
- The view (``skill/views/approval.html``: one self-contained file, no network, no framework, every value
  set with ``textContent``) shows the plan with Approve and Refuse. A click calls :data:`ANSWER_TOOL` with
  the nonce. :func:`answer` refuses any call without a nonce minted for that plan and not yet used
  (``confirmation_required``), consumes it whatever the decision, and on Approve mints the same
  plan-bound, single-use approval as ``model-factory approve`` (:func:`tools.launch.approve_plan`,
  channel ``mcp_app`` in the state store; the dispatch re-checks the whole plan as for any channel).
  The view then sends the code to the chat with ``ui/message`` (a user message, like a code pasted
  from the terminal), or shows it to paste when the host does not pass it on.

What the channel proves: a call with a nonce that only this result's ``_meta`` held reached the
app-only tool, so, in a host that honours MCP Apps (hides app-only tools from the model, refuses the
model's calls to them, keeps ``_meta`` out of its context), a person clicked Approve in the view of this
plan. What it does not: the server cannot see who clicked. A host that shows ``_meta`` to the model and
lets it call app-only tools (against the spec) would let the model approve; so would anything that can
drive the host's UI. The terminal and elicitation channels have their own limits
(:mod:`skill.approval`); a budget policy is the person's standing decision.
"""

from __future__ import annotations

import functools
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tools.errors import Call, ToolError, call

#: The view's resource URI.
VIEW_URI = "ui://model-factory/approval.html"
#: The app-only tool the view's buttons call (never in the model's list in a host that honours MCP Apps).
ANSWER_TOOL = "mf_approval_answer"
#: The key of the gated result's ``_meta`` that carries the view's data (nonce included).
META_KEY = "model-factory/approval"
#: The tools whose results the view renders: those gated by a person's approval.
GATED_TOOLS = ("mf_dispatch_run", "mf_resume_run", "mf_stop_run", "mf_pause_run", "mf_restart_run")
#: The run card: status, progress verdict, learning, spend against the plan, the metrics plot on a click.
CARD_URI = "ui://model-factory/run-card.html"
#: The tools whose results the run card renders.
CARD_TOOLS = ("mf_check_progress", "mf_run_report")
#: How long a view's nonce stays usable, in seconds (an approval minted with it then lasts 15 minutes).
NONCE_TTL_SECONDS = 900.0
#: Nonces kept at once; the oldest is dropped past this (each gated result mints one).
MAX_NONCES = 256
_VIEWS = Path(__file__).resolve().parent / "views"
#: uri -> (file under skill/views, name, title, description) of each view.
VIEWS = {
    VIEW_URI: ("approval.html", "approval", "Model Factory approval",
               "The plan a gated tool waits on, with Approve and Refuse buttons."),
    CARD_URI: ("run-card.html", "run-card", "Model Factory run",
               "A run at a glance: status, verdict, learning, spend against the plan, the metrics plot."),
}


@functools.cache
def view_html(uri: str = VIEW_URI) -> str:
    """The HTML of the view ``uri`` (files under ``skill/views``). Raises KeyError for another URI."""
    return (_VIEWS / VIEWS[uri][0]).read_text(encoding="utf-8")


def view_resources() -> list[dict[str, Any]]:
    """The views as ``resources/list`` items."""
    return [{"uri": uri, "name": name, "title": title, "description": description, "mimeType": APP_MIME_TYPE}
            for uri, (_, name, title, description) in VIEWS.items()]


def view_contents(uri: str) -> dict[str, Any]:
    """The ``resources/read`` answer for ``uri``: the HTML, no network needed (empty CSP domains). Raises
    KeyError for a URI that is not a view."""
    return {"contents": [{"uri": uri, "mimeType": APP_MIME_TYPE, "text": view_html(uri),
                          "_meta": {"ui": {"csp": {}, "prefersBorder": True}}}]}


def client_has_apps(session: Any) -> bool:
    """Whether the client negotiated MCP Apps: the extension is advertised with the HTML MIME type."""
    caps = getattr(session, "client_capabilities", None)
    settings = (getattr(caps, "extensions", None) or {}).get(EXTENSION_ID) if caps is not None else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, dict) else None
    return isinstance(mime_types, (list, tuple)) and APP_MIME_TYPE in mime_types


class NeedsView(BaseException):
    """Raised by the MCP Apps approver: the call ends with ``confirmation_required`` and the view's data.

    A ``BaseException`` so that no tool layer turns it into an error; only the MCP server's call handler
    catches it. Tools ask for approval before they write anything, so ending the call there is safe."""

    def __init__(self, request: Any) -> None:
        super().__init__("approval view needed")
        self.request = request


@dataclass(frozen=True)
class Binding:
    """What a view's nonce was minted for: the gated tool called, and the plan it showed."""

    expires: float
    tool: str
    plan_id: str
    plan_hash: str
    action: str
    run_id: str | None


class ViewNonces:
    """The nonces minted for approval views and not yet used: nonce -> :class:`Binding`."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._pending: dict[str, Binding] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def mint(self, tool: str, request: Any) -> str:
        """A fresh nonce for one view of ``request``'s plan (its id, hash, action and run) shown by ``tool``."""
        nonce = secrets.token_urlsafe(24)
        with self._lock:
            now = self._clock()
            self._pending = {k: v for k, v in self._pending.items() if v.expires > now}
            while len(self._pending) >= MAX_NONCES:
                self._pending.pop(next(iter(self._pending)))
            self._pending[nonce] = Binding(now + NONCE_TTL_SECONDS, tool, str(request.plan_id),
                                           str(request.plan_hash), str(request.action), request.run_id)
        return nonce

    def take(self, nonce: object, plan_id: object) -> Binding | None:
        """The binding of ``nonce`` when it was minted for ``plan_id``, is unexpired and unused; else None.
        The nonce is used up by this call whatever it returns (a wrong plan id spends it too)."""
        if not isinstance(nonce, str) or not nonce:
            return None
        with self._lock:
            bound = self._pending.pop(nonce, None)
        if bound is None or bound.expires <= self._clock() or bound.plan_id != plan_id:
            return None
        return bound


def _tool_call(tool: str, request: Any, confirmation: str | None = None) -> Call:
    """The gated tool's call for ``request`` (a launch by plan id, the others by run id)."""
    if request.action == "launch":
        return call(tool, plan_id=request.plan_id, confirmation=confirmation)
    return call(tool, run_id=request.run_id, confirmation=confirmation)


_MEANING = {
    "launch": "Approve lets the assistant launch exactly this plan, once, within 15 minutes; it spends money on the "
              "paying account. Any change to the plan voids the approval.",
    "resume": "Approve lets the assistant start this NEW billed run, once, within 15 minutes; any change to the plan "
              "voids the approval.",
    "stop": "Approve lets the assistant stop this run, once, within 15 minutes. Stopping cannot be undone.",
    "pause": "Approve lets the assistant pause this run, once, within 15 minutes.",
    "restart": "Approve lets the assistant restart this run from its latest READY checkpoint, once, within 15 "
               "minutes; the steps since then run, and bill, again.",
}


def view_error(tool: str, request: Any) -> ToolError:
    """The ``confirmation_required`` the model reads when the view is shown with the result."""
    again = _tool_call(tool, request)
    return ToolError(
        code="confirmation_required",
        message=f"Plan {request.plan_id} ({request.action}) needs the person's approval. It is shown to them in the "
                "approval view with this result, with Approve and Refuse buttons.",
        fix=f"Tell the person the plan waits for their click in the view (or `{request.approve_command}` in their "
            f"own terminal). The view sends you the confirmation code mfc_... when they approve; then call {again} "
            "with it as the confirmation. If they refuse, do not ask again unless they change their mind. Never "
            "invent or reuse a code.")


def view_meta(tool: str, request: Any, nonce: str) -> dict[str, Any]:
    """The result ``_meta`` the view reads (:data:`META_KEY`): the plan as the person sees it, and the nonce."""
    return {META_KEY: {
        "nonce": nonce, "answer_tool": ANSWER_TOOL, "tool": tool, "plan_id": request.plan_id,
        "action": request.action, "run_id": request.run_id, "owner": request.owner, "usd_high": request.usd_high,
        "summary": request.summary, "ttl_seconds": request.ttl_seconds, "approve_command": request.approve_command,
        "meaning": _MEANING.get(request.action, ""),
    }}


class AnswerInput(BaseModel):
    """The view's answer: the plan, the nonce of that view, and the person's click."""

    model_config = ConfigDict(extra="forbid")

    plan_id: str = Field(min_length=1, max_length=200, description="The plan the view showed.")
    nonce: str = Field(default="", max_length=200, description="The single-use nonce the view got with the result.")
    decision: Literal["approve", "refuse"] = Field(description="The button the person clicked.")


class AnswerResult(BaseModel):
    """What the view shows and passes to the chat after a click."""

    plan_id: str = Field(description="The plan answered.")
    action: str = Field(description="launch | resume | stop | pause | restart.")
    decision: Literal["approve", "refuse"] = Field(description="What the person clicked.")
    channel: str = Field(default="mcp_app", description="The approval channel recorded in the state store.")
    confirmation: str | None = Field(default=None, description="The approval code mfc_... (approve only): valid 15 "
                                                               "minutes, works once, for this plan only.")
    message: str = Field(description="What happened, for the person.")
    chat_message: str = Field(description="The user message the view sends to the chat (ui/message).")


def answer_tool() -> dict[str, Any]:
    """The app-only tool as a ``tools/list`` item."""
    from skill.registry import portable_schema

    return {"name": ANSWER_TOOL, "title": "Approval view answer",
            "description": "Record the person's click in the approval view. App-only: it needs the view's "
                           "single-use nonce.",
            "inputSchema": portable_schema(AnswerInput),
            "annotations": {"title": "Approval view answer", "readOnlyHint": False, "destructiveHint": False,
                            "idempotentHint": False, "openWorldHint": False},
            "_meta": {"ui": {"resourceUri": VIEW_URI, "visibility": ["app"]}}}


def linked(tool: dict[str, Any]) -> dict[str, Any]:
    """A ``tools/list`` item linked to its view: a gated tool to the approval view, mf_check_progress and
    mf_run_report to the run card (others unchanged)."""
    uri = VIEW_URI if tool["name"] in GATED_TOOLS else CARD_URI if tool["name"] in CARD_TOOLS else None
    if uri is None:
        return tool
    return {**tool, "_meta": {**(tool.get("_meta") or {}), "ui": {"resourceUri": uri}}}


def answer(arguments: Any, nonces: ViewNonces, ctx: Any) -> BaseModel:
    """Carry out one click of the view: an :class:`AnswerResult`, or a ToolError (``bad_arguments``;
    ``confirmation_required`` for a missing, unknown, used, expired or other plan's nonce; what
    :func:`tools.launch.approve_plan` raises: ``plan_changed``, ``already_dispatched``, ``plan_expired``...).
    Approve mints the approval (channel ``mcp_app``); Refuse mints nothing. Both are in the audit trail."""
    from skill.registry import audit
    from tools.errors import FieldProblem, ToolFailure
    from tools.launch import approve_plan

    try:
        parsed = AnswerInput.model_validate(arguments if isinstance(arguments, dict) else {})
    except ValidationError as exc:  # the field and what is wrong, never the value
        problems = [FieldProblem(path=".".join(str(p) for p in e["loc"]), problem=e["msg"]) for e in exc.errors()]
        return ToolError(code="bad_arguments", message=f"{ANSWER_TOOL}: invalid arguments: "
                         + "; ".join(f"{p.path}: {p.problem}" for p in problems),
                         fix="The approval view sends plan_id, nonce and decision.", fields=problems)
    bound = nonces.take(parsed.nonce, parsed.plan_id)
    recorded = {"plan_id": parsed.plan_id, "decision": parsed.decision}  # the nonce is spent: not kept
    if bound is None:
        result: BaseModel = ToolError(
            code="confirmation_required",
            message="This answer does not carry a nonce minted for a view of this plan that is still unused; "
                    "nothing was approved.",
            fix="Only the approval view shown with a gated tool's result can answer, once. Ask the assistant to "
                "call the tool again for a fresh view, or approve at a terminal with `model-factory approve PLAN_ID`.")
        audit(ctx, "mcp", ANSWER_TOOL, recorded, result)
        return result
    try:
        if parsed.decision == "refuse":
            result = AnswerResult(
                plan_id=bound.plan_id, action=bound.action, decision="refuse",
                message=f"Refused: plan {bound.plan_id} was not approved.",
                chat_message=f"I refused plan {bound.plan_id} ({bound.action}) in the approval view. Do not carry "
                             "it out.")
        else:
            token = approve_plan(bound.plan_id, "mcp_app", ctx, plan_hash=bound.plan_hash)
            again = _tool_call(bound.tool, bound, token)
            result = AnswerResult(
                plan_id=bound.plan_id, action=bound.action, decision="approve", confirmation=token,
                message=f"Approved plan {bound.plan_id}: the code is valid 15 minutes, once.",
                chat_message=f"I approved plan {bound.plan_id} ({bound.action}) in the approval view. Confirmation: "
                             f"{token} (valid 15 minutes, once). Call {again} now.")
    except ToolFailure as failure:
        result = failure.error
    audit(ctx, "mcp", ANSWER_TOOL, recorded, result)
    return result
