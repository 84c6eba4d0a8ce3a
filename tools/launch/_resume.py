"""Resuming a paused run: a NEW billed run, so it is planned and approved like a launch.

POST ``/training/runs/{id}/resume`` (reference/prime-api.md §2.1 row 3, §3.4) starts a new run
that continues a PAUSED one, with whichever of ``gpuType``, ``imageTag``, ``wandbApiKey``,
``hfToken`` are set, and answers like a create (``{runId, ...}``). :func:`build_resume` computes
the plan: the paused run (GET ``/rft/runs/{id}``: owner, model, GPUs, ``maxSteps``), the step it
paused at (GET ``/rft/runs/{id}/progress``), the price (GET ``/training/available-fft-models``,
on-demand ``pricePerGpuHour`` of the GPU type), the cost estimate of the steps left
(:mod:`tools.launch._cost`), the forwarded secret NAMES (values read only when sending), and the
earlier resumes of the same pause in the store. :func:`carry_out` sends it once with
:func:`tools.launch._dispatch.send_create`, after rebuilding the plan over current facts (an
approval covers exactly the plan hash it was given for).

A paused run is resumed once. An earlier resume plan of the same run that was sent (the new run
is known) or whose answer was lost (looked for once, :func:`tools.launch._reconcile.look_for_lost_run`)
goes into the plan material (``already_resumed_as``) and its summary ("ALREADY RESUMED: ... as run
X"), and a budget policy never approves such a plan (:class:`tools.guardrails.policy.PlanFacts`
``already_resumed``): only a person can. An approval given before the first resume went out does
not cover the second: the rebuilt plan differs (``plan_changed``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tools.core import RUN_ID, Context, owner_label, require_run
from tools.errors import Call, call, fail
from tools.guardrails import confirmation as gate
from tools.guardrails import secret_detection
from tools.guardrails.policy import PlanFacts, load_for_context
from tools.guardrails.records import PlanRecord
from tools.guardrails.store import Store
from tools.guardrails.text import shown
from tools.launch._approval import check_unchanged, obtain_confirmation, request_from_state
from tools.launch._cost import CostEstimate, estimate_cost, magnitude_warnings
from tools.launch._dispatch import DispatchRunResult, already, count_active, reconcile, send_create
from tools.launch._plan import APPROVAL_TTL_SECONDS, SECRETS_HELP, DisplayText, SecretNames, forwarded_names, usd
from tools.launch._reconcile import look_for_lost_run
from tools.platform import errors as perr
from tools.platform import wire


class ResumeRunInput(BaseModel):
    """Arguments of ``mf_resume_run``."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = RUN_ID
    gpu_type: DisplayText = Field(default=None, description=(
        "GPU type for the new run (see mf_list_gpus). Null: none sent, the platform keeps the paused run's."))
    image_tag: DisplayText = Field(default=None, description="prime-rl image tag for the new run; null: none sent.")
    secrets: SecretNames = Field(default_factory=list, description=SECRETS_HELP)
    env_files: list[str] = Field(default_factory=list, description=(
        "Paths of .env files to read forwarded secrets from (later wins); as with prime train resume, only "
        "WANDB_API_KEY / HF_TOKEN may be in them."))
    team: str | None = Field(default=None, description=(
        "Who you expect to pay: 'personal' or a team id. The new run belongs to the paused run's owner; a "
        "different one is refused. Null: the paused run's owner, shown in the plan."))
    confirmation: str | None = Field(default=None, description=(
        "The code (mfc_...) the user got from `model-factory approve RESUME_PLAN_ID` for this resume. Null: the "
        "user's budget policy or the host's approval prompt; without either the error shows the plan and names "
        "the command to run. Never invent one."))


@dataclass
class ResumeDraft:
    """A computed resume plan (internal). ``material`` is what ``plan_hash`` covers."""

    plan_id: str
    args: ResumeRunInput
    run: wire.RLRun
    mode: str
    gpu_type: str | None
    gpu_type_source: str
    cost: CostEstimate
    paused_step: int | None
    secret_names: list[str]
    env_files: list[Path]
    earlier: list[tuple[str, str]] = field(default_factory=list)  # (plan id, new run id or "")
    warnings: list[str] = field(default_factory=list)
    material: dict[str, Any] = field(default_factory=dict)
    plan_hash: str = ""

    @property
    def owner(self) -> str:
        """``personal`` or the team id (the paused run's owner)."""
        return self.run.team_id or "personal"


