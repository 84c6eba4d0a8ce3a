"""Run tools: read a run (:func:`get_run`), list the owner's runs (:func:`list_runs`) and wait for a run
(:func:`wait_for_run`). A run's checkpoints: :mod:`tools.monitor.checkpoints`.

Sources (reference/prime-api.md): GET ``/rft/runs/{id}`` (§2.2, §5.1), ``/rft/runs`` (§5.2),
``/progress`` (§5.8).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tools.core import (
    INT64_MAX,
    MAX_STEPS,
    NO_DASHBOARD,
    RUN_ID,
    Context,
    dashboard_url,
    fit_largest,
    not_found,
    owner_label,
    require_run,
    resolve_owner,
    tool,
)
from tools.errors import Call, ErrorCode, ToolFailure, call, fail
from tools.guardrails import confirmation as gate
from tools.monitor._clock import parse_time, seconds_since, server_now
from tools.monitor._series import OVERDUE_STEP_MULTIPLE, overdue_multiple, step_seconds
from tools.monitor._views import FailureAnalysisView, clip, failure_analysis_view, minutes
from tools.monitor.progress import (
    CRASH_POD_STATES,
    FAILED_POD_STATES,
    POD_SCHEDULING_GRACE_SECONDS,
    PULL_FAILED_POD_STATES,
    next_step,
)
from tools.platform import errors as perr
from tools.platform import paging, wire
from tools.platform.client import PlatformClient


class GetRunInput(BaseModel):
    """Which run to read."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID


class GetRunResult(BaseModel):
    """One run, from GET ``/rft/runs/{id}`` (field names of the wire ``RLRun`` in snake_case)."""

    run_id: str = Field(description="Run id.")
    name: str | None = Field(default=None, description="Run name (the TOML top-level name).")
    status: str = Field(description=(
        "Status as the platform sends it: QUEUED, PENDING, RUNNING, COMPLETED, FAILED, STOPPED, PAUSING, PAUSED or "
        "another value."))
    terminal: bool = Field(description="True for STOPPED, FAILED, COMPLETED, PAUSED (the prime CLI's terminal set).")
    runs_ahead: int | None = Field(default=None, description="While QUEUED: runs ahead in the queue.")
    queue_reason: str | None = Field(default=None, description="While QUEUED: why.")
    notice: str | None = Field(default=None, description="A platform notice about the run.")
    kind: str | None = Field(default=None, description="SHARED_RFT_HOSTED | DEDICATED_FULL_FT | EXTERNAL.")
    mode: str = Field(description="rl or sft (sft when the wire loss is 'sft').")
    model: str | None = Field(default=None, description="Base model (baseModel).")
    environments: list[str] = Field(default_factory=list, description=(
        "Environment labels (slug, name, id or taskset.id)."))
    max_steps: int | None = Field(default=None, description="Training steps planned.")
    batch_size: int | None = Field(default=None, description="Rollouts (RL) or samples (SFT) per step.")
    rollouts_per_example: int | None = Field(default=None, description="Rollouts per prompt (RL group size).")
    seq_len: int | None = Field(default=None, description="Sequence length in tokens.")
    gpu_count: int | None = Field(default=None, description="GPUs of the run (trainer + inference).")
    owner: str = Field(description="'team <id>' or 'personal account'.")
    team_id: str | None = Field(default=None, description="Owning team id; null for the personal account.")
    user_id: str | None = Field(default=None, description="User who launched the run.")
    volume_name: str | None = Field(default=None, description="Attached volume.")
    wandb_project: str | None = Field(default=None, description="W&B project, if logging there.")
    source_commit: str | None = Field(default=None, description="prime-rl commit the run was pinned to, if any.")
    created_at: datetime | None = Field(default=None, description="Creation time (UTC).")
    started_at: datetime | None = Field(default=None, description="Start time (UTC); null while queued.")
    completed_at: datetime | None = Field(default=None, description="End time (UTC) of a terminal run.")
    updated_at: datetime | None = Field(default=None, description="Last change (UTC).")
    running_seconds: float | None = Field(default=None, description=(
        "Seconds since start (to the end for a finished run), on the server's clock."))
    error_message: str | None = Field(default=None, description="The platform's error text of a failed run.")
    failure_analysis: FailureAnalysisView | None = Field(default=None, description=(
        "Diagnosis of a FAILED run, when the platform has one."))
    dashboard_url: str | None = Field(description="The run's page in the dashboard; " + NO_DASHBOARD + ".")
    secret_names: list[str] | None = Field(default=None, description=(
        "Env names whose values were forwarded at launch (never the values), from the state store; null "
        "when this state store did not launch the run."))
    plan_id: str | None = Field(default=None, description="The state store's launch plan, if it launched the run.")


