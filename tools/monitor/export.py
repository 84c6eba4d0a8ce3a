"""``mf_export_logs``: a run's logs, every component and env server, as much as the logs API
returns, into files scrubbed of secrets, with a manifest; resumable, with progress.

Source: GET ``/rft/runs/{id}/logs`` (reference/prime-api.md §5.5), read through
:class:`~tools.monitor._logreads.Sweep`: within the API's 24 h window every line it can return
(time slices when a read comes back full); for a run that ended more than 24 h ago only the
newest 5,000 lines per component (the orchestrator's 200) remain reachable. Logs live as long as
the run's pods and the platform keep them: export while they exist.

Layout: ``dest/<component>.log`` (``env-server-<name>.log`` per env server), the lines exactly as
served (JSON objects, prefixes kept), oldest first, with every known secret value replaced
(the context scrubs platform answers on arrival); ``dest/manifest.json``: per file its lines,
bytes, sha256, first and last timestamp, the reads it took, and where a cap cut it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tools.core import RUN_ID, Context, require_run, tool
from tools.errors import Call, call, fail
from tools.monitor._clock import server_now
from tools.monitor._logreads import MAX_SINCE, MAX_TAIL, Sweep, Target, fetch, not_started, targets, window_seconds
from tools.monitor._logtext import Line, parse_json_line
from tools.monitor.logs import Component
from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.files import is_partial, write_atomic

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "model-factory-logs/1"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ExportLogsInput(BaseModel):
    """Which run, where to, and how."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    dest: str = Field(min_length=1, max_length=1000, description=(
        "Folder to write (created if missing): new, empty, or one this tool wrote for the same run."))
    components: list[Component] | None = Field(default=None, description=(
        "Components to export. Default: all (orchestrator, trainer, inference and every env server)."))
    resume: bool = Field(default=True, description=(
        "Keep files an earlier export of this finished run completed (sha256 checked); false: read everything "
        "again. Files of a run that was still active are always read again (its logs grew)."))


class ExportedStream(BaseModel):
    """One component's (or env server's) log file."""

    component: str = Field(description="orchestrator, trainer, inference or env-server/<name>.")
    file: str | None = Field(default=None, description="File name in dest; null when nothing could be read.")
    lines: int = Field(default=0, description="Lines in the file.")
    bytes: int = Field(default=0, description="Size of the file in bytes.")
    sha256: str | None = Field(default=None, description="sha256 of the file.")
    first_timestamp: str | None = Field(default=None, description="Oldest line's timestamp (UTC).")
    last_timestamp: str | None = Field(default=None, description="Newest line's timestamp (UTC).")
    requests: int = Field(default=0, description="Reads it took.")
    complete: bool = Field(default=False, description=(
        "True when every line the run logged for it was read: the window reached the run's start and no cap cut."))
    cut: list[str] = Field(default_factory=list, description="Where a cap of the logs API cut this file.")
    kept_from_earlier: bool = Field(default=False, description="True when an earlier export's file was kept.")
    note: str | None = Field(default=None, description=(
        "Why it could not be read; or that it was read in time slices, which see JSON lines only (a plain-text "
        "line without a timestamp may be missing)."))


