"""Approval channels: how a human's "yes" to one exact plan becomes a confirmation token.

An agent can never approve. The channels, all ending in :func:`approve_plan` (or, inside a
dispatch that already re-checked the plan, :func:`tools.guardrails.confirmation.mint`):

* **terminal** - ``model-factory approve PLAN_ID`` (:mod:`skill.approval`): a person at an
  interactive terminal reads :func:`plan_request`'s summary, types a short confirmation, and
  gets a code ``mfc_...`` to paste to the agent (valid 15 minutes, launches once). It needs
  only the state folder: no API key, platform settings or forwarded secrets.
* **host_callback** - ``ctx.approver(request) -> bool``: the host shows
  ``request.summary`` to the person (a dialog, a chat button). ``mf_dispatch_run`` /
  ``mf_stop_run`` call it when no confirmation was passed.
* **mcp_elicitation** - the MCP server's ``ctx.approver`` asks the user with an elicitation
  form; it carries ``channel = "mcp_elicitation"``, which the store records.
* **mcp_app** - the MCP server's approval view (:mod:`skill.apps`, hosts that render MCP Apps): the
  person clicks Approve in the plan view shown with the gated tool's result; an app-only tool, called
  with the single-use nonce minted for that view of that plan, calls :func:`approve_plan`.
* **policy** - a budget policy written by the person (:mod:`tools.guardrails.policy`),
  outside any folder the agent writes, pre-authorizes launches within its limits.

Binding: every approval is minted for the ``plan_hash`` recorded with the plan, whose summary
is what the person saw. The binding check is at dispatch, in the agent's process (which has the
credentials and secrets): :func:`rebuild` recomputes the plan over the *current* config file,
env files, owner, prices and secret names, and :func:`check_unchanged` refuses ``plan_changed``,
naming each fact that differs from the record, unless the hash is the same; then
:func:`tools.guardrails.confirmation.claim_dispatch` accepts only an approval of that hash.
:func:`plan_request` (the terminal) checks what a person's shell can: the plan is in the store,
not already sent, not older than :data:`PLAN_MAX_AGE_SECONDS`, and the config file's bytes
still hash to the planned ``file_sha256``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.configs import read_bounded
from tools.core import Context, shell_command
from tools.errors import Call, FieldProblem, ToolFailure, call, fail
from tools.guardrails.confirmation import (
    LaunchState,
    imported_failure,
    launch_state,
    material_changes,
    mint,
    unresolved_launches,
)
from tools.guardrails.policy import PlanFacts, Policy, PolicyDecision, evaluate, load_for_context
from tools.guardrails.records import utc_now
from tools.guardrails.store import Store
from tools.guardrails.text import shown
from tools.launch._plan import APPROVAL_TTL_SECONDS, Draft, PlanRunInput, build_plan
from tools.launch._reconcile import Lookup, unresolved_failure
from tools.platform import errors as perr
from tools.platform import wire

#: A plan older than this (seconds since it was recorded) is not approved: its prices and
#: summary may be stale. The person asks the agent to plan again.
PLAN_MAX_AGE_SECONDS = 24 * 3600


class ApprovalRequest(BaseModel):
    """What a human approval channel shows and binds to (passed to ``ctx.approver``)."""

    plan_id: str = Field(description="The plan to approve.")
    plan_hash: str = Field(description="Hash of the exact plan shown; the approval covers only this.")
    action: Literal["launch", "resume", "stop", "pause", "restart"] = Field(description=(
        "launch: start a run (spends money); resume: start a NEW billed run continuing a paused one; stop / pause / "
        "restart: act on a run."))
    summary: str = Field(description="The plan in words: owner, GPUs, price, cost, steps, secrets, warnings.")
    owner: str = Field(description="Who pays / whose run: 'personal' or a team id.")
    usd_high: float | None = Field(default=None, description="High cost estimate, USD (launch); null = unknown.")
    ttl_seconds: int = Field(default=APPROVAL_TTL_SECONDS, description="How long an approval stays valid.")
    approve_command: str = Field(description="The terminal command a person runs to approve.")
    run_id: str | None = Field(default=None, description="The run a stop, pause, restart or resume plan acts on "
                                                         "(None for a launch).")
    planned_at: str | None = Field(default=None, description="ISO 8601 time the plan was recorded.")


def approve_command(plan_id: str, ctx: Context | None = None) -> str:
    """The command a person pastes to approve: ``<program> approve <plan_id>``, with
    ``MODEL_FACTORY_STATE_DIR=<state folder>`` in front when the agent's state folder is not the
    per-user one a person's shell finds by itself (:meth:`Context.state_assignments`). The program
    is named so the person's shell finds it (:func:`tools.core.program`)."""
    if ctx is None:
        return shell_command(["approve", plan_id])
    return shell_command(["approve", plan_id], ctx.env, ctx.state_assignments())


