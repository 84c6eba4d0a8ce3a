"""Sending one create exactly once: what ``mf_dispatch_run`` (a launch) and ``mf_resume_run`` (a
resume, which also starts a new billed run) share.

:func:`send_create` claims the plan in the store (:func:`tools.guardrails.confirmation.claim_dispatch`),
sends the one request (POST ``/training/runs`` or POST ``/training/runs/{id}/resume``, never
retried) and records its outcome: ``created``; ``not_sent`` (nothing left the machine: the same
approval works again); ``rejected`` (the platform answered 4xx: a new approval is needed);
``ambiguous`` (sent, answer lost), after which :func:`reconcile` looks for the new run
(:func:`tools.launch._reconcile.look_for_lost_run`) and never re-sends. :func:`already` answers
for a plan carried out before.

Before the create, after the claim, the platform is asked whether the plan's run exists already
(:func:`tools.launch._reconcile.look_before_create`): the store cannot know when a copy of it was
dispatched too. Found: ``reconciled``, nothing sent, answered as ``already_dispatched``. When the
runs cannot be listed, the create is sent: the store (whose damage is never read silently: the
claim would have failed) shows no sent attempt of the plan, and refusing would make every launch
depend on one more read; a copied store dispatched while the listing fails is the case left open.

Sources: reference/prime-api.md §2.1 rows 2, 3 (create, resume: same answer ``{runId, ...}``),
row 8 (list runs, for the reconciliation), §3.3 (no idempotency key: a repeated create is a
second run).
"""

from __future__ import annotations

import re
import secrets as pysecrets
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from tools.core import NO_DASHBOARD, Context, dashboard_url
from tools.errors import Call, ToolFailure, call, fail, from_platform
from tools.guardrails import confirmation as gate
from tools.guardrails.records import OutcomeFacts
from tools.guardrails.store import Store
from tools.launch._reconcile import doubtful_failure, look_before_create, look_for_lost_run
from tools.platform import errors as perr
from tools.platform import wire

#: A confirmation code: ``mfc_<plan_id>_<40 hex>`` (:func:`tools.guardrails.confirmation.mint`).
TOKEN = re.compile(r"\Amfc_(.+)_[0-9a-f]{40}\Z")
_ACTIVE = frozenset({"QUEUED", "PENDING", "RUNNING", "PAUSING"})


def new_plan_id(prefix: str = "plan") -> str:
    """``<prefix>_`` + 12 random hex digits (``plan``, ``resume``, ``stop``, ``pause``, ``restart``)."""
    return f"{prefix}_{pysecrets.token_hex(6)}"


def plan_of_token(store: Store, confirmation: str) -> gate.LaunchState | None:
    """The plan a confirmation code names (its ``plan_id`` part), or None when it names none."""
    match = TOKEN.match(confirmation.strip())
    try:
        return gate.launch_state(store, match.group(1)) if match else None
    except ToolFailure:
        return None