def _check_resumable(run: wire.RLRun) -> None:
    status = (run.status or "").upper()
    if status == "PAUSED":
        return
    if status == "PAUSING":
        wait = call("mf_wait_for_run", run_id=run.id)
        raise fail("conflict", f"Run {run.id} is still PAUSING; only a PAUSED run can be resumed.",
                   f"Wait until it is PAUSED ({wait}), then resume it.", retryable=True, next_calls=[wait])
    if wire.RunStatus.is_terminal(status):
        raise fail("conflict", f"Run {run.id} is {status}; only a PAUSED run can be resumed, and a {status} run "
                   "cannot be started again.", "Start a new run instead: plan it from its config file with "
                   "mf_plan_run.")
    pause = call("mf_pause_run", run_id=run.id)
    raise fail("conflict", f"Run {run.id} is {status}, not PAUSED: only a paused run can be resumed (resume starts "
               "a new run from the pause).", f"It is still going; nothing to resume. To pause it: {pause}.",
               next_calls=[pause])


def _earlier(ctx: Context, store: Store, run_id: str, plan_id: str) -> list[tuple[str, str]]:
    """(plan id, new run id, or "" when not found) of every earlier resume of ``run_id`` that was sent;
    a lost answer is looked for once first."""
    found = []
    for state in gate.resumes_of(store, run_id, exclude=plan_id):
        if state.status != "dispatched":
            lookup = look_for_lost_run(ctx, store, state)
            state = lookup.state
        found.append((state.plan_id, state.run_id or ""))
    return found


def _gpu(ctx: Context, store: Store, args: ResumeRunInput, run: wire.RLRun,
         warnings: list[str]) -> tuple[str | None, str, float | None, str | None]:
    """(GPU type, where it came from, USD per GPU-hour or None, why unknown)."""
    platform = ctx.platform()
    gpu: str | None
    if args.gpu_type:
        allowed = platform.list_gpu_types(team_id=run.team_id).gpu_types
        if allowed and args.gpu_type not in allowed:
            again = call("mf_resume_run", run_id=run.id, gpu_type=allowed[0])
            raise fail("bad_arguments", f"GPU type {args.gpu_type} is not available to the "
                       f"{owner_label(run.team_id)}; available: {', '.join(allowed)}.",
                       f"Pick one of those, e.g. {again}.", next_calls=[again])
        gpu, how = args.gpu_type, "argument (sent)"
    else:
        launched = gate.plan_of_run(store, run.id)
        attempt = next((a for a in reversed(launched.attempts) if a.run_id == run.id), None) if launched else None
        gpu = (attempt.facts.gpu_type if attempt else None) or (launched.plan.gpu_type if launched else None)
        how = "as the paused run, from its launch plan; none sent, the platform keeps it" if gpu else \
            "as the paused run, unknown here (not launched from this store); none sent"
    if gpu is None:
        warnings.append("The paused run's GPU type is not known here, so neither is the price; name a GPU type to "
                        "price the resume (a budget policy cannot approve an unknown cost).")
        return None, how, None, "price per GPU-hour: the GPU type is the platform's choice (the paused run's)."
    prices = {g.gpu_type: g.price_per_gpu_hour for g in platform.list_models(team_id=run.team_id).on_demand}
    price = prices.get(gpu)
    why = None if price is not None else f"price per GPU-hour: {gpu} has no on-demand price for this owner."
    return gpu, how, price, why


