"""Metric records as prime-rl logs them (flat objects with ``step`` and numeric keys such as
``reward/all/mean``, and a ``timestamp``): what counts as a value, which key holds each signal
(:func:`metric_key`: the reward, entropy, mismatch_kl, ...), the recent step time, and when the next
step is overdue.

The names come from prime-rl (``skills/training/monitor-run/SKILL.md``, ``src/prime_rl/monitors/wandb/
overview.py`` at 559b447): its rollout metrics are ``train/agg/<subset>/<agent>/<metric>/mean``, its
stability metrics ``entropy/all/mean``, ``mismatch_kl/all/mean``, ``optim/grad_norm``, its timings
``time/wait_for_batch`` and ``time/wait_for_policy``, SFT's ``loss/mean`` and ``val/loss``. The platform's
records are inferred to be those names (reference/prime-api.md §5.7 names ``reward/all/mean``); shorter
names (``entropy``, ``grad_norm``, ``loss``) are accepted too.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Iterable

from tools.monitor._clock import parse_time

#: The latest step is overdue when it is older than this many recent step times. Ours (the platform has no such
#: figure): a step rarely takes 3x the median of the last ten, so past it the run deserves a look, though it is
#: called stalled only past the stall threshold (5x, at least 600 s).
OVERDUE_STEP_MULTIPLE = 3


def is_number(value: object) -> bool:
    """A finite int or float (booleans excluded): what counts as a metric value."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


#: Where each signal is logged: exact names first, then patterns (the first sorted match); eval metrics
#: (``eval/...``) never stand for a training signal.
SIGNAL_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "reward": (("reward/all/mean",), (r"^train/agg/effective/[^/]+/reward/mean$", r"^train/agg/all/[^/]+/reward/mean$",
                                      r"reward.*mean$", r"^reward")),
    "reward_std": (("reward/all/std",), (r"^train/agg/effective/[^/]+/reward/std$",)),
    "entropy": (("entropy/all/mean", "entropy"), (r"^entropy/.*mean$",)),
    "mismatch_kl": (("mismatch_kl/all/mean", "mismatch_kl"), (r"^mismatch_kl/.*mean$",)),
    "grad_norm": (("optim/grad_norm", "grad_norm"), ()),
    "truncation": ((), (r"^train/agg/effective/[^/]+/is_truncated/mean$", r"is_truncated/mean$")),
    "errors": ((), (r"^train/agg/all/[^/]+/has_error/mean$", r"has_error/mean$")),
    "wait_for_batch": (("time/wait_for_batch",), ()),
    "wait_for_policy": (("time/wait_for_policy",), ()),
    "step_time": (("time/step",), ()),
    "loss": (("loss/mean", "loss"), ()),
    "eval_loss": (("val/loss", "val/loss/mean", "eval/loss"), ()),
}


def numeric_keys(records: Iterable[dict]) -> set[str]:
    """Keys holding a number in any record (``step`` included)."""
    return {k for r in records for k, v in r.items() if is_number(v)}


def metric_key(signal: str, keys: set[str]) -> str | None:
    """The key of ``keys`` that holds ``signal`` (a :data:`SIGNAL_KEYS` name), or None when none does."""
    exact, patterns = SIGNAL_KEYS[signal]
    for name in exact:
        if name in keys:
            return name
    training = sorted(k for k in keys if not k.startswith(("eval/", "val/")))
    for pattern in patterns:
        match = next((k for k in training if re.search(pattern, k)), None)
        if match:
            return match
    return None


def reward_key(records: list[dict]) -> str | None:
    """The reward metric to follow: ``reward/all/mean``, else prime-rl's ``train/agg/effective/<agent>/reward/mean``,
    else the first ``reward...mean``, else ``reward...``."""
    return metric_key("reward", numeric_keys(records))


def points(records: Iterable[dict], key: str) -> list[tuple[int, float]]:
    """``(step, value)`` of ``key`` in ``records``, by step (records without a number there left out)."""
    return sorted((r["step"], float(r[key])) for r in records
                  if isinstance(r.get("step"), int) and is_number(r.get(key)))


def step_seconds(records: list[dict]) -> float | None:
    """Median seconds per step between consecutive records (their ``step`` and ``timestamp``), one decimal;
    ``None`` with fewer than two timed steps."""
    parsed = [(r["step"], parse_time(r.get("timestamp"))) for r in records if isinstance(r.get("step"), int)]
    stamps = sorted((s, t) for s, t in parsed if t is not None)
    gaps = [(t2 - t1).total_seconds() / (s2 - s1) for (s1, t1), (s2, t2) in itertools.pairwise(stamps) if s2 > s1]
    gaps = [g for g in gaps if g > 0]
    return round(statistics.median(gaps), 1) if gaps else None


def overdue_multiple(last_step_age_seconds: float | None, seconds_per_step: float | None) -> float | None:
    """How many recent step times the latest step's age is (one decimal), when that is more than
    :data:`OVERDUE_STEP_MULTIPLE`; ``None`` otherwise or when either figure is unknown."""
    if not last_step_age_seconds or not seconds_per_step:
        return None
    multiple = last_step_age_seconds / seconds_per_step
    return round(multiple, 1) if multiple > OVERDUE_STEP_MULTIPLE else None


def merge_steps(records: Iterable[dict]) -> list[dict]:
    """One record per step, oldest first: the records of a step merged (later keys win), records without a step
    left out."""
    merged: dict[int, dict] = {}
    for r in records:
        step = r.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            merged.setdefault(step, {}).update(r)
    return [merged[s] for s in sorted(merged)]