class DispatchRunResult(BaseModel):
    """A launch or resume that happened (or was found again). Source: POST /training/runs (launch),
    POST /training/runs/{id}/resume (resume), GET /rft/runs (reconciliation)."""

    plan_id: str = Field(description="The plan carried out.")
    status: Literal["created", "reconciled", "already_dispatched"] = Field(description=(
        "created: launched (or resumed) now; reconciled: an earlier attempt whose answer was lost was found; "
        "already_dispatched: this plan was carried out before (same run)."))
    run_id: str = Field(description="The run's id (for a resume: the NEW run).")
    run_name: str | None = Field(description="The run's name (with the plan fingerprint).")
    resumed_from: str | None = Field(default=None, description="For a resume: the paused run it continues.")
    dashboard_url: str | None = Field(description="{frontend_url}/dashboard/training/{run_id}; " + NO_DASHBOARD + ".")
    approval_channel: str | None = Field(description="terminal | host_callback | mcp_elicitation | mcp_app | policy.")
    gpu_type: str | None = Field(description="GPU type (the platform's answer when on-demand, else the plan's).")
    usd_per_gpu_hour: float | None = Field(description="Price per GPU-hour (platform's answer, else the plan's).")
    estimated_usd_per_hour: float | None = Field(description="The platform's estimatedCostPerHour (on-demand runs).")
    message: str = Field(description="What happened, in words.")
    next_step: str = Field(description="What to call next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


class ResumeRunResult(DispatchRunResult):
    """A resume that happened (or was found again): the fields of :class:`DispatchRunResult`, the
    new run in ``run_id`` and the paused one in ``resumed_from``. Source: POST /training/runs/{id}/resume,
    GET /rft/runs (reconciliation)."""

    @classmethod
    def of(cls, done: DispatchRunResult) -> ResumeRunResult:
        """``done`` as a resume's result (:func:`result` builds one for every resume plan)."""
        return done if isinstance(done, ResumeRunResult) else cls(**dict(done))


def result(ctx: Context, state: gate.LaunchState, status: str, run_id: str, message: str,
           facts: OutcomeFacts | None = None) -> DispatchRunResult:
    """The answer for ``state``'s plan, carried out as ``run_id`` (``facts``: those recorded with its
    outcome; the plan's own where they say nothing)."""
    facts = facts or OutcomeFacts()
    plan = state.plan
    check, wait = call("mf_check_progress", run_id=run_id), call("mf_wait_for_run", run_id=run_id)
    channel = next((a.channel for a in reversed(state.attempts) if a.channel), None)
    price = plan.cost.usd_per_gpu_hour if plan.cost else None
    kind = ResumeRunResult if plan.action == "resume" else DispatchRunResult
    return kind(
        plan_id=state.plan_id, status=status, run_id=run_id, run_name=plan.name,
        resumed_from=plan.run_id if plan.action == "resume" else None,
        dashboard_url=dashboard_url(ctx, run_id), approval_channel=facts.channel or channel,
        gpu_type=facts.gpu_type or plan.gpu_type,
        usd_per_gpu_hour=facts.usd_per_gpu_hour if facts.usd_per_gpu_hour is not None else price,
        estimated_usd_per_hour=facts.estimated_usd_per_hour, message=message, next_calls=[check, wait],
        next_step=f"Watch it: {check} (is it progressing?) or {wait}.")


def already(ctx: Context, state: gate.LaunchState) -> DispatchRunResult:
    """``already_dispatched``: the plan was carried out before; nothing is sent again."""
    attempt = next((a for a in reversed(state.attempts) if a.outcome in ("created", "reconciled")), None)
    facts = attempt.facts if attempt else None
    verb = "resumed" if state.plan.action == "resume" else "launched"
    return result(ctx, state, "already_dispatched", str(state.run_id),
                  f"Plan {state.plan_id} was already {verb} as run {state.run_id}; nothing was sent again.", facts)


def reconcile(ctx: Context, store: Store, state: gate.LaunchState) -> DispatchRunResult:
    """Find the run of an attempt whose outcome is unknown (:mod:`tools.launch._reconcile`);
    never re-send. Raises ``ambiguous_launch`` (``ambiguous: true``) while it is not found."""
    lookup = look_for_lost_run(ctx, store, state)
    team_id = state.plan.team_id
    again, runs = call("mf_dispatch_run", plan_id=state.plan_id), call("mf_list_runs", team=team_id or "personal")
    what = "resume" if state.plan.action == "resume" else "launch"
    if lookup.problem:
        raise fail("ambiguous_launch", f"Plan {state.plan_id} may have been carried out (its {what}'s answer was "
                   f"lost), and the runs could not be listed to check: {lookup.problem}",
                   f"Do not re-dispatch. Call {again} again later (it only reconciles), or check {runs} or the "
                   "dashboard.", ambiguous=True, next_calls=[again, runs])
    if lookup.run is None:
        raise fail("ambiguous_launch",
                   f"Plan {state.plan_id}'s {what} was sent but its answer was lost, and no {lookup.looks_for} is "
                   f"listed for the {team_id or 'personal account'} yet. It may still appear.",
                   f"Never re-dispatch. Call {again} again in a minute (it only reconciles), or look for a "
                   f"{lookup.looks_for} with {runs} or in the dashboard.", ambiguous=True, next_calls=[again, runs])
    run = lookup.run
    extra = f" Several runs match: {', '.join(lookup.matches)}." if len(lookup.matches) > 1 else ""
    return result(ctx, lookup.state, "reconciled", run.id,
                  f"The {what}'s answer was lost, but run {run.id} ({run.name}) was found; it was not sent "
                  f"again.{extra}")


def count_active(ctx: Context, team_id: str | None) -> int | None:
    """Queued, pending, running or pausing runs of the owner (GET /rft/runs, page 1 of 100); None
    when they cannot be listed, or a row of them cannot be read (a policy limit on concurrent runs then fails
    closed)."""
    try:
        page = ctx.platform().list_runs(team_id=team_id, page=1, limit=100)
    except perr.PlatformError:
        return None
    if page.unreadable:
        return None
    return sum(1 for r in page.runs if (r.status or "").upper() in _ACTIVE)


def refused(exc: perr.PlatformError, plan_id: str, action: str) -> ToolFailure:
    """The platform's 4xx/5xx answer to a plan's request, as the tool error (``action``: what was
    not done, e.g. ``launched``)."""
    error = from_platform(exc)
    error.message = f"The platform refused plan {plan_id}: {error.message}"
    error.fix = (f"Nothing was {action}. Fix what the message and fields say, then plan again and get the new plan "
                 "approved; the old approval is spent." if error.code not in ("rate_limited",) else
                 "Wait and retry with a new approval (the platform was rate limiting).")
    return ToolFailure(error)


def send_create(ctx: Context, store: Store, plan_id: str, plan_hash: str, token: str, *, again: Call,
                send: Callable[[], wire.HostedRunCreated], planned_gpu: str | None,
                planned_price: float | None, message: Callable[[str], str]) -> DispatchRunResult:
    """Claim ``plan_id`` with ``token``, call ``send`` once and record the outcome (module
    docstring). ``again``: the call that repeats this one (named when nothing was sent);
    ``message(run_id)``: what happened, in words. Raises ToolFailure: the claim's codes,
    ``unavailable`` (nothing sent), ``ambiguous_launch``, the platform's refusal."""
    try:
        claim = gate.claim_dispatch(store, plan_id, plan_hash, token)
    except ToolFailure as failure:
        if failure.error.code == "already_dispatched":  # another process finished first
            return already(ctx, gate.launch_state(store, plan_id))
        raise
    state = gate.launch_state(store, plan_id)
    lookup = look_before_create(ctx, store, state, claim.attempt_id)
    if lookup.run is not None:  # a copy of this store, or an old ledger elsewhere, sent it before
        verb = "resumed" if state.plan.action == "resume" else "launched"
        return result(ctx, lookup.state, "already_dispatched", lookup.run.id,
                      f"Plan {plan_id} was already {verb} as run {lookup.run.id}: it is on the platform (a "
                      f"{lookup.looks_for}), although this store did not record it (a copy of the state folder "
                      "sent it). Reconciled; nothing was sent again.", OutcomeFacts(channel=claim.channel))
    if lookup.doubtful:
        gate.record_outcome(store, plan_id, claim.attempt_id, "not_sent", detail="a run row could not be read")
        raise doubtful_failure(state, str(lookup.problem))
    try:
        created = send()
    except perr.Ambiguous:
        gate.record_outcome(store, plan_id, claim.attempt_id, "ambiguous")
        return reconcile(ctx, store, gate.launch_state(store, plan_id))
    except (perr.CredentialsMissing, perr.Unavailable) as exc:  # creates raise Unavailable only when not sent
        gate.record_outcome(store, plan_id, claim.attempt_id, "not_sent", detail=exc.message)
        check = call("mf_preflight")
        raise fail("unavailable", f"Nothing was sent: {exc.message}",
                   f"The platform was not reached, so nothing was started and the approval is not used up. Check "
                   f"the network and PRIME_API_BASE_URL ({check}), then call {again} again (the same "
                   "confirmation works).", retryable=True, next_calls=[check, again]) from None
    except perr.PlatformError as exc:
        gate.record_outcome(store, plan_id, claim.attempt_id, "rejected", status_code=exc.status,
                            detail=exc.message)
        raise refused(exc, plan_id, "started") from None
    if created.token_value is not None:
        ctx.scrubber.add("tokenValue", created.token_value.get_secret_value())
    facts = OutcomeFacts(channel=claim.channel, gpu_type=created.gpu_type or planned_gpu,
                         usd_per_gpu_hour=created.price_per_gpu_hour if created.on_demand else planned_price,
                         estimated_usd_per_hour=created.estimated_cost_per_hour if created.on_demand else None,
                         on_demand=created.on_demand)
    gate.record_outcome(store, plan_id, claim.attempt_id, "created", run_id=created.run_id,
                        **facts.model_dump(exclude_defaults=True))
    return result(ctx, gate.launch_state(store, plan_id), "created", created.run_id, message(created.run_id), facts)