def _owner(team_id: str | None) -> str:
    return team_id or "personal"


def request_from_state(state: LaunchState, ctx: Context | None = None) -> ApprovalRequest:
    """The approval request of a plan as recorded (no re-check; see :func:`plan_request`)."""
    plan = state.plan
    return ApprovalRequest(
        plan_id=state.plan_id, plan_hash=state.plan_hash, action=plan.action, summary=screen_text(plan.summary),
        owner=_owner(plan.team_id), usd_high=plan.usd_high, approve_command=approve_command(state.plan_id, ctx),
        run_id=plan.run_id, planned_at=state.planned_at)


def screen_text(text: object) -> str:
    """Text from the store (put there from an agent's arguments or the platform's answers) as a
    person's screen shows it: each line escaped (:func:`tools.guardrails.text.shown`), so no
    character in it moves the cursor, recolours or rewrites another line."""
    return "\n".join(shown(line) for line in str(text or "").split("\n"))


def refuse_spent(state: LaunchState) -> None:
    """Raise when the plan was already sent: approving it again would mean nothing."""
    if state.status == "dispatched":
        raise fail("already_dispatched", f"Plan {state.plan_id} was already carried out"
                   + (f" (run {state.run_id})" if state.run_id else "") + "; it is never sent twice.",
                   "Nothing to approve. Monitor the run" + (f" ({watch})" if (watch := _watch(state)) else "")
                   + "; to launch again, plan a new run.", next_calls=[watch] if watch else [])
    if state.status in ("ambiguous", "in_flight"):
        again, launches = call("mf_dispatch_run", plan_id=state.plan_id), call("mf_list_launches")
        raise fail("ambiguous_launch", f"Plan {state.plan_id} may already have reached the platform; it must not "
                   "be sent again, so it cannot be approved again.",
                   f"Call {again} (it only reconciles) or see {launches}.", ambiguous=True,
                   next_calls=[again, launches])


def _watch(state: LaunchState) -> Call | None:
    return call("mf_check_progress", run_id=state.run_id) if state.run_id else None


def rebuild(ctx: Context, state: LaunchState) -> Draft:
    """A launch plan recomputed from its recorded arguments over the current config file, env
    files, owner and prices (the dispatch-time binding check; needs the agent's credentials)."""
    try:
        args = PlanRunInput.model_validate(state.plan.arguments)
    except ValueError:
        raise fail("unknown_plan", f"The record of plan {state.plan_id} is not a launch plan this version "
                   "understands.", "Call mf_plan_run to make a new plan.") from None
    return build_plan(args, ctx, state.plan_id, prepare=False)


def _shown(name: str, value: Any) -> str:
    if name == "team_id" and value is None:
        return "personal"
    if value is None:
        return "none"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if name.endswith("sha256") and isinstance(value, str):
        return value[:12]
    return str(value)