def launch_of(ctx: Context, run_id: str) -> gate.LaunchState | None:
    """The state store's plan that launched or resumed into ``run_id`` on this platform (None: launched
    elsewhere). Reads the store only."""
    return gate.plan_of_run(ctx.store(), run_id, platform_url=ctx.settings.base_url)


def _run_view(run: wire.RLRun, ctx: Context, now: datetime) -> GetRunResult:
    fa = run.failure_analysis
    launch = launch_of(ctx, run.id)
    end = run.completed_at or (now if run.started_at and not run.is_terminal() else None)
    return GetRunResult(
        run_id=run.id, name=run.name, status=run.status, terminal=run.is_terminal(), runs_ahead=run.runs_ahead,
        queue_reason=run.queue_reason, notice=run.notice, kind=run.kind, mode="sft" if run.is_sft else "rl",
        model=run.base_model, environments=run.environment_labels()[:20], max_steps=run.max_steps,
        batch_size=run.batch_size, rollouts_per_example=run.rollouts_per_example, seq_len=run.seq_len,
        gpu_count=run.gpu_count, owner=owner_label(run.team_id),
        team_id=run.team_id, user_id=run.user_id, volume_name=run.volume_name, wandb_project=run.wandb_project,
        source_commit=run.source_commit, created_at=run.created_at, started_at=run.started_at,
        completed_at=run.completed_at, updated_at=run.updated_at,
        running_seconds=round((end - run.started_at).total_seconds(), 1) if end and run.started_at else None,
        error_message=clip(run.error_message),
        failure_analysis=failure_analysis_view(fa),
        dashboard_url=dashboard_url(ctx, run.id),
        secret_names=list(launch.plan.secret_names) if launch else None,
        plan_id=launch.plan_id if launch else None,
    )


@tool
def get_run(inp: GetRunInput, ctx: Context) -> GetRunResult:
    """Read one run (GET ``/rft/runs/{id}``).

    Errors: ``not_found`` (unknown id, or a run of another owner), the platform codes.
    """
    run = require_run(ctx, inp.run_id)
    return _run_view(run, ctx, server_now(ctx.platform()))


class ListRunsInput(BaseModel):
    """Which runs to list."""

    model_config = ConfigDict(extra="forbid")
    team: str | None = Field(default=None, description=(
        "'personal', a team id, or null for the configured owner (PRIME_TEAM_ID, then ~/.prime/config.json)."))
    page: int = Field(default=1, ge=1, le=INT64_MAX, description="Page number, from 1.")
    limit: int = Field(default=20, ge=1, le=100, description="Runs per page (1..100).")
    status: str | None = Field(default=None, max_length=40, description=(
        "Only runs with this status, any case: " + ", ".join(sorted(wire.RunStatus.KNOWN)) + ". Filtered here: "
        "the newest 1000 runs are scanned."))

    @field_validator("status")
    @classmethod
    def _known_status(cls, value: str | None) -> str | None:
        if value is not None and value.strip().upper() not in wire.RunStatus.KNOWN:
            raise ValueError("expected one of " + ", ".join(sorted(wire.RunStatus.KNOWN)) + " (any case)")
        return value.strip().upper() if value is not None else None



#: Runs of a page whose latest step is read (one GET /progress each), and the seconds all those reads may take.
LATEST_STEP_ROWS = 20
LATEST_STEP_SECONDS = 10.0


class RunRow(BaseModel):
    """One run of a list."""

    run_id: str = Field(description="Run id.")
    name: str | None = Field(default=None, description="Run name.")
    status: str = Field(description="Wire status.")
    terminal: bool = Field(description="True for a terminal status.")
    model: str | None = Field(default=None, description="Base model.")
    max_steps: int | None = Field(default=None, description="Steps planned.")
    gpu_count: int | None = Field(default=None, description="GPUs.")
    runs_ahead: int | None = Field(default=None, description="Queue position while QUEUED.")
    latest_step: int | None = Field(default=None, description=(
        f"Latest step (GET /rft/runs/{{id}}/progress), read for the first {LATEST_STEP_ROWS} started runs of the page; "
        "null when not started, not read (note says why) or the read failed."))
    created_at: datetime | None = Field(default=None, description="Creation time (UTC).")


