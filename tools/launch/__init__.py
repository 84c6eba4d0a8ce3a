"""Launch tools: plan a run, dispatch it exactly once with a human's confirmation, stop a
run, list what the local ledger knows.

* ``mf_plan_run`` (:func:`plan_run`) - costs nothing: the summary, cost estimate and
  ``plan_id`` / ``plan_hash`` (planning in ``_plan``, the estimate in ``_cost``).
* ``mf_dispatch_run`` (:func:`dispatch_run`) - re-checks the plan against the current config,
  env files, owner and prices (``plan_changed`` names each fact that moved), gets a confirmation
  (given, budget policy, host approver; channels in ``_approval``), claims the
  launch in the ledger and sends POST ``/training/runs`` once. A create whose answer was lost
  is reconciled by listing the owner's runs (GET ``/rft/runs``) for the run name's plan
  fingerprint, never re-sent.
* ``mf_stop_run`` (:func:`stop_run`) - gated the same way; PUT ``/rft/runs/{id}/stop`` then
  polls GET ``/rft/runs/{id}`` until terminal, bounded.
* ``mf_list_launches`` (:func:`list_launches`) - the ledger (``<state>/launches.jsonl``).

The tools and their models are here; the work is in private modules: ``_plan`` (the facts a
plan shows and dispatch re-checks), ``_cost`` (the low/expected/high estimate), ``_approval``
(the approval channels and the checks before minting; ``model-factory approve`` uses
:func:`plan_request` and :func:`approve_plan`).

Errors returned (codes): see each tool. Ledger events: :mod:`tools.guardrails.confirmation`.
"""

from __future__ import annotations

import re
import secrets as pysecrets
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.core import NO_DASHBOARD, Context, Owner, dashboard_url, fit_largest, owner_label, tool
from tools.errors import Call, ToolFailure, call, fail, from_platform
from tools.guardrails import confirmation as gate
from tools.guardrails.ledger import Ledger
from tools.guardrails.policy import PlanFacts
from tools.guardrails.secrets import resolve_forwarded
from tools.launch._approval import (
    PLAN_MAX_AGE_SECONDS,
    ApprovalRequest,
    approve_command,
    approve_plan,
    check_unchanged,
    obtain_confirmation,
    plan_request,
    rebuild,
    request_from_state,
)
from tools.launch._cost import CostEstimate
from tools.launch._plan import (
    APPROVAL_TTL_SECONDS,
    Draft,
    PlanRunInput,
    RuntimeInfo,
    Validation,
    build_plan,
    summary_text,
)
from tools.launch._reconcile import look_for_lost_run
from tools.platform import errors as perr
from tools.platform import wire

__all__ = [
    "ApprovalRequest",
    "CostEstimate",
    "DispatchResult",
    "DispatchRunInput",
    "LaunchEntry",
    "LaunchList",
    "ListLaunchesInput",
    "PLAN_MAX_AGE_SECONDS",
    "PlanRunInput",
    "RunPlan",
    "RuntimeInfo",
    "StopRunInput",
    "StopRunResult",
    "Validation",
    "approve_plan",
    "dispatch_run",
    "list_launches",
    "plan_request",
    "plan_run",
    "stop_run",
]

STOP_POLL_SECONDS = 3.0
MAX_STOP_WAIT_SECONDS = 300.0
_TOKEN = re.compile(r"\Amfc_(.+)_[0-9a-f]{40}\Z")
_ACTIVE = frozenset({"QUEUED", "PENDING", "RUNNING", "PAUSING"})


# -- plan_run ---------------------------------------------------------------------------------


