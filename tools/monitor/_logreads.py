"""Reading as much of a run's logs as the logs API can return, for the tools that need the whole
run (:func:`~tools.monitor.logs.summarize_logs`, :func:`~tools.monitor.export.export_logs`).

The API (GET ``/rft/runs/{id}/logs``, reference/prime-api.md §5.5) caps a read at ``tail_lines``
5,000 (the newest), a filtered read (``level``, ``search``, ``since_seconds``) at a window of the
last ``since_seconds`` (60..86,400; 900 when not given), and has no offset. So older lines are
reached by narrowing, never by paging:

- a :class:`Sweep` reads one component's lines of one level (or all) in the last ``since``
  seconds with one request; when that read comes back full (5,000 lines: more were left out),
  it reads the window again in time slices, which the API cannot express directly (its
  window always ends now) but its ``search`` can: a regular expression on the line's JSON
  ``timestamp`` (``"timestamp":"2026-08-20T14:``) picks one hour; a full hour is split in
  ten-minute slices, those in minutes. A minute that is still full is a cap the sweep reports
  (the counts there are lower bounds). Slices are read oldest first, so lines come out in time
  order;
- lines older than 24 hours are beyond any filtered read: only an unfiltered read (the newest
  ``tail_lines`` lines of any age; the orchestrator's from a 200-line snapshot) reaches them.

Decisions where the platform is silent: ``search`` with ``regex=true`` is matched against the
line's text as served (the JSON object, prefixes included), as the emulator does; timestamps are
UTC ISO 8601 as prime-rl writes them. Plain-text lines carry no timestamp, so a sliced sweep
does not see them (it says so).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypedDict

from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.client import PlatformClient

#: The API's caps (prime-api.md §5.5): lines per read, and the seconds a filtered read looks back.
MAX_TAIL, MAX_SINCE, MIN_SINCE = 5000, 86400, 60
_STARTUP_MARKERS = ("queued", "pending", "starting", "initializing", "not started", "not available yet",
                    "logs are not available", "logs not available")
_ENV_INDEX = re.compile(r"^(?P<name>.+)/(?P<index>\d+)$")
#: Slice widths, coarsest first, as timestamp-prefix lengths of "YYYY-MM-DDTHH:MM:SS".
_SLICES = ((13, timedelta(hours=1), "hour"), (15, timedelta(minutes=10), "ten minutes"),
           (16, timedelta(minutes=1), "minute"))


def not_started(exc: perr.PlatformError) -> bool:
    """The CLI's "logs are not available yet" test: a 404 mentioning queued/pending/starting/..."""
    message = exc.message.lower()
    return isinstance(exc, perr.NotFound) and any(marker in message for marker in _STARTUP_MARKERS)


@dataclass(frozen=True)
class Target:
    """One log stream: a component, or one env server (``env_name``)."""

    component: str
    env_name: str | None = None

    @property
    def label(self) -> str:
        """``trainer``, or ``env-server/<name>``."""
        return f"env-server/{self.env_name}" if self.env_name else self.component


def env_names(platform: PlatformClient, run: wire.RLRun) -> list[str]:
    """The run's env servers (GET ``/env-servers``), else its environments' labels."""
    names = [s.env_name for s in platform.list_env_servers(run.id) if s.env_name]
    return list(dict.fromkeys(names or run.environment_labels()))


def targets(platform: PlatformClient, run: wire.RLRun, components: Sequence[str] | None = None) -> list[Target]:
    """Every stream of the run (orchestrator, trainer, inference, each env server; SFT: trainer and env
    servers), or those of ``components``."""
    wanted = components or (["trainer", "env-server"] if run.is_sft else
                            ["orchestrator", "trainer", "inference", "env-server"])
    out: list[Target] = []
    for component in dict.fromkeys(wanted):
        if component == "env-server":
            out += [Target("env-server", name) for name in env_names(platform, run)]
        else:
            out.append(Target(component))
    return out


