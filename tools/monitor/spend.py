"""``mf_get_spend``: what a run has cost so far, two ways, beside what its plan estimated.

- The platform's own figure: GET ``/billing/runs/{id}/usage`` (``RunUsage``, reference/prime-api.md
  §2.6): tokens and ``total_cost_usd``, priced per million tokens. Shown in its units, never
  converted: the plan prices GPU-hours (USD per GPU-hour), the usage endpoint prices tokens.
- Elapsed running time x the plan's hourly rate: ``startedAt`` to the run's end (or now, on the
  server's clock) x ``usd_per_gpu_hour`` x GPUs from the plan (else the platform's
  ``estimatedCostPerHour`` recorded at dispatch). A second, labelled figure: what the GPUs cost
  while the run held them. Billing (docs/hosted-training/billing) counts no queue (no ``startedAt``
  yet) and no pause: a PAUSED run's time ends when it paused (``completedAt``, else its
  ``updatedAt``), never at now. Image pull inside start-up is not billed either, but the wire does not
  say when it ended: the figure includes it (an upper bound by the start-up's length).
- A resume chain (paused -> resumed -> ..., the state store's run links) is one line,
  :class:`ChainSpend`: each run's figures and their total, against the launch plan's estimate.
- The plan's low/expected/high estimate comes from the state store (the plan that launched or
  resumed into this run, on this platform); a run launched from elsewhere has none, said as unknown,
  and :func:`missing_plan` says which store was read.

A warning when either figure passes the plan's high estimate. :func:`spend_so_far` is also what
mf_check_progress shows.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from tools.core import RUN_ID, STATE_DIR_ENV, Context, require_run, tool
from tools.errors import Call, call
from tools.guardrails import confirmation as gate
from tools.guardrails.records import PlanCost
from tools.monitor._clock import server_now
from tools.platform import errors as perr
from tools.platform import wire
from tools.units import USD, Seconds, USDPerHour, duration, usd, usd_per_gpu_hour, usd_per_hour

#: Runs of a resume chain followed each way at most (each resume is a pause a person asked for).
MAX_CHAIN = 8
UNITS_NOTE = ("The usage endpoint prices tokens (USD per million tokens) and the plan prices GPU time (USD per "
              "GPU-hour): both totals are in USD, shown side by side; no price is converted into the other unit.")


class GetSpendInput(BaseModel):
    """Which run."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID


class ChainRun(BaseModel):
    """One run of a resume chain and what it has cost."""

    run_id: str = Field(description="Run id.")
    status: str | None = Field(default=None, description="Its status when read (null: it could not be read).")
    platform_usd: USD | None = Field(default=None, description="The usage endpoint's total_cost_usd.")
    elapsed_x_rate_usd: USD | None = Field(default=None, description="Running time x the plan's hourly rate.")


class ChainSpend(BaseModel):
    """A resume chain's spend, oldest run first, against the launch plan's estimate (USD)."""

    runs: list[ChainRun] = Field(description="The chain's runs, oldest first (the state store's run links).")
    platform_usd: USD | None = Field(default=None, description="Sum of the platform figures (null: one unknown).")
    elapsed_x_rate_usd: USD | None = Field(default=None, description="Sum of time x rate (null: one unknown).")
    plan_id: str | None = Field(default=None, description="The plan that launched the first run.")
    plan_low_usd: USD | None = Field(default=None, description="That plan's low estimate.")
    plan_expected_usd: USD | None = Field(default=None, description="Its expected estimate.")
    plan_high_usd: USD | None = Field(default=None, description="Its high estimate.")
    line: str = Field(description="The chain's spend in one line.")


