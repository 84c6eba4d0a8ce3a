"""``mf_download_traces``: a whole run's traces (and episode envelopes) into a folder, with a
manifest, resume after any interruption, and a report of what the platform has not uploaded.

Sources (reference/prime-api.md §6): GET ``/traces?run_id=``, ``/traces/{id}?raw=true``,
``/episodes``, ``/episodes/{id}?raw=true``, ``/runs/{id}``, ``/runs/{id}/steps`` on the traces
host; GET ``/rft/runs/{id}/progress`` on the platform (completed steps).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.core import INT64_MAX, RUN_ID, Context, not_found, tool
from tools.errors import call, fail
from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.client import TracesClient
from tools.platform.files import is_partial, write_atomic
from tools.traces._scope import PAGE_LIMIT, platform_run

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "model-factory-traces/1"
_UNSAFE_NAME = re.compile(r'[/\\<>:"|?*\x00-\x1f\x7f]')
MAX_ID_CHARS = 200
#: Attempts per file download (a cut stream is retried once, then the call stops).
FILE_ATTEMPTS = 2
#: The manifest is rewritten (atomically) at most this often while files land, and never more
#: often than every ``MANIFEST_SAVE_FACTOR`` times its last write took (huge runs stay cheap).
MANIFEST_SAVE_SECONDS = 1.0
MANIFEST_SAVE_FACTOR = 20


class DownloadTracesInput(BaseModel):
    """Which run, where to, and how."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    dest: str = Field(min_length=1, max_length=1000, description=(
        "Folder to write (created if missing). It must be new, empty, or a folder this tool wrote for the same run "
        "(it holds our manifest.json)."))
    resume: bool = Field(default=True, description=(
        "Skip files already downloaded whose sha256 matches the manifest (corrupted, missing or unrecorded ones are "
        "fetched again). false: fetch everything again."))
    include_episodes: bool = Field(default=True, description=(
        "Also write each episode's raw envelope to episodes/<episode_id>.json and check its member traces."))
    max_traces: int | None = Field(default=None, ge=1, le=INT64_MAX, description=(
        "Stop after this many traces (newest first); the result then says complete=false."))


class StepGap(BaseModel):
    """A step with fewer traces on disk than the traces host counts."""

    step: int = Field(description="Training step.")
    expected: int = Field(description="Traces the host counts for the step (GET /runs/{id}/steps).")
    downloaded: int = Field(description="Traces of the step on disk.")


class EpisodeGap(BaseModel):
    """An episode whose envelope names member traces the host does not list."""

    episode_id: str = Field(description="Episode id.")
    missing_count: int = Field(description="Member traces not found.")
    missing_trace_ids: list[str] = Field(description="Up to 5 of them.")


class MissingReport(BaseModel):
    """What the platform has not uploaded (or not listed), compared with what it says exists."""

    summary: str = Field(description="One line: complete, or what is missing.")
    trace_count_gap: int = Field(description=(
        "RunSummary.trace_count minus traces listed (positive = the host counts traces it did not list)."))
    episode_count_gap: int = Field(description=(
        "RunSummary.episode_count minus episodes found (0 when episodes were not read)."))
    steps_without_traces: list[int] = Field(default_factory=list, description=(
        "Steps the run completed (GET /rft/runs/{id}/progress) that have no traces on the host."))
    steps_short: list[StepGap] = Field(default_factory=list, description=(
        "Steps with fewer traces on disk than the host counts."))
    episodes_with_missing_traces: list[EpisodeGap] = Field(default_factory=list, description=(
        "Episodes whose raw envelope lists traces that were not found."))
    gone_trace_ids: list[str] = Field(default_factory=list, description=(
        "Listed traces whose download answered 404 (deleted meanwhile)."))
    truncated: bool = Field(default=False, description="True when lists were cut; manifest.json has the full report.")
    omitted: int = Field(default=0, description="List items left out here (all are in manifest.json).")


