"""Log tools: a bounded tail of one component's logs (:func:`get_logs`) and a digest of every
distinct error the whole run has logged (:func:`summarize_logs`).

Source: GET ``/rft/runs/{id}/logs`` and ``/env-server-logs`` (reference/prime-api.md §5.5,
§5.6); lines are parsed as ``prime train logs`` 0.18.0 reads them (:mod:`._logtext`); reads
beyond one request's caps in :mod:`._logreads`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tools.core import RUN_ID, Context, fit_largest, json_chars, require_run, tool
from tools.errors import Call, call, fail
from tools.monitor._clock import server_now
from tools.monitor._logreads import (
    MAX_SINCE,
    MAX_TAIL,
    Sweep,
    Target,
    env_names,
    fetch,
    not_started,
    targets,
    window_seconds,
)
from tools.monitor._logtext import Signature, Signatures, excerpt, head, parse_logs, traceback_end
from tools.monitor._views import minutes
from tools.platform import errors as perr
from tools.platform import wire

Component = Literal["orchestrator", "trainer", "inference", "env-server"]
Level = Literal["ERROR", "WARNING", "SUCCESS", "INFO", "DEBUG"]
MAX_MESSAGE_CHARS = 2000
MAX_TRACEBACK_CHARS = 1500
#: The server's window for filtered reads when ``since_seconds`` is not sent (prime-api.md §5.5).
DEFAULT_WINDOW_SECONDS = 900
#: Characters of JSON mf_summarize_logs returns at most (tighter than the read tools' budget).
SUMMARY_BUDGET_CHARS = 6000


class GetLogsInput(BaseModel):
    """Which logs to read, and filters (as ``prime train logs``)."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    component: Component | None = Field(default=None, description=(
        "orchestrator | trainer | inference | env-server. Default: env-server when env_name is given, else "
        "orchestrator."))
    env_name: str | None = Field(default=None, min_length=1, max_length=200, description=(
        "Environment name for component env-server (required there), optionally 'name/N' for the N-th server."))
    tail_lines: int = Field(default=200, ge=1, le=1000, description="Newest lines to read (1..1000).")
    search: str | None = Field(default=None, min_length=1, max_length=500, description=(
        "Only lines containing this text (or matching it, with regex=true)."))
    regex: bool = Field(default=False, description="Treat search as an RE2 regular expression (needs search).")
    level: Level | None = Field(default=None, description=(
        "Only lines of this level: ERROR | WARNING | SUCCESS | INFO | DEBUG."))
    since_seconds: int | None = Field(default=None, ge=60, le=86400, description=(
        "Only lines from the last N seconds (60..86400). Filters (search, level, since) default to the last 15 "
        "minutes on the server."))

    @model_validator(mode="after")
    def _combination(self) -> GetLogsInput:
        if self.regex and not self.search:
            raise ValueError("regex=true needs search (the pattern)")
        if self.env_name and self.component not in (None, "env-server"):
            raise ValueError("env_name goes with component 'env-server' only")
        if self.component == "env-server" and not self.env_name:
            raise ValueError("component 'env-server' needs env_name (check-progress lists the env servers)")
        return self


class LogLine(BaseModel):
    """One log entry (JSON entries parsed; plain lines kept as text)."""

    timestamp: str | None = Field(default=None, description="The entry's timestamp (ISO text); null for plain lines.")
    level: str | None = Field(default=None, description=(
        "ERROR, WARNING, INFO, ... (upper case); null when a plain line names none."))
    component: str = Field(description="Component the line was read from (env-server/<name> for env servers).")
    source: str | None = Field(default=None, description="Prefixes and tag of the entry, e.g. 'rank0 trainer'.")
    message: str = Field(description=(
        f"The message (at most {MAX_MESSAGE_CHARS} characters; longer ones keep start and end)."))
    exception: str | None = Field(default=None, description=(
        f"Traceback text, if any (at most {MAX_TRACEBACK_CHARS} characters)."))


