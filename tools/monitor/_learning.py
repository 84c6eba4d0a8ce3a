"""Is a run *learning*? The learning verdict beside the health verdict (:func:`judge`), used by
mf_check_progress (the recent steps), mf_run_report and mf_compare_runs (the whole run).

Read from the metric records the platform serves (GET ``/rft/runs/{id}/metrics``, reference/prime-api.md
§5.7), under prime-rl's names (:mod:`._series`). What an RL researcher watches comes from prime-rl's own
monitoring skill (``skills/training/monitor-run/SKILL.md`` at 559b447: progress = reward, truncation,
errors; stability = entropy, mismatch_kl, grad_norm, "flag spikes"; performance = "trainer vs orchestrator
step time": a high ``time/wait_for_batch`` means the orchestrator is the bottleneck, a high
``time/wait_for_policy`` the trainer) and its W&B overview (``src/prime_rl/monitors/wandb/overview.py``:
``STABILITY_METRICS``, ``PERFORMANCE_METRICS``; SFT's ``loss/mean``, ``val/loss``, ``optim/grad_norm``).

The trend of a metric is the least-squares slope over the steps of a stated window with its 95% confidence
interval (Student's t with n - 2 degrees of freedom): rising when the whole interval is above zero,
falling when below, flat otherwise. So a noisy change over a few steps is called flat *with the noise said*
("+0.0091 per step +/- 0.0197"), and a steady one over many is called rising though each step moves little.
Residuals of a training curve are correlated from step to step, which makes the interval somewhat too
narrow; the thresholds below leave room for that.

Every finding carries its evidence (metric, steps, values) and, when something is wrong, what to do. A
signal whose metric the run does not log is listed in ``unknown``: never judged, never invented. The
thresholds are ours (no platform or prime-rl figure exists); each constant says why it is that.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from tools.monitor._series import metric_key, numeric_keys, points, step_seconds

LearningVerdict = Literal["learning", "flat", "worsening", "saturated", "overfitting", "too_early", "unknown"]

#: Steps mf_check_progress fits a trend over: the most recent ones. Twenty steps at the emulator's and a smoke
#: run's pace is 10 minutes, long enough for the noise of one batch's mean to average out, short enough to say
#: what the run does now (the report and compare-runs use the whole run).
TREND_WINDOW_STEPS = 20
#: Fewer points than this give no trend (two degrees of freedom at least: with 3 points the 95% interval is
#: 12.7 standard errors wide, useless).
MIN_TREND_POINTS = 4
#: Two-sided 97.5% quantiles of Student's t by degrees of freedom (a 95% interval); past the table 1.96.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
         20: 2.086, 22: 2.074, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}
#: A reward mean this close to 0 or 1 at every one of the last SATURATED_STEPS steps is saturated: at most 1% of
#: the batch scores otherwise, so (nearly) every group has zero advantage and nothing is learned from it.
SATURATION_TOLERANCE = 0.01
SATURATED_STEPS = 3
#: Entropy at or below this fraction of its first logged value has collapsed: a policy that lost 90% of its
#: entropy samples nearly the same tokens every time, exploration has stopped and the reward usually plateaus
#: (the emulator's healthy runs keep about a third of theirs over a smoke run).
ENTROPY_COLLAPSE_FRACTION = 0.1
#: A value above this many times the median of the values before it is a spike (mismatch_kl, grad_norm):
#: step-to-step noise of either stays within 2x; prime-rl's skill says spikes "may precede divergence".
SPIKE_FACTOR = 5.0
#: Values needed before a step for its spike to be judged (a median of fewer is noise itself).
SPIKE_HISTORY = 5
#: A truncation or error rate is flagged when it rises (the trend above) and has reached this fraction of the
#: rollouts: below 5% it costs little, and a rate of a few percent wanders by a point from batch to batch.
RATE_FLOOR = 0.05
#: A side that waits this share of each step (median over the window) is held up by the other: the trainer
#: waiting for batches (``time/wait_for_batch``) means the orchestrator is the bottleneck, the orchestrator
#: waiting for the policy (``time/wait_for_policy``) the trainer. Half the step: the GPUs of one side idle
#: half the time, worth moving GPUs or async settings for.
WAIT_SHARE = 0.5
#: The baseline advice for a reward with nothing to learn from (docs.primeintellect.ai hosted-training
#: end-to-end-run: run a baseline eval first; a base-model reward between 10% and 80% leaves room to learn).
BASELINE_ADVICE = ("check the environment on the base model first (a baseline eval): a reward between 10% and 80% "
                   "leaves room to learn; make the tasks harder or easier, or pick another model")


class Finding(BaseModel):
    """One fact of the learning verdict, with its evidence and, when something is wrong, what to do."""

    signal: str = Field(description=(
        "reward_trend, reward_saturated, loss_trend, eval_loss_trend, overfitting, no_reward, entropy_collapse, "
        "mismatch_kl_spike, grad_norm_spike, truncation_rising, errors_rising, trainer_waits (the orchestrator "
        "is the bottleneck) or orchestrator_waits (the trainer is)."))
    ok: bool = Field(description="False: something to act on (fix says what).")
    metric: str | None = Field(default=None, description="The metric it reads.")
    text: str = Field(description="The evidence: metric, steps, values.")
    fix: str | None = Field(default=None, description="What to do, when ok is false.")


class Learning(BaseModel):
    """Whether a run learns, from its metrics (the window the trend finding names)."""

    verdict: LearningVerdict = Field(description=(
        "learning (the reward rises; SFT: the loss falls), flat (no change beyond the noise), worsening, saturated "
        "(every rollout scores the same), overfitting (SFT: eval loss rises while the loss falls), too_early "
        f"(fewer than {MIN_TREND_POINTS} steps), unknown (the metric is not logged)."))
    metric: str | None = Field(default=None, description="The metric the run optimises (reward; SFT: loss).")
    last: float | None = Field(default=None, description="Its latest value.")
    findings: list[Finding] = Field(description="Evidence, the trend first.")
    unknown: list[str] | None = Field(default=None, description="Signals not judged: the run logs no such metric.")


@dataclass(frozen=True)
class Trend:
    """The least-squares trend of a metric over its points (module doc): slope per step and the half width of
    its 95% interval (None with too few points)."""

    metric: str
    points: Sequence[tuple[int, float]]
    slope: float | None
    half_width: float | None

    @property
    def direction(self) -> Literal["rising", "flat", "falling", "too_few"]:
        if self.slope is None or self.half_width is None:
            return "too_few"
        if self.slope - self.half_width > 0:
            return "rising"
        return "falling" if self.slope + self.half_width < 0 else "flat"

    @property
    def span(self) -> str:
        first, last = self.points[0][0], self.points[-1][0]
        return f"step {first}" if first == last else f"steps {first}-{last}"

    def words(self) -> str:
        """``reward/all/mean 0.2413 -> 0.7748 over steps 1-20: +0.028 per step +/- 0.0041 (95%), rising`` (the number
        of steps said when some between have no value)."""
        (_, first), (_, last) = self.points[0], self.points[-1]
        values = f"{_num(first)} -> {_num(last)}" if len(self.points) > 1 else _num(last)
        gaps = len(self.points) != self.points[-1][0] - self.points[0][0] + 1  # steps without a value between
        head = f"{self.metric} {values} over {self.span}" + (f" ({len(self.points)} steps)" if gaps else "")
        if self.slope is None or self.half_width is None:
            return f"{head}: a trend needs {MIN_TREND_POINTS} steps"
        return f"{head}: {self.slope:+.2g} per step +/- {self.half_width:.2g} (95%), {self.direction}"


#: The verdict for a trend's direction: of a metric that should rise (reward), and one that should fall (loss).
_RISING_IS_GOOD: dict[str, LearningVerdict] = {"rising": "learning", "flat": "flat", "falling": "worsening",
                                               "too_few": "too_early"}
_FALLING_IS_GOOD: dict[str, LearningVerdict] = {"falling": "learning", "flat": "flat", "rising": "worsening",
                                                "too_few": "too_early"}


def trend(metric: str, pts: Sequence[tuple[int, float]]) -> Trend:
    """The :class:`Trend` of ``pts`` ((step, value), by step)."""
    n = len(pts)
    if n < MIN_TREND_POINTS:
        return Trend(metric, pts, None, None)
    xs, ys = [float(s) for s, _ in pts], [v for _, v in pts]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return Trend(metric, pts, None, None)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    sse = sum((y - my - slope * (x - mx)) ** 2 for x, y in zip(xs, ys, strict=True))
    dof = n - 2
    t = next((v for k, v in sorted(_T975.items()) if k >= dof), 1.96)
    return Trend(metric, pts, slope, t * math.sqrt(sse / dof / sxx))


def _num(value: float) -> str:
    return f"{value:.4g}"


def _share(value: float) -> str:
    return f"{value:.0%}"


# -- the findings -----------------------------------------------------------------------------------------


def _saturated(metric: str, pts: Sequence[tuple[int, float]]) -> Finding | None:
    last = pts[-SATURATED_STEPS:]
    if len(last) < SATURATED_STEPS:
        return None
    for edge in (0.0, 1.0):
        if all(abs(v - edge) <= SATURATION_TOLERANCE for _, v in last):
            what = "fails" if edge == 0.0 else "succeeds"
            return Finding(signal="reward_saturated", ok=False, metric=metric, text=(
                f"{metric} is {_num(last[-1][1])} at steps {last[0][0]}-{last[-1][0]}: every rollout {what}, so "
                "there is nothing to learn from (no reward differences, zero advantages)."),
                fix=f"Stop it when the person agrees, and {BASELINE_ADVICE}.")
    return None


def _entropy(metric: str, pts: Sequence[tuple[int, float]], first: tuple[int, float] | None) -> Finding | None:
    start = first or pts[0]
    step, value = pts[-1]
    if start[1] <= 0 or step == start[0] or value > ENTROPY_COLLAPSE_FRACTION * start[1]:
        return None
    return Finding(signal="entropy_collapse", ok=False, metric=metric, text=(
        f"{metric} fell from {_num(start[1])} (step {start[0]}) to {_num(value)} (step {step}), "
        f"{_share(value / start[1])} of its start: the policy samples nearly the same tokens every time."),
        fix=("Exploration has stopped and the reward will plateau: a higher sampling temperature "
             "(orchestrator.train.sampling.temperature) or a lower learning rate (trainer.optim.lr) in the next run; "
             "the checkpoints before the collapse keep the better policy."))


_SPIKE_FIX = {
    "mismatch_kl_spike": ("The trainer's and the inference policy diverged there (stale off-policy rollouts or a "
                          "numerics problem): watch whether the reward drops after it; a lower "
                          "orchestrator.max_off_policy_steps keeps rollouts closer to the policy."),
    "grad_norm_spike": ("Spikes may precede divergence: watch the loss and the reward after it; "
                        "trainer.optim.max_norm clips gradients (1.0 by default) and a lower trainer.optim.lr calms "
                        "them."),
}


def _spike(signal: str, metric: str, pts: Sequence[tuple[int, float]]) -> Finding | None:
    spikes = []
    for i in range(SPIKE_HISTORY, len(pts)):
        median = statistics.median(v for _, v in pts[:i])
        if median > 0 and pts[i][1] > SPIKE_FACTOR * median:
            spikes.append((pts[i][1] / median, pts[i], median))
    if not spikes:
        return None
    ratio, (step, value), median = max(spikes)
    more = f" ({len(spikes)} spikes in all)" if len(spikes) > 1 else ""
    return Finding(signal=signal, ok=False, metric=metric, text=(
        f"{metric} {_num(value)} at step {step}, {ratio:.0f}x the median {_num(median)} of the steps before it"
        f"{more}."), fix=_SPIKE_FIX[signal])


def _rate(signal: str, metric: str, pts: Sequence[tuple[int, float]]) -> Finding | None:
    fit = trend(metric, pts)
    if fit.direction != "rising" or pts[-1][1] < RATE_FLOOR:
        return None
    if signal == "truncation_rising":
        what, fix = "of rollouts are truncated", (
            "More rollouts hit the token limit: raise orchestrator.train.sampling.max_completion_tokens (or seq_len), "
            "or look for answers that grow longer every step in the traces.")
    else:
        what, fix = "of rollouts fail", "Read the environment servers' errors with mf_summarize_logs."
    return Finding(signal=signal, ok=False, metric=metric,
                   text=f"{_share(pts[-1][1])} {what} now, rising: {fit.words()}.", fix=fix)


def _waits(keys: set[str], records: Sequence[dict], window: Sequence[dict]) -> Finding | None:
    step_key = metric_key("step_time", keys)
    logged = points(window, step_key) if step_key else []
    step_time = statistics.median(v for _, v in logged) if logged else step_seconds(list(records))
    if not step_time:
        return None
    for signal, waiting, other in (("trainer_waits", "wait_for_batch", "orchestrator"),
                                   ("orchestrator_waits", "wait_for_policy", "trainer")):
        key = metric_key(waiting, keys)
        pts = points(window, key) if key else []
        if not pts:
            continue
        median = statistics.median(v for _, v in pts)
        share = median / step_time
        if share < WAIT_SHARE:
            continue
        who = "The trainer waits for batches" if signal == "trainer_waits" else \
            "The orchestrator waits for the trainer's policy"
        fix = ("more inference GPUs (deployment.num_infer_gpus), faster environments, or a higher "
               "orchestrator.max_off_policy_steps so rollouts run further ahead" if other == "orchestrator" else
               "more trainer GPUs (deployment.num_train_gpus) or a smaller batch; inference is idle meanwhile")
        return Finding(signal=signal, ok=False, metric=key, text=(
            f"{who} {_share(share)} of each step ({key} median {median:.3g} s of {step_time:.3g} s, "
            f"{_span(pts)}): the {other} is the bottleneck."), fix=f"Where the time goes: {fix}.")
    return None


def _span(pts: Sequence[tuple[int, float]]) -> str:
    return f"steps {pts[0][0]}-{pts[-1][0]}" if pts[0][0] != pts[-1][0] else f"step {pts[0][0]}"


# -- the verdict --------------------------------------------------------------------------------------------


def judge(records: Sequence[dict], *, sft: bool, window: int | None = None,
          first: dict | None = None) -> Learning:
    """The learning verdict of ``records`` (metric records, one per step, by step): trends over the last
    ``window`` steps (None: all), entropy against ``first`` (the run's first record, when the window starts
    later). RL: the reward (saturation, trend), entropy collapse, mismatch_kl and grad_norm spikes, rising
    truncation and error rates, which side waits. SFT: the loss trend, the eval loss (overfitting), grad_norm
    spikes, and no reward said plainly."""
    records = sorted((r for r in records if isinstance(r.get("step"), int)), key=lambda r: r["step"])
    recent = records[-window:] if window else records
    keys = numeric_keys(records)
    findings: list[Finding] = []
    unknown: list[str] = []

    def key_of(signal: str) -> str | None:
        key = metric_key(signal, keys)
        if key is None:
            unknown.append(signal)
        return key

    learning = _sft(recent, findings, key_of) if sft else _rl(recent, findings, key_of, first)
    grad = key_of("grad_norm")
    if grad and (found := _spike("grad_norm_spike", grad, points(recent, grad))):
        findings.append(found)
    if not sft:
        for signal, name in (("truncation_rising", "truncation"), ("errors_rising", "errors")):
            key = key_of(name)
            if key and (found := _rate(signal, key, points(recent, key))):
                findings.append(found)
        if metric_key("wait_for_batch", keys) or metric_key("wait_for_policy", keys):
            if found := _waits(keys, records, recent):
                findings.append(found)
        else:
            unknown.append("waits")
    learning.findings, learning.unknown = findings, unknown or None
    return learning


_KeyOf = Callable[[str], "str | None"]


def _rl(recent: Sequence[dict], findings: list[Finding], key_of: _KeyOf, first: dict | None) -> Learning:
    metric = key_of("reward")
    if metric is None:
        findings.append(Finding(signal="reward_trend", ok=True, text="No reward metric is logged: learning cannot "
                                                                      "be judged from the reward."))
        return Learning(verdict="unknown", findings=[])
    pts = points(recent, metric)
    fit = trend(metric, pts)
    saturated = _saturated(metric, pts)
    verdict: LearningVerdict
    if saturated:
        verdict = "saturated"
    else:
        verdict = _RISING_IS_GOOD[fit.direction]
    fix = None
    if verdict == "flat":
        fix = (f"If it stays flat, the run is not learning: {BASELINE_ADVICE}; or raise the learning rate "
               "(trainer.optim.lr).")
    elif verdict == "worsening":
        fix = "Look for a spike or a collapse below; the checkpoints before the fall keep the better policy."
    findings.append(Finding(signal="reward_trend", ok=verdict in ("learning", "too_early"), metric=metric,
                            text=f"{fit.words()}.", fix=fix))
    if saturated:
        findings.append(saturated)
    entropy = key_of("entropy")
    if entropy and (epts := points(recent, entropy)):
        start = points([first], entropy) if first else []
        if found := _entropy(entropy, epts, start[0] if start and start[0][0] < epts[0][0] else None):
            findings.append(found)
    kl = key_of("mismatch_kl")
    if kl and (found := _spike("mismatch_kl_spike", kl, points(recent, kl))):
        findings.append(found)
    return Learning(verdict=verdict, metric=metric, last=pts[-1][1] if pts else None, findings=[])


def _sft(recent: Sequence[dict], findings: list[Finding], key_of: _KeyOf) -> Learning:
    findings.append(Finding(signal="no_reward", ok=True, text=(
        "SFT: the run trains on a dataset, so it has a loss, no reward, and no rollouts: no traces to download.")))
    metric = key_of("loss")
    if metric is None:
        return Learning(verdict="unknown", findings=[])
    pts = points(recent, metric)
    fit = trend(metric, pts)
    verdict = _FALLING_IS_GOOD[fit.direction]
    fix = {"flat": "If it stays flat: a higher learning rate (optim.lr), or check the dataset and its template.",
           "worsening": "The loss rises: a lower learning rate (optim.lr); the earlier checkpoints keep the better "
                        "weights."}.get(verdict)
    findings.insert(0, Finding(signal="loss_trend", ok=fix is None, metric=metric, text=f"{fit.words()}.", fix=fix))
    evals = key_of("eval_loss")
    if evals:
        epts = points(recent, evals)
        lowest = min(range(len(epts)), key=lambda i: epts[i][1]) if epts else 0
        since = trend(evals, epts[lowest:])  # the eval loss after its lowest point
        if since.direction == "rising" and verdict == "learning":
            verdict = "overfitting"
            findings.append(Finding(signal="overfitting", ok=False, metric=evals, text=(
                f"{evals} was lowest at step {epts[lowest][0]} ({_num(epts[lowest][1])}) and rises since: "
                f"{since.words()}, while {metric} falls: the model learns the training set, not the task."),
                fix="Keep the checkpoint nearest its lowest eval loss; fewer steps or more data next time."))
        else:
            val = trend(evals, epts)
            findings.append(Finding(signal="eval_loss_trend", ok=val.direction != "rising", metric=evals,
                                    text=f"{val.words()}."))
    return Learning(verdict=verdict, metric=metric, last=pts[-1][1] if pts else None, findings=[])


# -- milestones (compare-runs) ---------------------------------------------------------------------------------

#: Points of the centred moving mean the milestones are read on: one noisy step does not reach 50% early.
SMOOTH_POINTS = 3


@dataclass(frozen=True)
class Milestones:
    """Of a metric over a run: its best and last value, and the steps (from the first) until the smoothed curve
    first covered 50% and 90% of its change (None when it did not change beyond the noise)."""

    best: float
    best_step: int
    last: float
    last_step: int
    steps_to_50: int | None
    steps_to_90: int | None


def milestones(metric: str, pts: Sequence[tuple[int, float]], *, higher_is_better: bool) -> Milestones | None:
    """:class:`Milestones` of ``pts`` (None without points)."""
    if not pts:
        return None
    best_step, best = (max if higher_is_better else min)(pts, key=lambda p: p[1])
    half = SMOOTH_POINTS // 2
    smooth = [statistics.fmean(v for _, v in pts[max(0, i - half):i + half + 1]) for i in range(len(pts))]
    change = smooth[-1] - smooth[0]
    moved = trend(metric, pts).direction in ("rising", "falling")

    def reached(fraction: float) -> int | None:
        if not moved or change == 0:
            return None
        target = smooth[0] + fraction * change
        hit = next((i for i, v in enumerate(smooth) if (v - target) * change >= 0), None)
        return pts[hit][0] - pts[0][0] if hit is not None else None

    return Milestones(best=best, best_step=best_step, last=pts[-1][1], last_step=pts[-1][0],
                      steps_to_50=reached(0.5), steps_to_90=reached(0.9))