class _Filters(TypedDict):
    search: str | None
    regex: bool
    level: str | None
    since_seconds: int | None


def fetch(platform: PlatformClient, run_id: str, target: Target, tail: int, *, search: str | None = None,
          regex: bool = False, level: str | None = None, since: int | None = None) -> wire.RunLogs:
    """One read, routed as the CLI does (§5.5): ``name/N`` on a non-dedicated run uses ``/env-server-logs``."""
    filters = _Filters(search=search, regex=regex, level=level, since_seconds=since)
    env_name = target.env_name
    if target.component == "env-server" and env_name and (m := _ENV_INDEX.match(env_name)):
        try:
            dedicated = platform.get_run(run_id).kind == "DEDICATED_FULL_FT"
        except perr.PlatformError:
            dedicated = False
        if not dedicated:
            return platform.get_env_server_logs(run_id, env_name=m["name"], env_index=int(m["index"]),
                                                tail_lines=tail, **filters)
        env_name = m["name"]
    component = None if target.component == "orchestrator" else target.component
    return platform.get_logs(run_id, tail_lines=tail, component=component,
                             env_name=env_name if target.component == "env-server" else None, **filters)


def window_seconds(started: datetime | None, now: datetime) -> int:
    """``since_seconds`` that covers a run started at ``started`` (a minute of margin), within the API's range."""
    if started is None:
        return MAX_SINCE
    return max(MIN_SINCE, min(MAX_SINCE, math.ceil((now - started).total_seconds()) + 60))


@dataclass
class Sweep:
    """Every line of ``level`` (None: all) of one stream in the last ``since`` seconds that the API can
    return (see the module doc). Iterate it for the ``logs`` texts, oldest first; afterwards
    ``reads``, ``lines``, ``sliced`` and ``capped`` say what it took and where a cap still cut."""

    platform: PlatformClient
    run_id: str
    target: Target
    level: str | None
    since: int
    now: datetime
    tail: int = MAX_TAIL
    reads: int = 0
    lines: int = 0
    sliced: bool = False
    capped: list[str] = field(default_factory=list)

    def _read(self, since: int, prefix: str | None = None) -> str:
        self.reads += 1
        search = f'"timestamp": ?"{prefix}' if prefix else None
        return fetch(self.platform, self.run_id, self.target, self.tail, search=search, regex=bool(prefix),
                     level=self.level, since=since).logs

    def _full(self, text: str) -> bool:
        return text.count("\n") + 1 >= self.tail if text else False

    def __iter__(self) -> Iterator[str]:
        text = self._read(self.since)
        if not self._full(text):
            self.lines += text.count("\n") + 1 if text else 0
            yield text
            return
        self.sliced = True
        yield from self._slices(self.now - timedelta(seconds=self.since), self.now + timedelta(microseconds=1), 0)

    def _slices(self, lo: datetime, hi: datetime, depth: int) -> Iterator[str]:
        """The window ``[lo, hi)`` in slices of ``_SLICES[depth]``, oldest first; a full slice is split further."""
        width, step, _ = _SLICES[depth]
        start = _floor(lo, step)
        while start < hi:
            end = start + step
            prefix = start.strftime("%Y-%m-%dT%H:%M:%S")[:width]
            since = max(MIN_SINCE, min(self.since, math.ceil((self.now - start).total_seconds()) + 1))
            text = self._read(since, prefix)
            if self._full(text) and depth + 1 < len(_SLICES):
                yield from self._slices(max(start, lo), min(end, hi), depth + 1)
            else:
                if self._full(text):
                    self.capped.append(prefix)
                self.lines += text.count("\n") + 1 if text else 0
                yield text
            start = end


def _floor(moment: datetime, step: timedelta) -> datetime:
    """``moment`` rounded down to a multiple of ``step`` within its day (hours, ten minutes, minutes)."""
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight + step * ((moment - midnight) // step)
