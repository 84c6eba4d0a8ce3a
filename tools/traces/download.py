"""``mf_download_traces``: a whole run's traces (and episode envelopes) into a folder, with a
manifest, resume after any interruption, and a report of what the platform has not uploaded.

At the speed of the link, with flat memory: the listing is walked page by page
(:class:`~tools.platform.paging.CursorWalk`, so a misbehaving cursor ends it with a note) while a
pool of ``concurrency`` threads streams raw documents to disk through one shared httpx client;
at most twice that many files are in flight, and everything known per trace (the manifest, what
was listed, the episodes to fetch) lives on disk (:mod:`._manifest`), not in memory.

Sources (reference/prime-api.md §6): GET ``/traces?run_id=``, ``/traces/{id}?raw=true``,
``/episodes``, ``/episodes/{id}?raw=true``, ``/runs/{id}``, ``/runs/{id}/steps`` on the traces
host; GET ``/rft/runs/{id}/progress`` on the platform (completed steps).

Whose steps: a resumed run's first steps belong to the run it continues (its first metric step says
where its own begin; :func:`tools.core.predecessors` names that run), so they are not missing here: the
result names the run that holds them and the download that fetches them, and the download is complete
when the run's own steps are. An SFT run trains on a dataset and uploads no rollouts: nothing is missing.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.core import INT64_MAX, Context, Predecessor, first_step, not_found, predecessors, tool
from tools.errors import Call, call, fail
from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.files import is_partial, write_atomic
from tools.platform.paging import CursorWalk, Walk
from tools.traces._manifest import LEGACY_MANIFEST, MANIFEST, MAX_ERROR_CHARS, Record, is_manifest_partial
from tools.traces._scope import PAGE_LIMIT, TRACES_RUN_ID, platform_run

_UNSAFE_NAME = re.compile(r'[/\\<>:"|?*\x00-\x1f\x7f]')
MAX_ID_CHARS = 200
#: Attempts per file download (a cut stream is retried once, then the call stops).
FILE_ATTEMPTS = 2
#: A raw document as it streams (closed when a download stops early, to free its connection).
_Chunks = Generator[bytes, None, None]
#: Listing pages a download follows at most (100 traces each).
MAX_LIST_PAGES = 100_000


class DownloadTracesInput(BaseModel):
    """Which run, where to, and how."""

    model_config = ConfigDict(extra="forbid")
    run_id: TRACES_RUN_ID
    dest: str = Field(min_length=1, max_length=1000, description=(
        "Folder to write (created if missing). It must be new, empty, or a folder this tool wrote for the same run "
        f"(it holds our {MANIFEST})."))
    resume: bool = Field(default=True, description=(
        "Skip files already downloaded whose sha256 matches the manifest (corrupted, missing or unrecorded ones are "
        "fetched again). false: fetch everything again."))
    include_episodes: bool = Field(default=True, description=(
        "Also write each episode's raw envelope to episodes/<episode_id>.json and check its member traces."))
    max_traces: int | None = Field(default=None, ge=1, le=INT64_MAX, description=(
        "Stop after this many traces (newest first); the result then says complete=false."))
    concurrency: int = Field(default=8, ge=1, le=32, description=(
        "Files downloaded at the same time (1..32)."))


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
    """What the platform has not uploaded (or not listed), compared with what it says exists. Ids
    this tool skipped on purpose (unsafe as file names) are not counted here."""

    summary: str = Field(description=(
        "One line starting with complete:, missing: (the platform lacks something), skipped: (nothing missing, "
        "but ids unsafe as file names were not written) or partial: (the walk stopped early; gaps not checked)."))
    trace_count_gap: int = Field(description=(
        "RunSummary.trace_count minus traces listed (positive = the host counts traces it did not list)."))
    episode_count_gap: int = Field(description=(
        "RunSummary.episode_count minus episodes found (0 when episodes were not read)."))
    steps_without_traces: list[int] = Field(default_factory=list, description=(
        "Steps the run completed (GET /rft/runs/{id}/progress) that have no traces on the host."))
    steps_short: list[StepGap] = Field(default_factory=list, description=(
        "Steps with fewer traces on disk than the host counts (traces skipped for safety aside)."))
    episodes_with_missing_traces: list[EpisodeGap] = Field(default_factory=list, description=(
        "Episodes whose raw envelope lists traces that were not found."))
    gone_trace_ids: list[str] = Field(default_factory=list, description=(
        "Listed traces whose download answered 404 (deleted meanwhile)."))
    truncated: bool = Field(default=False, description=f"True when lists were cut; {MANIFEST} has the full report.")
    omitted: int = Field(default=0, description=f"List items left out here (all are in {MANIFEST}).")


class EarlierRun(BaseModel):
    """A run this resumed run continues, and the steps that are its own (its traces are there)."""

    run_id: str = Field(description="The earlier run.")
    first_step: int = Field(description="Its first step.")
    last_step: int = Field(description="Its last step (this run's first is the next).")


class DownloadTracesResult(BaseModel):
    """What a download wrote, skipped, and found missing."""

    run_id: str = Field(description="Run id.")
    dest: str = Field(description="Absolute folder written.")
    manifest_path: str = Field(description=(
        f"dest/{MANIFEST}, one JSON object per line: header (run id, source), expected totals, one line per file "
        "(trace_id or episode_id, file, run_step, bytes, sha256), the full missing report, and state lines "
        "(in_progress while a call runs or after it was killed, interrupted, finished; the last counts)."))
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
    complete: bool = Field(description=(
        "True only when the listing ran to its end, every listed trace is on disk, nothing is missing and nothing "
        "was skipped for safety."))
    stopped_at_max: bool = Field(default=False, description="True when max_traces stopped the walk.")
    listing_complete: bool = Field(default=True, description=(
        "False when a listing stopped early because the host's cursor repeated, cycled or came back empty, or the "
        "page bound was reached (note says which, with the last cursor)."))
    skipped_for_safety: int = Field(default=0, description=(
        "Traces and episodes not written on purpose because their ids cannot be file names (path separators, "
        "reserved or control characters, a leading dot, over 200 characters). Not missing on the platform."))
    unsafe_ids: list[str] = Field(default_factory=list, description=(
        "Up to 10 of the ids skipped for safety (all are in the manifest's skipped lines)."))
    missing: MissingReport = Field(description="Missing-upload report (compact; full in the manifest).")
    note: str | None = Field(default=None, description=(
        "Anything to know: the run is still uploading, a listing stopped early, ids skipped for safety, the "
        "steps an earlier run holds, an SFT run (no traces)."))
    earlier_runs: list[EarlierRun] | None = Field(default=None, description=(
        "For a resumed run: the runs it continues, nearest first; their steps are theirs, not missing here."))
    next_calls: list[Call] | None = Field(default=None, description="The calls the note names.")


def _safe_name(identifier: str) -> bool:
    """True when ``identifier`` can be a file name: no separators, reserved or control characters, no leading dot."""
    return bool(identifier) and len(identifier) <= MAX_ID_CHARS and not identifier.startswith(".") \
        and not _UNSAFE_NAME.search(identifier)


def _sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# -- one file, in a worker thread ----------------------------------------------------------------


class _Stopped(Exception):
    """The call is stopping (Ctrl-C, an error elsewhere): abandon this file at the next chunk."""


@dataclass(frozen=True)
class _Done:
    """What a worker did with one file: ``kept`` (on disk with the recorded sha256), ``fetched``,
    ``refetched`` (on disk but corrupted), ``gone`` (404); an episode's member trace ids and how it went
    (``ok``, ``error``: :func:`_episode_outcome`)."""

    outcome: Literal["kept", "fetched", "refetched", "gone"]
    nbytes: int = 0
    sha256: str = ""
    members: list[str] | None = None
    episode: dict[str, Any] | None = None


def _file_job(path: Path, known: tuple[int, str] | None, resume: bool, stream: Callable[[], _Chunks],
              members: bool, stop: threading.Event) -> _Done:
    """Check ``path`` against its recorded (bytes, sha256), else download it atomically (a cut
    stream is retried once); for an episode also read its member trace ids."""
    refetch = False
    done: _Done | None = None
    if resume and known and path.is_file():
        if _sha256_file(path) == known[1]:
            done = _Done("kept", known[0], known[1])
        else:
            refetch = True
    if done is None:
        for attempt in range(FILE_ATTEMPTS):
            chunks = stream()
            try:
                written, sha = write_atomic(path, _until(stop, chunks))
                break
            except perr.NotFound:
                return _Done("gone")
            except perr.Unavailable:
                if attempt + 1 == FILE_ATTEMPTS or stop.is_set():
                    raise
            finally:
                chunks.close()  # the response now, not when the garbage collector finds it
        done = _Done("refetched" if refetch else "fetched", written, sha)
    if not members:
        return done
    try:
        envelope = json.loads(path.read_bytes())
    except (OSError, ValueError):
        envelope = None
    envelope = envelope if isinstance(envelope, dict) else {}
    ids = envelope.get("traces")
    return _Done(done.outcome, done.nbytes, done.sha256,
                 [m for m in ids if isinstance(m, str)] if isinstance(ids, list) else None, _episode_outcome(envelope))


def _episode_outcome(envelope: dict[str, Any]) -> dict[str, Any] | None:
    """An episode envelope's ``ok`` and its first ``errors`` item as ``"type: message"`` (clipped), for the
    manifest; None when the envelope has no boolean ``ok``."""
    if not isinstance(envelope.get("ok"), bool):
        return None
    errors = envelope.get("errors")
    first = errors[0] if isinstance(errors, list) and errors else None
    if isinstance(first, dict):
        first = ": ".join(str(first[k]) for k in ("type", "message") if first.get(k)) or None
    error = first[:MAX_ERROR_CHARS] if isinstance(first, str) and first else None
    return {"ok": envelope["ok"], "error": error}


def _whole_json(chunks: _Chunks, what: str) -> _Chunks:
    """``chunks`` passed on; ``Unavailable(sent=True)`` after the last one when together they are
    not one JSON document (an episode envelope cut short in a well-framed answer)."""
    received: list[bytes] = []
    try:
        for chunk in chunks:
            received.append(chunk)
            yield chunk
    finally:
        chunks.close()
    try:
        json.loads(b"".join(received))
    except ValueError:
        raise perr.Unavailable(f"{what} arrived cut ({sum(map(len, received))} bytes that are not a whole JSON "
                               "document); download again", sent=True) from None


def _until(stop: threading.Event, chunks: Iterator[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        if stop.is_set():
            raise _Stopped
        yield chunk


class _Pool:
    """Files in flight: at most ``2 x workers`` submitted, results handed to ``handle`` on the
    calling thread as they complete. :meth:`close` stops the running files at their next chunk,
    drops what has not started, and still hands over every file that finished."""

    def __init__(self, workers: int, handle: Callable[[Any, _Done], None]) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mf-download")
        self._pending: dict[Future[_Done], Any] = {}
        self._window, self._handle = 2 * workers, handle
        self.stop = threading.Event()

    def submit(self, tag: Any, fn: Callable[..., _Done], *args: Any) -> None:
        """Run ``fn(*args, stop_event)`` in a worker (after waiting for room in the window)."""
        while len(self._pending) >= self._window:
            self._settle(FIRST_COMPLETED)
        self._pending[self._executor.submit(fn, *args, self.stop)] = tag

    def _settle(self, when: str) -> None:
        done, _ = wait(self._pending, return_when=when)
        for future in done:
            tag = self._pending.pop(future)
            self._handle(tag, future.result())  # a worker's error is raised here, on the calling thread

    def join(self) -> None:
        """Wait for every submitted file."""
        while self._pending:
            self._settle(ALL_COMPLETED)

    def close(self) -> None:
        self.stop.set()
        self._executor.shutdown(wait=True, cancel_futures=True)
        finished = [(f, tag) for f, tag in self._pending.items() if f.done() and not f.cancelled()
                    and f.exception() is None]
        self._pending.clear()
        for future, tag in finished:
            self._handle(tag, future.result())


# -- one call -------------------------------------------------------------------------------------


@dataclass
class _Counts:
    """What one call did; per-step tallies are bounded by the number of steps, never by traces."""

    listed: int = 0
    downloaded: int = 0
    episodes_downloaded: int = 0
    kept: int = 0
    refetched: int = 0
    nbytes: int = 0
    traces_on_disk: int = 0
    episodes_found: int = 0
    episodes_on_disk: int = 0
    skipped: int = 0
    unsafe: list[str] = field(default_factory=list)
    gone: int = 0
    gone_ids: list[str] = field(default_factory=list)
    gaps: int = 0
    gap_traces: int = 0
    gap_list: list[EpisodeGap] = field(default_factory=list)
    on_disk_by_step: dict[int, int] = field(default_factory=dict)
    skipped_by_step: dict[int, int] = field(default_factory=dict)


#: How many items of each list the result shows (the manifest has all).
_SHOW = {"steps_without_traces": 50, "steps_short": 20, "episodes_with_missing_traces": 10, "gone_trace_ids": 10}


def _prepare_dest(dest: Path, run_id: str) -> Path:
    under = next(p for p in dest.parents if p.exists() or p.is_symlink())  # the first ancestor that is there
    if not under.is_dir():
        instead = call("mf_download_traces", run_id=run_id, dest=str(under.parent / f"traces-{run_id}"))
        raise fail("bad_arguments", f"{under} is a file, not a folder, so dest {str(dest)!r} cannot be made under it.",
                   f"Pass a dest whose folders are folders, e.g. {instead}.", next_calls=[instead])
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise fail("bad_arguments", f"dest {str(dest)!r} exists and is not a folder.",
                   "Pass a new folder path (it is created) or one this tool wrote before.")
    dest = dest.resolve()
    ours = (dest / MANIFEST).is_file() or (dest / LEGACY_MANIFEST).is_file()
    # A call killed while writing its first manifest leaves only that manifest's temporary file.
    if dest.exists() and not ours and not all(map(is_manifest_partial, dest.iterdir())):
        raise fail("bad_arguments", f"dest {str(dest)!r} is not empty and holds no {MANIFEST} of this tool; "
                   "nothing was written.",
                   "Pass a new or empty folder (e.g. ./traces/<run_id>), or the folder of an earlier download.")
    for sub in ("traces", "episodes"):
        if (dest / sub).is_symlink() or ((dest / sub).exists() and not (dest / sub).is_dir()):
            raise fail("bad_arguments", f"{dest / sub} is not a plain folder; refusing to write through it.",
                       "Remove it or pass another dest.")
    return dest


class _Download:
    """One download_traces call: the folder, the record, the pool, the counts."""

    def __init__(self, ctx: Context, inp: DownloadTracesInput, team: str | None) -> None:
        self.ctx, self.inp, self.team = ctx, inp, team
        self.tc = ctx.traces()
        self.dest = _prepare_dest(ctx.resolve_path(inp.dest), inp.run_id)
        self.record = Record(self.dest, inp.run_id, ctx.settings.traces_url, resume=inp.resume)
        self.trace_dir, self.episode_dir = self.dest / "traces", self.dest / "episodes"
        self.counts = _Counts()
        self.expected_total = 0
        self.walks: list[tuple[str, Walk]] = []
        #: The run's own first step (a resumed run's steps before it are an earlier run's) and those runs.
        self.own_first = 1
        self.earlier: list[Predecessor] = []

    def whose_steps(self, run: wire.RLRun | None) -> None:
        """Where the run's own steps begin, and the earlier runs that hold the steps before (a resumed run)."""
        if run is None or run.is_sft:
            return
        first = first_step(self.ctx, run.id)
        if first is not None and first > 1:
            self.own_first = first
            self.earlier = predecessors(self.ctx, run, first=first)

    def begin(self, expected: dict[str, Any]) -> None:
        """Start the manifest before any other file, drop the temporary files a killed call left, make the folders."""
        self.dest.mkdir(parents=True, exist_ok=True)
        self.record.begin(expected)
        leftovers = [*filter(is_manifest_partial, self.dest.iterdir())]
        for folder in (self.trace_dir, self.episode_dir):  # ours: no file of a safe id starts with "."
            leftovers += filter(is_partial, folder.iterdir()) if folder.is_dir() else []
        for leftover in leftovers:
            leftover.unlink(missing_ok=True)
        self.trace_dir.mkdir(exist_ok=True)
        if self.inp.include_episodes:
            self.episode_dir.mkdir(exist_ok=True)

    def _skip(self, what: str, identifier: str, step: int | None = None) -> None:
        c = self.counts
        c.skipped += 1
        if len(c.unsafe) < 10:
            c.unsafe.append(identifier[:MAX_ID_CHARS])
        if step is not None:
            c.skipped_by_step[step] = c.skipped_by_step.get(step, 0) + 1
        self.record.problem("skipped", f"{what}:{identifier}", {"what": what, "id": identifier, "reason": "unsafe_id"})

    # -- traces ----------------------------------------------------------------------------------
    def traces(self) -> bool:
        """Walk the run's traces and download them; True when max_traces stopped the walk."""
        walk = CursorWalk(lambda c: self.tc.list_traces(team_id=self.team, run_id=self.inp.run_id, limit=PAGE_LIMIT,
                                                        cursor=c), max_pages=MAX_LIST_PAGES)
        self.walks.append(("trace listing", walk.walk))
        pool = _Pool(self.inp.concurrency, self._trace_done)
        stopped = False
        try:
            for t in walk.items():
                if self.inp.max_traces is not None and self.counts.listed >= self.inp.max_traces:
                    stopped = True
                    break
                if not self.record.list_trace(t.trace_id, t.episode_id if self.inp.include_episodes else None):
                    continue
                self.counts.listed += 1
                if not _safe_name(t.trace_id):
                    self._skip("trace", t.trace_id, t.run_step)
                    continue
                path = self.trace_dir / f"{t.trace_id}.json"
                pool.submit(t, _file_job, path, self.record.entry("trace", t.trace_id), self.inp.resume,
                            self._stream("trace", t.trace_id, t.size_bytes), False)
            pool.join()
        finally:
            pool.close()
        return stopped

    def _stream(self, kind: str, identifier: str, size: int | None = None) -> Callable[[], _Chunks]:
        """The download of one file. A trace answer must have the trace's ``size`` and an episode's
        must be one JSON document: one cut short in a well-framed body raises Unavailable, so it is
        never written (and is fetched again)."""
        if kind == "trace":
            return lambda: self.tc.stream_raw_trace(identifier, team_id=self.team, expected_bytes=size)
        return lambda: _whole_json(self.tc.stream_raw_episode(identifier, team_id=self.team), f"episode {identifier}")

    def _trace_done(self, t: wire.TraceSummary, done: _Done) -> None:
        c = self.counts
        if done.outcome == "gone":
            c.gone += 1
            if len(c.gone_ids) < _SHOW["gone_trace_ids"]:
                c.gone_ids.append(t.trace_id)
            self.record.problem("gone", t.trace_id, {"trace_id": t.trace_id})
        else:
            self._count(done, episode=False)
            if done.outcome != "kept":
                self.record.record("trace", t.trace_id, file=f"traces/{t.trace_id}.json", nbytes=done.nbytes,
                                   sha256=done.sha256, episode_id=t.episode_id, run_step=t.run_step,
                                   outcome={"reward": t.score.reward if t.score else None,
                                            "has_error": t.execution.has_error if t.execution else None})
            c.traces_on_disk += 1
            if t.run_step is not None:
                c.on_disk_by_step[t.run_step] = c.on_disk_by_step.get(t.run_step, 0) + 1
        handled = c.traces_on_disk + c.gone
        self.ctx.report(handled, self.expected_total or None, f"traces {handled}/{self.expected_total or '?'}")

    def _count(self, done: _Done, *, episode: bool) -> None:
        c = self.counts
        if done.outcome == "kept":
            c.kept += 1
            return
        c.refetched += done.outcome == "refetched"
        c.nbytes += done.nbytes
        if episode:
            c.episodes_downloaded += 1
        else:
            c.downloaded += 1

    # -- episodes --------------------------------------------------------------------------------
    def episodes(self, list_them: bool) -> None:
        """Fetch the envelopes of the listed traces' episodes (and, ``list_them``, of every episode the
        host lists for the run), and check each one's member traces against the listing."""
        if list_them:
            walk = CursorWalk(lambda c: self.tc.list_episodes(team_id=self.team, run_id=self.inp.run_id,
                                                              limit=PAGE_LIMIT, cursor=c), max_pages=MAX_LIST_PAGES)
            self.walks.append(("episode listing", walk.walk))
            for e in walk.items():
                self.record.add_episode(e.episode_id)
        pool = _Pool(self.inp.concurrency, self._episode_done)
        try:
            for episode_id in self.record.episodes():
                self.counts.episodes_found += 1
                if not _safe_name(episode_id):
                    self._skip("episode", episode_id)
                    continue
                pool.submit(episode_id, _file_job, self.episode_dir / f"{episode_id}.json",
                            self.record.entry("episode", episode_id), self.inp.resume,
                            self._stream("episode", episode_id), True)
            pool.join()
        finally:
            pool.close()

    def _episode_done(self, episode_id: str, done: _Done) -> None:
        c = self.counts
        if done.outcome == "gone":
            return
        self._count(done, episode=True)
        if done.outcome != "kept":
            self.record.record("episode", episode_id, file=f"episodes/{episode_id}.json", nbytes=done.nbytes,
                               sha256=done.sha256, outcome=done.episode)
        c.episodes_on_disk += 1
        lost = [m for m in done.members or [] if not self.record.was_listed(m)]
        if lost:
            c.gaps += 1
            c.gap_traces += len(lost)
            gap = EpisodeGap(episode_id=episode_id, missing_count=len(lost), missing_trace_ids=lost[:5])
            if len(c.gap_list) < _SHOW["episodes_with_missing_traces"]:
                c.gap_list.append(gap)
            self.record.problem("episode_gap", episode_id, gap.model_dump())

    def cut_walk(self) -> str | None:
        """The note of the first listing that stopped short, if any."""
        return next((note for what, walk in self.walks if (note := walk.note(what))), None)