class SpendSoFar(BaseModel):
    """What a run has cost so far, and what its plan estimated (USD unless a field says otherwise)."""

    platform_usd: USD | None = Field(default=None, description=(
        "total_cost_usd of GET /billing/runs/{id}/usage: the platform's figure so far; null when it did not answer."))
    platform_tokens: int | None = Field(default=None, description="total_tokens of the usage endpoint.")
    platform_pricing: str | None = Field(default=None, description=(
        "The usage endpoint's prices in its own unit, USD per million tokens (training, inference input/output)."))
    running_seconds: Seconds | None = Field(default=None, description=(
        "Elapsed running time: startedAt to the run's end, or to now on the server's clock (start-up included)."))
    usd_per_hour: USDPerHour | None = Field(default=None, description=(
        "The plan's rate: USD per GPU-hour x GPUs (else the platform's estimatedCostPerHour at dispatch)."))
    rate_source: str | None = Field(default=None, description="Where usd_per_hour comes from.")
    elapsed_x_rate_usd: USD | None = Field(default=None, description=(
        "Elapsed running time x the plan's hourly rate: a second figure, not the platform's bill."))
    plan_id: str | None = Field(default=None, description="The plan that launched the run (state store), if any.")
    plan_low_usd: USD | None = Field(default=None, description="The plan's low estimate.")
    plan_expected_usd: USD | None = Field(default=None, description="The plan's expected estimate.")
    plan_high_usd: USD | None = Field(default=None, description="The plan's high estimate.")
    over_high_estimate: bool | None = Field(default=None, description=(
        "True when either figure passes the plan's high estimate; false when a figure is known and neither does; "
        "null (unknown) when there is no high estimate (no plan in this store, or its cost was unknown) or no "
        "figure."))
    warning: str | None = Field(default=None, description="Said when a figure passes the plan's high estimate.")
    chain: ChainSpend | None = Field(default=None, exclude_if=lambda v: v is None, description=(
        "The resume chain this run belongs to (state store run links), added up; absent for a run on its own."))

    def words(self) -> str:
        """One line for a person: both figures, labelled, and the plan's estimate."""
        parts = []
        if self.platform_usd is not None:
            parts.append(f"{usd(self.platform_usd)} reported by the platform's usage (priced per token)")
        if self.elapsed_x_rate_usd is not None and self.running_seconds is not None:
            parts.append(f"about {usd(self.elapsed_x_rate_usd)} from running time "
                         f"({duration(self.running_seconds)} x {usd_per_hour(self.usd_per_hour)})")
        spent = "; ".join(parts) or "unknown"
        if self.plan_high_usd is not None:
            spent += (f", against the plan's estimate of {usd(self.plan_low_usd)} / "
                      f"{usd(self.plan_expected_usd)} / {usd(self.plan_high_usd)} (low/expected/high)")
        elif self.plan_id is not None:
            spent += ", against a plan whose cost was unknown"
        else:
            spent += "; no plan estimate to compare with"
        return spent