class ExportLogsResult(BaseModel):
    """What was written, and where the logs API's caps cut it."""

    run_id: str = Field(description="Run id.")
    status: str = Field(description="Run status when exported.")
    dest: str = Field(description="Absolute folder written.")
    manifest_path: str = Field(description=f"dest/{MANIFEST}: the files, their sha256 and where caps cut them.")
    looked_back_seconds: int | None = Field(default=None, description=(
        "How far back the reads looked (seconds before now, at most 86400); null when only the newest lines of each "
        "component could be read."))
    streams: list[ExportedStream] = Field(description="One file per component and env server.")
    lines_written: int = Field(description="Lines in all files.")
    bytes_written: int = Field(description="Bytes written by this call (files kept from earlier not counted).")
    complete: bool = Field(description="True when every file is complete.")
    next_step: str = Field(description="What to do next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


def _file_name(target: Target) -> str:
    return f"env-server-{_UNSAFE.sub('_', target.env_name)}.log" if target.env_name else f"{target.component}.log"


def _prepare(dest: Path, run_id: str) -> tuple[Path, dict[str, Any]]:
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise fail("bad_arguments", f"dest {str(dest)!r} exists and is not a folder.",
                   "Pass a new folder path (it is created) or one this tool wrote before.")
    dest = dest.resolve()
    manifest = dest / MANIFEST
    if not manifest.is_file():
        if dest.exists() and any(not is_partial(p) for p in dest.iterdir()):
            raise fail("bad_arguments", f"dest {str(dest)!r} is not empty and holds no {MANIFEST} of this tool; "
                       "nothing was written.", "Pass a new or empty folder (e.g. ./logs/<run_id>).")
        return dest, {}
    try:
        old = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = None
    if not isinstance(old, dict) or old.get("format") != MANIFEST_FORMAT:
        raise fail("bad_arguments", f"{manifest} is not a manifest written by this tool.",
                   "Pass a new or empty folder as dest.")
    if old.get("run_id") != run_id:
        raise fail("bad_arguments", f"{dest} holds the logs of run {old.get('run_id')!r}, not {run_id!r}.",
                   "Pass another dest for this run.")
    return dest, old


def _kept(dest: Path, old: dict[str, Any], label: str) -> ExportedStream | None:
    """An earlier export's complete file of a terminal run, unchanged on disk."""
    if not old.get("run_terminal"):
        return None
    entry = next((e for e in old.get("streams", []) if isinstance(e, dict) and e.get("component") == label), None)
    if not entry or not entry.get("file") or not entry.get("complete"):
        return None
    path = dest / entry["file"]
    try:
        with path.open("rb") as handle:
            if hashlib.file_digest(handle, "sha256").hexdigest() != entry.get("sha256"):
                return None
    except OSError:
        return None
    return ExportedStream.model_validate({**{k: v for k, v in entry.items() if k in ExportedStream.model_fields},
                                          "kept_from_earlier": True})


class _Writer:
    """The texts of one stream's reads into lines, counted, with their first and last timestamps."""

    def __init__(self) -> None:
        self.lines = 0
        self.first: str | None = None
        self.last: str | None = None

    def chunks(self, texts: Iterator[str]) -> Iterator[bytes]:
        for text in texts:
            if not text:
                continue
            rows = text.splitlines()
            self.lines += len(rows)
            for row in (rows[0], rows[-1]):
                parsed = parse_json_line(row)
                stamp = parsed.timestamp if isinstance(parsed, Line) else None
                if stamp:
                    self.first = self.first or stamp
                    self.last = stamp
            yield text.encode() + b"\n"


@tool
def export_logs(inp: ExportLogsInput, ctx: Context) -> ExportLogsResult:
    """Write every component's and env server's logs of a run to files, with a manifest.

    Per stream, one file written atomically (no partial files) from a
    :class:`~tools.monitor._logreads.Sweep` of all levels over the run's window (at most 24 h),
    or, for a run that ended more than 24 h ago, from its newest 5,000 lines. ``manifest.json``
    is rewritten after each file, so an interrupted export keeps the files it finished; called
    again (``resume``), it keeps the complete files of a finished run whose sha256 still match
    and reads the rest. Progress: ``ctx.report(streams done, streams, ...)``. Errors:
    ``not_found``, ``bad_arguments`` (dest not ours), ``unavailable`` (retryable: call again to
    resume), the platform codes.
    """
    platform = ctx.platform()
    run = require_run(ctx, inp.run_id)
    dest, old = _prepare(ctx.resolve_path(inp.dest), run.id)
    if not inp.resume:
        old = {}
    now = server_now(platform)
    window = window_seconds(run.started_at, now)
    ended_long_ago = run.completed_at is not None and (now - run.completed_at).total_seconds() > MAX_SINCE
    before_window = run.started_at is not None and (now - run.started_at).total_seconds() > MAX_SINCE
    dest.mkdir(parents=True, exist_ok=True)
    for leftover in filter(is_partial, dest.iterdir()):
        leftover.unlink(missing_ok=True)
    streams: list[ExportedStream] = []
    written = 0

    def save() -> Path:
        document = {"format": MANIFEST_FORMAT, "run_id": run.id, "run_status": run.status,
                    "run_terminal": run.is_terminal(), "exported_at": now.isoformat(timespec="seconds"),
                    "source": ctx.settings.base_url, "looked_back_seconds": None if ended_long_ago else window,
                    "streams": [s.model_dump() for s in streams]}
        path = dest / MANIFEST
        write_atomic(path, [json.dumps(document, indent=1).encode()])
        return path

    all_targets = targets(platform, run, inp.components)
    for index, target in enumerate(all_targets):
        kept = _kept(dest, old, target.label) if inp.resume else None
        if kept is not None:
            streams.append(kept)
        else:
            streams.append(_export_one(ctx, run.id, dest, target, window, now, ended_long_ago, before_window))
            written += streams[-1].bytes
        save()
        ctx.report(index + 1, len(all_targets), f"{target.label}: {streams[-1].lines} lines")
    manifest = save()
    complete = bool(streams) and all(s.complete for s in streams)
    summary = call("mf_summarize_logs", run_id=run.id)
    if complete:
        advice = f"Every line is on disk. For the distinct errors, {summary}."
    elif run.is_terminal():
        advice = f"Caps cut some files (see each stream's cut); the files hold all the API still returns. {summary}."
    else:
        again = call("mf_export_logs", run_id=run.id, dest=inp.dest)
        advice = f"The run is {run.status}: export again after it ends with {again} to add newer lines."
        return _result(run, dest, manifest, window, ended_long_ago, streams, written, complete, advice,
                       [again, summary])
    return _result(run, dest, manifest, window, ended_long_ago, streams, written, complete, advice, [summary])


def _result(run: wire.RLRun, dest: Path, manifest: Path, window: int, ended_long_ago: bool,
            streams: list[ExportedStream], written: int, complete: bool, advice: str,
            calls: list[Call]) -> ExportLogsResult:
    return ExportLogsResult(run_id=run.id, status=run.status, dest=str(dest), manifest_path=str(manifest),
                            looked_back_seconds=None if ended_long_ago else window, streams=streams,
                            lines_written=sum(s.lines for s in streams), bytes_written=written, complete=complete,
                            next_step=advice, next_calls=calls)


def _export_one(ctx: Context, run_id: str, dest: Path, target: Target, window: int, now: datetime,
                ended_long_ago: bool, before_window: bool) -> ExportedStream:
    """One stream into ``dest/<name>.log``, atomically; an ``unavailable`` platform stops the export."""
    platform = ctx.platform()
    name = _file_name(target)
    writer = _Writer()
    cut: list[str] = []
    note = None
    try:
        if ended_long_ago:
            requests = 1
            newest_lines = fetch(platform, run_id, target, MAX_TAIL).logs
            nbytes, sha = write_atomic(dest / name, writer.chunks(iter([newest_lines])))
            newest = 200 if target.component == "orchestrator" else MAX_TAIL
            if writer.lines >= newest:
                cut.append(f"only the newest {newest:,} lines: the run ended more than 24 h ago, beyond the logs API's "
                           "search window")
        else:
            sweep = Sweep(platform, run_id, target, None, window, now)
            nbytes, sha = write_atomic(dest / name, writer.chunks(iter(sweep)))
            requests = sweep.reads
            if before_window:
                start = (now - timedelta(seconds=MAX_SINCE)).isoformat(timespec="seconds")
                cut.append(f"lines before {start} (more than 24 h ago) are beyond the logs API's search window")
            if sweep.capped:
                cut.append(f"over 5,000 lines within a minute at {', '.join(sweep.capped[:5])}: only the newest 5,000 "
                           "of each")
            if sweep.sliced:
                note = (f"over 5,000 lines: read in {sweep.reads} time slices, which see JSON lines only (a plain-text "
                        "line without a timestamp may be missing)")
    except perr.PlatformError as exc:
        if isinstance(exc, perr.Unavailable):
            again = call("mf_export_logs", run_id=run_id, dest=str(dest))
            raise fail("unavailable", f"The export stopped at {target.label}: {exc.message}. Files finished before it "
                       "are kept.", f"Call {again} again: it keeps finished files and reads the rest.", retryable=True,
                       next_calls=[again]) from None
        note = "not started yet: no logs" if not_started(exc) else f"could not read: {exc.message}"
        return ExportedStream(component=target.label, note=note)
    return ExportedStream(component=target.label, file=name, lines=writer.lines, bytes=nbytes, sha256=sha,
                          first_timestamp=writer.first, last_timestamp=writer.last, requests=requests,
                          complete=not cut, cut=cut, note=note)