class DownloadTracesResult(BaseModel):
    """What a download wrote, skipped, and found missing."""

    run_id: str = Field(description="Run id.")
    dest: str = Field(description="Absolute folder written.")
    manifest_path: str = Field(description=(
        "dest/manifest.json: run id, state (in_progress while a call runs or after it was killed, interrupted, "
        "finished), time, per-file trace_id/episode_id/run_step/bytes/sha256, expected totals, full missing report."))
    traces_downloaded: int = Field(description=(
        "Trace files fetched by this call (including files on disk the manifest did not record, e.g. after a killed "
        "call)."))
    episodes_downloaded: int = Field(description="Episode envelopes fetched by this call.")
    skipped_existing: int = Field(description="Files already present with a matching sha256 (not fetched again).")
    refetched_corrupted: int = Field(description="Files present whose sha256 did not match: fetched again.")
    bytes_written: int = Field(description="Bytes written by this call.")
    traces_on_disk: int = Field(description="Trace files of this run in dest after the call.")
    episodes_on_disk: int = Field(description="Episode files in dest after the call.")
    expected_trace_count: int | None = Field(default=None, description=(
        "RunSummary.trace_count (GET /runs/{id}); null when the host has no traces for the run."))
    expected_episode_count: int | None = Field(default=None, description="RunSummary.episode_count.")
    complete: bool = Field(description="True when every listed trace is on disk and nothing is missing.")
    stopped_at_max: bool = Field(default=False, description="True when max_traces stopped the walk.")
    unsafe_ids: list[str] = Field(default_factory=list, description=(
        "Ids not usable as file names (path separators, reserved characters): not written."))
    missing: MissingReport = Field(description="Missing-upload report (compact; full in the manifest).")
    note: str | None = Field(default=None, description="Anything to know, e.g. the run is still uploading.")


def _safe_name(identifier: str) -> bool:
    """True when ``identifier`` can be a file name: no separators, reserved or control characters, no leading dot."""
    return bool(identifier) and len(identifier) <= MAX_ID_CHARS and not identifier.startswith(".") \
        and not _UNSAFE_NAME.search(identifier)


def _manifest_partial(path: Path) -> bool:
    """True for a temporary file of our manifest left by a killed call."""
    return is_partial(path) and path.name.startswith(f".{MANIFEST}.")