@tool
def download_traces(inp: DownloadTracesInput, ctx: Context) -> DownloadTracesResult:
    """Download every trace of a run into ``dest`` with a manifest, resume and a missing-upload report.

    Layout: ``dest/traces/<trace_id>.json`` (raw documents, GET ``/traces/{id}?raw=true``),
    ``dest/episodes/<episode_id>.json`` (raw envelopes), ``dest/manifest.jsonl`` (:mod:`._manifest`).
    Every file appears whole or not at all (:func:`~tools.platform.files.write_atomic`): no
    partial files, ever. Interruptions: the manifest is started (``state: in_progress``) before any other file and
    each file's line is appended as it lands; Ctrl-C stops the running files, records those that
    finished and appends ``interrupted`` before the KeyboardInterrupt propagates; a killed process
    leaves the journal as it was. The next call resumes: files in the manifest are sha256-checked,
    files on disk the manifest does not name are fetched again, temporary files a killed call left
    are removed. Ids unusable as file names are skipped for safety and reported apart from what
    the platform is missing. Totals to check against: GET ``/runs/{id}`` and ``/runs/{id}/steps``;
    completed steps: GET ``/rft/runs/{id}/progress``. Progress: ``ctx.report(traces done, expected, ...)``.

    Errors: ``bad_arguments`` (dest not ours / not a folder), ``unavailable`` (retryable:
    the connection failed twice on one file; what was written is in the manifest, call
    again to resume), the platform codes.
    """
    tc = ctx.traces()
    run, team = platform_run(ctx, inp.run_id)
    job = _Download(ctx, inp, team)
    try:
        try:
            summary: wire.RunSummary | None = tc.get_run(inp.run_id, team_id=team)
        except perr.NotFound:
            summary = None
        if summary is None and run is None:
            raise not_found(inp.run_id)
        steps = tc.list_run_steps(inp.run_id, team_id=team).items if summary else []
        job.expected_total = summary.trace_count if summary else 0
        expected = {"trace_count": job.expected_total, "episode_count": summary.episode_count if summary else 0,
                    "steps": [s.model_dump(include={"step", "trace_count", "episode_count"}) for s in steps]}
        job.begin(expected)
        job.whose_steps(run)
        stopped = False
        try:
            if summary is not None:
                stopped = job.traces()
                if inp.include_episodes:
                    job.episodes(list_them=not stopped and not job.cut_walk())
            report, full = _missing_report(ctx, inp, run, summary, steps, job, stopped)
        except perr.Unavailable as exc:
            job.record.finish("interrupted", expected)
            again = call("mf_download_traces", run_id=inp.run_id, dest=inp.dest)
            raise fail("unavailable", f"The download of run {inp.run_id} stopped after {job.counts.downloaded} new "
                       f"trace file(s) ({job.counts.traces_on_disk} checked or written in {job.dest}): {exc.message}. "
                       "No partial file was left.",
                       f"Call {again} again: it resumes, skipping what is already there.", retryable=True,
                       next_calls=[again]) from None
        except BaseException:  # Ctrl-C (KeyboardInterrupt), SystemExit, a bug: record what landed, then propagate
            job.record.finish("interrupted", expected)
            raise
        job.record.finish("finished", expected, full)
    finally:
        job.record.close()
    c = job.counts
    walk_note = job.cut_walk()
    complete = (not stopped and walk_note is None and report.summary.startswith("complete"))
    notes = []
    if run is not None and not run.is_terminal():
        notes.append(f"Run is {run.status}: newer traces may still be uploading; call again later to add them.")
    elif summary is None and not (run is not None and run.is_sft):
        notes.append("The traces host has no traces for this run yet.")
    if walk_note:
        notes.append(walk_note)
    calls = _earlier_notes(job, run, notes)
    if c.skipped:
        notes.append(f"{c.skipped} id(s) were skipped for safety: they cannot be file names (see unsafe_ids); "
                     "the platform is not missing them.")
    return DownloadTracesResult(
        run_id=inp.run_id, dest=str(job.dest), manifest_path=str(job.record.path), traces_downloaded=c.downloaded,
        episodes_downloaded=c.episodes_downloaded, skipped_existing=c.kept, refetched_corrupted=c.refetched,
        bytes_written=c.nbytes, traces_on_disk=c.traces_on_disk, episodes_on_disk=c.episodes_on_disk,
        expected_trace_count=summary.trace_count if summary else None,
        expected_episode_count=summary.episode_count if summary else None, complete=complete,
        stopped_at_max=stopped, listing_complete=walk_note is None, skipped_for_safety=c.skipped,
        unsafe_ids=c.unsafe, missing=report, note=" ".join(notes) or None,
        earlier_runs=[EarlierRun(run_id=e.run_id, first_step=e.first_step, last_step=e.last_step)
                      for e in job.earlier] or None, next_calls=calls or None)


