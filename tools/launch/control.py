"""Run control: stop, pause, restart and resume a run, each gated by a person's approval.

* ``mf_stop_run`` (:func:`stop_run`) - PUT ``/rft/runs/{id}/stop``, then polls GET
  ``/rft/runs/{id}`` until terminal (bounded), as ``prime train stop`` does (reference §5.3).
* ``mf_pause_run`` (:func:`pause_run`) - POST ``/training/runs/{id}/pause`` (no body; answers
  ``{runId, status}``, reference §2.1 row 4, §3.4), then polls until PAUSED (bounded). A paused
  run keeps its checkpoint and can be resumed.
* ``mf_restart_run`` (:func:`restart_run`) - PUT ``/rft/runs/{id}/restart`` (row 11, §5.4:
  valid only for RUNNING runs), then polls until RUNNING again (bounded).
* ``mf_resume_run`` (:func:`resume_run`) - POST ``/training/runs/{id}/resume`` (row 3): a NEW
  billed run, so it is planned like a launch (cost, owner, GPUs; :mod:`tools.launch._resume`),
  a budget policy may approve it within its limits, and a lost answer is reconciled, never re-sent.

Stop, pause and restart act on a run that already bills: a person confirms THAT action on THAT
run (the host's approval prompt, MCP elicitation, or ``model-factory approve PLAN_ID`` at a
terminal, whose code names the plan); a budget policy never approves them. Each call records a
plan, its approval, the attempt and its outcome in the store (``mf_list_launches`` shows them),
and verifies the resulting state. A run already in the wanted state gets nothing sent.

Each action is sent exactly once, as a launch is: a request that was answered by an HTTP error or
whose answer was lost is never reported as done. A stop or pause counts as done when the run then
reaches the state it leads to (recorded ``reconciled``, with that evidence); otherwise, and always
for a restart (a restarted run is RUNNING, as it was), the tool answers ``ambiguous`` and never
sends it again, and the next stop, pause or restart plan of that run names the unresolved one in
its summary and its hashed material (``acknowledged_unresolved``): a person decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from tools.core import RUN_ID, Context, owner_label, require_run, tool
from tools.errors import Call, ToolFailure, call, fail
from tools.guardrails import confirmation as gate
from tools.guardrails.records import PlanRecord
from tools.guardrails.store import Store
from tools.guardrails.text import shown
from tools.launch._approval import check_unchanged, obtain_confirmation, request_from_state
from tools.launch._dispatch import ResumeRunResult, new_plan_id, plan_of_token, refused
from tools.launch._plan import APPROVAL_TTL_SECONDS
from tools.launch._reconcile import Lookup, look_for_lost_action, unresolved_action_lines
from tools.launch._resume import ResumeRunInput, build_resume, carry_out, record
from tools.platform import errors as perr
from tools.platform import wire

POLL_SECONDS = 3.0
MAX_WAIT_SECONDS = 300.0
Action = Literal["stop", "pause", "restart"]


def _confirmation_field(action: str) -> str:
    return (f"The code (mfc_...) the user got from `model-factory approve {action.upper()}_PLAN_ID` for this "
            f"{action}. Null: use the host's approval prompt; without one the error shows the plan and names the "
            "command to run. Never invent one.")


def _timeout_field(target: str) -> float:
    return Field(default=60.0, ge=0, le=MAX_WAIT_SECONDS, description=(
        f"Seconds to wait for the run to reach {target} after the request (polling every 3 s)."))


class StopRunInput(BaseModel):
    """Arguments of ``mf_stop_run``."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1, max_length=200, description="The run to stop (irreversible).")
    confirmation: str | None = Field(default=None, description=_confirmation_field("stop"))
    timeout_seconds: float = _timeout_field("a terminal status")