def build_resume(args: ResumeRunInput, ctx: Context, plan_id: str) -> ResumeDraft:
    """The resume plan of ``args`` (module docstring). Raises ToolFailure: ``not_found`` (run),
    ``conflict`` (not PAUSED), ``bad_arguments`` (team or GPU type), ``env_file_invalid``,
    ``unsupported_secret``, ``secret_not_set``; PlatformError from the reads."""
    store = ctx.store()
    files = [ctx.resolve_path(p) for p in args.env_files]
    for env_file in files:
        ctx.scrubber.add_env_file(env_file, ctx.env)
    run = require_run(ctx, args.run_id)
    _check_resumable(run)
    if args.team is not None and args.team.strip() != (run.team_id or "personal"):
        again = call("mf_resume_run", run_id=run.id, team=run.team_id or "personal")
        raise fail("bad_arguments", f"Run {run.id} belongs to the {owner_label(run.team_id)}, not {args.team}; a "
                   "resumed run is billed to the paused run's owner.",
                   f"Resume it as its owner ({again}) or not at all.", next_calls=[again])
    warnings: list[str] = []
    given = dict(zip(files, args.env_files, strict=True))
    same = args.model_dump(exclude_defaults=True, exclude={"env_files"})

    def without(env_file: Path) -> Call | None:
        rest = [p for p in args.env_files if p != given.get(env_file)]
        return call("mf_resume_run", **same, env_files=rest or None)

    names = forwarded_names(args.secrets, ctx, files, warnings, call("mf_resume_run", run_id=run.id), without)
    gpu, how, price, why = _gpu(ctx, store, args, run, warnings)
    try:
        paused_step = ctx.platform().get_progress(run.id).latest_step
    except perr.NotFound:  # no progress served for it: unknown (any other failure is raised: a retry may read it)
        paused_step = None
    steps = run.max_steps
    if steps is not None and paused_step is not None:
        steps = max(0, steps - paused_step)
    elif steps is not None:
        warnings.append("The step the run paused at is unknown; the estimate counts all its max steps.")
    mode = "sft" if (run.loss or "rl") == "sft" else "rl"
    count = run.gpu_count
    if count is None:
        price, why = None, "GPU count: the platform did not say how many GPUs the run uses."
    cost = estimate_cost(mode, count or 1, price, steps, None, why)
    warnings += magnitude_warnings(cost)
    if problem := load_for_context(ctx).problem:
        warnings.append(f"The budget policy is not used: {problem}")
    draft = ResumeDraft(plan_id=plan_id, args=args, run=run, mode=mode, gpu_type=gpu, gpu_type_source=how, cost=cost,
                        paused_step=paused_step, secret_names=sorted(names), env_files=files,
                        earlier=_earlier(ctx, store, run.id, plan_id), warnings=warnings)
    draft.material = {
        "action": "resume", "platform_url": ctx.settings.base_url, "account_id": ctx.account_id(),
        "run_id": run.id, "config_sha256": None, "team_id": run.team_id, "gpu_type": gpu,
        "gpu_count": count, "volume": None, "source_ref": None, "image_tag": args.image_tag,
        "secret_names": draft.secret_names, "max_steps": steps, "mode": mode, "name": run.name,
        "cost": {"usd_per_gpu_hour": price, "usd_low": cost.usd_low, "usd_expected": cost.usd_expected,
                 "usd_high": cost.usd_high},
        "already_resumed_as": [new or f"unknown ({pid})" for pid, new in draft.earlier],
    }
    draft.plan_hash = gate.plan_hash(draft.material)
    return draft