class GetSpendResult(SpendSoFar):
    """Spend so far of one run."""

    run_id: str = Field(description="Run id.")
    status: str = Field(description="Run status when read.")
    summary: str = Field(description="The figures in one sentence.")
    units_note: str = Field(default=UNITS_NOTE, description="Why the two figures are not converted into each other.")
    next_step: str = Field(description="What to do next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


def spend_so_far(ctx: Context, run: wire.RLRun, now: datetime | None = None, *, with_chain: bool = True) -> SpendSoFar:
    """The figures of :class:`SpendSoFar` for ``run`` (one GET ``/billing/runs/{id}/usage``; the store is local),
    with its resume chain added up unless ``with_chain`` is false (:func:`chain_spend`)."""
    platform = ctx.platform()
    spend = SpendSoFar()
    try:
        usage = platform.get_usage(run.id)
    except (perr.NotFound, perr.Unavailable, perr.InvalidRequest, perr.RateLimited):
        usage = None
    if usage is not None:
        spend.platform_usd, spend.platform_tokens = round(usage.total_cost_usd, 2), usage.total_tokens
        prices = usage.pricing
        parts = [f"{name} {value:g}" for name, value in (("training", prices.training_per_mtok),
                                                           ("inference input", prices.inference_input_per_mtok),
                                                           ("inference output", prices.inference_output_per_mtok))
                 if value is not None]
        spend.platform_pricing = f"USD per million tokens: {', '.join(parts)}" if parts else None
    now = now or server_now(platform)
    if run.started_at is not None and (end := _held_until(run, now)) is not None:
        spend.running_seconds = max(0.0, round((end - run.started_at).total_seconds(), 1))
    state = gate.plan_of_run(ctx.store(), run.id, platform_url=ctx.settings.base_url)
    if state is not None:
        cost = state.plan.cost or PlanCost()
        spend.plan_id = state.plan_id
        spend.plan_low_usd, spend.plan_expected_usd = cost.usd_low, cost.usd_expected
        spend.plan_high_usd = cost.usd_high
        price, gpus = cost.usd_per_gpu_hour, state.plan.gpu_count or run.gpu_count
        dispatched = next((a.facts for a in reversed(state.attempts) if a.outcome in ("created", "reconciled")), None)
        if price is not None and gpus:
            spend.usd_per_hour = price * gpus
            spend.rate_source = f"plan {state.plan_id}: {usd_per_gpu_hour(price)} x {gpus} GPUs"
        elif dispatched is not None and dispatched.estimated_usd_per_hour is not None:
            spend.usd_per_hour = dispatched.estimated_usd_per_hour
            spend.rate_source = "the platform's estimatedCostPerHour at dispatch"
    if spend.usd_per_hour is not None and spend.running_seconds is not None:
        spend.elapsed_x_rate_usd = round(spend.running_seconds / 3600 * spend.usd_per_hour, 2)
    high = spend.plan_high_usd
    over = [(label, value) for label, value in (("the platform's usage", spend.platform_usd),
                                                 ("elapsed time x rate", spend.elapsed_x_rate_usd))
            if high is not None and value is not None and value > high]
    known = high is not None and (spend.platform_usd is not None or spend.elapsed_x_rate_usd is not None)
    spend.over_high_estimate = bool(over) if known else None
    if over:
        spend.warning = (f"Spend so far passes the plan's high estimate of {usd(high)}: "
                         + "; ".join(f"{label} {usd(value)}" for label, value in over) + ".")
    if with_chain:
        spend.chain = chain_spend(ctx, run, spend, now)
    return spend


def _held_until(run: wire.RLRun, now: datetime) -> datetime | None:
    """When the run stopped holding billed GPUs: its ``completedAt`` once ended; a PAUSED run without
    one, its ``updatedAt`` (when it paused: the meter stops, docs/hosted-training/pause-resume); None
    when an ended run says neither (unknown, never counted to now); ``now`` while it runs or pauses."""
    if not run.is_terminal():
        return now
    if run.completed_at is not None:
        return run.completed_at
    return run.updated_at if (run.status or "").upper() == "PAUSED" else None


def chain_ids(ctx: Context, run_id: str) -> list[str]:
    """The resume chain of ``run_id``, oldest first, from the state store's run links (a resume's link
    names the run it continues); ``[run_id]`` alone when no link joins it to another. Store only."""
    store = ctx.store()

    def links(rid: str) -> list:
        return store.run_links(rid, ctx.settings.base_url)

    chain = [run_id]
    while len(chain) < MAX_CHAIN:
        back = next((x.continues for x in links(chain[0]) if x.run_id == chain[0] and x.continues), None)
        if back is None or back in chain:
            break
        chain.insert(0, back)
    while len(chain) < 2 * MAX_CHAIN:
        ahead = next((x.run_id for x in links(chain[-1]) if x.continues == chain[-1]), None)
        if ahead is None or ahead in chain:
            break
        chain.append(ahead)
    return chain


def _total(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else round(sum(v for v in values if v is not None), 2)


def chain_spend(ctx: Context, run: wire.RLRun, spend: SpendSoFar, now: datetime | None = None) -> ChainSpend | None:
    """The resume chain of ``run`` added up (``spend``: its own figures, already read); None when the run is
    alone. One GET ``/rft/runs/{id}`` and one usage read per other run of the chain."""
    ids = chain_ids(ctx, run.id)
    if len(ids) < 2:
        return None
    rows: list[ChainRun] = []
    first_spend: SpendSoFar | None = None
    for rid in ids:
        if rid == run.id:
            other, figures = run, spend
        else:
            try:
                other = ctx.platform().get_run(rid)
            except perr.PlatformError:
                rows.append(ChainRun(run_id=rid))
                continue
            figures = spend_so_far(ctx, other, now, with_chain=False)
        first_spend = first_spend or figures
        rows.append(ChainRun(run_id=rid, status=other.status, platform_usd=figures.platform_usd,
                             elapsed_x_rate_usd=figures.elapsed_x_rate_usd))
    launch = first_spend if first_spend is not None and rows[0].status is not None else None
    chain = ChainSpend(runs=rows, platform_usd=_total([r.platform_usd for r in rows]),
                       elapsed_x_rate_usd=_total([r.elapsed_x_rate_usd for r in rows]),
                       plan_id=launch.plan_id if launch else None,
                       plan_low_usd=launch.plan_low_usd if launch else None,
                       plan_expected_usd=launch.plan_expected_usd if launch else None,
                       plan_high_usd=launch.plan_high_usd if launch else None, line="")
    each = ", ".join(f"{r.run_id} {usd(r.platform_usd)}" for r in rows)
    plan = (f" against plan {chain.plan_id}'s estimate of {usd(chain.plan_low_usd)} / "
            f"{usd(chain.plan_expected_usd)} / {usd(chain.plan_high_usd)} (low/expected/high)"
            if chain.plan_id else "")
    chain.line = (f"Resume chain of {len(rows)} runs: {usd(chain.platform_usd)} reported by the platform "
                  f"({each}); about {usd(chain.elapsed_x_rate_usd)} from running time{plan}.")
    return chain


def missing_plan(ctx: Context, run_id: str) -> str:
    """Why run ``run_id`` has no plan estimate here, in words: the state store read (and where its folder
    comes from), and where the plan may be instead. Reads the store only (GET nothing)."""
    here = ctx.state_path().resolve()
    source = " (given)" if ctx.state_dir is not None else (
        f" (from {STATE_DIR_ENV})" if ctx.env.get(STATE_DIR_ENV, "").strip() else " (this user's)")
    return (f"No plan for run {run_id} in the state store of {here}{source}: it was launched from another "
            f"machine, user or state folder ({STATE_DIR_ENV}), or without model-factory. To compare its cost with "
            f"a plan made elsewhere, run this command again with {STATE_DIR_ENV} set to that folder.")


@tool
def get_spend(inp: GetSpendInput, ctx: Context) -> GetSpendResult:
    """What a run has cost so far: the usage endpoint's figure (its units), elapsed running time x the plan's
    hourly rate, and the plan's low/expected/high estimate, with a warning past the high one (module doc).
    Errors: ``not_found``, the platform codes of GET ``/rft/runs/{id}`` (a usage endpoint that does not
    answer leaves its figure null)."""
    run = require_run(ctx, inp.run_id)
    spend = spend_so_far(ctx, run)
    plan = (f"plan {spend.plan_id}: {usd(spend.plan_low_usd)} / {usd(spend.plan_expected_usd)} / "
            f"{usd(spend.plan_high_usd)} (low/expected/high)" if spend.plan_id else
            "the plan's estimate is unknown. " + missing_plan(ctx, run.id).rstrip("."))
    hours = duration(spend.running_seconds) if spend.running_seconds is not None else "not started"
    so_far = "in all" if run.is_terminal() else "so far"
    summary = (f"Run {run.id} ({run.status}): the platform reports {usd(spend.platform_usd)} {so_far}; running "
               f"{hours} x {usd_per_hour(spend.usd_per_hour)} = {usd(spend.elapsed_x_rate_usd)}; {plan}."
               + (f" {spend.chain.line}" if spend.chain else ""))
    progress = call("mf_check_progress", run_id=run.id)
    if run.is_terminal():  # nothing left to watch: what it cost, against the plan
        report = call("mf_run_report", run_id=run.id)
        advice, calls = (f"The run has ended ({run.status}); it bills no more. The end-of-run report puts its cost "
                         f"beside the plan and the results: {report}.", [report])
    elif wire.RunStatus.of(run.status) == "PAUSING":  # not progressing on purpose: it is saving a checkpoint to stop
        wait = call("mf_wait_for_run", run_id=run.id)
        advice, calls = (f"The run is pausing (saving a checkpoint) and bills until it is PAUSED: {wait}.", [wait])
    elif spend.over_high_estimate:
        stop = call("mf_stop_run", run_id=run.id)
        advice = (f"Tell the person it has cost more than planned; ask whether to stop it ({stop}) or let it go on. "
                  f"Check it is still progressing with {progress}.")
        calls = [stop, progress]
    else:
        advice, calls = f"Check it is progressing with {progress}.", [progress]
    return GetSpendResult(**spend.model_dump(), run_id=run.id, status=run.status, summary=summary, next_step=advice,
                          next_calls=calls)
