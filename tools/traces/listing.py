"""``mf_list_traces``: one cursor page of a run's traces, episodes or eval runs (the decisions where
the platform is silent are in :mod:`tools.traces`).

Sources (reference/prime-api.md §6): GET ``/traces``, ``/episodes``, ``/episodes/{id}/traces``,
``/runs?run_type=eval`` on the traces host.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tools.core import MAX_STEPS, OUTPUT_BUDGET_CHARS, Context, json_chars, not_found, tool
from tools.errors import Call, call, fail
from tools.platform import wire
from tools.platform.client import TracesClient
from tools.platform.paging import CursorTrail, End, Walk
from tools.traces._scope import PAGE_LIMIT, TRACES_RUN_ID, platform_run
from tools.units import Bytes

#: Episodes per page when walking a step's episodes (fixed, so cursors stay valid).
STEP_EPISODE_PAGE = 20
#: Requests one per-step page may make at most (it then returns what it has and a cursor).
MAX_STEP_REQUESTS = 60
#: Traces-host run pages a search for eval runs scans per call.
EVAL_SCAN_PAGES = 10
#: Host pages one listing walk follows in all, across calls (then it ends with a note).
MAX_WALK_PAGES = 1000
#: Cursor digests a walk's own cursor remembers (a longer cycle is ended by MAX_WALK_PAGES).
TRAIL_KEEP = 32
_CURSOR = "mfl1."


class ListTracesInput(BaseModel):
    """Which run, what to list, filters and the page."""

    model_config = ConfigDict(extra="forbid")
    run_id: TRACES_RUN_ID
    kind: Literal["traces", "episodes", "eval_runs"] = Field(default="traces", description=(
        "traces (one rollout each), episodes (groups of traces) or eval_runs (the run's evaluation runs on the "
        "traces host)."))
    step: int | None = Field(default=None, ge=0, le=MAX_STEPS, description=(
        "Only this training step (run_step). traces: members of the step's episodes; episodes: server filter "
        "run_step; eval_runs: runs covering the step."))
    cursor: str | None = Field(default=None, max_length=4000, description=(
        "next_cursor of the previous page (valid only with the same other arguments)."))
    limit: int = Field(default=20, ge=1, le=100, description=(
        "Rows per page (1..100); fewer when the output budget needs it."))
    has_error: bool | None = Field(default=None, description="Only rows with (true) or without (false) an error.")
    reward_min: float | None = Field(default=None, allow_inf_nan=False, description=(
        "Only traces with reward >= this (unscored traces excluded). Not for episodes."))
    reward_max: float | None = Field(default=None, allow_inf_nan=False,
                                     description="Only traces with reward <= this. Not for episodes.")

    @model_validator(mode="after")
    def _reward_range(self) -> ListTracesInput:
        if self.reward_min is not None and self.reward_max is not None and self.reward_min > self.reward_max:
            raise ValueError("reward_min must be at most reward_max (no reward is in an empty range)")
        return self


class TraceRow(BaseModel):
    """One trace (``TraceSummary`` of GET ``/traces``), compact."""

    trace_id: str = Field(description="Trace id (mf_download_traces writes traces/<trace_id>.json).")
    episode_id: str | None = Field(default=None, description="Episode it belongs to.")
    run_step: int | None = Field(default=None, description="Training step.")
    reward: float | None = Field(default=None, description="Reward; null = unscored (not 0).")
    outcome: str | None = Field(default=None, description="Outcome, e.g. done, error, truncated.")
    has_error: bool | None = Field(default=None, description="True when the rollout errored.")
    tokens: int | None = Field(default=None, description="Total tokens.")
    duration_ms: int | None = Field(default=None, description="Duration in milliseconds.")
    size_bytes: Bytes | None = Field(default=None, description="Size of the raw document in bytes.")
    run_type: str | None = Field(default=None, description="context.run_type: train, eval or unknown.")


class EpisodeRow(BaseModel):
    """One episode (``EpisodeSummary`` of GET ``/episodes``)."""

    episode_id: str = Field(description="Episode id.")
    outcome: str | None = Field(default=None, description="Outcome.")
    has_error: bool | None = Field(default=None, description="The episode's own error flag.")
    error: str | None = Field(default=None, description=(
        "'type: message' of the episode's error (at most 200 characters)."))
    environment_id: str | None = Field(default=None, description="Environment.")
    created_at: datetime | None = Field(default=None, description="Creation time (UTC).")


class EvalRunRow(BaseModel):
    """One eval run (``RunSummary`` of GET ``/runs?run_type=eval``)."""

    run_id: str = Field(description="Eval run id on the traces host (use it as run_id to list or download its traces).")
    trace_count: int = Field(description="Traces.")
    episode_count: int = Field(description="Episodes.")
    avg_reward: float | None = Field(default=None, description="Mean reward of scored traces.")
    step_min: int | None = Field(default=None, description="First training step evaluated.")
    step_max: int | None = Field(default=None, description="Last training step evaluated.")
    has_error: bool | None = Field(default=None, description="True when any trace errored.")
    last_trace_created_at: datetime | None = Field(default=None, description="Newest trace (UTC).")


class ListTracesResult(BaseModel):
    """One page. Only the list of the requested kind is filled."""

    run_id: str = Field(description="Run id.")
    kind: str = Field(description="traces, episodes or eval_runs.")
    traces: list[TraceRow] = Field(default_factory=list, description="Trace rows (kind traces), newest first.")
    episodes: list[EpisodeRow] = Field(default_factory=list, description="Episode rows (kind episodes), newest first.")
    eval_runs: list[EvalRunRow] = Field(default_factory=list, description=(
        "Eval runs (kind eval_runs), most recent first."))
    next_calls: list[Call] = Field(default_factory=list, description=(
        "The call for the next page: the same arguments (a cursor is valid only with them) and next_cursor; "
        "empty on the last page."))
    count: int = Field(description="Rows on this page.")
    next_cursor: str | None = Field(default=None, description=(
        "Pass as cursor (same other arguments) for the next page; null when the listing ended (see complete)."))
    complete: bool = Field(default=False, description=(
        "True on the last page of the listing. False with next_cursor null: the listing was cut short (note says "
        "why); with a next_cursor: more pages follow."))
    note: str | None = Field(default=None, description=(
        "Why the listing stopped early (the host's paging repeated, cycled or emptied its cursor, or the page bound "
        "was reached), with the last cursor."))
    truncated: bool = Field(default=False, description=(
        "True when the page holds fewer rows than limit to fit the output budget (nothing is skipped: next_cursor "
        "continues after the last row)."))
    omitted: int = Field(default=0, description=(
        "Rows left out of this page and not reachable by next_cursor (always 0 here)."))
    narrow_hint: str | None = Field(default=None, description="How to get smaller pages.")


def _trace_row(t: wire.TraceSummary) -> TraceRow:
    score, execution = t.score or wire.TraceScore(), t.execution or wire.TraceExecution()
    return TraceRow(trace_id=t.trace_id, episode_id=t.episode_id, run_step=t.run_step, reward=score.reward,
                    outcome=score.outcome, has_error=execution.has_error, tokens=t.total_tokens,
                    duration_ms=t.duration_ms, size_bytes=t.size_bytes, run_type=t.context.get("run_type"))


def _episode_row(e: wire.EpisodeSummary) -> EpisodeRow:
    error = None
    if e.error and (e.error.type or e.error.message):
        error = ": ".join(part for part in (e.error.type, e.error.message) if part)[:200]
    return EpisodeRow(episode_id=e.episode_id, outcome=e.outcome, has_error=e.has_error, error=error,
                      environment_id=e.environment_id, created_at=e.created_at)


@dataclass
class _Position:
    """Where a listing walk stands between calls (carried in our ``next_cursor``): the host cursor to
    send next (the episode pages' cursor for per-step traces), a per-step walk's episode index and
    member-trace cursor, and the walk's trails (:class:`~tools.platform.paging.CursorTrail`)."""

    kind: str
    step: int | None
    host: str | None = None
    index: int = 0
    member: str | None = None
    trail: CursorTrail = field(default_factory=lambda: _trail())
    members: CursorTrail = field(default_factory=lambda: _trail())

    def copy(self) -> _Position:
        return replace(self, trail=replace(self.trail, sent=list(self.trail.sent)),
                       members=replace(self.members, sent=list(self.members.sent)))


def _trail(pages: int = 0, sent: list[str] | None = None) -> CursorTrail:
    return CursorTrail(max_pages=MAX_WALK_PAGES, pages=pages, sent=sent or [], keep=TRAIL_KEEP)


def _encode(pos: _Position) -> str:
    state = {"k": pos.kind, "s": pos.step, "c": pos.host, "i": pos.index, "t": pos.member, "n": pos.trail.pages,
             "h": pos.trail.sent, "mn": pos.members.pages, "mh": pos.members.sent}
    raw = json.dumps(state, separators=(",", ":")).encode()
    return _CURSOR + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(cursor: str | None, inp: ListTracesInput) -> _Position:
    if not cursor:
        return _Position(kind=inp.kind, step=inp.step)
    try:
        if not cursor.startswith(_CURSOR):
            raise ValueError
        body = cursor[len(_CURSOR):]
        s = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        pos = _Position(kind=s["k"], step=s["s"], host=s["c"], index=s["i"], member=s["t"],
                        trail=_trail(s["n"], s["h"]), members=_trail(s["mn"], s["mh"]))
        if not (isinstance(pos.index, int) and isinstance(pos.trail.pages, int) and isinstance(pos.members.pages, int)
                and all(isinstance(d, str) for d in pos.trail.sent + pos.members.sent)):
            raise ValueError
    except (ValueError, KeyError, TypeError, binascii.Error, AttributeError):
        raise fail("bad_arguments", "This cursor is not a next_cursor of mf_list_traces.",
                   "Repeat the first call (cursor null), then pass each page's next_cursor unchanged.") from None
    if (pos.kind, pos.step) != (inp.kind, inp.step):
        raise fail("bad_arguments", f"This cursor belongs to a listing of kind {pos.kind!r}"
                   + (f", step {pos.step}" if pos.step is not None else ", all steps") + ".",
                   "Pass the same kind and step as the call that returned it, or start again with cursor null.")
    return pos


#: ``fetch(limit) -> (rows, how the walk ended (None: more pages), the cursor the host answered last, the
#: position after the page)``.
Fetch = Callable[[int], tuple[list[Any], End | None, str | None, _Position]]


def _traces_fetch(tc: TracesClient, inp: ListTracesInput, team: str | None, start: _Position) -> Fetch:
    def fetch(limit: int) -> tuple[list[Any], End | None, str | None, _Position]:
        pos = start.copy()
        page = tc.list_traces(team_id=team, run_id=inp.run_id, has_error=inp.has_error, reward_min=inp.reward_min,
                              reward_max=inp.reward_max, limit=limit, cursor=pos.host)
        end = pos.trail.step(pos.host, page.next_cursor)
        pos.host = page.next_cursor
        return [_trace_row(t) for t in page.items], end, page.next_cursor, pos

    return fetch


def _step_traces_fetch(tc: TracesClient, inp: ListTracesInput, team: str | None, start: _Position) -> Fetch:
    step = inp.step

    def fetch(limit: int) -> tuple[list[Any], End | None, str | None, _Position]:
        pos = start.copy()
        rows: list[TraceRow] = []
        page: wire.EpisodeListPage | None = None
        requests = 0
        while len(rows) < limit and requests < MAX_STEP_REQUESTS:
            if page is None:
                page = tc.list_episodes(team_id=team, run_id=inp.run_id, run_step=step, limit=STEP_EPISODE_PAGE,
                                        cursor=pos.host)
                requests += 1
            if pos.index >= len(page.items):  # leave this episode page
                end = pos.trail.step(pos.host, page.next_cursor)
                if end is not None:
                    return rows, end, page.next_cursor, pos
                pos.host, pos.index, pos.member, page = page.next_cursor, 0, None, None
                continue
            episode = page.items[pos.index]
            members = tc.list_episode_traces(episode.episode_id, team_id=team, limit=min(PAGE_LIMIT, limit - len(rows)),
                                             cursor=pos.member, has_error=inp.has_error, reward_min=inp.reward_min,
                                             reward_max=inp.reward_max)
            requests += 1
            rows += [_trace_row(t) for t in members.items if t.run_step == step]
            # one trail for every member list of the walk: a cursor is never valid in two lists
            end = pos.members.step(pos.member, members.next_cursor)
            if end == "last_page":
                pos.index, pos.member = pos.index + 1, None
            elif end is not None:
                return rows, end, members.next_cursor, pos
            else:
                pos.member = members.next_cursor
        if page is not None and pos.index >= len(page.items) and not page.next_cursor:
            return rows, "last_page", None, pos
        return rows, None, None, pos

    return fetch


def _episodes_fetch(tc: TracesClient, inp: ListTracesInput, team: str | None, start: _Position) -> Fetch:
    if inp.reward_min is not None or inp.reward_max is not None:
        raise fail("bad_arguments", "Episodes have no reward filter on the traces host.",
                   "Drop the reward bounds, or list traces (not episodes) with them.")


    def fetch(limit: int) -> tuple[list[Any], End | None, str | None, _Position]:
        pos = start.copy()
        page = tc.list_episodes(team_id=team, run_id=inp.run_id, run_step=inp.step, has_error=inp.has_error,
                                limit=limit, cursor=pos.host)
        end = pos.trail.step(pos.host, page.next_cursor)
        pos.host = page.next_cursor
        return [_episode_row(e) for e in page.items], end, page.next_cursor, pos

    return fetch


def _is_eval_of(summary: wire.RunSummary, run_id: str) -> bool:
    return (summary.context.get("train_run_id") == run_id or summary.run_id == run_id
            or summary.run_id.startswith(run_id + "-"))


def _eval_runs_fetch(tc: TracesClient, inp: ListTracesInput, team: str | None, start: _Position) -> Fetch:
    def keep(s: wire.RunSummary) -> bool:
        if not _is_eval_of(s, inp.run_id):
            return False
        if inp.has_error is not None and bool(s.has_error) != inp.has_error:
            return False
        if inp.step is not None and not (s.step_min is not None and s.step_max is not None
                                         and s.step_min <= inp.step <= s.step_max):
            return False
        reward = s.avg_reward
        if inp.reward_min is not None and (reward is None or reward < inp.reward_min):
            return False
        return not (inp.reward_max is not None and (reward is None or reward > inp.reward_max))

    def fetch(limit: int) -> tuple[list[Any], End | None, str | None, _Position]:
        pos = start.copy()
        rows: list[EvalRunRow] = []
        for _ in range(EVAL_SCAN_PAGES):
            page = tc.list_runs(team_id=team, run_type="eval", limit=limit - len(rows), cursor=pos.host)
            rows += [EvalRunRow(run_id=s.run_id, trace_count=s.trace_count, episode_count=s.episode_count,
                                avg_reward=s.avg_reward, step_min=s.step_min, step_max=s.step_max,
                                has_error=s.has_error, last_trace_created_at=s.last_trace_created_at)
                     for s in page.items if keep(s)]
            end = pos.trail.step(pos.host, page.next_cursor)
            if end is not None:
                return rows, end, page.next_cursor, pos
            pos.host = page.next_cursor
            if len(rows) >= limit:
                break
        return rows, None, None, pos

    return fetch


_WHAT = {"traces": "trace listing", "episodes": "episode listing", "eval_runs": "eval-run listing"}


@tool
def list_traces(inp: ListTracesInput, ctx: Context) -> ListTracesResult:
    """One cursor page of a run's traces, episodes or eval runs (traces host, see module doc).

    Rows are compact summaries; fetch documents with mf_download_traces. When ``limit``
    rows would not fit the output budget the page is re-read with fewer rows (its
    ``next_cursor`` then continues right after them: nothing is skipped). Errors:
    ``bad_arguments`` (cursor of other arguments, reward filter on episodes),
    ``invalid_request`` (a cursor the host rejects), the platform codes.
    """
    tc = ctx.traces()
    run, team = platform_run(ctx, inp.run_id)
    start = _decode(inp.cursor, inp)
    if inp.kind == "traces":
        fetch = (_step_traces_fetch if inp.step is not None else _traces_fetch)(tc, inp, team, start)
    elif inp.kind == "episodes":
        fetch = _episodes_fetch(tc, inp, team, start)
    else:
        fetch = _eval_runs_fetch(tc, inp, team, start)

    def build(rows: list[Any], end: End | None, answered: str | None, after: _Position, limit: int) -> ListTracesResult:
        cut = limit < inp.limit
        walk = Walk(end=end, pages=after.trail.pages, last_cursor=answered, max_pages=MAX_WALK_PAGES)
        cursor = None if end else _encode(after)
        same = {**inp.model_dump(exclude_defaults=True), "cursor": cursor}
        return ListTracesResult(
            run_id=inp.run_id, kind=inp.kind, count=len(rows), next_cursor=cursor,
            next_calls=[call("mf_list_traces", **same)] if cursor else [],
            complete=walk.complete, note=walk.note(_WHAT[inp.kind]), truncated=cut,
            narrow_hint=f"Page shortened to {limit} rows to fit the output budget; follow next_cursor for more."
            if cut else None, **{inp.kind: rows})

    limit = inp.limit
    while True:
        rows, end, answered, after = fetch(limit)
        result = build(rows, end, answered, after, limit)
        if run is None and not rows and not inp.cursor and inp.kind != "eval_runs":
            raise not_found(inp.run_id)
        size = json_chars(result)
        if size <= OUTPUT_BUDGET_CHARS or limit == 1:
            return result
        limit = max(1, min(limit - 1, int(limit * OUTPUT_BUDGET_CHARS * 0.95 / size)))
