"""Log tools: a bounded tail of one component's logs (:func:`get_logs`) and a digest of every
component's recent errors and warnings (:func:`summarize_logs`).

Source: GET ``/rft/runs/{id}/logs`` and ``/env-servers/logs`` (reference/prime-api.md §5.5,
§5.6); lines are parsed as ``prime train logs`` 0.18.0 reads them (:mod:`._logtext`).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tools.core import OUTPUT_BUDGET_CHARS, RUN_ID, Context, fit_largest, json_chars, require_run, tool
from tools.monitor._logtext import Digest, digest, excerpt, parse_logs
from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.client import PlatformClient

Component = Literal["orchestrator", "trainer", "inference", "env-server"]
Level = Literal["ERROR", "WARNING", "SUCCESS", "INFO", "DEBUG"]
_STARTUP_MARKERS = ("queued", "pending", "starting", "initializing", "not started", "not available yet",
                    "logs are not available", "logs not available")
_ENV_INDEX = re.compile(r"^(?P<name>.+)/(?P<index>\d+)$")
MAX_MESSAGE_CHARS = 2000
MAX_TRACEBACK_CHARS = 1500
#: Lines read per component by mf_summarize_logs (the server allows 5000).
SUMMARY_TAIL_LINES = 2000


def _not_started(exc: perr.PlatformError) -> bool:
    """The CLI's "logs are not available yet" test: a 404 mentioning queued/pending/starting/..."""
    message = exc.message.lower()
    return isinstance(exc, perr.NotFound) and any(marker in message for marker in _STARTUP_MARKERS)


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
    note: str | None = Field(default=None, description="Why logs are unavailable or empty, and what to do.")
    lines: list[LogLine] = Field(default_factory=list, description="Visible lines, oldest first.")
    received_lines: int = Field(default=0, description="Raw lines the platform returned.")
    hidden_progress_lines: int = Field(default=0, description=(
        "Progress entries and unfinished tqdm bars hidden (as the CLI does)."))
    truncated: bool = Field(default=False, description="True when older lines were left out to fit the output budget.")
    omitted: int = Field(default=0, description="Older visible lines left out.")
    narrow_hint: str | None = Field(default=None, description="How to ask for less.")


def _fetch_logs(platform: PlatformClient, run_id: str, component: str, env_name: str | None, tail: int,
                search: str | None = None, regex: bool = False, level: str | None = None,
                since: int | None = None) -> wire.RunLogs:
    """The CLI's route choice (§5.5): ``name/N`` on a non-dedicated run uses ``/env-server-logs``."""
    filters = {"search": search, "regex": regex, "level": level, "since_seconds": since}
    if component == "env-server" and env_name and (m := _ENV_INDEX.match(env_name)):
        try:
            dedicated = platform.get_run(run_id).kind == "DEDICATED_FULL_FT"
        except perr.PlatformError:
            dedicated = False
        if not dedicated:
            return platform.get_env_server_logs(run_id, env_name=m["name"], env_index=int(m["index"]),
                                                tail_lines=tail, **filters)
        env_name = m["name"]
    return platform.get_logs(run_id, tail_lines=tail, component=None if component == "orchestrator" else component,
                             env_name=env_name if component == "env-server" else None, **filters)