class PauseRunInput(BaseModel):
    """Arguments of ``mf_pause_run``."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = RUN_ID
    confirmation: str | None = Field(default=None, description=_confirmation_field("pause"))
    timeout_seconds: float = _timeout_field("PAUSED")


class RestartRunInput(BaseModel):
    """Arguments of ``mf_restart_run``."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = RUN_ID
    confirmation: str | None = Field(default=None, description=_confirmation_field("restart"))
    timeout_seconds: float = _timeout_field("RUNNING again")


class ControlResult(BaseModel):
    """What a stop, pause or restart did and the state it left. Source: the control request, then GET
    /rft/runs/{id} until the wanted state or timeout_seconds."""

    run_id: str = Field(description="The run.")
    status: str = Field(description="Its last status as read after the request.")
    plan_id: str | None = Field(description="The control plan (state store), when a request was sent.")
    approval_channel: str | None = Field(description="How it was approved (terminal, host_callback, mcp_elicitation, "
                                                      "mcp_app).")
    waited_seconds: float = Field(description="Seconds spent polling.")
    message: str = Field(description="What happened, in words.")
    next_step: str = Field(description="What to call next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


class StopRunResult(ControlResult):
    """Outcome of a stop. Source: PUT /rft/runs/{id}/stop, GET /rft/runs/{id}."""

    outcome: Literal["stopped", "terminal", "still_tearing_down", "already_terminal"] = Field(description=(
        "stopped: STOPPED; terminal: reached another terminal status before the stop completed; "
        "still_tearing_down: not terminal within timeout_seconds; already_terminal: nothing was sent."))


class PauseRunResult(ControlResult):
    """Outcome of a pause. Source: POST /training/runs/{id}/pause, GET /rft/runs/{id}."""

    outcome: Literal["paused", "still_pausing", "terminal", "already_paused", "already_terminal"] = Field(
        description="paused: PAUSED (resumable with mf_resume_run); still_pausing: PAUSING after timeout_seconds "
                    "(saving a checkpoint); terminal: ended otherwise (STOPPED, FAILED, COMPLETED); already_paused "
                    "/ already_terminal: nothing was sent.")


class RestartRunResult(ControlResult):
    """Outcome of a restart. Source: PUT /rft/runs/{id}/restart, GET /rft/runs/{id}, GET /rft/runs/{id}/progress."""

    outcome: Literal["restarted", "still_starting", "terminal", "already_terminal"] = Field(description=(
        "restarted: RUNNING again after the request; still_starting: not RUNNING within timeout_seconds; terminal: "
        "ended instead; already_terminal: nothing was sent."))
    latest_step: int | None = Field(default=None, description=(
        "Latest step after the restart (it continues from its latest READY checkpoint); null when unknown."))


# -- the gate shared by stop, pause and restart --------------------------------------------------


_WHAT = {
    "stop": "stop run {run} ({name}). Irreversible: the run cannot be started again (a PAUSED run could be "
            "resumed; a STOPPED one cannot).",
    "pause": "pause run {run} ({name}): it saves a checkpoint and stops billing GPUs; resuming it later starts a "
             "NEW billed run from that checkpoint, planned and approved like a launch.",
    "restart": "restart run {run} ({name}) from its latest READY checkpoint (steps since then are done again, and "
               "billed).",
}


def _still_unresolved(ctx: Context, store: Store, run: wire.RLRun, plan_id: str) -> list[Lookup]:
    """Earlier stop, pause and restart plans of ``run`` whose answer was lost, still unresolved after one
    look each (:func:`tools.launch._reconcile.look_for_lost_action`), except those a later plan of the
    run that was carried out acknowledged (a person decided on them then)."""
    plans = gate.list_launches(store, 1_000_000, platform_url=ctx.settings.base_url)
    decided = {pid for s in plans if s.plan.run_id == run.id and s.status == "dispatched"
               for pid in s.plan.acknowledged_unresolved}
    earlier = [s for s in gate.unresolved_actions(store, run.id, platform_url=ctx.settings.base_url, exclude=plan_id)
               if s.plan_id not in decided]
    return [lookup for lookup in (look_for_lost_action(ctx, store, s) for s in earlier) if lookup.run is None]


def _material(ctx: Context, run: wire.RLRun, action: Action, unresolved: list[Lookup]) -> dict:
    material: dict[str, Any] = {"action": action, "platform_url": ctx.settings.base_url, "account_id": ctx.account_id(),
                "run_id": run.id, "config_sha256": None, "team_id": run.team_id, "gpu_type": None,
                "gpu_count": run.gpu_count, "volume": None, "source_ref": None, "image_tag": None, "secret_names": [],
                "max_steps": None, "cost": None}
    if unresolved:  # only then: a plan with nothing unresolved keeps the hash it always had
        material["acknowledged_unresolved"] = [lookup.state.plan_id for lookup in unresolved]
    return material


def _plan(ctx: Context, store: Store, run: wire.RLRun, action: Action) -> gate.LaunchState:
    plan_id = new_plan_id(action)
    unresolved = _still_unresolved(ctx, store, run, plan_id)
    material = _material(ctx, run, action, unresolved)
    summary = "\n".join(shown(line) for line in [  # the run's name and status are the platform's text
        f"{action.capitalize()} plan {plan_id}: " + _WHAT[action].format(run=run.id, name=run.name or "unnamed"),
        *unresolved_action_lines(unresolved),
        f"  Owner:   {owner_label(run.team_id)}",
        f"  Model:   {run.base_model or 'unknown'}; status when planned {run.status}; GPUs "
        f"{run.gpu_count or 'unknown'}",
        f"  Approval valid {APPROVAL_TTL_SECONDS // 60} minutes, for this run only, once; a budget policy never "
        "approves it."])
    gate.record_plan(store, PlanRecord.of(plan_id, gate.plan_hash(material), material, summary=summary,
                                          owner_label=owner_label(run.team_id), model=run.base_model))
    return gate.launch_state(store, plan_id)


def _state(ctx: Context, store: Store, run: wire.RLRun, action: Action, confirmation: str | None) -> gate.LaunchState:
    """A new plan without a confirmation; else the plan the code names, which must be this action on this run."""
    if not confirmation or not confirmation.strip():
        return _plan(ctx, store, run, action)
    state = plan_of_token(store, confirmation)
    if state is None or state.plan.action != action or state.plan.run_id != run.id:
        again = call(f"mf_{action}_run", run_id=run.id)
        raise fail("confirmation_invalid", f"That confirmation does not approve the {action} of run {run.id}.",
                   f"Call {again} (no confirmation) to get the approve command, and ask the user to run it.",
                   next_calls=[again])
    return state


@dataclass
class _Sent:
    """What :func:`_send` did: the status answered (or the run's before), the plan, the approval channel,
    a note for the message, and ``lost`` (why the request's answer is unknown; None when it answered)."""

    status: str
    state: gate.LaunchState
    channel: str | None
    note: str = ""
    lost: str | None = None
    attempt_id: str | None = None


def _lost_failure(run: wire.RLRun, action: Action, state: gate.LaunchState, why: str, status: str) -> ToolFailure:
    """``ambiguous``: the request may or may not have been carried out, and the run does not show which."""
    inspect, logs = call("mf_get_run", run_id=run.id), call("mf_get_logs", run_id=run.id)
    return fail("ambiguous", f"The {action} of run {run.id} (plan {state.plan_id}) was sent and {why}; the run is "
                f"{status}, which does not show whether the {action} was carried out. It was not sent again.",
                f"Do not repeat it. Look at the run ({inspect}, {logs}); the next {action} plan of this run names "
                f"plan {state.plan_id}, and a person decides whether to send another.", ambiguous=True,
                next_calls=[inspect, logs])


def _send(ctx: Context, run: wire.RLRun, action: Action, confirmation: str | None, send: Callable[[], str]) -> _Sent:
    """Approve (a person: given code, host prompt or MCP elicitation; never a policy), claim, send once,
    record the outcome. A plan sent before is not sent again: its lost answer is looked for instead
    (:func:`tools.launch._reconcile.look_for_lost_action`; still unknown: ``ambiguous``). An answer
    that is an HTTP error or lost after sending is ``lost`` (the caller checks the run; it never
    reports that as done)."""
    store = ctx.store()
    store.require_writable()
    state = _state(ctx, store, run, action, confirmation)
    if state.status in gate.UNRESOLVED_STATUSES:
        lookup = look_for_lost_action(ctx, store, state)
        if lookup.run is None:
            raise _lost_failure(run, action, state, "its answer was lost earlier", run.status)
        state = lookup.state
    if state.status == "dispatched":
        channel = next((a.channel for a in reversed(state.attempts) if a.channel), None)
        return _Sent(run.status, state, channel, f" This approval's {action} was sent before; it was not sent again.")
    if confirmation and confirmation.strip():  # bound to what the person saw: the same run, owner, unresolved ones
        check_unchanged(state, *_rehash(ctx, store, run, action, state.plan_id))
    token = obtain_confirmation(ctx, store, request_from_state(state, ctx), confirmation, None)
    claim = gate.claim_dispatch(store, state.plan_id, state.plan_hash, token)
    try:
        status = send()
    except perr.Unavailable as exc:
        if not exc.sent:
            gate.record_outcome(store, state.plan_id, claim.attempt_id, "not_sent", detail=exc.message)
            check, again = call("mf_preflight"), call(f"mf_{action}_run", run_id=run.id, confirmation=confirmation)
            raise fail("unavailable", f"Nothing was sent: {exc.message}",
                       f"Check the network ({check}), then call {again} again.", retryable=True,
                       next_calls=[check, again]) from None
        gate.record_outcome(store, state.plan_id, claim.attempt_id, "ambiguous", run_id=run.id, detail=exc.message,
                            status_code=exc.status)
        why = f"was answered with an error ({exc.message})" if exc.status else f"its answer was lost ({exc.message})"
        return _Sent(run.status, gate.launch_state(store, state.plan_id), claim.channel, lost=why,
                     attempt_id=claim.attempt_id)
    except perr.PlatformError as exc:
        gate.record_outcome(store, state.plan_id, claim.attempt_id, "rejected", status_code=exc.status,
                            detail=exc.message)
        raise refused(exc, state.plan_id, f"{action}ed" if action != "stop" else "stopped") from None
    gate.record_outcome(store, state.plan_id, claim.attempt_id, "created", run_id=run.id, channel=claim.channel)
    return _Sent(status, state, claim.channel)


def _rehash(ctx: Context, store: Store, run: wire.RLRun, action: Action, plan_id: str) -> tuple[str, dict]:
    material = _material(ctx, run, action, _still_unresolved(ctx, store, run, plan_id))
    return gate.plan_hash(material), material


def _settle(ctx: Context, store: Store, sent: _Sent, run: wire.RLRun, action: Action, status: str,
            done: bool) -> str:
    """After a request whose answer was lost (``sent.lost``): the run reaching the state the action leads
    to (``done``) is the evidence it took effect (recorded ``reconciled``; the note says so); otherwise
    raise ``ambiguous``. Returns the note for the message (empty when the request answered)."""
    if sent.lost is None:
        return sent.note
    if not done or sent.attempt_id is None:
        raise _lost_failure(run, action, sent.state, sent.lost, status)
    gate.record_outcome(store, sent.state.plan_id, sent.attempt_id, "reconciled", run_id=run.id,
                        evidence=f"the run reached {status}")
    return f" (The {action} request {sent.lost}, but the run reached {status}; it was not sent again.)"


def _poll(ctx: Context, run_id: str, status: str, timeout: float, done: Callable[[str], bool]) -> tuple[str, float]:
    """GET the run every :data:`POLL_SECONDS` until ``done(status)`` or ``timeout`` seconds; a failed read ends it."""
    start = ctx.clock()
    deadline = start + timeout
    while not done(status.upper()) and ctx.clock() < deadline:
        ctx.sleep(min(POLL_SECONDS, max(0.0, deadline - ctx.clock())))
        try:
            status = ctx.platform().get_run(run_id).status
        except perr.PlatformError:
            break
    return status, round(ctx.clock() - start, 2)


R = TypeVar("R", bound=ControlResult)


def _untouched(cls: type[R], run: wire.RLRun, outcome: str, message: str, **extra: Any) -> R:
    inspect = call("mf_get_run", run_id=run.id)
    return cls(run_id=run.id, status=run.status, outcome=outcome, plan_id=None, approval_channel=None,
               waited_seconds=0.0, message=message, next_step=f"Inspect it with {inspect}.", next_calls=[inspect],
               **extra)


# -- the tools ------------------------------------------------------------------------------------


@tool
def stop_run(inp: StopRunInput, ctx: Context) -> StopRunResult:
    """Stop a run after a person approved this stop, then wait (bounded) for a terminal status.

    Errors: ``not_found`` (run), ``confirmation_required`` (fix names ``model-factory approve
    <stop plan>``), ``approval_refused``, ``confirmation_invalid`` / ``_expired`` / ``_used``,
    ``unavailable`` (nothing sent), ``ambiguous`` (sent, answered by an HTTP error or not at all, and
    the run did not end: never sent again), ``plan_changed``, platform 4xx. A budget policy does not
    pre-authorize stops.
    """
    run = require_run(ctx, inp.run_id)
    if run.is_terminal():
        return _untouched(StopRunResult, run, "already_terminal", f"Run {run.id} is already {run.status}; nothing "
                          "was sent.")
    sent = _send(ctx, run, "stop", inp.confirmation, lambda: ctx.platform().stop_run(run.id).status)
    state, channel = sent.state, sent.channel
    status, waited = _poll(ctx, run.id, sent.status, inp.timeout_seconds, wire.RunStatus.is_terminal)
    upper = status.upper()
    note = _settle(ctx, ctx.store(), sent, run, "stop", status, wire.RunStatus.is_terminal(upper) or "STOPP" in upper)
    if upper == "STOPPED":
        outcome, message = "stopped", f"Run {run.id} stopped."
    elif wire.RunStatus.is_terminal(upper):
        outcome, message = "terminal", f"Run {run.id} reached {status} before the stop completed."
    else:
        outcome, message = "still_tearing_down", (f"Run {run.id} is still being torn down ({status}) after "
                                                  f"{waited:g} s; the stop was accepted.")
    inspect, wait = call("mf_get_run", run_id=run.id), call("mf_wait_for_run", run_id=run.id)
    tearing = outcome == "still_tearing_down"
    return StopRunResult(run_id=run.id, status=status, outcome=outcome, plan_id=state.plan_id,
                         approval_channel=channel, waited_seconds=waited, message=message + note,
                         next_step=f"Confirm with {inspect}" + (f" (or {wait})." if tearing else "."),
                         next_calls=[inspect, wait] if tearing else [inspect])


@tool
def pause_run(inp: PauseRunInput, ctx: Context) -> PauseRunResult:
    """Pause a run after a person approved this pause (POST /training/runs/{id}/pause), then wait
    (bounded) for PAUSED. A paused run stops billing GPUs and can be resumed later with
    ``mf_resume_run`` (a new billed run, planned and approved like a launch).

    Errors: ``not_found`` (run), ``confirmation_required``, ``approval_refused``,
    ``confirmation_invalid`` / ``_expired`` / ``_used``, ``unavailable`` (nothing sent),
    ``conflict`` (the platform cannot pause it in its state), ``ambiguous`` (sent, answered by an HTTP
    error or not at all, and the run is not pausing: never sent again), ``plan_changed``, platform
    4xx. Never approved by a budget policy.
    """
    run = require_run(ctx, inp.run_id)
    upper = run.status.upper()
    if upper in ("PAUSING", "PAUSED"):
        return _untouched(PauseRunResult, run, "already_paused", f"Run {run.id} is already {run.status}; nothing "
                          "was sent.")
    if run.is_terminal():
        return _untouched(PauseRunResult, run, "already_terminal", f"Run {run.id} is already {run.status}; nothing "
                          "was sent.")
    sent = _send(ctx, run, "pause", inp.confirmation, lambda: ctx.platform().pause_run(run.id).status or run.status)
    state, channel = sent.state, sent.channel
    status, waited = _poll(ctx, run.id, sent.status, inp.timeout_seconds, wire.RunStatus.is_terminal)
    upper = status.upper()
    note = _settle(ctx, ctx.store(), sent, run, "pause", status,
                   upper in ("PAUSING", "PAUSED") or wire.RunStatus.is_terminal(upper))
    inspect, wait, resume = (call("mf_get_run", run_id=run.id), call("mf_wait_for_run", run_id=run.id),
                             call("mf_resume_run", run_id=run.id))
    if upper == "PAUSED":
        outcome, message = "paused", f"Run {run.id} is PAUSED (a checkpoint was kept)."
        step, calls = f"Resume it when wanted: {resume} (a new billed run; it shows the plan first).", [resume]
    elif wire.RunStatus.is_terminal(upper):
        outcome, message = "terminal", f"Run {run.id} reached {status} before the pause completed."
        step, calls = f"See why with {inspect}.", [inspect]
    else:
        outcome, message = "still_pausing", (f"Run {run.id} is still {status} after {waited:g} s (saving a "
                                             "checkpoint); the pause was accepted.")
        step, calls = f"Wait for PAUSED: {wait}.", [wait]
    return PauseRunResult(run_id=run.id, status=status, outcome=outcome, plan_id=state.plan_id,
                          approval_channel=channel, waited_seconds=waited, message=message + note, next_step=step,
                          next_calls=calls)


@tool
def restart_run(inp: RestartRunInput, ctx: Context) -> RestartRunResult:
    """Restart a RUNNING run from its latest READY checkpoint after a person approved this restart
    (PUT /rft/runs/{id}/restart), then wait (bounded) until it is RUNNING again and read its latest
    step (GET /rft/runs/{id}/progress).

    Errors: ``not_found`` (run), ``conflict`` (not RUNNING: nothing sent), ``confirmation_required``,
    ``approval_refused``, ``confirmation_invalid`` / ``_expired`` / ``_used``, ``unavailable``
    (nothing sent), ``ambiguous`` (sent, answered by an HTTP error or not at all: it may or may not
    have restarted; never sent again, and the next restart plan names it), ``plan_changed``, platform
    4xx. Never approved by a budget policy.
    """
    run = require_run(ctx, inp.run_id)
    if run.is_terminal():
        return _untouched(RestartRunResult, run, "already_terminal", f"Run {run.id} is already {run.status}; "
                          "nothing was sent (a paused run is continued with mf_resume_run).")
    if run.status.upper() != "RUNNING":
        wait = call("mf_wait_for_run", run_id=run.id)
        raise fail("conflict", f"Run {run.id} is {run.status}; only a RUNNING run can be restarted.",
                   f"Nothing was sent. Wait until it runs ({wait}) and check it before restarting.", retryable=True,
                   next_calls=[wait])
    sent = _send(ctx, run, "restart", inp.confirmation, lambda: ctx.platform().restart_run(run.id).status)
    state, channel = sent.state, sent.channel
    if sent.lost is not None:  # nothing a run shows says a restart happened: never report one as done
        raise _lost_failure(run, "restart", state, sent.lost, run.status)
    status, waited = _poll(ctx, run.id, sent.status, inp.timeout_seconds,
                           lambda s: s == "RUNNING" or wire.RunStatus.is_terminal(s))
    note = sent.note
    upper = status.upper()
    latest = None
    if upper == "RUNNING":
        try:
            latest = ctx.platform().get_progress(run.id).latest_step
        except perr.PlatformError:
            latest = None
        at = f"; latest step {latest}" if latest is not None else ""
        outcome, message = "restarted", f"Run {run.id} restarted and is RUNNING{at}."
    elif wire.RunStatus.is_terminal(upper):
        outcome, message = "terminal", f"Run {run.id} reached {status} instead of running again."
    else:
        outcome, message = "still_starting", f"Run {run.id} is {status} after {waited:g} s; the restart was accepted."
    check = call("mf_check_progress", run_id=run.id)
    return RestartRunResult(run_id=run.id, status=status, outcome=outcome, plan_id=state.plan_id,
                            approval_channel=channel, waited_seconds=waited, message=message + note,
                            latest_step=latest, next_step=f"Check that it progresses: {check}.", next_calls=[check])


@tool
def resume_run(inp: ResumeRunInput, ctx: Context) -> ResumeRunResult:
    """Resume a PAUSED run as a NEW billed run (POST /training/runs/{id}/resume), exactly once.

    Without a confirmation the plan is made (owner, GPUs, price per GPU-hour, cost of the steps
    left, secret names; recorded in the store) and approved by the person's budget policy within
    its limits, else the host's approval prompt, else ``confirmation_required`` carries the plan
    and the ``model-factory approve`` command. With the code that command printed, that plan is
    rebuilt over current facts and sent. A second resume of the same pause shows "already resumed
    as run X" and only a person can approve it. A lost answer is reconciled (GET /rft/runs), never
    re-sent: call again with the same confirmation, or mf_dispatch_run with the plan id.

    Errors: ``not_found`` (run), ``conflict`` (not PAUSED), ``bad_arguments`` (team, GPU type, or
    arguments that differ from the approved plan), secret errors (``secret_not_set``,
    ``unsupported_secret``, ``env_file_invalid``), ``confirmation_required``, ``approval_refused``,
    ``confirmation_invalid`` / ``_expired`` / ``_used``, ``plan_changed``, ``ambiguous_launch``,
    ``unavailable`` (nothing sent), platform 4xx.
    """
    store = ctx.store()
    store.require_writable()
    if not inp.confirmation or not inp.confirmation.strip():
        draft = build_resume(inp, ctx, new_plan_id("resume"))
        return ResumeRunResult.of(carry_out(ctx, store, record(ctx, store, draft), None, draft))
    state = plan_of_token(store, inp.confirmation)
    if state is None or state.plan.action != "resume" or state.plan.run_id != inp.run_id:
        again = call("mf_resume_run", run_id=inp.run_id)
        raise fail("confirmation_invalid", f"That confirmation does not approve a resume of run {inp.run_id}.",
                   f"Call {again} (no confirmation) to get the plan and the approve command, and ask the user to "
                   "run it.", next_calls=[again])
    planned = ResumeRunInput.model_validate(state.plan.arguments)
    given = inp.model_dump(exclude={"run_id", "confirmation"}, exclude_defaults=True)
    if "env_files" in given:
        given["env_files"] = [str(ctx.resolve_path(p)) for p in given["env_files"]]
    differ = sorted(k for k, v in given.items() if getattr(planned, k) != v)
    if differ:
        again = call("mf_resume_run", run_id=inp.run_id, confirmation=inp.confirmation)
        raise fail("bad_arguments", f"The confirmation approves plan {state.plan_id}, whose {', '.join(differ)} "
                   "differ from this call's.", f"Call {again} (the plan's own arguments apply), or resume with the "
                   "new arguments without a confirmation to get a new plan approved.", next_calls=[again])
    return ResumeRunResult.of(carry_out(ctx, store, state, inp.confirmation))
