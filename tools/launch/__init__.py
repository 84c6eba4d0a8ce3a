"""Launch tools: plan a run, dispatch it exactly once with a human's confirmation, control a
run (stop, pause, restart, resume), list what the state store knows.

* ``mf_plan_run`` (:func:`plan_run`) - costs nothing: the summary, cost estimate and
  ``plan_id`` / ``plan_hash`` (planning in ``_plan``, the estimate in ``_cost``).
* ``mf_dispatch_run`` (:func:`dispatch_run`) - re-checks the plan against the current config,
  env files, owner and prices (``plan_changed`` names each fact that moved), gets a confirmation
  (given, budget policy, host approver; channels in ``_approval``), claims the
  launch in the state store and sends POST ``/training/runs`` once (``_dispatch``). A create whose
  answer was lost is reconciled by listing the owner's runs (GET ``/rft/runs``) for the run
  name's plan fingerprint, never re-sent. It carries out resume plans too (``_resume``).
* ``mf_stop_run``, ``mf_pause_run``, ``mf_restart_run``, ``mf_resume_run`` - run control
  (:mod:`tools.launch.control`).
* ``mf_list_launches`` (:func:`list_launches`) - the state store's plans of this platform
  (:mod:`tools.guardrails.store`): every launch and control action.

The tools and their models are here and in ``control``; the work is in private modules:
``_plan`` (the facts a plan shows and dispatch re-checks), ``_cost`` (the low/expected/high
estimate), ``_approval`` (the approval channels and the checks before minting; ``model-factory
approve`` uses :func:`plan_request` and :func:`approve_plan`), ``_dispatch`` (one create, once),
``_reconcile`` (lost answers), ``_resume`` (the resume plan).

Errors returned (codes): see each tool. Records: :mod:`tools.guardrails.records`; the gate:
:mod:`tools.guardrails.confirmation`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.core import Context, Owner, fit_largest, tool
from tools.errors import Call, call, fail
from tools.guardrails import confirmation as gate
from tools.guardrails.policy import PlanFacts
from tools.guardrails.records import PlanRecord
from tools.guardrails.secret_detection import resolve_forwarded
from tools.launch._approval import (
    PLAN_MAX_AGE_SECONDS,
    ApprovalRequest,
    approve_command,
    approve_plan,
    check_unchanged,
    obtain_confirmation,
    plan_request,
    policy_decision,
    rebuild,
    request_from_state,
)
from tools.launch._cost import CostEstimate
from tools.launch._dispatch import (
    DispatchRunResult,
    ResumeRunResult,
    already,
    count_active,
    new_plan_id,
    reconcile,
    send_create,
)
from tools.launch._plan import (
    APPROVAL_TTL_SECONDS,
    Draft,
    PlanRunInput,
    RuntimeInfo,
    Validation,
    build_plan,
    summary_text,
)
from tools.launch._resume import ResumeRunInput, carry_out
from tools.launch.control import (
    PauseRunInput,
    PauseRunResult,
    RestartRunInput,
    RestartRunResult,
    StopRunInput,
    StopRunResult,
    pause_run,
    restart_run,
    resume_run,
    stop_run,
)
from tools.platform import wire

__all__ = [
    "ApprovalRequest",
    "CostEstimate",
    "DispatchRunInput",
    "DispatchRunResult",
    "LaunchEntry",
    "ListLaunchesInput",
    "ListLaunchesResult",
    "PLAN_MAX_AGE_SECONDS",
    "PauseRunInput",
    "PauseRunResult",
    "PlanRunInput",
    "PlanRunResult",
    "RestartRunInput",
    "RestartRunResult",
    "ResumeRunInput",
    "ResumeRunResult",
    "RuntimeInfo",
    "StopRunInput",
    "StopRunResult",
    "Validation",
    "approve_plan",
    "dispatch_run",
    "list_launches",
    "pause_run",
    "plan_request",
    "plan_run",
    "restart_run",
    "resume_run",
    "stop_run",
]


# -- plan_run ---------------------------------------------------------------------------------


class PlanRunResult(BaseModel):
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
    policy_approves: bool = Field(default=False, description=(
        "True: the person's budget policy (policy_path) covers this plan now, so mf_dispatch_run launches it without "
        "a confirmation code; the summary says so. Re-checked at dispatch."))
    policy_path: str | None = Field(default=None, description="The budget policy file that covers this plan, when "
                                                               "policy_approves.")
    next_step: str = Field(description="How to get it approved and launched.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


@tool
def plan_run(inp: PlanRunInput, ctx: Context) -> PlanRunResult:
    """Plan a run: costs nothing, launches nothing; records the plan in the state store.

    Errors: ``secret_in_input``, ``config_not_found``, ``invalid_toml``, ``invalid_config``,
    ``bad_arguments``, ``env_file_invalid``, ``unsupported_secret``, ``secret_not_set``,
    ``invalid_context``, ``invalid_team``, ``owner_ambiguous``, ``volume_not_found``, ``state_read_only`` /
    ``state_unusable`` (nothing sent), platform errors.
    """
    ctx.store().require_writable()
    plan_id = new_plan_id()
    draft = build_plan(inp, ctx, plan_id, prepare=True)
    approve, dispatch = approve_command(plan_id, ctx), call("mf_dispatch_run", plan_id=plan_id)
    _, decision = policy_decision(ctx, _policy_facts(draft), lambda: count_active(ctx, draft.owner.team_id))
    covered = decision.policy_path if decision.allowed else None
    summary = summary_text(draft, policy=covered, policy_reasons=decision.reasons if covered else [])
    args = inp.model_dump()
    args["config_path"] = str(draft.config_path)
    args["env_files"] = [str(ctx.resolve_path(p)) for p in inp.env_files]
    gate.record_plan(ctx.store(), PlanRecord.of(
        plan_id, draft.plan_hash, draft.material, arguments=args, config_path=str(draft.config_path),
        env_files=[str(p) for p in draft.env_files], fingerprint=draft.fingerprint, owner_label=draft.owner.label,
        model=draft.model, summary=summary))
    return PlanRunResult(
        plan_id=plan_id, plan_hash=draft.plan_hash, summary=summary, config_path=str(draft.config_path),
        config_sha256=draft.config_sha256, file_sha256=draft.file_sha256, mode=draft.mode, model=draft.model,
        run_name=draft.run_name, owner=draft.owner, gpu_type=draft.gpu_type, gpu_type_source=draft.gpu_type_source,
        gpu_count=draft.gpu_count, usd_per_gpu_hour=draft.cost.usd_per_gpu_hour, usd_per_hour=draft.cost.usd_per_hour,
        cost=draft.cost, run_kind=inp.run_kind, max_steps=draft.max_steps, max_steps_reason=draft.max_steps_reason,
        config_max_steps=draft.config_max_steps, secret_names=draft.secret_names, volume=draft.volume,
        image_tag=draft.image_tag, source_ref=draft.source_ref, runtime=draft.runtime,
        validation=draft.validation, warnings=draft.warnings,
        approval_ttl_seconds=APPROVAL_TTL_SECONDS, approve_command=approve, next_calls=[dispatch],
        policy_approves=covered is not None, policy_path=covered,
        next_step=(f"The user's budget policy {covered} covers this plan: you may launch it now with {dispatch}, "
                   "no confirmation code needed (show the user the summary first; dispatch checks the policy again)."
                   if covered else
                   f"Show the summary to the user; call {dispatch}. If it says confirmation_required, they run "
                   f"`{approve}` in their own terminal and give you the code for the confirmation."))


# -- dispatch_run -----------------------------------------------------------------------------


class DispatchRunInput(BaseModel):
    """Arguments of ``mf_dispatch_run``."""

    model_config = ConfigDict(extra="forbid")

    plan_id: str = Field(description="The plan_id from mf_plan_run.")
    confirmation: str | None = Field(default=None, description=(
        "The code (mfc_...) the user got from `model-factory approve PLAN_ID`. Null: use the host's approval "
        "prompt or the user's budget policy, if any. Never invent one."))


def _policy_facts(draft: Draft) -> PlanFacts:
    return PlanFacts(usd_high=draft.cost.usd_high, gpu_count=draft.gpu_count, gpu_type=draft.gpu_type,
                     model=draft.model, steps=draft.max_steps, owner=draft.owner.team_id or "personal",
                     unresolved_launches=draft.material.get("acknowledged_unresolved", []))


def _create_body(ctx: Context, draft: Draft) -> dict:
    values = resolve_forwarded(draft.secret_names, ctx.env, draft.env_files)
    for name, value in values.items():
        ctx.scrubber.add(name, value)
    return wire.build_create_body(
        draft.hosted, mode=draft.mode, name=draft.run_name, team_id=draft.owner.team_id, image_tag=draft.image_tag,
        wandb_api_key=values.get("WANDB_API_KEY"), hf_token=values.get("HF_TOKEN"), gpu_type=draft.gpu_type,
        volume=draft.volume, source_ref=draft.source_ref)


@tool
def dispatch_run(inp: DispatchRunInput, ctx: Context) -> DispatchRunResult:
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
    store = ctx.store()
    store.require_writable()
    state = gate.launch_state(store, inp.plan_id)
    action = state.plan.action
    if action not in ("launch", "resume"):
        tool_call = call(f"mf_{action}_run", run_id=state.plan.run_id, confirmation=inp.confirmation)
        raise fail("bad_arguments", f"{inp.plan_id} is a {action} plan, not a launch.",
                   f"Carry it out with its own tool: {tool_call}.", next_calls=[tool_call])
    if action == "resume":
        return carry_out(ctx, store, state, inp.confirmation)
    if state.status == "dispatched":
        return already(ctx, state)
    if state.status in gate.UNRESOLVED_STATUSES:
        return reconcile(ctx, store, state)
    if state.plan.imported_from is not None:
        raise gate.imported_failure(state.plan)
    draft = rebuild(ctx, state)
    check_unchanged(state, draft.plan_hash, draft.material)
    token = obtain_confirmation(ctx, store, request_from_state(state, ctx), inp.confirmation, _policy_facts(draft),
                                lambda: count_active(ctx, draft.owner.team_id))
    body = _create_body(ctx, draft)
    return send_create(
        ctx, store, inp.plan_id, draft.plan_hash, token,
        again=call("mf_dispatch_run", plan_id=inp.plan_id, confirmation=inp.confirmation),
        send=lambda: ctx.platform().create_run(body), planned_gpu=draft.gpu_type,
        planned_price=draft.cost.usd_per_gpu_hour,
        message=lambda run_id: f"Launched run {run_id} ({draft.run_name}) for the {draft.owner.label}.")


# -- list_launches ----------------------------------------------------------------------------


class ListLaunchesInput(BaseModel):
    """Arguments of ``mf_list_launches``."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=20, ge=1, le=200, description="Most recently active plans to list.")


