"""Enforcing a spend cap: the run is PAUSED (a checkpoint kept, billing stops) before its spend passes the
cap a person set (:mod:`tools.monitor.cap` says when).

The pause is one the person pre-authorised with the cap (``approve PLAN --max-usd N``, or the budget
policy's ``spend_cap_usd_per_*``): a pause plan of the run is recorded and approved on the ``spend_cap``
channel (the approval records which cap and the figures), then carried out by ``mf_pause_run``'s own path:
claimed, sent once, its outcome recorded and reconciled like any other control action. A run the cap
paused before (a sent ``spend_cap`` pause plan of the same run) is never paused again by it: a pause
whose answer was lost is left to the person (an alert), never re-sent. Where the platform cannot pause
(the run is not RUNNING yet, or the pause failed), the cap stops the run only when the budget policy
says so (``stop_when_cap_cannot_pause``), saying what is lost; otherwise it alerts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from tools.core import Context, require_run, tool
from tools.errors import ToolError, call
from tools.guardrails import confirmation as gate
from tools.launch._plan import APPROVAL_TTL_SECONDS
from tools.launch.control import PauseRunInput, StopRunInput, pause_run, plan_action, stop_run
from tools.monitor import SpendCap, WaitForRunInput, WaitForRunResult, check_cap, wait
from tools.platform import errors as perr
from tools.platform import wire
from tools.units import usd

#: Seconds a cap pause waits for PAUSED at most (the rest is left to the next check).
PAUSE_WAIT_SECONDS = 60.0



def _earlier(ctx: Context, run_id: str) -> gate.LaunchState | None:
    """A pause of ``run_id`` the cap approved and sent before (any outcome but not_sent), if any."""
    for state in gate.list_launches(ctx.store(), 1_000, platform_url=ctx.settings.base_url):
        if state.plan.action == "pause" and state.plan.run_id == run_id \
                and any(a.channel == "spend_cap" for a in state.approvals) \
                and (state.status == "dispatched" or state.status in gate.UNRESOLVED_STATUSES):
            return state
    return None


def _approve(ctx: Context, run: wire.RLRun, action: str, cap: SpendCap) -> str:
    """A ``spend_cap`` approval of a new ``action`` plan of ``run``: its token."""
    store = ctx.store()
    state = plan_action(ctx, store, run, action)  # type: ignore[arg-type]
    checked = (f"spend cap {usd(cap.cap_usd)} ({cap.cap_source}): spent {usd(cap.spent_usd)} + next check "
               f"{usd(cap.next_check_usd)} would pass it")
    return gate.mint(store, state.plan_id, state.plan_hash, "spend_cap", APPROVAL_TTL_SECONDS,
                     owner=run.team_id or "personal", checked=checked,
                     terms={"max_usd": cap.cap_usd, "cap_source": cap.cap_source})


def enforce_cap(ctx: Context, run: wire.RLRun, interval_seconds: float,
                wait_seconds: float = PAUSE_WAIT_SECONDS) -> SpendCap | None:
    """Check ``run``'s spend cap (:func:`tools.monitor.check_cap`) for a next check ``interval_seconds`` away
    and, when it would be passed, pause the run (module doc), waiting ``wait_seconds`` at most for PAUSED.
    Returns the cap with ``action`` and ``message`` set, or None when no cap applies. Never raises a
    ToolFailure: a failed pause is ``pause_failed`` (or ``stopped``)."""
    cap = check_cap(ctx, run, interval_seconds)
    if cap is None or not cap.over:
        return cap
    figures = (f"spend {usd(cap.spent_usd)} + the next check's {usd(cap.next_check_usd)} would pass the cap "
               f"of {usd(cap.cap_usd)} ({cap.cap_source})")
    resume = call("mf_resume_run", run_id=run.id)
    status = wire.RunStatus.of(run.status)
    if run.is_terminal() or status == "PAUSING":
        cap.action = "ended" if status != "PAUSED" and status != "PAUSING" else "already_paused"
        cap.message = f"Run {run.id} is {run.status}; {figures}. Nothing was sent."
        return cap
    earlier = _earlier(ctx, run.id)
    if earlier is not None:
        cap.action = "pause_failed"
        cap.message = (f"Run {run.id} is still {run.status} although the spend cap paused it before (plan "
                       f"{earlier.plan_id}, {earlier.status}); {figures}. It is not paused twice: ask the person "
                       f"to pause ({call('mf_pause_run', run_id=run.id)}) or stop it.")
        return cap
    failure = None
    if status == "RUNNING":
        result = pause_run(PauseRunInput(run_id=run.id, confirmation=_approve(ctx, run, "pause", cap),
                                         timeout_seconds=min(wait_seconds, PAUSE_WAIT_SECONDS)), ctx)
        if not isinstance(result, ToolError):
            cap.action = "paused" if result.outcome in ("paused", "already_paused") else "pausing"
            cap.message = (f"Run {run.id} was PAUSED by the spend cap ({figures}); a checkpoint was kept and "
                           f"billing stopped. To go on, resume it: {resume} (a new billed run; it shows its plan "
                           "and needs an approval)." if cap.action == "paused" else
                           f"Run {run.id} is pausing by the spend cap ({figures}): it saves a checkpoint, then "
                           f"billing stops. Resume it later with {resume}.")
            return cap
        failure = f"the pause failed ([{result.code}] {result.message})"
    else:
        failure = f"the platform cannot pause a {run.status} run"
    if cap.stop_when_cannot_pause:
        stopped = stop_run(StopRunInput(run_id=run.id, confirmation=_approve(ctx, run, "stop", cap),
                                        timeout_seconds=min(wait_seconds, PAUSE_WAIT_SECONDS)), ctx)
        if not isinstance(stopped, ToolError):
            cap.action = "stopped"
            cap.message = (f"Run {run.id} was STOPPED by the spend cap: {figures}, {failure}, and the budget policy "
                           "says to stop then. Lost: the steps since its last READY checkpoint; it cannot be resumed.")
            return cap
        failure += f"; the stop failed too ([{stopped.code}] {stopped.message})"
    cap.action = "pause_failed"
    cap.message = (f"ALERT: run {run.id} could not be paused by the spend cap: {figures}, and {failure}. It still "
                   f"bills. Ask the person to stop it ({call('mf_stop_run', run_id=run.id)}; the steps since its "
                   "last READY checkpoint are lost) or to raise the cap.")
    return cap


#: The next check a wait counts with: an agent calls mf_wait_for_run again within about a minute.
WAIT_CHECK_SECONDS = 60.0


@tool
def wait_for_run(inp: WaitForRunInput, ctx: Context) -> WaitForRunResult:
    """``mf_wait_for_run``: :func:`tools.monitor.wait` with the spend cap enforced after each read of a run that
    has not ended (:func:`enforce_cap`, the next check :data:`WAIT_CHECK_SECONDS` away): a run about to pass
    its cap is paused and the wait ends, ``spend_cap`` saying so. Errors: those of :func:`tools.monitor.wait`."""
    return wait(inp, ctx, on_poll=lambda run, left: enforce_cap(ctx, run, WAIT_CHECK_SECONDS, wait_seconds=left))


#: ``model-factory watch``: default and largest check interval and watch length (seconds).
WATCH_INTERVAL_SECONDS = 60.0
MAX_WATCH_INTERVAL_SECONDS = 600.0
WATCH_SECONDS = 12 * 3600.0
MAX_WATCH_SECONDS = 7 * 24 * 3600.0


class WatchResult(BaseModel):
    """How ``model-factory watch RUN`` ended."""

    run_id: str = Field(description="The run watched.")
    status: str = Field(description="Its last status read.")
    ended_because: Literal["ended", "paused", "pausing", "stopped", "pause_failed", "no_cap", "time_limit"] = Field(
        description="ended: the run reached a terminal status; paused / pausing / stopped: the spend cap acted; "
                    "pause_failed: it could not (an alert); no_cap: no spend cap applies; time_limit: watched for "
                    "the longest time asked.")
    checks: int = Field(description="Times the run and its spend were read.")
    watched_seconds: float = Field(description="Seconds watched (the context's clock).")
    spend_cap: SpendCap | None = Field(default=None, description="The cap at the last check.")
    message: str = Field(description="What happened, in words.")


def watch(ctx: Context, run_id: str, *, interval_seconds: float = WATCH_INTERVAL_SECONDS,
          max_seconds: float = WATCH_SECONDS, say: Callable[[str], None] = lambda line: None) -> WatchResult:
    """Keep ``run_id``'s spend cap with no agent running: every ``interval_seconds`` read the run and enforce its
    cap (:func:`enforce_cap`: a run about to pass it is paused), for at most ``max_seconds`` (both bounded:
    :data:`MAX_WATCH_INTERVAL_SECONDS`, :data:`MAX_WATCH_SECONDS`), ``say``-ing one line per check. Ends when the
    run ends, the cap acts, no cap applies, or time is up. Reads GET ``/rft/runs/{id}`` and the spend
    (:func:`tools.monitor.check_cap`) each check. Raises ToolFailure ``not_found`` and the platform's errors
    of the first read; a later failed read is said and retried at the next check."""
    interval = min(max(interval_seconds, 1.0), MAX_WATCH_INTERVAL_SECONDS)
    limit = min(max(max_seconds, 0.0), MAX_WATCH_SECONDS)
    started = ctx.clock()
    run = require_run(ctx, run_id)
    checks = 0
    cap: SpendCap | None = None
    while True:
        checks += 1
        if run.is_terminal():
            return _watched(run, "ended", checks, ctx.clock() - started, cap,
                            f"Run {run.id} is {run.status}; it bills no more. Watch ended.")
        cap = enforce_cap(ctx, run, interval, wait_seconds=interval)  # a pause still saving is told as pausing
        if cap is None:
            return _watched(run, "no_cap", checks, ctx.clock() - started, None,
                            f"No spend cap applies to run {run.id} (set one with `approve PLAN --max-usd N` or the "
                            "budget policy's spend_cap_usd_per_run); nothing to keep. Watch ended.")
        if cap.action in ("paused", "pausing", "stopped", "pause_failed"):
            return _watched(run, cap.action, checks, ctx.clock() - started, cap, cap.message)
        say(f"Run {run.id} {run.status}: spent {usd(cap.spent_usd)} of the {usd(cap.cap_usd)} cap "
            f"({cap.cap_source}); next check in {interval:g} s." + (f" {cap.message}" if cap.message else ""))
        left = started + limit - ctx.clock()
        if left <= 0:
            return _watched(run, "time_limit", checks, ctx.clock() - started, cap,
                            f"Watched run {run.id} for {limit:g} s, the longest asked; it is {run.status}. Start the "
                            "watch again to keep the cap.")
        ctx.sleep(min(interval, left))
        try:
            run = ctx.platform().get_run(run_id)
        except perr.PlatformError as exc:
            say(f"Run {run_id} could not be read ({exc.message}); trying again at the next check.")


def _watched(run: wire.RLRun, why: str, checks: int, seconds: float, cap: SpendCap | None,
             message: str) -> WatchResult:
    return WatchResult(run_id=run.id, status=run.status, ended_because=why, checks=checks,
                       watched_seconds=round(seconds, 1), spend_cap=cap, message=message)
