"""Run log lines and the ``/rft/runs/{id}/logs`` query (tail, search, regex, level, since).

Lines are stored as the exact text the platform returns: JSON objects like prime-rl's
(``{"timestamp","level","message","tag"}``), some with a ``[rank0]: `` prefix, and
``type: progress`` lines the CLI hides.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .errors import ApiError

COMPONENTS = ("orchestrator", "trainer", "inference", "env-server")
LEVELS = ("ERROR", "WARNING", "SUCCESS", "INFO", "DEBUG")
#: Unfiltered reads come from a snapshot of this many lines (prime-api.md §5.5).
SNAPSHOT_LINES = 200
MAX_TAIL = 5000
DEFAULT_SINCE_SECONDS = 900
MAX_SINCE_SECONDS = 86400


@dataclass
class LogLine:
    """One stored line: when, which pod, its level, and the raw text served."""

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


def _int_param(params: dict[str, str], name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ApiError(422, [{"loc": ["query", name], "msg": "Input should be a valid integer",
                              "type": "int_parsing"}]) from None


def query_logs(lines: list[LogLine], now: float, params: dict[str, str], *, primary: str,
               env_names: list[str]) -> str:
    """The ``logs`` text for a request's query parameters (``component`` defaults to ``primary``)."""
    component = params.get("component") or primary
    if component not in COMPONENTS:
        raise ApiError(400, f"Unknown component '{component}'. Use one of: {', '.join(COMPONENTS)}")
    env_name = params.get("env_name")
    if component == "env-server" and env_name and env_name not in env_names:
        raise ApiError(404, f"No env server named '{env_name}' for this run")
    tail = _int_param(params, "tail_lines")
    tail = 1000 if tail is None else tail
    if not 1 <= tail <= MAX_TAIL:
        raise ApiError(422, [{"loc": ["query", "tail_lines"], "msg": f"Input should be between 1 and {MAX_TAIL}",
                              "type": "less_than_equal"}])
    since = _int_param(params, "since_seconds")
    if since is not None and not 60 <= since <= MAX_SINCE_SECONDS:
        raise ApiError(422, [{"loc": ["query", "since_seconds"], "msg": "Input should be between 60 and 86400",
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
    selected = [ln for ln in lines if ln.t <= now and ln.component == component
                and (component != "env-server" or not env_name or ln.env_name == env_name)]
    if filtered:
        # The search backend: a time window (default 15 min) and up to 5000 lines.
        window = since if since is not None else DEFAULT_SINCE_SECONDS
        selected = [ln for ln in selected if ln.t >= now - window]
        if level is not None:
            selected = [ln for ln in selected if ln.level == level]
        if pattern is not None:
            selected = [ln for ln in selected if pattern.search(ln.text)]
        elif search is not None:
            selected = [ln for ln in selected if search in ln.text]
    elif component == "orchestrator":
        tail = min(tail, SNAPSHOT_LINES)
    return "\n".join(ln.text for ln in selected[-tail:])