class GetLogsResult(BaseModel):
    """The newest log lines that fit the budget, oldest first."""

    run_id: str = Field(description="Run id.")
    component: str = Field(description="Component read.")
    env_name: str | None = Field(default=None, description="Environment of an env-server read.")
    available: bool = Field(description="False when the run has not started yet (no logs exist).")
    window_seconds: int | None = Field(default=None, description=(
        "The time window that applied: filtered reads (search, level, since) see only the last N seconds (900 when "
        "since_seconds is not given; at most 86400). Null: an unfiltered read, the newest lines of any age."))
    note: str | None = Field(default=None, description=(
        "Why logs are unavailable or empty, which window applied and how to widen it, or that a cap cut the read."))
    lines: list[LogLine] = Field(default_factory=list, description="Visible lines, oldest first.")
    received_lines: int = Field(default=0, description="Raw lines the platform returned.")
    hidden_progress_lines: int = Field(default=0, description=(
        "Progress entries and unfinished tqdm bars hidden (as the CLI does)."))
    truncated: bool = Field(default=False, description="True when older lines were left out to fit the output budget.")
    omitted: int = Field(default=0, description="Older visible lines left out.")
    narrow_hint: str | None = Field(default=None, description="How to ask for less.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls the note names.")


def _window_note(inp: GetLogsInput, run: wire.RLRun | None, now: datetime, window: int) -> tuple[str, list[Call]]:
    """No line matched a filtered read: which window applied, and the call that widens it."""
    ended = run.completed_at if run is not None else None
    wider = min(MAX_SINCE, max(window * 4, window_seconds(run.started_at if run else None, now)))
    again = call("mf_get_logs", **{**inp.model_dump(exclude_defaults=True), "since_seconds": wider})
    text = (f"No log lines matched in the last {minutes(window)} (the window of filtered reads"
            + ("" if inp.since_seconds else ", the server's default") + ").")
    if ended is not None and (now - ended).total_seconds() > window:
        text += f" The run ended {minutes((now - ended).total_seconds())} ago, before this window."
    if window >= MAX_SINCE:
        text += (" This is the widest window the logs API searches (24 h); older lines are reached only unfiltered "
                 "(the newest lines of any age), or were kept by mf_export_logs.")
        unfiltered = call("mf_get_logs", **inp.model_dump(exclude_defaults=True, exclude={"search", "regex", "level",
                                                                                            "since_seconds"}))
        return text + f" Read them with {unfiltered}.", [unfiltered]
    return text + f" Widen it with {again} (at most 86400 s).", [again]


def _wrong_env(ctx: Context, inp: GetLogsInput, exc: perr.NotFound) -> Exception:
    """A 404 of an env-server read: a wrong run gives the run's not_found; a wrong env name lists the run's env
    servers."""
    run = require_run(ctx, inp.run_id)
    names = env_names(ctx.platform(), run)
    if not names:
        return fail("not_found", f"Run {run.id} has no env servers ({exc.message}).",
                    "Read another component (orchestrator, trainer or inference).")
    name = (inp.env_name or "").split("/")[0]
    listed = ", ".join(names)
    if name in names:  # the name is right: the index or the route is not
        return fail("not_found", f"Run {run.id}'s env server {inp.env_name!r} has no logs ({exc.message}); its env "
                    f"servers: {listed}.", f"Read {name!r} without an index.",
                    next_calls=[call("mf_get_logs", run_id=run.id, env_name=name)])
    first = call("mf_get_logs", **{**inp.model_dump(exclude_defaults=True), "env_name": names[0]})
    return fail("not_found", f"Run {run.id} has no env server named {inp.env_name!r}. Its env servers: {listed}.",
                f"Use one of those names, e.g. {first}.", next_calls=[first])