def _sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class _Download:
    """State of one download_traces call: dest layout, manifest, counters."""

    def __init__(self, ctx: Context, inp: DownloadTracesInput) -> None:
        self.ctx, self.inp = ctx, inp
        self.dest = self._prepare_dest(ctx.resolve_path(inp.dest))
        self.trace_dir, self.episode_dir = self.dest / "traces", self.dest / "episodes"
        old = self._load_manifest()
        self.old_traces: dict[str, dict] = {e["trace_id"]: e for e in old.get("traces", []) if isinstance(e, dict)
                                            and isinstance(e.get("trace_id"), str)}
        self.old_episodes: dict[str, dict] = {e["episode_id"]: e for e in old.get("episodes", [])
                                              if isinstance(e, dict) and isinstance(e.get("episode_id"), str)}
        self.traces: dict[str, dict] = dict(self.old_traces)
        self.episodes: dict[str, dict] = dict(self.old_episodes)
        self.expected: dict[str, Any] = old.get("expected", {})
        self.missing: dict[str, Any] = {}
        self.downloaded = self.episodes_downloaded = self.skipped = self.refetched = self.bytes = 0
        self.unsafe: list[str] = []
        self.gone: list[str] = []
        self.save_due = 0.0

    # -- folder and manifest -------------------------------------------------------------
    def _prepare_dest(self, dest: Path) -> Path:
        if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
            raise fail("bad_arguments", f"dest {str(dest)!r} exists and is not a folder.",
                       "Pass a new folder path (it is created) or one this tool wrote before.")
        dest = dest.resolve()
        # A call killed while writing its first manifest leaves only that manifest's temporary file.
        if dest.exists() and not all(map(_manifest_partial, dest.iterdir())) and not (dest / MANIFEST).is_file():
            raise fail("bad_arguments", f"dest {str(dest)!r} is not empty and holds no {MANIFEST} of this tool; "
                       "nothing was written.",
                       "Pass a new or empty folder (e.g. ./traces/<run_id>), or the folder of an earlier download.")
        for sub in ("traces", "episodes"):
            if (dest / sub).is_symlink() or ((dest / sub).exists() and not (dest / sub).is_dir()):
                raise fail("bad_arguments", f"{dest / sub} is not a plain folder; refusing to write through it.",
                           "Remove it or pass another dest.")
        return dest

    def _load_manifest(self) -> dict[str, Any]:
        path = self.dest / MANIFEST
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
            raise fail("bad_arguments", f"{path} is not a manifest written by this tool.",
                       "Pass a new or empty folder as dest.")
        if data.get("run_id") != self.inp.run_id:
            raise fail("bad_arguments", f"{self.dest} holds the download of run {data.get('run_id')!r}, not "
                       f"{self.inp.run_id!r}.", "Pass another dest for this run.")
        return data if self.inp.resume else {"expected": data.get("expected", {})}

    def begin(self) -> None:
        """Write the manifest (state ``in_progress``) before any other file, drop the temporary
        files a killed call left, and create the folders."""
        self.dest.mkdir(parents=True, exist_ok=True)
        self.save_manifest("in_progress")
        leftovers = [*filter(_manifest_partial, self.dest.iterdir())]
        for folder in (self.trace_dir, self.episode_dir):  # ours: no file of a safe id starts with "."
            leftovers += filter(is_partial, folder.iterdir()) if folder.is_dir() else []
        for leftover in leftovers:
            leftover.unlink(missing_ok=True)
        self.trace_dir.mkdir(exist_ok=True)
        if self.inp.include_episodes:
            self.episode_dir.mkdir(exist_ok=True)

    def checkpoint(self) -> None:
        """Rewrite the manifest when it is due (see ``MANIFEST_SAVE_SECONDS``): a call killed
        outright then loses at most the record of the files of its last second or so, and
        those are fetched again, never trusted, by the next call."""
        if time.monotonic() >= self.save_due:
            self.save_manifest("in_progress")

    def save_manifest(self, state: Literal["in_progress", "interrupted", "finished"]) -> Path:
        """Write ``dest/manifest.json`` atomically. ``state``: ``in_progress`` (the call is
        running, or was killed), ``interrupted`` (it stopped on an error or Ctrl-C, the
        record is current), ``finished`` (it ended; ``missing`` says what is not there)."""
        started = time.monotonic()
        document = {
            "format": MANIFEST_FORMAT, "run_id": self.inp.run_id, "state": state,
            "updated_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "source": self.ctx.settings.traces_url, "expected": self.expected,
            "traces": [self.traces[k] for k in sorted(self.traces)],
            "episodes": [self.episodes[k] for k in sorted(self.episodes)],
            "missing": self.missing,
        }
        path = self.dest / MANIFEST
        write_atomic(path, [json.dumps(document, indent=1).encode()])
        now = time.monotonic()
        self.save_due = now + max(MANIFEST_SAVE_SECONDS, MANIFEST_SAVE_FACTOR * (now - started))
        return path

    # -- files ---------------------------------------------------------------------------
    def _fresh(self, path: Path, entry: dict | None) -> bool:
        """True when ``path`` is on disk with the manifest's sha256 (then it is not fetched again)."""
        if not (self.inp.resume and entry and path.is_file()):
            return False
        if _sha256_file(path) == entry.get("sha256"):
            return True
        self.refetched += 1
        return False

    def fetch(self, path: Path, stream: Callable[[], Iterator[bytes]]) -> tuple[int, str]:
        """Download into ``path`` atomically, retrying a cut stream once."""
        for attempt in range(FILE_ATTEMPTS):
            try:
                written, sha = write_atomic(path, stream())
            except perr.Unavailable:
                if attempt + 1 == FILE_ATTEMPTS:
                    raise
                continue
            self.bytes += written
            return written, sha
        raise AssertionError("unreachable")  # pragma: no cover

    def trace(self, tc: TracesClient, team: str | None, t: wire.TraceSummary) -> None:
        path = self.trace_dir / f"{t.trace_id}.json"
        entry = self.traces.get(t.trace_id)
        base = {"trace_id": t.trace_id, "file": f"traces/{t.trace_id}.json", "episode_id": t.episode_id,
                "run_step": t.run_step}
        if self._fresh(path, entry):
            self.skipped += 1
            self.traces[t.trace_id] = {**base, "bytes": entry["bytes"], "sha256": entry["sha256"]}
            return
        try:
            written, sha = self.fetch(path, lambda: tc.stream_raw_trace(t.trace_id, team_id=team))
        except perr.NotFound:
            self.gone.append(t.trace_id)
            return
        self.downloaded += 1
        self.traces[t.trace_id] = {**base, "bytes": written, "sha256": sha}
        self.checkpoint()

    def episode(self, tc: TracesClient, team: str | None, episode_id: str) -> list[str] | None:
        """Write one envelope; returns its member trace ids (``None`` if it cannot be read)."""
        path = self.episode_dir / f"{episode_id}.json"
        entry = self.episodes.get(episode_id)
        if self._fresh(path, entry):
            self.skipped += 1
        else:
            try:
                written, sha = self.fetch(path, lambda: tc.stream_raw_episode(episode_id, team_id=team))
            except perr.NotFound:
                return None
            self.episodes_downloaded += 1
            self.episodes[episode_id] = {"episode_id": episode_id, "file": f"episodes/{episode_id}.json",
                                         "bytes": written, "sha256": sha}
            self.checkpoint()
        try:
            members = json.loads(path.read_bytes()).get("traces")
        except (OSError, ValueError, AttributeError):
            return None
        return [m for m in members if isinstance(m, str)] if isinstance(members, list) else None