def _plan_changed(plan_id: str, changes: list[tuple[str, Any, Any]], why: str = "") -> ToolFailure:
    """``plan_changed`` naming each fact that moved (``name old -> new``), also as ``fields``."""
    said = "; ".join(f"{name} {_shown(name, old)} -> {_shown(name, new)}" for name, old, new in changes)
    return fail("plan_changed",
                f"Plan {plan_id} is no longer what was shown{why}: " + (said or "its hash differs from the "
                "recorded plan (the record does not say which fact moved)") + ".",
                "Plan again (with the same arguments), show the new summary, and get the new plan approved.",
                fields=
[FieldProblem(path=name, problem=f"planned {_shown(name, old)}, now {_shown(name, new)}")
                        for name, old, new in changes])


def check_unchanged(state: LaunchState, plan_hash: str, material: dict[str, Any]) -> None:
    """``plan_changed`` unless the plan rebuilt now (its ``plan_hash`` and ``material``) has the
    recorded plan hash; the error names the facts that differ from the recorded plan (e.g.
    ``usd_per_gpu_hour 1.8 -> 2.1``, ``team_id``, ``config_sha256``, ``already_resumed_as``) in
    its message and ``fields``."""
    if plan_hash != state.plan_hash:
        raise _plan_changed(state.plan_id, material_changes(state.plan.material, material))


def check_locally(state: LaunchState, now: datetime | None = None) -> None:
    """What a person's terminal can check without credentials: the plan is not older than
    :data:`PLAN_MAX_AGE_SECONDS` (``plan_expired``) and, for a launch, the config file's bytes
    still hash to the planned ``file_sha256`` (``config_not_found``, ``plan_changed``)."""
    now = now or utc_now()
    planned = datetime.fromisoformat(str(state.planned_at)) if state.planned_at else None
    if planned is None or now - planned > timedelta(seconds=PLAN_MAX_AGE_SECONDS):
        raise fail("plan_expired", f"Plan {state.plan_id} was made at {state.planned_at or 'an unknown time'}, more "
                   f"than {PLAN_MAX_AGE_SECONDS // 3600} hours ago; its prices and summary may be out of date.",
                   "Ask the agent to plan again (mf_plan_run) and approve the new plan.")
    if state.plan.action != "launch":
        return
    path, planned_sha = state.plan.config_path, state.plan.file_sha256
    try:
        current = hashlib.sha256(read_bounded(Path(str(path)))).hexdigest()
    except ToolFailure as failure:
        raise fail("config_not_found", f"The config file of plan {state.plan_id} cannot be used: "
                   f"{failure.error.message}", "Restore the file, or ask the agent to plan again.") from None
    if current != planned_sha:
        raise _plan_changed(state.plan_id, [("file_sha256", planned_sha, current)],
                            f" (the config file {path} was edited since planning)")


def plan_request(plan_id: str, ctx: Context, *, now: datetime | None = None) -> ApprovalRequest:
    """The request a person approves for ``plan_id``: the summary recorded at planning, after
    the local checks of :func:`check_locally`. Reads only the store and the config file (no
    platform call, no credentials, no secrets); dispatch re-checks everything else.

    For a stop, pause or restart the summary ends with the run's status read now.

    Raises ToolFailure: ``unknown_plan``, ``already_dispatched`` / ``ambiguous_launch`` (already
    sent), ``conflict`` (a stop, pause or restart that no longer applies), ``plan_expired``,
    ``config_not_found``, ``plan_changed`` (the config file was edited), ``unknown_plan`` (also for a
    plan imported from an old ledger: never approved),
    ``unresolved_launch`` (an earlier launch of the same config is unresolved and this plan does
    not acknowledge it).
    """
    store = ctx.store()
    state = launch_state(store, plan_id)
    refuse_spent(state)
    if state.plan.imported_from is not None:
        raise imported_failure(state.plan)
    check_locally(state, now)
    refuse_unacknowledged(store, state)
    request = request_from_state(state, ctx)
    if request.action in _CONTROL:
        request.summary += "\n" + shown(f"  Status now:    {_status_now(ctx, state)}")
    return request


