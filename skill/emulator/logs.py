"""Run log lines and the ``/rft/runs/{id}/logs`` query (tail, search, regex, level, since).

Lines are the exact text the platform returns: JSON objects like prime-rl's
(``{"timestamp","level","message","tag"}``), some with a ``[rank0]: `` or ``[adminlog] ``
prefix, and ``type: progress`` lines the CLI hides. A run's lines come from several
sources (:class:`StoredLines`, the lines its events appended, and for a long run a
:class:`~skill.emulator.logvolume.LogVolume` generated on demand); each yields the lines of
one component newest first within a time window, and the query merges them.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from operator import attrgetter
from typing import Any, Protocol

from .errors import ApiError

COMPONENTS = ("orchestrator", "trainer", "inference", "env-server")
LEVELS = ("ERROR", "WARNING", "SUCCESS", "INFO", "DEBUG")
#: Unfiltered orchestrator reads come from a snapshot of this many lines (prime-api.md §5.5).
SNAPSHOT_LINES = 200
DEFAULT_TAIL = 1000
MAX_TAIL = 5000
DEFAULT_SINCE_SECONDS = 900
MIN_SINCE_SECONDS = 60
MAX_SINCE_SECONDS = 86400


@dataclass
class LogLine:
    """One line: when (simulated seconds), which pod, its level, and the raw text served."""

    t: float
    component: str
    env_name: str | None
    level: str
    text: str


def make_line(t: float, iso: str, component: str, level: str, message: str, *, env_name: str | None = None,
              prefix: str = "", kind: str | None = None, extra: dict[str, Any] | None = None) -> LogLine:
    """Build a JSON log line (``tag`` = component); ``env_name`` files env-server lines per env."""
    entry: dict[str, Any] = {"timestamp": iso, "level": level if kind is None else level.lower()}
    if kind:
        entry["type"] = kind
    entry["message"] = message
    entry["tag"] = component
    if extra:
        entry.update(extra)
    return LogLine(t, component, env_name, level.upper(), prefix + json.dumps(entry, separators=(",", ":")))


class LineSource(Protocol):
    """Where a run's lines come from."""

    def lines_desc(self, component: str, env_name: str | None, lo: float, hi: float,
                   level: str | None) -> Iterator[LogLine]:
        """Lines of ``component`` (one env server's if ``env_name``) with ``lo <= t <= hi`` and,
        if given, that ``level``, newest first."""
        ...


class StoredLines:
    """The lines a run's events appended (a list in time order)."""

    def __init__(self, lines: list[LogLine]) -> None:
        self.lines = lines

    def lines_desc(self, component: str, env_name: str | None, lo: float, hi: float,
                   level: str | None) -> Iterator[LogLine]:
        """See :class:`LineSource`."""
        picked = [ln for ln in self.lines if ln.component == component and lo <= ln.t <= hi
                  and (env_name is None or ln.env_name == env_name) and (level is None or ln.level == level)]
        picked.sort(key=attrgetter("t"))
        return reversed(picked)


def _int_param(params: dict[str, str], name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ApiError(422, [{"loc": ["query", name], "msg": "Input should be a valid integer",
                              "type": "int_parsing"}]) from None


def query_logs(sources: list[LineSource], now: float, params: dict[str, str], *, primary: str,
               env_names: list[str]) -> str:
    """The ``logs`` text for a request's query parameters (``component`` defaults to ``primary``).

    Unfiltered reads give the newest ``tail_lines`` (1-5000, default 1000; the orchestrator's
    at most 200, from its snapshot). A ``search``/``regex``/``level``/``since_seconds`` read
    goes to the search backend: lines of the last ``since_seconds`` (60-86400, default 900)
    that match, the newest ``tail_lines`` of them. No offset: older lines are reached only by
    narrowing the filters. 400/404/422 as the platform answers.
    """
    component = params.get("component") or primary
    if component not in COMPONENTS:
        raise ApiError(400, f"Unknown component '{component}'. Use one of: {', '.join(COMPONENTS)}")
    env_name = params.get("env_name") or None
    if component == "env-server" and env_name and env_name not in env_names:
        raise ApiError(404, f"No env server named '{env_name}' for this run")
    tail = _int_param(params, "tail_lines")
    tail = DEFAULT_TAIL if tail is None else tail
    if not 1 <= tail <= MAX_TAIL:
        raise ApiError(422, [{"loc": ["query", "tail_lines"], "msg": f"Input should be between 1 and {MAX_TAIL}",
                              "type": "less_than_equal"}])
    since = _int_param(params, "since_seconds")
    if since is not None and not MIN_SINCE_SECONDS <= since <= MAX_SINCE_SECONDS:
        raise ApiError(422, [{"loc": ["query", "since_seconds"],
                              "msg": f"Input should be between {MIN_SINCE_SECONDS} and {MAX_SINCE_SECONDS}",
                              "type": "less_than_equal"}])
    search, level = params.get("search"), params.get("level")
    regex = (params.get("regex") or "").lower() in ("true", "1")
    filtered = search is not None or level is not None or since is not None
    if level is not None:
        level = level.upper()
        if level not in LEVELS:
            raise ApiError(422, [{"loc": ["query", "level"], "msg": f"Input should be one of {', '.join(LEVELS)}",
                                  "type": "enum"}])
    pattern = None
    if search is not None and regex:
        try:
            pattern = re.compile(search)
        except re.error as exc:
            raise ApiError(400, f"Invalid regex: {exc}") from None
    if not filtered and component == "orchestrator":
        tail = min(tail, SNAPSHOT_LINES)
    # The search backend looks back a time window (default 15 min); unfiltered reads do not.
    lo = now - (since if since is not None else DEFAULT_SINCE_SECONDS) if filtered else -math.inf
    scope = env_name if component == "env-server" else None
    lines: Iterator[LogLine] = heapq.merge(*(s.lines_desc(component, scope, lo, now, level) for s in sources),
                                           key=attrgetter("t"), reverse=True)
    if pattern is not None:
        lines = (ln for ln in lines if pattern.search(ln.text))
    elif search is not None:
        lines = (ln for ln in lines if search in ln.text)
    picked = list(islice(lines, tail))
    picked.reverse()
    return "\n".join(ln.text for ln in picked)