@tool
def get_logs(inp: GetLogsInput, ctx: Context) -> GetLogsResult:
    """Read a bounded tail of one component's logs (GET ``/rft/runs/{id}/logs``).

    Lines are parsed as the CLI does (:mod:`tools.monitor._logtext`): JSON entries with prefixes
    stripped, progress entries and unfinished tqdm bars hidden. The newest lines that fit
    the output budget are kept. A run that has not started answers 404 "not available
    yet": that is a normal result with ``available=false`` (one request, no polling).
    Filtered reads (search, level, since) see only a window ending now: ``window_seconds``
    says which, and a read that matched nothing says how to widen it (the run's end is
    compared with the window on the server's clock). Unfiltered orchestrator reads come from
    the platform's 200-line snapshot. Errors: ``not_found`` (an unknown run; or an env server
    name the run does not have, listing the ones it has), the platform codes.
    """
    component = inp.component or ("env-server" if inp.env_name else "orchestrator")
    target = Target(component, inp.env_name if component == "env-server" else None)
    base = {"run_id": inp.run_id, "component": component, "env_name": inp.env_name}
    platform = ctx.platform()
    filtered = bool(inp.search or inp.level or inp.since_seconds)
    window = (inp.since_seconds or DEFAULT_WINDOW_SECONDS) if filtered else None
    try:
        logs = fetch(platform, inp.run_id, target, inp.tail_lines, search=inp.search, regex=inp.regex,
                     level=inp.level, since=inp.since_seconds)
    except perr.PlatformError as exc:
        if not not_started(exc):
            if isinstance(exc, perr.NotFound):
                if component == "env-server":
                    raise _wrong_env(ctx, inp, exc) from None
                require_run(ctx, inp.run_id)  # an unknown run gives the not_found with its fix
            raise
        wait = call("mf_wait_for_run", run_id=inp.run_id, until="running")
        return GetLogsResult(**base, available=False, window_seconds=window,
                             note=f"Logs are not available yet: the run has not started ({exc.message}). Wait until "
                                  f"it runs with {wait}, then read the logs.", next_calls=[wait])

    parsed = parse_logs(logs.logs)
    received = len(logs.lines())
    lines = [LogLine(timestamp=ln.timestamp, level=ln.level, component=target.label, source=ln.source,
                     message=excerpt(ln.message, MAX_MESSAGE_CHARS),
                     exception=excerpt(ln.exception, MAX_TRACEBACK_CHARS) if ln.exception else None)
             for ln in parsed.lines][-inp.tail_lines:]
    note: str | None = None
    calls: list[Call] = []
    if not lines and window is not None:
        run = require_run(ctx, inp.run_id)
        note, calls = _window_note(inp, run, server_now(platform), window)
    elif not lines:
        note = "No log lines yet."
    elif received >= inp.tail_lines:
        where = f" of the last {minutes(window)}" if window else ""
        note = (f"The read was capped at tail_lines={inp.tail_lines}: these are the newest lines{where}; older ones "
                "were not returned. mf_summarize_logs finds every distinct error of the run.")
    elif window is not None:
        note = f"Filters applied to the last {minutes(window)} only (since_seconds up to 86400 widens it)."

    def build(k: int) -> GetLogsResult:
        cut = len(lines) - k
        hint = None
        if cut:
            hint = (f"Showing the newest {k} of {len(lines)} lines. Narrow it with a level (ERROR), a search text, "
                    "since seconds or fewer tail lines, or summarize the logs first (mf_summarize_logs).")
        return GetLogsResult(**base, available=True, window_seconds=window, note=note, lines=lines[cut:],
                             received_lines=received, hidden_progress_lines=parsed.hidden_progress, truncated=cut > 0,
                             omitted=cut, narrow_hint=hint, next_calls=calls)

    return fit_largest(build, len(lines))


class SummarizeLogsInput(BaseModel):
    """Which run, which components, how far back."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    components: list[Component] | None = Field(default=None, description=(
        "Components to read. Default: orchestrator, trainer, inference and every env server (SFT runs: trainer and "
        "env servers)."))
    since_seconds: int | None = Field(default=None, ge=60, le=86400, description=(
        "Only the last N seconds (60..86400). Default: the whole run, as far back as the logs API reaches (24 h)."))


class LogSignature(BaseModel):
    """One distinct message: lines of one component and level equal once numbers and ids are masked."""

    component: str = Field(description="orchestrator, trainer, inference or env-server/<name>.")
    level: str = Field(description="ERROR (or CRITICAL) or WARNING.")
    pattern: str = Field(description="The message with numbers (<n>), ids (<id>, <hex>, <uuid>), times masked.")
    example: str | None = Field(default=None, description="One real message (clipped; left out when the budget is "
                                                          "tight).")
    count: int = Field(description="Lines with this signature in the window read.")
    count_is_lower_bound: bool = Field(default=False, description=(
        "True when a cap cut the read (warnings: their one read was full; errors: a minute held over 5,000)."))
    first_seen: str | None = Field(default=None, description="Timestamp of the first line (UTC).")
    last_seen: str | None = Field(default=None, description="Timestamp of the last line (UTC).")
    traceback: str | None = Field(default=None, description="One traceback of the signature (clipped), if any.")


class StreamReach(BaseModel):
    """How one component's (or env server's) logs were read."""

    component: str = Field(description="orchestrator, trainer, inference or env-server/<name>.")
    read: bool = Field(description="False when the logs could not be read (not started, or an error).")
    error_lines: int = Field(default=0, description="ERROR lines read.")
    warning_lines: int = Field(default=0, description="WARNING lines read (one capped read).")
    requests: int = Field(default=0, description="Reads it took.")
    note: str | None = Field(default=None, description="Why not read, or where a cap cut it.")


class SummarizeLogsResult(BaseModel):
    """Every distinct error of a run's logs that the logs API can return, with counts and times."""

    run_id: str = Field(description="Run id.")
    status: str = Field(description="Run status when read.")
    looked_back_seconds: int | None = Field(default=None, description=(
        "How far back the search looked (seconds before now, at most 86400); null when only the newest lines "
        "could be read."))
    looked_back_to: str | None = Field(default=None, description="The oldest time searched (UTC).")
    covers_whole_run: bool = Field(default=False, description=(
        "True when the search reached back to the run's start and no cap cut it: every ERROR line was read."))
    caps: list[str] = Field(default_factory=list, description="Every place a cap of the logs API cut the reading.")
    errors: list[LogSignature] = Field(default_factory=list, description=(
        "Distinct ERROR signatures, all of them, oldest first seen first."))
    warnings: list[LogSignature] = Field(default_factory=list, description=(
        "Distinct WARNING signatures (the newest 5,000 warnings of each component), as the budget allows."))
    streams: list[StreamReach] = Field(default_factory=list, description="How each component was read.")
    truncated: bool = Field(default=False, description=(
        "True when tracebacks, examples, warnings or (last) errors were cut to fit 6,000 characters."))
    omitted: int = Field(default=0, description="Signatures left out (warnings first).")
    narrow_hint: str | None = Field(default=None, description="How to see what was left out.")