def _no_longer_applies(action: str, status: str) -> str | None:
    """Why a stop, pause or restart of a run in ``status`` would do nothing, as the tools decide
    before sending (stop: the run ended or paused; pause: also PAUSING; restart: not RUNNING)."""
    upper = status.upper()
    if action == "restart":
        return None if upper == "RUNNING" else "only a RUNNING run can be restarted"
    if wire.RunStatus.is_terminal(upper) or (action == "pause" and upper == "PAUSING"):
        return "it has already ended or paused"
    return None


_CONTROL = ("stop", "pause", "restart")


def _status_now(ctx: Context, state: LaunchState) -> str:
    """The run's status read now (GET /rft/runs/{id}) for a stop, pause or restart plan; raises
    ``conflict`` when the action no longer applies (the run ended, paused, or for a restart is not
    RUNNING). When the platform cannot be read here (no API key in the person's shell), says so:
    the action's own tool checks the status again before sending."""
    run_id = str(state.plan.run_id)
    action = state.plan.action
    try:  # bounded: a person is waiting at the screen
        with ctx.platform_client(ctx.http_timeouts().capped(10.0), attempts=1) as client:
            status = client.get_run(run_id).status
    except perr.PlatformError as exc:
        return f"could not be read here ({exc.message}); the {action} checks it again before sending"
    if why := _no_longer_applies(action, status):
        inspect = call("mf_get_run", run_id=run_id)
        raise fail("conflict", f"Run {run_id} is {status} now, so the {action} of plan {state.plan_id} no longer "
                   f"applies ({why}); nothing was approved.", f"Nothing to approve. See the run with {inspect}.",
                   next_calls=[inspect])
    return f"{status} (read from the platform just now)"


def refuse_unacknowledged(store: Store, state: LaunchState) -> None:
    """``unresolved_launch`` when the store holds an unresolved launch of the same owner and config
    file that this launch plan does not acknowledge (its summary does not show it, so a person would
    approve a second run unknowingly; dispatch would refuse it too). Store only, no platform call."""
    plan = state.plan
    if plan.action != "launch" or not plan.file_sha256:
        return
    acknowledged = set(plan.acknowledged_unresolved)
    missing = [s for s in unresolved_launches(store, platform_url=plan.platform_url, team_id=plan.team_id,
                                              account_id=plan.account_id, file_sha256=plan.file_sha256,
                                              exclude=state.plan_id)
               if s.plan_id not in acknowledged]
    if missing:
        raise unresolved_failure([Lookup(state=s, problem="not from this terminal: approving makes no platform "
                                         "call") for s in missing], planning=False,
                                 config_path=plan.config_path)


def approve_plan(plan_id: str, channel: str, ctx: Context, *, plan_hash: str | None = None,
                 now: datetime | None = None, checked: str | None = None) -> str:
    """Record a human's approval of ``plan_id`` on ``channel`` and return the token (``mfc_...``),
    bound to the plan hash recorded at planning.

    ``channel``: ``terminal`` | ``mcp_elicitation`` | ``mcp_app`` | ``host_callback`` | ``policy``. Call it
    only after a person said yes to the summary of :func:`plan_request`; pass that request's
    ``plan_hash`` so a different plan record cannot be approved in its place. Valid
    :data:`~tools.launch._plan.APPROVAL_TTL_SECONDS`, single use; ``mf_dispatch_run`` refuses it
    (``plan_changed``) if the plan rebuilt then differs. ``checked``: what the channel checked, as the
    approval records it (default :data:`tools.guardrails.confirmation.CHECKED`). Raises like
    :func:`plan_request`.
    """
    request = plan_request(plan_id, ctx, now=now)
    if plan_hash is not None and plan_hash != request.plan_hash:
        raise fail("plan_changed", f"Plan {plan_id} changed while it was being approved.",
                   "Show the new summary (call mf_plan_run again) and ask again.")
    return mint(ctx.store(), plan_id, request.plan_hash, channel, APPROVAL_TTL_SECONDS, owner=request.owner,
                checked=checked)


