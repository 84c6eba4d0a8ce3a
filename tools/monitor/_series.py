"""Metric records as prime-rl logs them (flat objects with ``step`` and numeric keys such as
``reward/all/mean``, and a ``timestamp``): what counts as a value, which key is the reward to
follow, the recent step time, and when the next step is overdue.
"""

from __future__ import annotations

import itertools
import math
import statistics

from tools.monitor._clock import parse_time

#: The latest step is overdue when it is older than this many recent step times. Ours (the platform has no such
#: figure): a step rarely takes 3x the median of the last ten, so past it the run deserves a look, though it is
#: called stalled only past the stall threshold (5x, at least 600 s).
OVERDUE_STEP_MULTIPLE = 3


def is_number(value: object) -> bool:
    """A finite int or float (booleans excluded): what counts as a metric value."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def reward_key(records: list[dict]) -> str | None:
    """The reward metric to follow: ``reward/all/mean``, else the first ``reward...mean``, else ``reward...``."""
    keys = {k for r in records for k, v in r.items() if is_number(v)}
    if "reward/all/mean" in keys:
        return "reward/all/mean"
    candidates = sorted(k for k in keys if "reward" in k and k.endswith("mean"))
    return candidates[0] if candidates else next((k for k in sorted(keys) if k.startswith("reward")), None)


def step_seconds(records: list[dict]) -> float | None:
    """Median seconds per step between consecutive records (their ``step`` and ``timestamp``), one decimal;
    ``None`` with fewer than two timed steps."""
    stamps = [(r["step"], parse_time(r.get("timestamp"))) for r in records if isinstance(r.get("step"), int)]
    stamps = sorted((s, t) for s, t in stamps if t is not None)
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