@tool
def get_logs(inp: GetLogsInput, ctx: Context) -> GetLogsResult:
    """Read a bounded tail of one component's logs (GET ``/rft/runs/{id}/logs``).

    Lines are parsed as the CLI does (:mod:`tools.monitor._logtext`): JSON entries with prefixes
    stripped, progress entries and unfinished tqdm bars hidden. The newest lines that fit
    the output budget are kept. A run that has not started answers 404 "not available
    yet": that is a normal result with ``available=false`` (one request, no polling).
    Note: unfiltered orchestrator reads come from the platform's 200-line snapshot; add
    ``since_seconds`` to search further back. Errors: ``not_found``, the platform codes.
    """
    component = inp.component or ("env-server" if inp.env_name else "orchestrator")
    label = f"env-server/{inp.env_name}" if component == "env-server" else component
    base = {"run_id": inp.run_id, "component": component, "env_name": inp.env_name}
    try:
        logs = _fetch_logs(ctx.platform(), inp.run_id, component, inp.env_name, inp.tail_lines, inp.search,
                           inp.regex, inp.level, inp.since_seconds)
    except perr.PlatformError as exc:
        if not _not_started(exc):
            if isinstance(exc, perr.NotFound):
                require_run(ctx, inp.run_id)  # an unknown run gives the not_found with its fix
            raise
        return GetLogsResult(**base, available=False,
                             note=f"Logs are not available yet: the run has not started ({exc.message}). Wait until "
                                  "it runs (mf_wait_for_run, until running), then read the logs.")

    parsed = parse_logs(logs.logs)
    lines = [LogLine(timestamp=ln.timestamp, level=ln.level, component=label, source=ln.source,
                     message=excerpt(ln.message, MAX_MESSAGE_CHARS),
                     exception=excerpt(ln.exception, MAX_TRACEBACK_CHARS) if ln.exception else None)
             for ln in parsed.lines][-inp.tail_lines:]
    note = None if lines else "No log lines matched." if (inp.search or inp.level or inp.since_seconds) else \
        "No log lines yet."

    def build(k: int) -> GetLogsResult:
        cut = len(lines) - k
        hint = None
        if cut:
            hint = (f"Showing the newest {k} of {len(lines)} lines. Narrow it with a level (ERROR), a search text, "
                    "since seconds or fewer tail lines, or summarize the logs first (mf_summarize_logs).")
        return GetLogsResult(**base, available=True, note=note, lines=lines[cut:], received_lines=len(logs.lines()),
                             hidden_progress_lines=parsed.hidden_progress, truncated=cut > 0, omitted=cut,
                             narrow_hint=hint)

    return fit_largest(build, len(lines))


class SummarizeLogsInput(BaseModel):
    """Which run, which components, how far back."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    components: list[Component] | None = Field(default=None, description=(
        "Components to read. Default: orchestrator, trainer, inference and every env server (SFT runs: trainer and "
        "env servers)."))
    since_seconds: int | None = Field(default=None, ge=60, le=86400, description=(
        f"Only the last N seconds (60..86400). Default: the newest {SUMMARY_TAIL_LINES} lines of each component "
        "(the orchestrator's unfiltered snapshot holds 200)."))


class LevelCounts(BaseModel):
    """Lines per level."""

    critical: int = Field(default=0, description="CRITICAL lines.")
    error: int = Field(default=0, description="ERROR lines.")
    warning: int = Field(default=0, description="WARNING lines.")
    success: int = Field(default=0, description="SUCCESS lines.")
    info: int = Field(default=0, description="INFO lines.")
    debug: int = Field(default=0, description="DEBUG lines.")
    other: int = Field(default=0, description="Plain lines naming no level.")


class MessageGroup(BaseModel):
    """Error/warning lines whose messages are equal once numbers and ids are masked."""

    level: str = Field(description="CRITICAL, ERROR or WARNING.")
    pattern: str = Field(description=(
        "The message with numbers (<n>), ids (<id>, <hex>, <uuid>) and times (<time>) masked."))
    example: str = Field(description="One real message of the group (at most 300 characters).")
    count: int = Field(description="Lines in the group.")
    first_seen: str | None = Field(default=None, description="Timestamp of the first line.")
    last_seen: str | None = Field(default=None, description="Timestamp of the last line.")


class ComponentSummary(BaseModel):
    """Digest of one component's recent logs."""

    component: str = Field(description="orchestrator, trainer, inference or env-server/<name>.")
    available: bool = Field(description="False when the logs could not be read (not started, or an error).")
    note: str | None = Field(default=None, description="Why not available.")
    lines_read: int = Field(default=0, description="Visible lines digested.")
    counts: LevelCounts = Field(default_factory=LevelCounts, description="Lines per level.")
    first_timestamp: str | None = Field(default=None, description="Oldest line digested.")
    last_timestamp: str | None = Field(default=None, description="Newest line digested.")
    messages: list[MessageGroup] = Field(default_factory=list, description=(
        "Distinct error and warning messages, most severe then most frequent first."))
    messages_omitted: int = Field(default=0, description="Distinct messages left out to fit the budget.")
    last_traceback: str | None = Field(default=None, description="The newest traceback (start and end kept).")