class LaunchEntry(BaseModel):
    """One plan in the state store (scrubbed)."""

    plan_id: str = Field(description="Plan id.")
    action: Literal["launch", "resume", "stop", "pause", "restart"] = Field(description=(
        "launch (a new run), resume (a new run continuing a paused one), or a control action on a run: stop, "
        "pause, restart."))
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
    run_id: str | None = Field(description=(
        "Run id when known: the run launched, the NEW run of a resume, the run a stop/pause/restart acted on."))
    acted_on: str | None = Field(default=None, description=(
        "The existing run a resume, stop, pause or restart plan names (a resume's paused run); null for a launch."))


class ListLaunchesResult(BaseModel):
    """The state store's plans of this platform, most recently active first. Source: <state>/state.db."""

    store_path: str = Field(description="The state database (per user, outside the working folder).")
    store_warning: str | None = Field(default=None, description=(
        "Why the store cannot be written or read here, or what was imported into it from an old ledger (null: "
        "nothing to say)."))
    launches: list[LaunchEntry] = Field(description="Plans, newest activity first.")
    truncated: bool = Field(description="True when entries were left out to fit the output budget.")
    omitted: int = Field(description="Entries left out.")
    narrow_hint: str | None = Field(description="How to ask for less.")


def _entry(s: gate.LaunchState) -> LaunchEntry:
    plan = s.plan
    cost = plan.cost
    return LaunchEntry(
        plan_id=s.plan_id, action=plan.action, status=s.status, planned_at=s.planned_at,
        last_activity=s.last_activity, owner=plan.team_id or "personal", config_path=plan.config_path,
        config_sha256=plan.config_sha256, run_name=plan.name, gpu_type=plan.gpu_type,
        gpu_count=plan.gpu_count, usd_per_gpu_hour=cost.usd_per_gpu_hour if cost else None,
        usd_high=cost.usd_high if cost else None, secret_names=list(plan.secret_names),
        approval_channel=s.approvals[-1].channel if s.approvals else None, approvals=len(s.approvals),
        attempts=len(s.attempts), outcome=s.last_outcome,
        run_id=s.run_id or (plan.run_id if plan.action != "resume" else None),
        acted_on=plan.run_id)


@tool
def list_launches(inp: ListLaunchesInput, ctx: Context) -> ListLaunchesResult:
    """The state store's plans of this platform (launches, resumes, stops, pauses, restarts) with their
    approvals, attempts, outcome and run id, and why the store cannot be written here, if so. Local only
    (the platform URL from the settings; no request)."""
    store = ctx.store()
    entries = [_entry(s) for s in gate.list_launches(store, inp.limit, platform_url=ctx.settings.base_url)]
    notes = [note] if (note := store.note()) else []
    notes += [imported.words() for imported in store.imported]

    def build(k: int) -> ListLaunchesResult:
        omitted = len(entries) - k
        return ListLaunchesResult(store_path=str(store.path), store_warning=" ".join(notes) or None,
                                  launches=entries[:k], truncated=omitted > 0, omitted=omitted,
                                  narrow_hint=f"Pass a smaller limit (e.g. {max(1, k)})." if omitted else None)

    return fit_largest(build, len(entries))