def _pages(fetch: Callable[[str | None], Any]) -> Iterator[Any]:
    cursor = None
    while True:
        page = fetch(cursor)
        yield from page.items
        if not page.next_cursor:
            return
        cursor = page.next_cursor


@tool
def download_traces(inp: DownloadTracesInput, ctx: Context) -> DownloadTracesResult:
    """Download every trace of a run into ``dest`` with a manifest, resume and a missing-upload report.

    Layout: ``dest/traces/<trace_id>.json`` (raw documents, GET ``/traces/{id}?raw=true``),
    ``dest/episodes/<episode_id>.json`` (raw envelopes), ``dest/manifest.json``. Every file
    goes through a hidden temporary sibling and an atomic rename: no partial files, ever.
    Interruptions: the manifest is written (``state: in_progress``) before any other file and
    rewritten about every second as files land; Ctrl-C saves it (``interrupted``) before the
    KeyboardInterrupt propagates, and a killed process leaves the last one. The next call
    resumes: files in the manifest are sha256-checked, files on disk the manifest does not
    name are fetched again, temporary files a killed call left are removed.
    Totals to check against: GET ``/runs/{id}`` and ``/runs/{id}/steps``; completed steps:
    GET ``/rft/runs/{id}/progress``. Progress: ``ctx.report(traces done, expected, ...)``.

    Errors: ``bad_arguments`` (dest not ours / not a folder), ``unavailable`` (retryable:
    the connection failed twice on one file; what was written is in the manifest, call
    again to resume), the platform codes.
    """
    job = _Download(ctx, inp)
    tc = ctx.traces()
    run, team = platform_run(ctx, inp.run_id)
    try:
        summary: wire.RunSummary | None = tc.get_run(inp.run_id, team_id=team)
    except perr.NotFound:
        summary = None
    if summary is None and run is None:
        raise not_found(inp.run_id)
    steps = tc.list_run_steps(inp.run_id, team_id=team).items if summary else []
    expected_total = summary.trace_count if summary else 0
    job.expected = {"trace_count": expected_total, "episode_count": summary.episode_count if summary else 0,
                    "steps": [s.model_dump(include={"step", "trace_count", "episode_count"}) for s in steps]}
    job.begin()
    listed: dict[str, wire.TraceSummary] = {}
    stopped = False
    try:
        if summary is not None:
            for t in _pages(lambda c: tc.list_traces(team_id=team, run_id=inp.run_id, limit=PAGE_LIMIT, cursor=c)):
                if inp.max_traces is not None and len(listed) >= inp.max_traces:
                    stopped = True
                    break
                if t.trace_id in listed:
                    continue
                listed[t.trace_id] = t
                if not _safe_name(t.trace_id):
                    job.unsafe.append(t.trace_id)
                    continue
                job.trace(tc, team, t)
                done = len(listed)
                ctx.report(done, expected_total or None, f"traces {done}/{expected_total or '?'}")
        members: dict[str, list[str] | None] = {}
        if inp.include_episodes and summary is not None:
            ids = dict.fromkeys(t.episode_id for t in listed.values() if t.episode_id)
            if not stopped:
                ids.update(dict.fromkeys(e.episode_id for e in _pages(
                    lambda c: tc.list_episodes(team_id=team, run_id=inp.run_id, limit=PAGE_LIMIT, cursor=c))))
            for episode_id in ids:
                if not _safe_name(episode_id):
                    job.unsafe.append(episode_id)
                    continue
                members[episode_id] = job.episode(tc, team, episode_id)
        report = _missing_report(ctx, inp, run, summary, steps, listed, job, members, stopped)
    except perr.Unavailable as exc:
        job.save_manifest("interrupted")
        again = call("mf_download_traces", run_id=inp.run_id, dest=inp.dest)

        raise fail("unavailable", f"The download of run {inp.run_id} stopped after {job.downloaded} new trace "
                   f"file(s) ({len(job.traces)} in {job.dest}): {exc.message}. No partial file was left.",
                   f"Call {again} again: it resumes, skipping what is already there.", retryable=True,
                   next_calls=[again]) from None
    except BaseException:  # Ctrl-C (KeyboardInterrupt), SystemExit, a bug: record what landed, then propagate
        with contextlib.suppress(OSError):
            job.save_manifest("interrupted")
        raise
    manifest = job.save_manifest("finished")
    on_disk = sum(1 for t in listed if t in job.traces)
    complete = (not stopped and on_disk == len(listed) and report.summary.startswith("complete"))
    note = None
    if run is not None and not run.is_terminal():
        note = f"Run is {run.status}: newer traces may still be uploading; call again later to add them."
    elif summary is None:
        note = "The traces host has no traces for this run yet."
    return DownloadTracesResult(
        run_id=inp.run_id, dest=str(job.dest), manifest_path=str(manifest), traces_downloaded=job.downloaded,
        episodes_downloaded=job.episodes_downloaded, skipped_existing=job.skipped, refetched_corrupted=job.refetched,
        bytes_written=job.bytes, traces_on_disk=on_disk, episodes_on_disk=sum(1 for e in members if e in job.episodes),
        expected_trace_count=summary.trace_count if summary else None,
        expected_episode_count=summary.episode_count if summary else None, complete=complete,
        stopped_at_max=stopped, unsafe_ids=[i[:MAX_ID_CHARS] for i in job.unsafe[:10]], missing=report, note=note)