def _lower_bound(sig: Signature, lower: set[tuple[str, str]], capped: dict[str, list[str]]) -> bool:
    """True when a cap cut lines of ``sig``: its stream's one read of that level was full, or its time span
    overlaps a minute no read could cover."""
    if (sig.component, sig.level) in lower:
        return True
    first, last = sig.first_seen or "", sig.last_seen or "\uffff"
    return any(first[:len(p)] <= p <= last[:len(p)] for p in capped.get(sig.component, []))


def _view(sig: Signature, traceback_chars: int, example_chars: int, lower_bound: bool) -> LogSignature:
    return LogSignature(
        component=sig.component, level=sig.level, pattern=head(sig.pattern, 200),
        example=head(sig.example, example_chars) if example_chars and sig.example != sig.pattern else None,
        count=sig.count, count_is_lower_bound=lower_bound, first_seen=sig.first_seen, last_seen=sig.last_seen,
        traceback=traceback_end(sig.traceback, traceback_chars) if sig.traceback and traceback_chars else None)


#: Detail levels tried in turn until the digest fits: (traceback chars, example chars, warnings kept).
_LADDER = ((600, 200, None), (400, 160, 12), (300, 120, 6), (200, 100, 3), (160, 0, 0), (100, 0, 0), (0, 0, 0))