class ListRunsResult(BaseModel):
    """A page of runs, newest first (GET ``/rft/runs``)."""

    owner: str = Field(description="Whose runs: 'team <id>' or 'personal account', and where that choice came from.")
    runs: list[RunRow] = Field(description="The runs of this page, newest first.")
    total: int = Field(description="Runs in all pages (matching status, when filtered).")
    page: int = Field(description="This page number.")
    next_page: int | None = Field(default=None, description="The next page number, null on the last page.")
    last_page: int = Field(default=1, description="The last page holding runs at this limit (1 when there are none).")
    scan_complete: bool = Field(default=True, description=(
        "False when the listing cannot be trusted to be whole: a status filter's scan stopped early (after the "
        "newest 1000 runs, or the platform's paging repeated or emptied a page), or this page repeats an earlier "
        "one (note says which)."))
    note: str | None = Field(default=None, description=(
        "Why a scan stopped early or a page came back empty although the platform counts more runs, and which "
        "rows could not be read."))
    unreadable_runs: list[str] = Field(default_factory=list, description=(
        "Rows the platform sent in a shape that cannot be read (a null status or id, a wrong type, not an object): "
        "left out of runs, each as its position, its id when readable, and what is wrong."))
    truncated: bool = Field(default=False, description=(
        "True when rows of this page were left out to fit the output budget."))
    omitted: int = Field(default=0, description="Rows of this page left out.")
    narrow_hint: str | None = Field(default=None, description=(
        "When rows were left out: the call asking for fewer runs per page from this page's first run."))
    next_calls: list[Call] = Field(default_factory=list, description=(
        "The call for the next page, or past the last page the call for the last page: the same team, limit and "
        "status (page numbers depend on limit); then, when rows were left out, the call narrow_hint names."))


_STATUS_SCAN_PAGES = 10


