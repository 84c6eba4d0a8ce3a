"""The cost estimate of a plan: price per GPU-hour x GPU count x assumed hours.

The hours are an ASSUMPTION, not platform data: the platform quotes a price per GPU-hour
(GET /training/available-fft-models, ``onDemand[].pricePerGpuHour``) but nothing about how
long a step takes. ``hours = (steps x seconds_per_step + start-up) / 3600`` with the user's
``seconds_per_step`` when given, else :data:`STEP_SECONDS` by mode and deployment size,
plus :data:`STARTUP_MINUTES`. Unknown price or unbounded steps give unknown totals, with the
reason, never a made-up number.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.units import USD, Seconds, USDPerGPUHour, USDPerHour, usd

#: Assumed seconds per training step (low, expected, high) when the user gives none.
#: An ASSUMPTION for the estimate, not platform data: small RL runs of the bundled examples
#: take tens of seconds per step; bigger deployments train bigger models, slower.
STEP_SECONDS: dict[tuple[str, str], tuple[float, float, float]] = {
    ("rl", "small"): (15, 45, 120),      # <= 2 GPUs
    ("rl", "node"): (30, 90, 300),       # <= 8 GPUs, one node
    ("rl", "multi"): (60, 240, 900),     # several nodes
    ("sft", "small"): (2, 8, 30),
    ("sft", "node"): (4, 15, 60),
    ("sft", "multi"): (8, 30, 120),
}
#: Assumed start-up before step 1 (minutes: low, expected, high): scheduling, image pull,
#: model download, inference server start. An assumption, billed like training time.
STARTUP_MINUTES = (5.0, 10.0, 20.0)
#: A high estimate above this many USD, or a step cap above this many steps, gets a plan
#: warning asking the person to double-check (a prompt to look, not a limit: a budget
#: policy is the place for limits).
LARGE_USD_HIGH = 1000.0
#: How the platform bills a dedicated run (docs/hosted-training/billing, as read in
#: shared/reference/platform-docs.md): per GPU-hour, prorated to the second, for the GPUs the
#: ``[deployment]`` holds (:func:`tools.configs._facts.gpu_count`, prime-rl's deployment classes),
#: at the rate fixed when the run is dispatched; queueing and image pull are not billed.
BILLING_RULE = "Billed per GPU-second at the dispatch rate; not queue, image pull or pause."
LARGE_MAX_STEPS = 100_000
_SIZE_LABEL = {"small": "<=2-GPU", "node": "single-node (<=8 GPUs)", "multi": "multi-node"}


class CostEstimate(BaseModel):
    """The money side of a plan. USD throughout; ``None`` means unknown (reason in ``unknown``)."""

    usd_per_gpu_hour: USDPerGPUHour | None = Field(description="On-demand price per GPU-hour (GET "
                                                       "/training/available-fft-models onDemand[]); null = unknown.")
    gpu_count: int = Field(description="GPUs the run asks for ([deployment]).")
    usd_per_hour: USDPerHour | None = Field(description="usd_per_gpu_hour x gpu_count.")
    steps: int | None = Field(description="Step cap used for the estimate; null = runs until stopped.")
    seconds_per_step_low: Seconds = Field(description="Assumed seconds per step, low.")
    seconds_per_step_expected: Seconds = Field(description="Assumed seconds per step, expected.")
    seconds_per_step_high: Seconds = Field(description="Assumed seconds per step, high.")
    seconds_per_step_source: Literal["argument", "default"] = Field(
        description="argument: the user's seconds_per_step; default: STEP_SECONDS by mode and size.")
    startup_minutes_low: float = Field(description="Assumed start-up before step 1, minutes, low.")
    startup_minutes_expected: float = Field(description="Assumed start-up, minutes, expected.")
    startup_minutes_high: float = Field(description="Assumed start-up, minutes, high.")
    hours_low: float | None = Field(description="(steps x s/step + start-up) / 3600, low; null when steps unknown.")
    hours_expected: float | None = Field(description="Hours, expected.")
    hours_high: float | None = Field(description="Hours, high.")
    usd_low: USD | None = Field(description="usd_per_hour x hours_low, rounded to cents.")
    usd_expected: USD | None = Field(description="usd_per_hour x hours_expected.")
    usd_high: USD | None = Field(description="usd_per_hour x hours_high (what a budget policy compares).")
    assumptions: str = Field(description="The assumptions in words (they are not platform data).")
    unknown: list[str] = Field(default_factory=list, description="Why a figure is unknown.")


def _size(count: int) -> str:
    return "small" if count <= 2 else "node" if count <= 8 else "multi"


def estimate_cost(mode: str, count: int, price: float | None, steps: int | None,
                  seconds_per_step: float | None, unknown_price_reason: str | None = None) -> CostEstimate:
    """Low/expected/high cost: ``usd_per_gpu_hour x gpu_count x hours``, with
    ``hours = (steps x seconds_per_step + start-up) / 3600``.

    ``seconds_per_step`` (the user's assumption) is used for all three figures; otherwise
    :data:`STEP_SECONDS` by mode and deployment size. Start-up is :data:`STARTUP_MINUTES`.
    Unknown price or unknown steps give ``None`` totals with the reason in ``unknown``.
    """
    size = _size(count)
    if seconds_per_step is not None:
        sps = (seconds_per_step,) * 3
        source: Literal["argument", "default"] = "argument"
        said = f"{seconds_per_step:g} s per step (your assumption)"
    else:
        sps = STEP_SECONDS[(mode, size)]
        source = "default"
        said = (f"{sps[0]:g}/{sps[1]:g}/{sps[2]:g} s per step (default for a {_SIZE_LABEL[size]} "
                f"{mode.upper()} run, not platform data)")
    assumptions = (f"{said}, plus {STARTUP_MINUTES[0]:g}/{STARTUP_MINUTES[1]:g}/{STARTUP_MINUTES[2]:g} min "
                   "start-up, at the on-demand GPU-hour price. " + BILLING_RULE)
    unknown: list[str] = []
    usd_per_hour = round(price * count, 4) if price is not None else None
    if price is None:
        unknown.append(unknown_price_reason or "price per GPU-hour: not quoted for this GPU type and owner.")
    hours: list[float | None] = [None, None, None]
    if steps is None:
        unknown.append("duration: the run has no max_steps, so it runs until stopped; set a max steps or a smoke"
                       " run kind for a bounded cost.")
    else:
        hours = [round((steps * s + m * 60) / 3600, 4) for s, m in zip(sps, STARTUP_MINUTES, strict=True)]
    usd = [round(usd_per_hour * h, 2) if usd_per_hour is not None and h is not None else None for h in hours]
    return CostEstimate(
        usd_per_gpu_hour=price, gpu_count=count, usd_per_hour=usd_per_hour, steps=steps,
        seconds_per_step_low=sps[0], seconds_per_step_expected=sps[1], seconds_per_step_high=sps[2],
        seconds_per_step_source=source, startup_minutes_low=STARTUP_MINUTES[0],
        startup_minutes_expected=STARTUP_MINUTES[1], startup_minutes_high=STARTUP_MINUTES[2],
        hours_low=hours[0], hours_expected=hours[1], hours_high=hours[2],
        usd_low=usd[0], usd_expected=usd[1], usd_high=usd[2], assumptions=assumptions, unknown=unknown)


def magnitude_warnings(cost: CostEstimate) -> list[str]:
    """Plan warnings for figures large enough to be a typo: a high estimate above
    :data:`LARGE_USD_HIGH` USD, a step cap above :data:`LARGE_MAX_STEPS`. No limit is enforced."""
    warnings: list[str] = []
    if cost.usd_high is not None and cost.usd_high > LARGE_USD_HIGH:
        warnings.append(f"The high cost estimate is {usd(cost.usd_high)} (over {usd(LARGE_USD_HIGH)}): "
                        f"double-check the step cap ({cost.steps:,} steps), the GPU count ({cost.gpu_count}) and "
                        "the price before approving; nothing stops the run at this figure.")
    if cost.steps is not None and cost.steps > LARGE_MAX_STEPS:
        days = f", about {cost.hours_expected / 24:,.0f} days at the assumed pace" if cost.hours_expected else ""
        warnings.append(f"The step cap is {cost.steps:,} steps (over {LARGE_MAX_STEPS:,}{days}): double-check "
                        "max_steps; is this the number you meant?")
    return warnings


def steps_within(cap_usd: float, usd_per_hour: float | None, steps: int | None, usd_at: float | None,
                 startup_minutes: float = STARTUP_MINUTES[1]) -> int | None:
    """How many steps fit in ``cap_usd`` at the pace an estimate assumed: ``usd_at`` is that estimate's cost of
    ``steps`` steps (e.g. the plan's expected one, with its start-up ``startup_minutes``), at ``usd_per_hour``.
    None when a figure is unknown; 0 when the start-up alone passes the cap."""
    if not usd_per_hour or not steps or usd_at is None:
        return None
    seconds_per_step = (usd_at / usd_per_hour * 3600 - startup_minutes * 60) / steps
    if seconds_per_step <= 0:
        return None
    return max(0, int((cap_usd / usd_per_hour * 3600 - startup_minutes * 60) // seconds_per_step))


def cap_warning(cap_usd: float, source: str, cost: CostEstimate) -> str | None:
    """A warning when the plan's low estimate already passes a spend cap, with the step count whose expected
    cost fits (:func:`steps_within`); None when it does not (or the low estimate is unknown)."""
    if cost.usd_low is None or cost.usd_low <= cap_usd:
        return None
    fit = steps_within(cap_usd, cost.usd_per_hour, cost.steps, cost.usd_expected)
    hint = f" About {fit:,} steps fit at the expected pace: plan with max steps {fit:,}." if fit else (
        " Not even the start-up fits.")
    return (f"The low cost estimate ${cost.usd_low:,.2f} already passes the spend cap of ${cap_usd:,.2f} ({source}): "
            f"the run would be paused (a checkpoint kept) before it finishes.{hint}")
