"""Spend caps: how close a run is to the cap a person set, and whether the next check would pass it.

A cap comes from a person, never from the agent:

- ``model-factory approve PLAN --max-usd N``: recorded with the approval (its ``terms``, ``max_usd``)
  of the launch or resume plan of any run of the resume chain;
- the budget policy (:mod:`tools.guardrails.policy`, human-written, outside the workspace):
  ``spend_cap_usd_per_run`` (a run's resume chain) and ``spend_cap_usd_per_day`` (the runs this state
  store launched or resumed on this platform whose run link is of the current UTC day, each with its
  chain's spend).

The lowest cap that applies counts. Spend is the chain's (:func:`tools.monitor.spend.spend_so_far`): the
larger of the platform's usage figure and running time x the plan's rate (the conservative one), so a
lagging usage endpoint cannot let a run past the cap. A run is **over** when that spend plus the cost of
the next check interval and of saving the pause checkpoint (:data:`PAUSE_MARGIN_SECONDS`) at the run's
hourly rate would pass the cap: the watcher (``model-factory watch RUN``, ``mf_wait_for_run``) then pauses
it through the control-action path (:mod:`tools.launch._cap`). Evaluation only reads: GET
``/billing/runs/{id}/usage`` of the chain's runs and the state store.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field

from tools.core import Context
from tools.guardrails import confirmation as gate
from tools.guardrails.policy import load_for_context
from tools.monitor.spend import SpendSoFar, spend_so_far
from tools.platform import wire
from tools.units import USD

#: Seconds of billing a pause takes (the checkpoint is saved while the GPUs are held), counted into the margin.
PAUSE_MARGIN_SECONDS = 60.0


class SpendCap(BaseModel):
    """A run's spend against the cap that applies (USD), and what the watcher did about it."""

    run_id: str = Field(description="The run checked.")
    cap_usd: USD = Field(description="The lowest cap that applies (USD).")
    cap_source: str = Field(description="Where the cap comes from: an approval's --max-usd, or the budget policy.")
    spent_usd: USD | None = Field(description=(
        "Spend so far (its resume chain; per-day cap: the day's runs): the larger of the platform's figure and "
        "running time x rate; null when unknown."))
    next_check_usd: USD | None = Field(description=(
        "Cost of the next check interval plus the pause checkpoint at the run's hourly rate; null when unknown."))
    over: bool = Field(description=(
        "True when spent + next_check would pass the cap; false too when either is unknown (no price: the cap "
        "cannot be enforced, message says so)."))
    stop_when_cannot_pause: bool = Field(default=False, description=(
        "The budget policy's stop_when_cap_cannot_pause: stop the run when a pause fails."))
    action: str = Field(default="none", description=(
        "none | paused | pausing (checkpoint being saved) | already_paused (an earlier cap pause) | pause_failed | "
        "stopped | ended."))
    message: str = Field(default="", description="What happened, in words, with the resume command when paused.")


def _spent(spend: SpendSoFar) -> float | None:
    """The conservative figure of a run's (chain's) spend: the larger known of the two."""
    if spend.chain is not None:
        values = [spend.chain.platform_usd, spend.chain.elapsed_x_rate_usd]
    else:
        values = [spend.platform_usd, spend.elapsed_x_rate_usd]
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _approval_caps(ctx: Context, run_ids: list[str]) -> list[tuple[float, str]]:
    """``(max_usd, source)`` of the used approvals that carry one, of the plans that created ``run_ids``."""
    caps: list[tuple[float, str]] = []
    for rid in run_ids:
        state = gate.plan_of_run(ctx.store(), rid, platform_url=ctx.settings.base_url)
        if state is None:
            continue
        for approval in state.approvals:
            value = approval.terms.get("max_usd")
            if approval.used and isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                caps.append((float(value), f"--max-usd of the approval of plan {state.plan_id} ({approval.channel})"))
    return caps


def _day_spent(ctx: Context, now: datetime) -> float | None:
    """Spend of the runs this store launched or resumed on this platform today (UTC), chains counted once."""
    day = now.astimezone(UTC).date().isoformat()
    store = ctx.store()
    links = [link for state in gate.list_launches(store, 1_000, platform_url=ctx.settings.base_url)
             if state.plan.action in ("launch", "resume") and state.run_id
             for link in store.run_links(state.run_id, ctx.settings.base_url)
             if link.run_id == state.run_id and (link.at or "").startswith(day)]
    total, seen = 0.0, set()
    for link in links:
        if link.run_id in seen:
            continue
        try:
            run = ctx.platform().get_run(link.run_id)
        except Exception:  # noqa: BLE001 - a run that cannot be read makes the day's spend unknown
            return None
        spend = spend_so_far(ctx, run, with_chain=False)
        seen.add(link.run_id)
        value = _spent(spend)
        if value is None:
            return None
        total += value
    return round(total, 2)


def check_cap(ctx: Context, run: wire.RLRun, interval_seconds: float,
              spend: SpendSoFar | None = None) -> SpendCap | None:
    """The cap of ``run`` and whether the next check would pass it (module doc); None when no cap applies.
    ``spend``: the run's figures when already read. Reads the usage endpoint and the state store only."""
    policy = load_for_context(ctx)
    limits = policy.limits
    spend = spend or spend_so_far(ctx, run)
    chain = [r.run_id for r in spend.chain.runs] if spend.chain else [run.id]
    caps = _approval_caps(ctx, chain)
    if limits is not None and limits.spend_cap_usd_per_run is not None:
        caps.append((limits.spend_cap_usd_per_run, f"spend_cap_usd_per_run of the budget policy {policy.path}"))
    spent = _spent(spend)
    rate = spend.usd_per_hour
    ahead = None if rate is None else round(rate * (interval_seconds + PAUSE_MARGIN_SECONDS) / 3600, 2)
    found: list[SpendCap] = [
        SpendCap(run_id=run.id, cap_usd=cap, cap_source=source, spent_usd=spent, next_check_usd=ahead,
                 over=spent is not None and ahead is not None and spent + ahead > cap)
        for cap, source in caps]
    if limits is not None and limits.spend_cap_usd_per_day is not None:
        day = _day_spent(ctx, datetime.now(UTC))
        cap = limits.spend_cap_usd_per_day
        found.append(SpendCap(run_id=run.id, cap_usd=cap, cap_source=f"spend_cap_usd_per_day of the budget policy "
                              f"{policy.path} (this store's runs of the UTC day)", spent_usd=day, next_check_usd=ahead,
                              over=day is not None and ahead is not None and day + ahead > cap))
    if not found:
        return None
    chosen = min(found, key=lambda c: (not c.over, c.cap_usd - (c.spent_usd or 0.0)))
    chosen.stop_when_cannot_pause = bool(limits and limits.stop_when_cap_cannot_pause)
    if chosen.spent_usd is None or chosen.next_check_usd is None:
        chosen.message = (f"The spend cap of ${chosen.cap_usd:,.2f} ({chosen.cap_source}) cannot be enforced: the "
                          "run's spend or hourly rate is unknown (no on-demand price).")
    return chosen