class RunPlan(BaseModel):
    """A planned run (nothing launched). Sources: the config file, GET /user/teams (owner),
    GET /training/available-fft-models (price), GET /training/available-gpu-types, GET
    /training/volumes, POST /training/runs/prepare (runtime)."""

    plan_id: str = Field(description="Id of this plan; pass it to mf_dispatch_run.")
    plan_hash: str = Field(description="sha256 over the plan's facts; an approval covers exactly this.")
    summary: str = Field(description="The plan in words; show it to the user before asking for approval.")
    config_path: str = Field(description="Absolute path of the config file.")
    config_sha256: str = Field(description="sha256 of the canonical hosted config (step cap applied).")
    file_sha256: str = Field(description="sha256 of the file's bytes; editing the file voids an approval.")
    mode: Literal["rl", "sft"] = Field(description="rl or sft, decided as prime train does.")
    model: str | None = Field(description="Base model (model.name).")
    run_name: str = Field(description="Name the run gets: base name + '-' + plan fingerprint.")
    owner: Owner = Field(description="Who pays: team or personal, and where that came from.")
    gpu_type: str | None = Field(description="GPU type sent (null: the platform picks).")
    gpu_type_source: str = Field(description="argument, config, or the default rule used.")
    gpu_count: int = Field(description="GPUs the run asks for ([deployment]).")
    usd_per_gpu_hour: float | None = Field(description="On-demand price, USD per GPU-hour; null = unknown.")
    usd_per_hour: float | None = Field(description="usd_per_gpu_hour x gpu_count; null = unknown.")
    cost: CostEstimate = Field(description="Low/expected/high USD with assumptions and unknowns.")
    run_kind: Literal["smoke", "full"] = Field(description="smoke or full.")
    max_steps: int | None = Field(description="Step cap sent in the config; null = runs until stopped.")
    max_steps_reason: str = Field(description="Why this step cap.")
    config_max_steps: int | None = Field(description="max_steps the file itself sets.")
    secret_names: list[str] = Field(description="Env names forwarded to the run (values read at dispatch only).")
    volume: str | None = Field(description="Volume attached, if any.")
    image_tag: str | None = Field(description="prime-rl image tag; null = platform default.")
    source_ref: str | None = Field(description="prime-rl source ref; null = none.")
    runtime: RuntimeInfo | None = Field(description="What prepare said about the prime-rl build.")
    validation: Validation = Field(description="Which schema checked the config (mf_validate_config, schema auto).")
    warnings: list[str] = Field(description="Things the user should know before approving.")
    approval_ttl_seconds: int = Field(description="How long an approval of this plan stays valid.")
    approve_command: str = Field(description="The command a person runs in their terminal to approve this plan "
                                             "(it prints the confirmation code and the command that launches it).")
    next_step: str = Field(description="How to get it approved and launched.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


def _plan_id(prefix: str = "plan") -> str:
    return f"{prefix}_{pysecrets.token_hex(6)}"


@tool
def plan_run(inp: PlanRunInput, ctx: Context) -> RunPlan:
    """Plan a run: costs nothing, launches nothing; records the plan in the ledger.

    Errors: ``secret_in_input``, ``config_not_found``, ``invalid_toml``, ``invalid_config``,
    ``bad_arguments``, ``env_file_invalid``, ``unsupported_secret``, ``secret_not_set``,
    ``invalid_context``, ``invalid_team``, ``owner_ambiguous``, ``volume_not_found``, platform errors.
    """
    plan_id = _plan_id()
    draft = build_plan(inp, ctx, plan_id, prepare=True)
    approve, dispatch = approve_command(plan_id, ctx), call("mf_dispatch_run", plan_id=plan_id)
    summary = summary_text(draft)
    args = inp.model_dump()
    args["config_path"] = str(draft.config_path)
    args["env_files"] = [str(ctx.resolve_path(p)) for p in inp.env_files]
    gate.record_plan(
        Ledger.for_context(ctx), plan_id, draft.plan_hash, **draft.material, arguments=args,
        config_path=str(draft.config_path), env_files=[str(p) for p in draft.env_files],
        fingerprint=draft.fingerprint, owner_label=draft.owner.label,
        model=draft.model, usd_per_gpu_hour=draft.cost.usd_per_gpu_hour, summary=summary,
        runtime=draft.runtime.model_dump() if draft.runtime else None, validation=draft.validation.model_dump())
    return RunPlan(
        plan_id=plan_id, plan_hash=draft.plan_hash, summary=summary, config_path=str(draft.config_path),
        config_sha256=draft.config_sha256, file_sha256=draft.file_sha256, mode=draft.mode, model=draft.model,
        run_name=draft.run_name, owner=draft.owner, gpu_type=draft.gpu_type, gpu_type_source=draft.gpu_type_source,
        gpu_count=draft.gpu_count, usd_per_gpu_hour=draft.cost.usd_per_gpu_hour, usd_per_hour=draft.cost.usd_per_hour,
        cost=draft.cost, run_kind=inp.run_kind, max_steps=draft.max_steps, max_steps_reason=draft.max_steps_reason,
        config_max_steps=draft.config_max_steps, secret_names=draft.secret_names, volume=draft.volume,
        image_tag=draft.image_tag, source_ref=draft.source_ref, runtime=draft.runtime,
        validation=draft.validation, warnings=draft.warnings,
        approval_ttl_seconds=APPROVAL_TTL_SECONDS, approve_command=approve, next_calls=[dispatch],
        next_step=(f"Show the summary to the user; call {dispatch}. If it says confirmation_required, they run "
                   f"`{approve}` in their own terminal and give you the code for the confirmation."))


# -- dispatch_run -----------------------------------------------------------------------------


class DispatchRunInput(BaseModel):
    """Arguments of ``mf_dispatch_run``."""

    model_config = ConfigDict(extra="forbid")

    plan_id: str = Field(description="The plan_id from mf_plan_run.")
    confirmation: str | None = Field(default=None, description=(
        "The code (mfc_...) the user got from `model-factory approve PLAN_ID`. Null: use the host's approval "
        "prompt or the user's budget policy, if any. Never invent one."))


class DispatchResult(BaseModel):
    """A launch that happened (or was found again). Source: POST /training/runs, GET /rft/runs."""

    plan_id: str = Field(description="The plan launched.")
    status: Literal["created", "reconciled", "already_dispatched"] = Field(description=(
        "created: launched now; reconciled: an earlier launch whose answer was lost was found; "
        "already_dispatched: this plan was launched before (same run)."))
    run_id: str = Field(description="The run's id.")
    run_name: str | None = Field(description="The run's name (with the plan fingerprint).")
    dashboard_url: str | None = Field(description="{frontend_url}/dashboard/training/{run_id}; " + NO_DASHBOARD + ".")
    approval_channel: str | None = Field(description="terminal | host_callback | mcp_elicitation | policy.")
    gpu_type: str | None = Field(description="GPU type (the platform's answer when on-demand, else the plan's).")
    usd_per_gpu_hour: float | None = Field(description="Price per GPU-hour (platform's answer, else the plan's).")
    estimated_usd_per_hour: float | None = Field(description="The platform's estimatedCostPerHour (on-demand runs).")
    message: str = Field(description="What happened, in words.")
    next_step: str = Field(description="What to call next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


def _result(ctx: Context, state: gate.LaunchState, status: str, run_id: str, message: str,
            facts: dict | None = None) -> DispatchResult:
    facts = facts or {}
    check, wait = call("mf_check_progress", run_id=run_id), call("mf_wait_for_run", run_id=run_id)

    channel = next((a.channel for a in reversed(state.attempts) if a.channel), None)
    return DispatchResult(
        plan_id=state.plan_id, status=status, run_id=run_id, run_name=state.plan.get("name"),
        dashboard_url=dashboard_url(ctx, run_id), approval_channel=facts.get("channel", channel),
        gpu_type=facts.get("gpu_type") or state.plan.get("gpu_type"),
        usd_per_gpu_hour=facts.get("usd_per_gpu_hour", state.plan.get("usd_per_gpu_hour")),
        estimated_usd_per_hour=facts.get("estimated_usd_per_hour"), message=message, next_calls=[check, wait],
        next_step=f"Watch it: {check} (is it progressing?) or {wait}.")


def _already(ctx: Context, state: gate.LaunchState) -> DispatchResult:
    attempt = next((a for a in reversed(state.attempts) if a.outcome in ("created", "reconciled")), None)
    facts = dict(attempt.facts) if attempt else {}
    return _result(ctx, state, "already_dispatched", str(state.run_id),
                   f"Plan {state.plan_id} was already launched as run {state.run_id}; nothing was sent again.", facts)


def _reconcile(ctx: Context, ledger: Ledger, state: gate.LaunchState) -> DispatchResult:
    """Find the run of an attempt whose outcome is unknown (``_reconcile``); never re-send."""
    lookup = look_for_lost_run(ctx, ledger, state)
    fp, team_id = lookup.fingerprint, state.plan.get("team_id")
    again, runs = call("mf_dispatch_run", plan_id=state.plan_id), call("mf_list_runs", team=team_id or "personal")
    if lookup.problem:
        raise fail("ambiguous_launch", f"Plan {state.plan_id} may have been launched (its answer was lost), and the "
                   f"runs could not be listed to check: {lookup.problem}",
                   f"Do not re-dispatch. Call {again} again later (it only reconciles), or check {runs} or the "
                   "dashboard.", ambiguous=True, next_calls=[again, runs])
    if lookup.run is None:
        raise fail("ambiguous_launch",
                   f"Plan {state.plan_id}'s launch was sent but its answer was lost, and no run named *-{fp} is "
                   f"listed for the {team_id or 'personal account'} yet. It may still appear.",
                   f"Never re-dispatch. Call {again} again in a minute (it only reconciles), or look for a run whose "
                   f"name ends in -{fp} with {runs} or in the dashboard.", ambiguous=True, next_calls=[again, runs])

    run = lookup.run
    extra = f" Several runs carry the fingerprint: {', '.join(lookup.matches)}." if len(lookup.matches) > 1 else ""
    return _result(ctx, lookup.state, "reconciled", run.id,
                   f"The launch's answer was lost, but run {run.id} ({run.name}) was found; it was not sent "
                   f"again.{extra}")


def _policy_facts(draft: Draft) -> PlanFacts:
    return PlanFacts(usd_high=draft.cost.usd_high, gpu_count=draft.gpu_count, gpu_type=draft.gpu_type,
                     model=draft.model, steps=draft.max_steps, owner=draft.owner.team_id or "personal",
                     unresolved_launches=draft.material.get("acknowledged_unresolved", []))


def _count_active(ctx: Context, team_id: str | None) -> int | None:
    try:
        page = ctx.platform().list_runs(team_id=team_id, page=1, limit=100)
    except perr.PlatformError:
        return None
    return sum(1 for r in page.runs if (r.status or "").upper() in _ACTIVE)


def _create_body(ctx: Context, draft: Draft) -> dict:
    values = resolve_forwarded(draft.secret_names, ctx.env, draft.env_files)
    for name, value in values.items():
        ctx.scrubber.add(name, value)
    return wire.build_create_body(
        draft.hosted, mode=draft.mode, name=draft.run_name, team_id=draft.owner.team_id, image_tag=draft.image_tag,
        wandb_api_key=values.get("WANDB_API_KEY"), hf_token=values.get("HF_TOKEN"), gpu_type=draft.gpu_type,
        volume=draft.volume, source_ref=draft.source_ref)


def _refused(exc: perr.PlatformError, plan_id: str, action: str) -> ToolFailure:
    error = from_platform(exc)
    error.message = f"The platform refused plan {plan_id}: {error.message}"
    error.fix = (f"Nothing was {action}. Fix what the message and fields say, then plan again (mf_plan_run) and get "
                 "the new plan approved; the old approval is spent." if error.code not in ("rate_limited",) else
                 "Wait and retry with a new approval (the platform was rate limiting).")
    return ToolFailure(error)


@tool
def dispatch_run(inp: DispatchRunInput, ctx: Context) -> DispatchResult:
    """Launch a planned run exactly once (POST /training/runs; never retried).

    The plan is rebuilt here, over the current config file, env files, owner and prices: this is
    the check that binds an approval (minted for the recorded ``plan_hash``) to what is sent.

    Errors: ``unknown_plan``, ``plan_changed`` (message and ``fields`` name each fact that differs
    from the plan, e.g. ``usd_per_gpu_hour 1.8 -> 2.1``), ``confirmation_required``, ``approval_refused``,
    ``confirmation_invalid`` / ``_expired`` / ``_used``, ``ambiguous_launch`` (ambiguous=true:
    never re-send; call again to reconcile), ``unavailable`` (nothing sent; retry with the same
    confirmation), platform 4xx (refused; plan again), and the planning errors of mf_plan_run.
    A plan launched before returns status ``already_dispatched`` with its run id.
    """
    ledger = Ledger.for_context(ctx)
    state = gate.launch_state(ledger, inp.plan_id)
    if state.plan.get("action") == "stop":
        stop = call("mf_stop_run", run_id=state.plan.get("run_id"), confirmation=inp.confirmation)
        raise fail("bad_arguments", f"{inp.plan_id} is a stop plan.", f"Stop the run instead: {stop}.",
                   next_calls=[stop])
    if state.status == "dispatched":
        return _already(ctx, state)
    if state.status in ("ambiguous", "in_flight"):
        return _reconcile(ctx, ledger, state)
    draft = rebuild(ctx, state)
    check_unchanged(state, draft)
    request = request_from_state(state, ctx)
    token = obtain_confirmation(ctx, ledger, request, inp.confirmation, _policy_facts(draft),
                                   lambda: _count_active(ctx, draft.owner.team_id))
    body = _create_body(ctx, draft)
    try:
        claim = gate.claim_dispatch(ledger, inp.plan_id, draft.plan_hash, token)
    except ToolFailure as failure:
        if failure.error.code == "already_dispatched":  # another process finished first
            return _already(ctx, gate.launch_state(ledger, inp.plan_id))
        raise
    try:
        created = ctx.platform().create_run(body)
    except perr.Ambiguous:
        gate.record_outcome(ledger, inp.plan_id, claim.attempt_id, "ambiguous")
        return _reconcile(ctx, ledger, gate.launch_state(ledger, inp.plan_id))
    except (perr.CredentialsMissing, perr.Unavailable) as exc:  # create_run raises Unavailable only when not sent
        gate.record_outcome(ledger, inp.plan_id, claim.attempt_id, "not_sent", detail=exc.message)
        check, again = call("mf_preflight"), call("mf_dispatch_run", plan_id=inp.plan_id, confirmation=inp.confirmation)
        raise fail("unavailable", f"Nothing was sent: {exc.message}",
                   f"The platform was not reached, so nothing was launched and the approval is not used up. Check "
                   f"the network and PRIME_API_BASE_URL ({check}), then call {again} again (the same "
                   "confirmation works).", retryable=True,

                   next_calls=[check, again]) from None

    except perr.PlatformError as exc:
        gate.record_outcome(ledger, inp.plan_id, claim.attempt_id, "rejected", status_code=exc.status,
                            detail=exc.message)
        raise _refused(exc, inp.plan_id, "launched") from None
    if created.token_value is not None:
        ctx.scrubber.add("tokenValue", created.token_value.get_secret_value())
    facts = {"channel": claim.channel, "gpu_type": created.gpu_type or draft.gpu_type,
             "usd_per_gpu_hour": created.price_per_gpu_hour if created.on_demand else draft.cost.usd_per_gpu_hour,
             "estimated_usd_per_hour": created.estimated_cost_per_hour if created.on_demand else None,
             "on_demand": created.on_demand}
    gate.record_outcome(ledger, inp.plan_id, claim.attempt_id, "created", run_id=created.run_id, **facts)
    state = gate.launch_state(ledger, inp.plan_id)
    return _result(ctx, state, "created", created.run_id,
                   f"Launched run {created.run_id} ({draft.run_name}) for the {draft.owner.label}.", facts)


# -- stop_run ---------------------------------------------------------------------------------


class StopRunInput(BaseModel):
    """Arguments of ``mf_stop_run``."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(description="The run to stop (irreversible).")
    confirmation: str | None = Field(default=None, description=(
        "The code (mfc_...) the user got from `model-factory approve STOP_PLAN_ID` for this stop. Null: use the "
        "host's approval prompt; without one the error names the command to run."))
    timeout_seconds: float = Field(default=60.0, ge=0, le=MAX_STOP_WAIT_SECONDS, description=(
        "Seconds to wait for the run to reach a terminal status after the stop request (polling every 3 s)."))


class StopRunResult(BaseModel):
    """Outcome of a stop. Source: PUT /rft/runs/{id}/stop, GET /rft/runs/{id}."""

    run_id: str = Field(description="The run.")
    status: str = Field(description="Its last status (STOPPED, another terminal status, or still tearing down).")
    outcome: Literal["stopped", "terminal", "still_tearing_down", "already_terminal"] = Field(description=(
        "stopped: STOPPED; terminal: reached another terminal status before the stop completed; "
        "still_tearing_down: not terminal within timeout_seconds; already_terminal: nothing was sent."))
    plan_id: str | None = Field(description="The stop plan (ledger), when a stop was sent.")
    approval_channel: str | None = Field(description="How the stop was approved.")
    waited_seconds: float = Field(description="Seconds spent polling.")
    message: str = Field(description="What happened, in words.")
    next_step: str = Field(description="What to call next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


def _stop_plan(ctx: Context, ledger: Ledger, run: wire.RLRun) -> gate.LaunchState:
    plan_id = _plan_id("stop")
    material = {"action": "stop", "run_id": run.id, "config_sha256": None, "team_id": run.team_id,
                "gpu_type": None, "gpu_count": run.gpu_count, "volume": None, "source_ref": None, "image_tag": None,
                "secret_names": [], "max_steps": None, "cost": None}
    summary = "\n".join([
        f"Stop plan {plan_id}: stop run {run.id} ({run.name or 'unnamed'}). Irreversible: the run cannot be "
        "started again (a PAUSED run could be resumed; a STOPPED one cannot).",
        f"  Owner:   {owner_label(run.team_id)}",
        f"  Model:   {run.base_model or 'unknown'}; status now {run.status}; GPUs {run.gpu_count or 'unknown'}",
        f"  Approval valid {APPROVAL_TTL_SECONDS // 60} minutes, for this run only, once."])
    gate.record_plan(ledger, plan_id, gate.plan_hash(material), **material, summary=summary)
    return gate.launch_state(ledger, plan_id)


def _stop_state(ctx: Context, ledger: Ledger, run: wire.RLRun, confirmation: str | None) -> gate.LaunchState:
    if not confirmation or not confirmation.strip():
        return _stop_plan(ctx, ledger, run)
    match = _TOKEN.match(confirmation.strip())
    try:
        state = gate.launch_state(ledger, match.group(1)) if match else None
    except ToolFailure:
        state = None
    if state is None or state.plan.get("action") != "stop" or state.plan.get("run_id") != run.id:
        again = call("mf_stop_run", run_id=run.id)
        raise fail("confirmation_invalid", f"That confirmation does not approve stopping run {run.id}.",
                   f"Call {again} (no confirmation) to get the approve command, and ask the user to run it.",
                   next_calls=[again])
    return state


def _poll_terminal(ctx: Context, run_id: str, status: str, timeout: float) -> tuple[str, float]:
    start = ctx.clock()
    deadline = start + timeout
    while not wire.RunStatus.is_terminal(status) and ctx.clock() < deadline:
        ctx.sleep(min(STOP_POLL_SECONDS, max(0.0, deadline - ctx.clock())))
        try:
            status = ctx.platform().get_run(run_id).status
        except perr.PlatformError:
            break
    return status, round(ctx.clock() - start, 2)


@tool
def stop_run(inp: StopRunInput, ctx: Context) -> StopRunResult:
    """Stop a run after a person approved this stop, then wait (bounded) for a terminal status.

    Errors: ``not_found`` (run), ``confirmation_required`` (fix names ``model-factory approve
    <stop plan>``), ``approval_refused``, ``confirmation_invalid`` / ``_expired`` / ``_used``,
    ``unavailable`` (nothing sent), platform 4xx. A budget policy does not pre-authorize stops.
    """
    run = ctx.platform().get_run(inp.run_id)
    inspect = call("mf_get_run", run_id=run.id)
    if run.is_terminal():
        return StopRunResult(run_id=run.id, status=run.status, outcome="already_terminal", plan_id=None,
                             approval_channel=None, waited_seconds=0.0,
                             message=f"Run {run.id} is already {run.status}; nothing was sent.",
                             next_step=f"Inspect it with {inspect}.", next_calls=[inspect])
    ledger = Ledger.for_context(ctx)
    state = _stop_state(ctx, ledger, run, inp.confirmation)
    request: ApprovalRequest = request_from_state(state, ctx)
    token = obtain_confirmation(ctx, ledger, request, inp.confirmation, None)
    claim = gate.claim_dispatch(ledger, state.plan_id, str(state.plan_hash), token)
    note = ""
    try:
        status = ctx.platform().stop_run(run.id).status
        gate.record_outcome(ledger, state.plan_id, claim.attempt_id, "created", run_id=run.id, channel=claim.channel)
    except perr.Unavailable as exc:
        if not exc.sent:
            gate.record_outcome(ledger, state.plan_id, claim.attempt_id, "not_sent", detail=exc.message)
            check, again = call("mf_preflight"), call("mf_stop_run", run_id=run.id, confirmation=inp.confirmation)
            raise fail("unavailable", f"Nothing was sent: {exc.message}",
                       f"Check the network ({check}), then call {again} again.", retryable=True,
                       next_calls=[check, again]) from None
        gate.record_outcome(ledger, state.plan_id, claim.attempt_id, "ambiguous", run_id=run.id)
        status, note = run.status, " The stop request's answer was lost; polling the run instead."
    except perr.PlatformError as exc:
        gate.record_outcome(ledger, state.plan_id, claim.attempt_id, "rejected", status_code=exc.status,
                            detail=exc.message)
        raise _refused(exc, state.plan_id, "stopped") from None
    status, waited = _poll_terminal(ctx, run.id, status, inp.timeout_seconds)
    upper = status.upper()
    if upper == "STOPPED":
        outcome, message = "stopped", f"Run {run.id} stopped."
    elif wire.RunStatus.is_terminal(upper):
        outcome, message = "terminal", f"Run {run.id} reached {status} before the stop completed."
    else:
        outcome, message = "still_tearing_down", (f"Run {run.id} is still being torn down ({status}) after "
                                                  f"{waited:g} s; the stop was accepted.")
    wait = call("mf_wait_for_run", run_id=run.id)
    tearing = outcome == "still_tearing_down"
    return StopRunResult(run_id=run.id, status=status, outcome=outcome, plan_id=state.plan_id,
                         approval_channel=claim.channel, waited_seconds=waited, message=message + note,
                         next_step=f"Confirm with {inspect}" + (f" (or {wait})." if tearing else "."),
                         next_calls=[inspect, wait] if tearing else [inspect])



# -- list_launches ----------------------------------------------------------------------------


class ListLaunchesInput(BaseModel):
    """Arguments of ``mf_list_launches``."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=20, ge=1, le=200, description="Most recently active plans to list.")


class LaunchEntry(BaseModel):
    """One plan in the ledger (scrubbed)."""

    plan_id: str = Field(description="Plan id.")
    action: Literal["launch", "stop"] = Field(description="launch or stop.")
    status: str = Field(description="planned | approved | in_flight | dispatched | ambiguous | rejected | not_sent.")
    planned_at: str | None = Field(description="ISO 8601 time of the latest plan record.")
    last_activity: str = Field(description="ISO 8601 time of the latest record.")
    owner: str = Field(description="'personal' or the team id.")
    config_path: str | None = Field(description="Config file (launch plans).")
    config_sha256: str | None = Field(description="sha256 of the canonical hosted config.")
    run_name: str | None = Field(description="Run name with fingerprint (launch plans).")
    gpu_type: str | None = Field(description="GPU type.")
    gpu_count: int | None = Field(description="GPU count.")
    usd_per_gpu_hour: float | None = Field(description="Price per GPU-hour at planning.")
    usd_high: float | None = Field(description="High cost estimate at planning, USD.")
    secret_names: list[str] = Field(default_factory=list, description=(
        "Env names the plan forwards to the run (names only, never values)."))
    approval_channel: str | None = Field(description="Channel of the latest approval.")
    approvals: int = Field(description="Approvals recorded.")
    attempts: int = Field(description="Dispatch attempts.")
    outcome: str | None = Field(description="Latest attempt's outcome (created, reconciled, ambiguous, ...).")
    run_id: str | None = Field(description="Run id when known (the stopped run for stop plans).")


class LaunchList(BaseModel):
    """The ledger's plans, most recently active first. Source: <state>/launches.jsonl."""

    ledger_path: str = Field(description="The ledger file.")
    launches: list[LaunchEntry] = Field(description="Plans, newest activity first.")
    truncated: bool = Field(description="True when entries were left out to fit the output budget.")
    omitted: int = Field(description="Entries left out.")
    narrow_hint: str | None = Field(description="How to ask for less.")


def _entry(s: gate.LaunchState) -> LaunchEntry:
    plan = s.plan
    cost = plan.get("cost") if isinstance(plan.get("cost"), dict) else {}
    return LaunchEntry(
        plan_id=s.plan_id, action=plan.get("action", "launch"), status=s.status, planned_at=s.planned_at,
        last_activity=s.last_activity, owner=plan.get("team_id") or "personal", config_path=plan.get("config_path"),
        config_sha256=plan.get("config_sha256"), run_name=plan.get("name"), gpu_type=plan.get("gpu_type"),
        gpu_count=plan.get("gpu_count"), usd_per_gpu_hour=cost.get("usd_per_gpu_hour"), usd_high=cost.get("usd_high"),
        secret_names=list(plan.get("secret_names") or []),
        approval_channel=s.approvals[-1].channel if s.approvals else None, approvals=len(s.approvals),
        attempts=len(s.attempts), outcome=s.last_outcome, run_id=s.run_id or plan.get("run_id"))


@tool
def list_launches(inp: ListLaunchesInput, ctx: Context) -> LaunchList:
    """The local launch ledger: each plan's approvals, attempts, outcome and run id. Local only."""
    ledger = Ledger.for_context(ctx)
    entries = [_entry(s) for s in gate.list_launches(ledger, inp.limit)]

    def build(k: int) -> LaunchList:
        omitted = len(entries) - k
        return LaunchList(ledger_path=str(ledger.path), launches=entries[:k], truncated=omitted > 0, omitted=omitted,
                          narrow_hint=f"Pass a smaller limit (e.g. {max(1, k)})." if omitted else None)

    return fit_largest(build, len(entries))
