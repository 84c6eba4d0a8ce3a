"""Metric records as prime-rl logs them (flat objects with ``step`` and numeric keys such as
``reward/all/mean``): what counts as a value, and which key is the reward to follow.
"""

from __future__ import annotations

import math


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
