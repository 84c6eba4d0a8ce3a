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
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tools.core import MAX_STEPS, OUTPUT_BUDGET_CHARS, RUN_ID, Context, json_chars, not_found, tool
from tools.errors import fail
from tools.platform import wire
from tools.platform.client import TracesClient
from tools.traces._scope import PAGE_LIMIT, platform_run

#: Episodes per page when walking a step's episodes (fixed, so cursors stay valid).
STEP_EPISODE_PAGE = 20
#: Requests one per-step page may make at most (it then returns what it has and a cursor).
MAX_STEP_REQUESTS = 60
#: Traces-host run pages a search for eval runs scans per call.
EVAL_SCAN_PAGES = 10
_STEP_CURSOR = "mfs1."


class ListTracesInput(BaseModel):
    """Which run, what to list, filters and the page."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
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
    size_bytes: int | None = Field(default=None, description="Size of the raw document in bytes.")
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
    count: int = Field(description="Rows on this page.")
    next_cursor: str | None = Field(default=None, description=(
        "Pass as cursor (same other arguments) for the next page; null on the last page."))
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


def _encode_step_cursor(state: dict[str, Any]) -> str:
    raw = json.dumps(state, separators=(",", ":")).encode()
    return _STEP_CURSOR + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_step_cursor(cursor: str | None, step: int) -> dict[str, Any]:
    if not cursor:
        return {"s": step, "e": None, "i": 0, "t": None}
    try:
        if not cursor.startswith(_STEP_CURSOR):
            raise ValueError
        body = cursor[len(_STEP_CURSOR):]
        state = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        if state.get("s") != step or not isinstance(state.get("i"), int):
            raise ValueError
        return state
    except (ValueError, binascii.Error, AttributeError):
        raise fail("bad_arguments", "This cursor does not belong to a per-step trace listing of this step.",
                   "Repeat the first call (cursor null) with the same run_id, kind and step, then follow its "
                   "next_cursor.") from None


Fetch = Callable[[int], tuple[list[Any], str | None]]


def _traces_fetch(tc: TracesClient, inp: ListTracesInput, team: str | None) -> Fetch:
    if inp.cursor and inp.cursor.startswith(_STEP_CURSOR):
        raise fail("bad_arguments", "This cursor belongs to a per-step listing (pass the same step).",
                   "Pass the step that produced the cursor, or start again with cursor null.")

    def fetch(limit: int) -> tuple[list[Any], str | None]:
        page = tc.list_traces(team_id=team, run_id=inp.run_id, has_error=inp.has_error, reward_min=inp.reward_min,
                              reward_max=inp.reward_max, limit=limit, cursor=inp.cursor)
        return [_trace_row(t) for t in page.items], page.next_cursor

    return fetch


def _step_traces_fetch(tc: TracesClient, inp: ListTracesInput, team: str | None) -> Fetch:
    step = inp.step
    assert step is not None
    start = _decode_step_cursor(inp.cursor, step)

    def fetch(limit: int) -> tuple[list[Any], str | None]:
        state = dict(start)
        rows: list[TraceRow] = []
        page: wire.EpisodeListPage | None = None
        requests = 0
        while len(rows) < limit and requests < MAX_STEP_REQUESTS:
            if page is None:
                page = tc.list_episodes(team_id=team, run_id=inp.run_id, run_step=step, limit=STEP_EPISODE_PAGE,
                                        cursor=state["e"])
                requests += 1
            if state["i"] >= len(page.items):
                if not page.next_cursor:
                    return rows, None
                state, page = {"s": step, "e": page.next_cursor, "i": 0, "t": None}, None
                continue
            episode = page.items[state["i"]]
            members = tc.list_episode_traces(episode.episode_id, team_id=team, limit=min(PAGE_LIMIT, limit - len(rows)),
                                             cursor=state["t"], has_error=inp.has_error, reward_min=inp.reward_min,
                                             reward_max=inp.reward_max)
            requests += 1
            rows += [_trace_row(t) for t in members.items if t.run_step == step]
            if members.next_cursor:
                state["t"] = members.next_cursor
            else:
                state["i"], state["t"] = state["i"] + 1, None
        if page is not None and state["i"] >= len(page.items) and not page.next_cursor:
            return rows, None
        return rows, _encode_step_cursor(state)

    return fetch


def _episodes_fetch(tc: TracesClient, inp: ListTracesInput, team: str | None) -> Fetch:
    if inp.reward_min is not None or inp.reward_max is not None:
        raise fail("bad_arguments", "Episodes have no reward filter on the traces host.",
                   "Drop the reward bounds, or list traces (not episodes) with them.")


    def fetch(limit: int) -> tuple[list[Any], str | None]:
        page = tc.list_episodes(team_id=team, run_id=inp.run_id, run_step=inp.step, has_error=inp.has_error,
                                limit=limit, cursor=inp.cursor)
        return [_episode_row(e) for e in page.items], page.next_cursor

    return fetch


def _is_eval_of(summary: wire.RunSummary, run_id: str) -> bool:
    return (summary.context.get("train_run_id") == run_id or summary.run_id == run_id
            or summary.run_id.startswith(run_id + "-"))


def _eval_runs_fetch(tc: TracesClient, inp: ListTracesInput, team: str | None) -> Fetch:
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

    def fetch(limit: int) -> tuple[list[Any], str | None]:
        rows: list[EvalRunRow] = []
        cursor = inp.cursor
        for _ in range(EVAL_SCAN_PAGES):
            page = tc.list_runs(team_id=team, run_type="eval", limit=limit - len(rows), cursor=cursor)
            rows += [EvalRunRow(run_id=s.run_id, trace_count=s.trace_count, episode_count=s.episode_count,
                                avg_reward=s.avg_reward, step_min=s.step_min, step_max=s.step_max,
                                has_error=s.has_error, last_trace_created_at=s.last_trace_created_at)
                     for s in page.items if keep(s)]
            cursor = page.next_cursor
            if not cursor or len(rows) >= limit:
                break
        return rows, cursor

    return fetch


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
    if inp.kind == "traces":
        fetch = _step_traces_fetch(tc, inp, team) if inp.step is not None else _traces_fetch(tc, inp, team)
    elif inp.kind == "episodes":
        fetch = _episodes_fetch(tc, inp, team)
    else:
        fetch = _eval_runs_fetch(tc, inp, team)

    def build(rows: list[Any], cursor: str | None, limit: int) -> ListTracesResult:
        cut = limit < inp.limit
        return ListTracesResult(
            run_id=inp.run_id, kind=inp.kind, count=len(rows), next_cursor=cursor, truncated=cut,
            narrow_hint=f"Page shortened to {limit} rows to fit the output budget; follow next_cursor for more."
            if cut else None, **{inp.kind: rows})

    limit = inp.limit
    while True:
        rows, cursor = fetch(limit)
        result = build(rows, cursor, limit)
        if run is None and not rows and not inp.cursor and inp.kind != "eval_runs":
            raise not_found(inp.run_id)
        size = json_chars(result)
        if size <= OUTPUT_BUDGET_CHARS or limit == 1:
            return result
        limit = max(1, min(limit - 1, int(limit * OUTPUT_BUDGET_CHARS * 0.95 / size)))