def _created(run: wire.RLRun) -> float | None:
    """A run's creation time as seconds (a time without a zone read as UTC), for ordering."""
    at = run.created_at
    return None if at is None else (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def _follows(platform: PlatformClient, team_id: str | None, inp: ListRunsInput,
             runs: list[wire.RLRun]) -> paging.End | None:
    """Why page ``inp.page`` cannot follow page ``inp.page - 1`` (read again: GET /rft/runs, one more
    request), or None (:func:`tools.platform.paging.page_follows`; a page that cannot be read proves
    nothing)."""
    try:
        before = platform.list_runs(team_id=team_id, page=inp.page - 1, limit=inp.limit)
    except perr.PlatformError:
        return None
    return paging.page_follows(before.runs, runs, key=lambda r: r.id, order=_created)


def _latest_steps(ctx: Context, runs: list[wire.RLRun]) -> tuple[dict[str, int | None], int]:
    """Latest step of the first :data:`LATEST_STEP_ROWS` started runs: one GET ``/progress`` each, no
    retry, all within :data:`LATEST_STEP_SECONDS` (a slow platform leaves the rest unread).
    Returns the steps by run id and how many reads failed or ran out of time (started runs past the
    first :data:`LATEST_STEP_ROWS` are not counted: the caller says so)."""
    started = _started(runs)
    steps: dict[str, int | None] = {}
    unread = 0
    deadline = ctx.clock() + LATEST_STEP_SECONDS
    client = ctx.platform_client(attempts=1)
    try:
        for run in started[:LATEST_STEP_ROWS]:
            left = deadline - ctx.clock()
            if left <= 0:
                unread += 1
                continue
            client.bound_requests(left)
            try:
                steps[run.id] = ctx.scrubber.scrub_obj(client.get_progress(run.id)).latest_step
            except perr.PlatformError:
                unread += 1
    finally:
        client.close()
    return steps, unread


def _started(runs: list[wire.RLRun]) -> list[wire.RLRun]:
    """The runs that have started (a start time, or a status past QUEUED and PENDING): those with steps."""
    return [r for r in runs if r.started_at is not None or r.status.upper() not in ("QUEUED", "PENDING")]


def _row(run: wire.RLRun) -> RunRow:
    return RunRow(run_id=run.id, name=run.name, status=run.status, terminal=run.is_terminal(), model=run.base_model,
                  max_steps=run.max_steps, gpu_count=run.gpu_count, runs_ahead=run.runs_ahead,
                  created_at=run.created_at)


def _newest_first(runs: list[wire.RLRun]) -> list[wire.RLRun]:
    oldest = datetime.min.replace(tzinfo=UTC)
    return sorted(runs, key=lambda r: r.created_at or oldest, reverse=True)


@tool
def list_runs(inp: ListRunsInput, ctx: Context) -> ListRunsResult:
    """List the owner's runs, newest first, one page (GET ``/rft/runs?page=&limit=&team_id=``).

    The owner is resolved like the CLI (:func:`tools.core.resolve_owner`). With ``status``
    the newest pages (up to 1000 runs) are read and filtered here; the scan ends early, with a
    note, on a page the platform repeats or answers empty (:class:`~tools.platform.paging.NumberedWalk`).
    A backend that ignores paging (no ``total``) is paged locally, as the CLI does. ``next_calls``: the
    next page (past the end: the last page) with the same team, limit and status. Errors: ``invalid_team``,
    the platform codes.
    """
    owner = resolve_owner(ctx, inp.team)
    platform = ctx.platform()
    complete, note = True, None
    unreadable: list[str] = []
    if inp.status is None:
        page = platform.list_runs(team_id=owner.team_id, page=inp.page, limit=inp.limit)
        unreadable = [u.words("row") for u in page.unreadable]
        if page.total is None:
            everything = _newest_first(page.runs)
            total, runs = len(everything), everything[(inp.page - 1) * inp.limit: inp.page * inp.limit]
        else:
            total, runs = page.total, page.runs
            if not runs and total > (inp.page - 1) * inp.limit:
                note = (f"The platform answered page {inp.page} empty although it counts {total} run(s): its paging "
                        "misbehaves; the runs of this page are not known.")
            elif runs and inp.page > 1 and (end := _follows(platform, owner.team_id, inp, runs)) is not None:
                runs, complete = [], False  # rows of an earlier page: shown there
                note = (f"Page {inp.page} is not the page after page {inp.page - 1}: {paging.why(end)}. Its runs are "
                        f"left out and no later page is offered (the platform's paging cannot be trusted past page "
                        f"{inp.page - 1}): filter by status, or ask for more runs per page.")
    else:
        wanted = inp.status.strip().upper()

        def scanned(n: int) -> wire.RLRunPage:
            scanned_page = platform.list_runs(team_id=owner.team_id, page=n, limit=100)
            unreadable.extend(u.words(f"page {n} row") for u in scanned_page.unreadable)
            return scanned_page

        scan = paging.NumberedWalk(scanned, rows=lambda p: p.runs, key=lambda r: r.id, total=lambda p: p.total,
                                   limit=100, max_pages=_STATUS_SCAN_PAGES)
        matches = [r for r in scan if r.status.upper() == wanted]
        complete, note = scan.walk.complete, scan.walk.note("scan of the runs list")
        total, runs = len(matches), matches[(inp.page - 1) * inp.limit: inp.page * inp.limit]
    if unreadable:
        note = " ".join(filter(None, [note, f"{len(unreadable)} row(s) the platform sent could not be read and are "
                                            "left out (unreadable_runs says which and why); the other runs are "
                                            "listed."]))
    rows = [_row(r) for r in runs]
    if runs:  # every page: a run looked up on page 2 needs its step as much as one on page 1
        steps, unread = _latest_steps(ctx, runs)
        for row in rows:
            row.latest_step = steps.get(row.run_id)
        beyond = len(_started(runs)) - LATEST_STEP_ROWS
        if unread:
            note = " ".join(filter(None, [note, f"The latest step of {unread} run(s) could not be read in time."]))
        if beyond > 0:
            note = " ".join(filter(None, [note, f"The latest step is read for the first {LATEST_STEP_ROWS} started "
                                                f"runs of a page: {beyond} more show none (ask for at most "
                                                f"{LATEST_STEP_ROWS} runs per page to see every one)."]))
    label = f"{owner.label} (from {owner.source})"
    paged = complete or inp.status is not None  # a page that repeats an earlier one offers no page after it
    next_page = inp.page + 1 if total > inp.page * inp.limit and paged else None
    last_page = max(1, -(-total // inp.limit))
    to = next_page if runs else last_page if total and inp.page > last_page and paged else None
    same = inp.model_dump(exclude_defaults=True, exclude={"page"})  # team, limit, status: pages depend on limit
    turn = [call("mf_list_runs", **same, page=to if to > 1 else None)] if to else []

    def build(k: int) -> ListRunsResult:
        cut = len(rows) - k
        narrow, hint = None, None
        if cut:  # the largest limit that fits and divides this one: its page starts where this page does
            fewer = max(d for d in range(1, max(1, k) + 1) if inp.limit % d == 0)
            start = (inp.page - 1) * (inp.limit // fewer) + 1
            narrow = call("mf_list_runs", **{**same, "limit": fewer}, page=start if start > 1 else None)
            hint = f"Ask for {fewer} runs per page, from the first run of this page: {narrow}."
        return ListRunsResult(
            owner=label, runs=rows[:k], total=total, page=inp.page, next_page=next_page, last_page=last_page,
            scan_complete=complete, note=note, unreadable_runs=unreadable[:20],
            next_calls=turn + ([narrow] if narrow else []), truncated=cut > 0,
            omitted=cut, narrow_hint=hint)

    return fit_largest(build, len(rows))


#: One wait call's bound, requests included: under the 60 s many agent hosts allow a command or tool call.
DEFAULT_WAIT_SECONDS = 45
MAX_WAIT_SECONDS = 55
#: Seconds kept at the end of a wait for its last poll's requests (each bounded by the time left).
LAST_POLL_SECONDS = 5.0
FIRST_POLL_SECONDS = 2.0
MAX_POLL_SECONDS = 15.0


class WaitForRunInput(BaseModel):
    """Which run, what to wait for, and for how long at most."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    timeout_seconds: int = Field(default=DEFAULT_WAIT_SECONDS, ge=1, le=MAX_WAIT_SECONDS, description=(
        f"Seconds this call lasts at most, its requests included (1..{MAX_WAIT_SECONDS}, under a host's 60 s "
        "limit). To wait longer, call again: loop, do not ask for more."))
    until: Literal["terminal", "running", "step"] | None = Field(default=None, description=(
        "terminal: a final status; running: the run has started; step: latest step >= step. Null: step when a "
        "step is given, else terminal."))
    step: int | None = Field(default=None, ge=1, le=MAX_STEPS, description="Target step (implies until step).")

    @model_validator(mode="after")
    def _step_needed(self) -> WaitForRunInput:
        if self.until is None:
            self.until = "step" if self.step is not None else "terminal"
        if (self.until == "step") != (self.step is not None):
            raise ValueError("until step needs a step, and a step goes with until step only")
        return self



class WaitForRunResult(BaseModel):
    """Where a run was when the wait ended."""

    run_id: str = Field(description="Run id.")
    status: str = Field(description="Last status read.")
    terminal: bool = Field(description="True when that status is terminal.")
    reached: bool = Field(description="True when the condition of until was met.")
    until: str = Field(description="What was waited for.")
    latest_step: int | None = Field(default=None, description="Latest step seen.")
    max_steps: int | None = Field(default=None, description="Steps planned.")
    waited_seconds: float = Field(description="Wall-clock seconds spent waiting.")
    polls: int = Field(description="Times the run was read.")
    last_step_age_seconds: float | None = Field(default=None, description=(
        "When the wait ended short of its target on a RUNNING run: seconds since the latest step was recorded "
        "(GET /progress lastUpdatedAt vs the server's clock); null otherwise."))
    step_overdue: bool | None = Field(default=None, description=(
        f"True when that age is more than {OVERDUE_STEP_MULTIPLE} x the recent step time (GET /metrics timestamps): "
        "the run may be stuck; next_step names mf_check_progress. Null otherwise."))
    next_step: str = Field(description="What to do next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")



def _reached(inp: WaitForRunInput, run: wire.RLRun, step: int | None) -> bool:
    if inp.until == "terminal":
        return run.is_terminal()
    if inp.until == "running":
        return run.status.upper() == "RUNNING" or run.started_at is not None
    return step is not None and step >= (inp.step or 0)


@tool
def wait_for_run(inp: WaitForRunInput, ctx: Context) -> WaitForRunResult:
    """Poll a run (GET ``/rft/runs/{id}`` and ``/progress``) until ``until`` holds, it ends,
    or ``timeout_seconds`` pass (on ``ctx.clock``), requests included: each request is bounded
    by the time left (:meth:`~tools.platform.client.PlatformClient.bound_requests`) and the
    last poll starts :data:`LAST_POLL_SECONDS` before the end.

    A status the prime CLI does not know (``PREEMPTED``) ends the wait at once: ``next_step`` says
    "Unknown status X" and what to read (as check-progress does). ``next_step`` names
    :func:`~tools.monitor.progress.check_progress` first when a RUNNING run made no
    step during the wait and :func:`_concern` says why it may be in trouble (a start-up that looks
    normal does not: the agent keeps waiting without reading a digest each time).

    Polls back off from 2 s to 15 s (``ctx.sleep``). Transient errors (rate limits, outages)
    are retried by the next poll, not inside it. Progress goes to ``ctx.report(step,
    max_steps, ...)``. Errors: ``not_found``; ``unavailable`` / ``rate_limited`` (retryable)
    when the last poll failed: the message says the last status read is stale and how old it
    is (a wait never reports a status it could not confirm as current); the platform codes.
    """
    started = ctx.clock()
    deadline = started + inp.timeout_seconds
    last_poll = deadline - min(LAST_POLL_SECONDS, inp.timeout_seconds / 2)
    client = ctx.platform_client(attempts=1)
    run: wire.RLRun | None = None
    progress: wire.RunProgress | None = None
    step = first_step = None
    late: tuple[float, float, float] | None = None
    polls, interval, read_at = 0, FIRST_POLL_SECONDS, started
    last_error: perr.PlatformError | None = None
    try:
        while True:
            polls += 1
            try:
                client.bound_requests(deadline - ctx.clock())
                run = client.get_run(inp.run_id)
                if run.started_at is not None or run.status.upper() not in ("QUEUED", "PENDING"):
                    client.bound_requests(deadline - ctx.clock())
                    progress = client.get_progress(inp.run_id)
                    step = progress.latest_step
                last_error, read_at = None, ctx.clock()
            except perr.NotFound:
                raise not_found(inp.run_id) from None
            except (perr.Unavailable, perr.RateLimited) as exc:
                last_error = exc
            if polls == 1:
                first_step = step
            if run is not None and last_error is None:
                ctx.report(step or 0, run.max_steps, f"{run.status} step {step or 0}/{run.max_steps or '?'}")
                if _reached(inp, run, step) or run.is_terminal() or not wire.RunStatus.is_known(run.status):
                    break  # an unknown status: waiting cannot tell whether it ends
            remaining = last_poll - ctx.clock()
            if remaining <= 0:
                break
            ctx.sleep(min(interval, remaining))
            interval = min(interval * 1.5, MAX_POLL_SECONDS)
        concern = late = None
        if run is not None and last_error is None and not run.is_terminal() and not _reached(inp, run, step) \
                and run.status.upper() == "RUNNING":
            if step is not None and progress is not None:
                late = _late_step(ctx, client, run.id, progress, deadline)
            if late is None and step == first_step:
                concern = _concern(client, run, step, deadline - ctx.clock())
    finally:
        client.close()
    if last_error is not None:
        raise _stale(inp, ctx, run, step, last_error, ctx.clock() - read_at)
    assert run is not None
    reached = _reached(inp, run, step)
    check = call("mf_check_progress", run_id=run.id)
    dest = f"traces-{run.id}"
    download = call("mf_download_traces", run_id=run.id, dest=dest)
    report = call("mf_run_report", run_id=run.id, traces_dir=dest)
    again = call("mf_wait_for_run", run_id=run.id, until="running" if inp.until == "running" else None, step=inp.step,
                 timeout_seconds=None if inp.timeout_seconds == DEFAULT_WAIT_SECONDS else inp.timeout_seconds)
    calls = [check]
    if not wire.RunStatus.is_known(run.status):
        advice, calls = next_step("unknown", run.id, run.status, None)
    elif run.is_terminal() and run.is_sft:  # an SFT run trains on a dataset: no rollouts, no traces
        report = call("mf_run_report", run_id=run.id)
        advice = f"The run ended ({run.status}): {report} (an SFT run has a loss, no reward and no traces)."
        calls = [report]
    elif run.is_terminal():
        advice = f"The run ended ({run.status}): {download}, then {report}."
        calls = [download, report]
    elif reached:
        advice = f"See the run's health with {check}."
    elif late is not None:
        age, per_step, multiple = late
        advice = (f"Not yet, and no new step for {minutes(age)} ({multiple:g} x the recent step time of "
                  f"{minutes(per_step)}): {check} says whether it is stuck and why; else {again} again.")
        calls = [check, again]
    elif concern is not None:
        advice = (f"Not yet, and {concern}: {check} says whether it is stuck, crash-looping or failing to pull its "
                  f"image, or just slow; if it is healthy, {again} again.")
        calls = [check, again]
    else:
        advice, calls = "Not yet: the same call again.", [again]  # next_calls holds it, run id and all
    return WaitForRunResult(
        run_id=run.id, status=run.status, terminal=run.is_terminal(), reached=reached, until=inp.until,
        latest_step=step, max_steps=run.max_steps, waited_seconds=round(ctx.clock() - started, 2), polls=polls,
        last_step_age_seconds=late[0] if late else None, step_overdue=True if late else None, next_step=advice,
        next_calls=calls)


def _late_step(ctx: Context, client: PlatformClient, run_id: str, progress: wire.RunProgress,
               deadline: float) -> tuple[float, float, float] | None:
    """(age of the latest step, recent seconds per step, age in step times) when the latest step is older than
    :data:`~tools.monitor._series.OVERDUE_STEP_MULTIPLE` step times; None otherwise or when the step time cannot
    be read before ``deadline`` (GET ``/metrics`` of the last 10 steps, on the server's clock)."""
    age = seconds_since(parse_time(progress.last_updated_at), server_now(client))
    if age is None or progress.latest_step is None:
        return None
    try:
        client.bound_requests(deadline - ctx.clock())
        records = client.get_metrics(run_id, min_step=max(0, progress.latest_step - 9)).metrics
    except perr.PlatformError:
        return None
    per_step = step_seconds(records)
    multiple = overdue_multiple(age, per_step)
    return (age, per_step, multiple) if per_step is not None and multiple is not None else None


def _concern(client: PlatformClient, run: wire.RLRun, step: int | None, seconds_left: float) -> str | None:
    """Why a RUNNING run that made no step during a wait needs :func:`~tools.monitor.progress.check_progress`,
    or ``None`` while its start-up looks normal. With steps already made: no new one came. With none yet, from
    one GET ``/rft/runs/{id}/env-servers`` (bounded by the wait's time left): an env server in a failed pod
    state (image pull, crash loop, error), or a start-up longer than the shortest phase allowance."""
    if step is not None:
        return "no new step during this wait"
    try:
        client.bound_requests(seconds_left)
        servers = client.list_env_servers(run.id)
    except perr.PlatformError:
        return "no step yet, and its env servers could not be read"
    bad = next((s for s in servers if s.status in PULL_FAILED_POD_STATES | CRASH_POD_STATES | FAILED_POD_STATES),
               None)
    if bad is not None:
        return f"no step yet, and env server {bad.env_name or bad.pod_name} is {bad.status}"
    started = seconds_since(parse_time(run.started_at), server_now(client))
    if started is not None and started > POD_SCHEDULING_GRACE_SECONDS:
        return f"no step yet after {minutes(started)} of start-up"
    return None


def _stale(inp: WaitForRunInput, ctx: Context, run: wire.RLRun | None, step: int | None, error: perr.PlatformError,
           age: float) -> ToolFailure:
    """The wait ended while the platform could not be read: the error, with the last status read called stale."""
    code: ErrorCode = "rate_limited" if isinstance(error, perr.RateLimited) else "unavailable"
    why = "rate limiting" if code == "rate_limited" else "unreachable or failing"
    if run is None:
        seen = f"Nothing could be read about run {inp.run_id}."
    else:
        where = f", step {step}/{run.max_steps or '?'}" if step is not None else ""
        seen = (f"The last status read, {run.status}{where}, is {age:.0f} s old and stale: the run may have moved on "
                "since.")
    preflight = call("mf_preflight")
    again = call("mf_wait_for_run", run_id=inp.run_id, until="running" if inp.until == "running" else None,
                 step=inp.step, timeout_seconds=inp.timeout_seconds)
    return fail(code, f"The platform was {why} when the wait ended ({error.message}). {seen}",
                f"Check the network and PRIME_API_BASE_URL with {preflight}, then wait again with {again}; do not act "
                "on the stale status.", retryable=True, retry_after_seconds=error.retry_after,
                next_calls=[preflight, again])