def _earlier_notes(job: _Download, run: wire.RLRun | None, notes: list[str]) -> list[Call]:
    """The notes of a resumed run (whose earlier steps are where) and of an SFT run (no traces), and the calls
    they name."""
    if run is not None and run.is_sft:
        evals = call("mf_list_traces", run_id=run.id, kind="eval_runs")
        notes.append(f"SFT: the run trains on a dataset and uploads no rollouts, so it has no training traces; its "
                     f"online evals' traces, if it ran any, are eval runs: {evals}.")
        return [evals]
    if job.own_first <= 1:
        return []
    if not job.earlier:
        runs = call("mf_list_runs")
        notes.append(f"Steps 1-{job.own_first - 1} are not this run's: it resumed at step {job.own_first}, from a "
                     f"run that could not be identified ({runs} lists the owner's runs; a resume keeps the name).")
        return [runs]
    calls = [call("mf_download_traces", run_id=e.run_id, dest=f"traces-{e.run_id}") for e in job.earlier]
    notes.append(" ".join(f"The traces of {e.steps} are run {e.run_id}'s: {c}." for e, c in
                          zip(job.earlier, calls, strict=True)))
    return calls


def _missing_report(ctx: Context, inp: DownloadTracesInput, run: wire.RLRun | None, summary: wire.RunSummary | None,
                    steps: list[wire.RunStep], job: _Download, stopped: bool) -> tuple[MissingReport, dict]:
    """Compare what the host and the platform say exists with what was listed and written; the
    compact report and the full one's fields for the manifest (its per-item lines are in the index)."""
    c = job.counts
    host_steps = {s.step for s in steps}
    completed = None
    if run is not None and not run.is_sft:  # an SFT run uploads no rollouts: no step lacks traces
        completed = ctx.platform().get_progress(inp.run_id).latest_step
        if completed is not None and not run.is_terminal():
            completed -= 1  # the newest step's traces may still be uploading
    without = sorted(set(range(job.own_first, (completed or 0) + 1)) - host_steps)
    partial = stopped or job.cut_walk() is not None
    short = [] if partial else [
        StepGap(step=s.step, expected=s.trace_count, downloaded=c.on_disk_by_step.get(s.step, 0))
        for s in steps if c.on_disk_by_step.get(s.step, 0) + c.skipped_by_step.get(s.step, 0) < s.trace_count]
    gaps, gap_count = ([], 0) if partial else (c.gap_list, c.gaps)
    trace_gap = (summary.trace_count - c.listed) if summary and not partial else 0
    episode_gap = (summary.episode_count - c.episodes_found) if summary and c.episodes_found and not partial else 0
    problems = []
    if without:
        problems.append(f"{len(without)} completed step(s) with no traces")
    if short:
        problems.append(f"{len(short)} step(s) with fewer traces than counted")
    if gap_count:
        problems.append(f"{gap_count} episode(s) missing {c.gap_traces} member trace(s)")
    if trace_gap > 0:
        problems.append(f"{trace_gap} trace(s) counted but not listed")
    if c.gone:
        problems.append(f"{c.gone} listed trace(s) gone")
    skipped = f"{c.skipped} id(s) skipped for safety (not usable as file names)" if c.skipped else ""
    if stopped:
        text = f"partial: stopped at max_traces={inp.max_traces}; gaps not checked"
    elif partial:
        text = "partial: a listing stopped early (see note); gaps not checked"
    elif problems:
        text = "missing: " + "; ".join(problems) + (f"; apart from that, {skipped}" if skipped else "")
    elif skipped:
        text = f"skipped: {skipped}; nothing is missing on the platform"
    elif run is not None and run.is_sft and summary is None:
        text = "complete: an SFT run uploads no training traces (it trains on a dataset)"
    else:
        text = "complete: every counted trace is on disk"
    if job.own_first > 1 and not stopped and not partial:
        text += "; " + ("; ".join(f"{e.steps} are in run {e.run_id}" for e in job.earlier) if job.earlier else
                        f"steps 1-{job.own_first - 1} are not this run's (it resumed at step {job.own_first})")
    full = {"summary": text, "trace_count_gap": trace_gap, "episode_count_gap": episode_gap,
            "steps_without_traces": without, "steps_short": [g.model_dump() for g in short],
            "episodes_with_missing_traces": gap_count, "gone_trace_ids": c.gone, "skipped_for_safety": c.skipped}
    shown = {"steps_without_traces": len(without), "steps_short": len(short),
             "episodes_with_missing_traces": gap_count, "gone_trace_ids": c.gone}
    omitted = sum(max(0, shown[k] - n) for k, n in _SHOW.items())
    report = MissingReport(
        summary=text, trace_count_gap=trace_gap, episode_count_gap=episode_gap,
        steps_without_traces=without[:_SHOW["steps_without_traces"]], steps_short=short[:_SHOW["steps_short"]],
        episodes_with_missing_traces=gaps[:_SHOW["episodes_with_missing_traces"]],
        gone_trace_ids=c.gone_ids, truncated=omitted > 0, omitted=omitted)
    return report, full