def summary(d: ResumeDraft) -> str:
    """The resume plan for a person: what starts, who pays, the cost, earlier resumes first."""
    c, run = d.cost, d.run
    lines = [f"Resume plan {d.plan_id}: resume paused run {run.id} ({run.name or 'unnamed'}) as a NEW billed run; "
             "nothing started, nothing spent yet."]
    for pid, new in d.earlier:
        said = f"as run {new}" if new else "(its answer was lost and no new run was found yet; one may exist)"
        lines.append(f"  ALREADY RESUMED: run {run.id} was already resumed {said}, plan {pid}. Approving this "
                     "starts ANOTHER run from the same pause; a budget policy never approves it.")
    price = (f"{usd(c.usd_per_gpu_hour)} per GPU-hour -> {usd(c.usd_per_hour)}/hour"
             if c.usd_per_gpu_hour is not None else "unknown per GPU-hour")
    cost = f"low {usd(c.usd_low)} / expected {usd(c.usd_expected)} / high {usd(c.usd_high)}"
    paused = f"step {d.paused_step}" if d.paused_step is not None else "an unknown step"
    lines += [
        f"  Owner (pays):  {owner_label(run.team_id)} (the paused run's owner)",
        f"  Model / mode:  {run.base_model or 'unknown'} / {d.mode.upper()}",
        f"  Paused at:     {paused} of {run.max_steps if run.max_steps is not None else 'no limit'}",
        f"  GPUs:          {d.gpu_type or 'as paused'} x {run.gpu_count or 'unknown'} ({d.gpu_type_source})",
        f"  Price:         {price}",
        f"  Cost estimate: {cost} for {c.steps if c.steps is not None else 'unbounded'} steps left",
        f"  Assumptions:   {c.assumptions}",
        *[f"  Unknown:       {u}" for u in c.unknown],
        "  Secrets:       " + (", ".join(d.secret_names) + " (by name; values read only when sending)"
                              if d.secret_names else "none forwarded"),
        f"  prime-rl:      image {d.args.image_tag or 'none sent (the platform chooses)'}",
    ]
    if d.warnings:
        lines += ["  Warnings:", *[f"    - {w}" for w in d.warnings]]
    lines.append(f"  Approval:      valid {APPROVAL_TTL_SECONDS // 60} minutes, this exact plan, once; any change "
                 "voids it.")
    return "\n".join(shown(line) for line in lines)  # the run's name is the platform's text


def record(ctx: Context, store: Store, d: ResumeDraft) -> gate.LaunchState:
    """Record the plan (its material, the arguments it is rebuilt from, the summary) in the store."""
    args = d.args.model_dump(exclude={"confirmation"})
    args["env_files"] = [str(p) for p in d.env_files]
    gate.record_plan(store, PlanRecord.of(d.plan_id, d.plan_hash, d.material, arguments=args,
                                          env_files=[str(p) for p in d.env_files],
                                          owner_label=owner_label(d.run.team_id), model=d.run.base_model,
                                          summary=summary(d)))
    return gate.launch_state(store, d.plan_id)


def _facts(d: ResumeDraft) -> PlanFacts:
    return PlanFacts(usd_high=d.cost.usd_high, gpu_count=d.run.gpu_count, gpu_type=d.gpu_type, model=d.run.base_model,
                     steps=d.cost.steps, owner=d.owner, already_resumed=d.material["already_resumed_as"])


def carry_out(ctx: Context, store: Store, state: gate.LaunchState, confirmation: str | None,
              draft: ResumeDraft | None = None) -> DispatchRunResult:
    """Send the resume of plan ``state`` once (``draft``: the plan just built; else rebuilt from the
    recorded arguments over current facts and checked against the recorded hash). A plan sent
    before is answered from the store (``already_dispatched``) or reconciled, never re-sent."""
    if state.status == "dispatched":
        return already(ctx, state)
    if state.status in gate.UNRESOLVED_STATUSES:
        return reconcile(ctx, store, state)
    if draft is None:
        args = ResumeRunInput.model_validate(state.plan.arguments)
        draft = build_resume(args, ctx, state.plan_id)
        check_unchanged(state, draft.plan_hash, draft.material)
    token = obtain_confirmation(ctx, store, request_from_state(state, ctx), confirmation, _facts(draft),
                                lambda: count_active(ctx, draft.run.team_id))
    values = secret_detection.resolve_forwarded(draft.secret_names, ctx.env, draft.env_files)
    for name, value in values.items():
        ctx.scrubber.add(name, value)
    run = draft.run
    again = call("mf_resume_run", run_id=run.id, confirmation=confirmation)
    return send_create(
        ctx, store, state.plan_id, draft.plan_hash, token, again=again,
        send=lambda: ctx.platform().resume_run(run.id, gpu_type=draft.args.gpu_type, image_tag=draft.args.image_tag,
                                               wandb_api_key=values.get("WANDB_API_KEY"),
                                               hf_token=values.get("HF_TOKEN")),
        planned_gpu=draft.gpu_type, planned_price=draft.cost.usd_per_gpu_hour,
        message=lambda new: f"Resumed run {run.id} as new run {new} for the {owner_label(run.team_id)}; it bills "
                            "from now.")
