"""The output budget of the read tools: a result's JSON stays under :data:`OUTPUT_BUDGET_CHARS`.

A tool builds its result for ``k`` kept items and :func:`fit_largest` finds the largest ``k``
that fits; the result then says ``truncated``, counts what it left out in ``omitted`` and gives
a ``narrow_hint`` (how to ask for less). This is the one place that says so; the tools link here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

#: Characters of JSON a read tool returns at most.
OUTPUT_BUDGET_CHARS = 8000

B = TypeVar("B", bound=BaseModel)


def json_chars(model: BaseModel) -> int:
    """Length of ``model`` as JSON (what the budget counts)."""
    return len(model.model_dump_json())


def fit_largest(build: Callable[[int], B], n: int, budget: int = OUTPUT_BUDGET_CHARS) -> B:
    """``build(k)`` for the largest ``k <= n`` whose JSON fits ``budget`` (``build(0)`` if none does).

    ``build(k)`` keeps ``k`` items, sets its own truncation fields, and must grow with ``k``.
    Binary search: about log2(n) builds.
    """
    full = build(n)
    if n == 0 or json_chars(full) <= budget:
        return full
    lo, hi = 0, n - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if json_chars(build(mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return build(lo)