def policy_decision(ctx: Context, facts: PlanFacts,
                    count_active_runs: Callable[[], int | None] | None = None) -> tuple[Policy, PolicyDecision]:
    """The budget policy of ``ctx`` (:func:`tools.guardrails.policy.load_for_context`) and its
    decision on ``facts``; the owner's active runs are counted (``count_active_runs``, GET
    /rft/runs) only when the policy limits them. Planning says the decision, dispatch acts on it."""
    policy = load_for_context(ctx)
    limits = policy.limits
    if limits is not None and limits.max_concurrent_runs is not None and count_active_runs is not None:
        facts = facts.model_copy(update={"active_runs": count_active_runs()})
    return policy, evaluate(policy, facts)


def obtain_confirmation(
    ctx: Context,
    store: Store,
    request: ApprovalRequest,
    given: str | None,
    facts: PlanFacts | None,
    count_active_runs: Callable[[], int | None] | None = None,
) -> str:
    """A token for ``request``: the ``given`` confirmation, else the budget policy (launches and
    resumes only: ``facts`` set; its reasons are recorded with the approval; never for stop, pause
    or restart), else the host approver callback.

    Raises ToolFailure ``approval_refused`` (the person said no, or the host channel failed)
    or ``confirmation_required`` (no channel; the fix names the terminal command).
    """
    if given and given.strip():
        return given.strip()
    notes: list[str] = []
    if facts is not None:
        policy, decision = policy_decision(ctx, facts, count_active_runs)
        if decision.allowed:
            token = mint(store, request.plan_id, request.plan_hash, "policy", APPROVAL_TTL_SECONDS,
                         owner=request.owner, checked=f"budget policy {decision.policy_path} (sha256 "
                         f"{str(decision.policy_sha256)[:12]}): " + "; ".join(decision.reasons))
            return token
        if policy.limits is not None:
            notes = [f"The budget policy {policy.path} does not cover it: " + "; ".join(decision.reasons)]
        elif policy.problem:
            notes = [f"The budget policy is not used: {policy.problem}"]
    if ctx.approver is not None:
        try:
            approved = ctx.approver(request) is True
        except Exception as exc:  # noqa: BLE001 - a broken channel fails closed
            raise fail("approval_refused", f"The host's approval prompt failed ({type(exc).__name__}); nothing was "
                       "done.", f"Ask the user to approve with `{request.approve_command}` in a terminal.") from None
        if not approved:
            raise fail("approval_refused", f"The user did not approve plan {request.plan_id}; nothing was done.",
                       f"Ask the user what to change, then call {_TOOL_OF[request.action]} again.")

        channel = getattr(ctx.approver, "channel", "host_callback")  # the MCP server's says mcp_elicitation
        if channel not in ("host_callback", "mcp_elicitation"):  # a callback cannot claim terminal or policy
            channel = "host_callback"
        return mint(store, request.plan_id, request.plan_hash, channel, APPROVAL_TTL_SECONDS,
                    owner=request.owner)
    # A launch plan's summary came with mf_plan_run; the others are made by their tool, so the summary travels now.
    shown = f"\n{request.summary}" if request.action != "launch" else ""
    raise fail(
        "confirmation_required",
        f"{_VERB[request.action]} plan {request.plan_id} needs a person's confirmation; none was given and no "
        "approval channel is attached." + (" " + " ".join(notes) if notes else "") + shown,
        f"Show the user the plan summary{' above' if shown else ''} and ask them to approve it in their own terminal: "
        f"`{request.approve_command}`. It prints a confirmation code mfc_... (valid 15 minutes, works once) and the "
        f"command that uses it; then call {_TOOL_OF[request.action]} again with that code as the confirmation. Never "
        "invent or reuse a code.",
    )


#: How each action's confirmation_required opens, and the tool that carries the plan out.
_VERB = {"launch": "Launching", "resume": "Resuming a run with", "stop": "Stopping a run with",
         "pause": "Pausing a run with", "restart": "Restarting a run with"}
_TOOL_OF = {"launch": "mf_dispatch_run", "resume": "mf_resume_run", "stop": "mf_stop_run", "pause": "mf_pause_run",
            "restart": "mf_restart_run"}