class SummarizeLogsResult(BaseModel):
    """Per-component log digests of a run."""

    run_id: str = Field(description="Run id.")
    status: str = Field(description="Run status when read.")
    since_seconds: int | None = Field(default=None, description="Time window used, if any.")
    components: list[ComponentSummary] = Field(description="One digest per component (env servers one each).")
    truncated: bool = Field(default=False, description="True when messages or tracebacks were cut to fit the budget.")
    omitted: int = Field(default=0, description="Distinct messages left out in all.")
    narrow_hint: str | None = Field(default=None, description="How to see more.")


def _env_names(platform: PlatformClient, run: wire.RLRun) -> list[str]:
    names = [s.env_name for s in platform.list_env_servers(run.id) if s.env_name]
    return list(dict.fromkeys(names or run.environment_labels()))


@tool
def summarize_logs(inp: SummarizeLogsInput, ctx: Context) -> SummarizeLogsResult:
    """Digest recent logs of every component instead of pulling them.

    One GET ``/rft/runs/{id}/logs`` per component (``tail_lines`` 2000, ``since_seconds``
    when given) and per environment server (names from ``/env-servers``, else the run's
    environments). Per component: counts by level, distinct ERROR/WARNING messages
    (numbers and ids masked, see :func:`tools.monitor.normalise`) with count and first/last
    seen, the newest traceback. Errors: ``not_found``, the platform codes (a component
    that cannot be read is reported in its digest instead).
    """
    platform = ctx.platform()
    run = require_run(ctx, inp.run_id)
    wanted = inp.components or (["trainer", "env-server"] if run.is_sft else
                                ["orchestrator", "trainer", "inference", "env-server"])
    targets: list[tuple[str, str | None]] = []
    for component in dict.fromkeys(wanted):
        if component == "env-server":
            targets += [("env-server", name) for name in _env_names(platform, run)]
        else:
            targets.append((component, None))
    digests: list[tuple[ComponentSummary, Digest | None]] = []
    for component, env_name in targets:
        label = f"env-server/{env_name}" if env_name else component
        try:
            logs = _fetch_logs(platform, run.id, component, env_name, SUMMARY_TAIL_LINES, since=inp.since_seconds)
        except perr.PlatformError as exc:
            note = "Not started yet: no logs." if _not_started(exc) else f"Could not read: {exc.message}"
            digests.append((ComponentSummary(component=label, available=False, note=note), None))
            continue
        lines = parse_logs(logs.logs).lines
        d = digest(lines)
        counts = LevelCounts(**{k.lower(): v for k, v in d.counts.items() if k.lower() in LevelCounts.model_fields})
        counts.other += sum(v for k, v in d.counts.items() if k.lower() not in LevelCounts.model_fields)
        digests.append((ComponentSummary(component=label, available=True, lines_read=len(lines), counts=counts,
                                         first_timestamp=d.first_timestamp, last_timestamp=d.last_timestamp), d))
    most = max((len(d.groups) for _, d in digests if d), default=0)

    def build(k: int, traceback_chars: int = MAX_TRACEBACK_CHARS) -> SummarizeLogsResult:
        comps, omitted = [], 0
        for summary, d in digests:
            if d is not None:
                groups = d.groups[:k]
                omitted += len(d.groups) - len(groups)
                summary = summary.model_copy(update={
                    "messages": [MessageGroup(level=g.level, pattern=g.pattern, example=excerpt(g.example, 300),
                                              count=g.count, first_seen=g.first_seen, last_seen=g.last_seen)
                                 for g in groups],
                    "messages_omitted": len(d.groups) - len(groups),
                    "last_traceback": excerpt(d.last_traceback, traceback_chars) if d.last_traceback else None})
            comps.append(summary)
        cut = omitted > 0 or traceback_chars < MAX_TRACEBACK_CHARS
        return SummarizeLogsResult(
            run_id=run.id, status=run.status, since_seconds=inp.since_seconds, components=comps, truncated=cut,
            omitted=omitted,
            narrow_hint="Ask for fewer components, or read one component's errors (mf_get_logs with a level or a "
                        "search text)." if cut else None)


    result = fit_largest(build, most)
    if json_chars(result) > OUTPUT_BUDGET_CHARS:
        result = build(0, traceback_chars=400)
    return result
