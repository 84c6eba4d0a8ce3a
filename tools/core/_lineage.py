"""Which runs a resumed run continues, and which of the chain's steps are theirs: :func:`predecessors`.

A resume creates a new run id on the same volume (docs/hosted-training/pause-resume, reference/
platform-docs.md) whose steps continue the paused run's: the paused run holds steps 1-69 (their metrics,
traces and checkpoints), the new run step 70 on. The platform's run record (``RLRun``, reference/prime-api.md
§2.2) names no source run, so the chain is read from, in this order:

1. the state store's resume chain: a resume's run link says which run it continues
   (:meth:`tools.guardrails.store.Store.run_links`, written when the resume's outcome is recorded);
2. the platform's facts about the run: a run whose first step (its oldest metric record, GET
   ``/rft/runs/{id}/metrics?limit=1``) is N > 1 continues the PAUSED run of the same owner and name, created
   before it, whose latest step (GET ``/progress``) is N - 1. A resume keeps the paused run's name (the
   reconciliation of a lost resume answer rests on the same fact); the owner's runs are listed newest first
   (GET ``/rft/runs``), :data:`LINEAGE_PAGES` pages at most.

Its callers (the trace download, the report, the learning verdict) read the chain through this one function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tools.core._context import Context
from tools.platform import errors as perr
from tools.platform import wire

#: Runs a chain is followed back at most (each resume is a pause a person asked for).
MAX_CHAIN = 8
#: Pages of the owner's runs (100 each, newest first) searched for a paused run of the same name.
LINEAGE_PAGES = 2


@dataclass(frozen=True)
class Predecessor:
    """An earlier run of a resume chain: its id, the steps that are its own (``first_step``..``last_step``), and
    where the link was read (``store``: the state store's resume chain; ``platform``: name, owner and steps)."""

    run_id: str
    first_step: int
    last_step: int
    source: Literal["store", "platform"]

    @property
    def steps(self) -> str:
        """``steps 1-69`` (``step 1`` for one)."""
        return f"step {self.first_step}" if self.first_step == self.last_step else \
            f"steps {self.first_step}-{self.last_step}"


def first_step(ctx: Context, run_id: str) -> int | None:
    """The run's first step: its oldest metric record's (None when it has none, or the read fails)."""
    try:
        records = ctx.platform().get_metrics(run_id, limit=1).metrics
    except perr.PlatformError:
        return None
    steps = [r["step"] for r in records if isinstance(r.get("step"), int) and not isinstance(r.get("step"), bool)]
    return min(steps) if steps else None


def _latest_step(ctx: Context, run_id: str) -> int | None:
    try:
        return ctx.platform().get_progress(run_id).latest_step
    except perr.PlatformError:
        return None


def _recorded(ctx: Context, run: wire.RLRun) -> str | None:
    """The run the state store's resume chain says ``run`` continues (its run link), or None."""
    for link in ctx.store().run_links(run.id):
        if link.run_id == run.id and link.continues and link.continues != run.id:
            return link.continues
    return None


def _inferred(ctx: Context, run: wire.RLRun, first: int) -> wire.RLRun | None:
    """The PAUSED run of ``run``'s owner and name, created before it, whose latest step is ``first - 1``."""
    if not run.name:
        return None
    for page in range(1, LINEAGE_PAGES + 1):
        try:
            listed = ctx.platform().list_runs(team_id=run.team_id, page=page, limit=100)
        except perr.PlatformError:
            return None
        for other in listed.runs:
            if (other.id != run.id and other.name == run.name and wire.RunStatus.of(other.status) == "PAUSED"
                    and other.team_id == run.team_id
                    and (run.created_at is None or other.created_at is None or other.created_at <= run.created_at)
                    and _latest_step(ctx, other.id) == first - 1):
                return other
        if len(listed.runs) < 100 or (listed.total_pages is not None and page >= listed.total_pages):
            return None
    return None


def predecessors(ctx: Context, run: wire.RLRun, *, first: int | None = None) -> list[Predecessor]:
    """The runs ``run`` continues, nearest first (empty: it is not a resumed run, or its chain cannot be read),
    each with the steps that are its own. ``first``: ``run``'s first step when the caller knows it."""
    chain: list[Predecessor] = []
    current, start = run, first
    seen = {run.id}
    while len(chain) < MAX_CHAIN:
        paused_id, source = _recorded(ctx, current), "store"
        if paused_id is None:
            start = start if start is not None else first_step(ctx, current.id)
            if start is None or start <= 1:
                break
            found = _inferred(ctx, current, start)
            paused_id, source = (found.id, "platform") if found else (None, "platform")
        if paused_id is None or paused_id in seen:
            break
        try:
            paused = ctx.platform().get_run(paused_id)
        except perr.PlatformError:
            break
        last = _latest_step(ctx, paused_id)
        if last is None or last < 1:
            break
        own_first = first_step(ctx, paused_id) or 1
        chain.append(Predecessor(paused_id, min(own_first, last), last, source))  # type: ignore[arg-type]
        seen.add(paused_id)
        current, start = paused, own_first
    return chain