#: How many items of each list the result shows (the manifest has all).
_SHOW = {"steps_without_traces": 50, "steps_short": 20, "episodes_with_missing_traces": 10, "gone_trace_ids": 10}


def _missing_report(ctx: Context, inp: DownloadTracesInput, run: wire.RLRun | None, summary: wire.RunSummary | None,
                    steps: list[wire.RunStep], listed: dict[str, wire.TraceSummary], job: _Download,
                    members: dict[str, list[str] | None], stopped: bool) -> MissingReport:
    """Compare what the host and the platform say exists with what was listed and written."""
    host_steps = {s.step: s for s in steps}
    completed = None
    if run is not None:
        completed = ctx.platform().get_progress(inp.run_id).latest_step
        if completed is not None and not run.is_terminal():
            completed -= 1  # the newest step's traces may still be uploading
    without = sorted(set(range(1, (completed or 0) + 1)) - set(host_steps))
    on_disk: dict[int, int] = {}
    for trace_id, t in listed.items():
        if trace_id in job.traces and t.run_step is not None:
            on_disk[t.run_step] = on_disk.get(t.run_step, 0) + 1
    short = [] if stopped else [StepGap(step=s.step, expected=s.trace_count, downloaded=on_disk.get(s.step, 0))
                                for s in steps if on_disk.get(s.step, 0) < s.trace_count]
    gaps = []
    for episode_id, ids in members.items():
        lost = [i for i in ids or [] if i not in listed]
        if lost and not stopped:
            gaps.append(EpisodeGap(episode_id=episode_id, missing_count=len(lost), missing_trace_ids=lost[:5]))
    trace_gap = (summary.trace_count - len(listed)) if summary and not stopped else 0
    episode_gap = (summary.episode_count - len(members)) if summary and members and not stopped else 0
    full = {"steps_without_traces": without, "steps_short": [g.model_dump() for g in short],
            "episodes_with_missing_traces": [g.model_dump() for g in gaps], "gone_trace_ids": job.gone,
            "trace_count_gap": trace_gap, "episode_count_gap": episode_gap}
    job.missing = full
    problems = []
    if without:
        problems.append(f"{len(without)} completed step(s) with no traces")
    if short:
        problems.append(f"{len(short)} step(s) with fewer traces than counted")
    if gaps:
        problems.append(f"{len(gaps)} episode(s) missing {sum(g.missing_count for g in gaps)} member trace(s)")
    if trace_gap > 0:
        problems.append(f"{trace_gap} trace(s) counted but not listed")
    if job.gone:
        problems.append(f"{len(job.gone)} listed trace(s) gone")
    if stopped:
        text = f"partial: stopped at max_traces={inp.max_traces}; gaps not checked"
    else:
        text = "missing: " + "; ".join(problems) if problems else "complete: every counted trace is on disk"
    omitted = sum(max(0, len(full[k]) - n) for k, n in _SHOW.items())
    return MissingReport(
        summary=text, trace_count_gap=trace_gap, episode_count_gap=episode_gap,
        steps_without_traces=without[:_SHOW["steps_without_traces"]], steps_short=short[:_SHOW["steps_short"]],
        episodes_with_missing_traces=gaps[:_SHOW["episodes_with_missing_traces"]],
        gone_trace_ids=job.gone[:_SHOW["gone_trace_ids"]], truncated=omitted > 0, omitted=omitted)