@tool
def summarize_logs(inp: SummarizeLogsInput, ctx: Context) -> SummarizeLogsResult:
    """Find every distinct error signature of a run that the logs API can return, in one digest.

    Per component and env server (names from ``/env-servers``, else the run's environments):
    every ERROR line of the window (from the run's start, at most the API's 24 h) through a
    :class:`~tools.monitor._logreads.Sweep` (one request, or time slices when a read comes back
    full), and one read of the newest 5,000 WARNING lines. A run that ended more than 24 h ago
    can only be read unfiltered: its newest 5,000 lines per component. Signatures mask numbers
    and ids (:func:`tools.monitor.normalise`); each has its count, first and last time, component
    and one traceback. The result says how far back it looked and every cap that cut it, and
    stays within 6,000 characters (tracebacks, examples and warnings shrink first). Errors:
    ``not_found``, the platform codes (a component that cannot be read is reported in ``streams``;
    once the logs API has not answered one, after its retries, the rest are reported not tried, so
    an outage costs one stream's retries, not every stream's).
    """
    platform = ctx.platform()
    run = require_run(ctx, inp.run_id)
    now = server_now(platform)
    table, caps, reaches = Signatures(), [], []
    lower: set[tuple[str, str]] = set()  # (component, level) whose counts are all lower bounds
    capped: dict[str, list[str]] = {}  # component -> minutes (timestamp prefixes) a read could not cover
    window = inp.since_seconds or window_seconds(run.started_at, now)
    ended_long_ago = run.completed_at is not None and (now - run.completed_at).total_seconds() > MAX_SINCE
    looked_back: int | None = None if ended_long_ago else window
    if run.started_at is not None and not ended_long_ago and inp.since_seconds is None and \
            (now - run.started_at).total_seconds() > MAX_SINCE:
        caps.append(f"The run started {minutes((now - run.started_at).total_seconds())} ago: lines older than 24 h "
                    f"(before {(now - timedelta(seconds=MAX_SINCE)).isoformat(timespec='seconds')}) are beyond the "
                    "logs API's search window.")
    if run.completed_at is not None and ended_long_ago:
        caps.append(f"The run ended {minutes((now - run.completed_at).total_seconds())} ago, more than the 24 h the "
                    "logs API searches: only the newest 5,000 lines of each component were read (the orchestrator's "
                    "200).")
    outage: perr.PlatformError | None = None  # the logs API did not answer: the other streams are not tried
    for target in targets(platform, run, inp.components):
        reach = StreamReach(component=target.label, read=outage is None)
        reaches.append(reach)
        if outage is not None:
            reach.note = f"not tried: the logs API was unavailable for an earlier stream ({outage.code})"
            continue
        try:
            if ended_long_ago:
                reach.requests += 1
                for line in parse_logs(fetch(platform, run.id, target, MAX_TAIL).logs).lines:
                    table.add(target.label, line)
                    reach.error_lines += line.level in ("ERROR", "CRITICAL")
                    reach.warning_lines += line.level == "WARNING"
                continue
            sweep = Sweep(platform, run.id, target, "ERROR", window, now)
            for text in sweep:
                for line in parse_logs(text).lines:
                    table.add(target.label, line)
                    reach.error_lines += 1
            warning_read = fetch(platform, run.id, target, MAX_TAIL, level="WARNING", since=window)
            reach.requests = sweep.reads + 1
            for line in parse_logs(warning_read.logs).lines:
                table.add(target.label, line)
                reach.warning_lines += 1
            if len(warning_read.lines()) >= MAX_TAIL:
                lower.add((target.label, "WARNING"))
                reach.note = "over 5,000 warnings: only the newest 5,000 read"
            if sweep.capped:
                capped[target.label] = sweep.capped
                where = ", ".join(sweep.capped[:3]) + (" ..." if len(sweep.capped) > 3 else "")
                caps.append(f"{target.label}: more than 5,000 ERROR lines within a minute ({where}): error counts "
                            "there are lower bounds.")
            if sweep.sliced:
                reach.note = (reach.note + "; " if reach.note else "") + (
                    f"over 5,000 ERROR lines: read in {sweep.reads} time slices")
        except perr.PlatformError as exc:
            if isinstance(exc, perr.NotFound) and not not_started(exc) and exc.service_code == "not_the_api":
                raise
            reach.read = False
            reach.note = "not started yet: no logs" if not_started(exc) else f"could not read: {exc.message}"
            if isinstance(exc, perr.RateLimited) or isinstance(exc, perr.Unavailable) and exc.status in (
                    None, 502, 503, 504):  # its retries are spent; every other stream would wait as long again
                outage = exc
    covered = run.started_at is not None and looked_back is not None and not caps and all(r.read for r in reaches) \
        and (now - run.started_at).total_seconds() <= looked_back
    capped_warnings = sorted(c for c, level in lower if level == "WARNING")
    if capped_warnings:
        caps.append(f"Warnings of {', '.join(capped_warnings)}: over 5,000 each; only the newest 5,000 were read "
                    "(their counts are lower bounds; errors are read in full).")
    errors = table.found(("CRITICAL", "ERROR"))
    warnings = table.found(("WARNING",))

    def build(rung: tuple[int, int, int | None], keep: int) -> SummarizeLogsResult:
        tb, ex, kept_warnings = rung
        shown_warnings = warnings if kept_warnings is None else warnings[:kept_warnings]
        omitted = len(warnings) - len(shown_warnings) + len(errors) - keep
        kept = {id(s) for s in sorted(errors, key=lambda s: -s.count)[:keep]}  # the rarest go first
        shown_errors = [s for s in errors if id(s) in kept]
        cut = omitted > 0 or rung != _LADDER[0]
        return SummarizeLogsResult(
            run_id=run.id, status=run.status, looked_back_seconds=looked_back,
            looked_back_to=(now - timedelta(seconds=looked_back)).isoformat(timespec="seconds")
            if looked_back else None, covers_whole_run=covered, caps=caps,
            errors=[_view(s, tb, ex, _lower_bound(s, lower, capped)) for s in shown_errors],
            warnings=[_view(s, 0, 0, _lower_bound(s, lower, capped)) for s in shown_warnings],
            streams=reaches, truncated=cut, omitted=omitted,
            narrow_hint="Read one signature in full with mf_get_logs (component, level ERROR, search text, "
                        "since_seconds), or keep everything with mf_export_logs." if cut else None)

    for rung in _LADDER:
        result = build(rung, len(errors))
        if json_chars(result) <= SUMMARY_BUDGET_CHARS:
            return result
    return fit_largest(lambda k: build(_LADDER[-1], k), len(errors), SUMMARY_BUDGET_CHARS)
