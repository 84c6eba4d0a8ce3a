"""The record of a traces download: ``dest/manifest.jsonl`` on disk, and an index of it that lives
on disk too, so a download holds no per-trace state in memory (its memory stays flat in the
number of traces).

``manifest.jsonl`` holds one JSON object per line, told apart by ``kind``:

- ``header`` (first line): ``format`` (:data:`FORMAT`), ``run_id``, ``source`` (the traces host),
  ``created_at``;
- ``expected``: ``trace_count``, ``episode_count``, ``steps`` as the host counts them;
- ``trace``: ``trace_id``, ``file``, ``episode_id``, ``run_step``, ``bytes``, ``sha256``, and how the rollout went
  as the host's listing said (``TraceSummary``): ``reward`` (null = unscored) and ``has_error``;
- ``episode``: ``episode_id``, ``file``, ``bytes``, ``sha256``, and from its envelope ``ok`` and ``error`` (the
  first of its ``errors`` as ``"type: message"``, at most :data:`MAX_ERROR_CHARS` characters, null when none);
- ``skipped`` (``what``, ``id``, ``reason`` ``unsafe_id``), ``gone`` (``trace_id``),
  ``episode_gap`` (``episode_id``, ``missing_count``, ``missing_trace_ids``): one line per item
  of the missing-upload report; ``missing``: the rest of that report;
- ``state``: ``in_progress`` | ``interrupted`` | ``finished`` and ``at`` (UTC); the last one
  counts.

While a call runs the file is a journal: each file's line is appended as soon as the file is
renamed into place and reaches the disk within :data:`FLUSH_SECONDS`, so a killed call loses at
most the lines of the files renamed in its last quarter second (they are fetched again, never
trusted, by the next call). A later line for the same
file replaces an earlier one. A finished call rewrites the file atomically, in order: header,
expected, traces and episodes sorted by id, the report's lines, ``missing``, ``state``.

The index is a private SQLite database (``sqlite3.connect("")``: on disk, removed when closed,
a page cache of :data:`INDEX_CACHE_KIB`): the entries, the traces listed by this call and the
episodes to fetch. A folder written by an earlier version (``manifest.json``, format
``model-factory-traces/1``) is read once and replaced.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

from tools.errors import fail
from tools.platform.files import is_partial, write_atomic

MANIFEST = "manifest.jsonl"
FORMAT = "model-factory-traces/2"
LEGACY_MANIFEST, LEGACY_FORMAT = "manifest.json", "model-factory-traces/1"
#: Page cache of the index, KiB (SQLite's default is about 2 MiB).
INDEX_CACHE_KIB = 2048
#: Rows read from the index at a time.
BATCH = 500
#: Seconds at most between the journal's writes to disk while files land.
FLUSH_SECONDS = 0.25
#: Characters kept of an episode's error; distinct errors counted by :func:`download_summary` (the rest: "other").
MAX_ERROR_CHARS = 200
MAX_DISTINCT_ERRORS = 50
#: The fields of a file's line that say how its rollout went (written by downloads since format 2 gained them).
OUTCOME_KEYS = {"trace": ("reward", "has_error"), "episode": ("ok", "error")}

State = Literal["in_progress", "interrupted", "finished"]
Kind = Literal["trace", "episode"]
_ID = {"trace": "trace_id", "episode": "episode_id"}
_SCHEMA = """
CREATE TABLE entry (kind TEXT NOT NULL, id TEXT NOT NULL, file TEXT, episode_id TEXT, run_step INTEGER,
                    bytes INTEGER, sha256 TEXT, outcome TEXT, PRIMARY KEY (kind, id)) WITHOUT ROWID;
CREATE TABLE listed (id TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE episode (n INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE);
CREATE TABLE problem (kind TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID;
"""


def now_text() -> str:
    """The current UTC time as ISO 8601 with a ``Z``."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def is_manifest_partial(path: Path) -> bool:
    """True for a temporary file of our manifest (this or the earlier format) left by a killed call."""
    return is_partial(path) and path.name.startswith((f".{MANIFEST}.", f".{LEGACY_MANIFEST}."))


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class Record:
    """One download's manifest and index. Used from one thread (the index is SQLite's).

    Few statements per file: the files of this call are indexed in batches of :data:`BATCH`
    (``executemany``), and a download that starts from nothing never looks a file up (only an
    earlier call's files can be there). Each statement hands the interpreter's lock to the
    download threads and waits to get it back, so statements per file cost throughput.
    """

    def __init__(self, dest: Path, run_id: str, source: str, *, resume: bool) -> None:
        self.dest, self.run_id, self.source, self.resume = dest, run_id, source, resume
        self.path = dest / MANIFEST
        self._db = sqlite3.connect("", isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size=-{INDEX_CACHE_KIB}"):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.executescript(_SCHEMA)
        self._db.execute("BEGIN")  # one transaction for the index's whole life: nothing is written per statement
        self._journal: IO[bytes] | None = None
        self._flush_due = 0.0
        self._rows: list[tuple[Any, ...]] = []  # entries not yet in the index (at most BATCH)
        self._legacy = (dest / LEGACY_MANIFEST).is_file() and not self.path.is_file()
        if self.path.is_file():
            self._read_journal()
        elif self._legacy:
            self._read_legacy()
        self._index_rows()
        self._earlier = self._db.execute("SELECT 1 FROM entry LIMIT 1").fetchone() is not None

    # -- reading what an earlier call left ---------------------------------------------------
    def _refuse(self, why: str) -> None:
        raise fail("bad_arguments", f"{self.dest} {why}; nothing was written.",
                   "Pass a new or empty folder as dest (or the folder of an earlier download of this run).")

    def _check_header(self, header: Any, fmt: str) -> None:
        if not isinstance(header, dict) or header.get("format") != fmt:
            self._refuse("holds a manifest not written by this tool")
        if header.get("run_id") != self.run_id:
            raise fail("bad_arguments", f"{self.dest} holds the download of run {header.get('run_id')!r}, not "
                       f"{self.run_id!r}.", "Pass another dest for this run.")

    def _read_journal(self) -> None:
        with self.path.open("rb") as handle:
            first = handle.readline()
            try:
                header = json.loads(first)
            except ValueError:
                header = None
            self._check_header(header, FORMAT)
            if not self.resume:
                return
            for raw in handle:
                try:
                    record = json.loads(raw)
                except ValueError:  # a line torn by a killed call
                    continue
                if isinstance(record, dict) and record.get("kind") in _ID:
                    self._remember(record)

    def _read_legacy(self) -> None:
        try:
            document = json.loads((self.dest / LEGACY_MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            document = None
        self._check_header(document, LEGACY_FORMAT)
        if self.resume:
            for kind, key in (("trace", "traces"), ("episode", "episodes")):
                for entry in document.get(key) or []:
                    if isinstance(entry, dict):
                        self._remember({**entry, "kind": kind})

    def _remember(self, record: dict[str, Any]) -> None:
        kind = record["kind"]
        identifier = record.get(_ID[kind])
        if not isinstance(identifier, str) or not isinstance(record.get("sha256"), str):
            return
        outcome = {k: record[k] for k in OUTCOME_KEYS[kind] if k in record}
        self._rows.append((kind, identifier, record.get("file"), record.get("episode_id"), record.get("run_step"),
                           record.get("bytes"), record["sha256"], json.dumps(outcome) if outcome else None))
        if len(self._rows) >= BATCH:
            self._index_rows()

    def _index_rows(self) -> None:
        """Write the pending entries to the index, in order (a later one for a file replaces an earlier one)."""
        if self._rows:
            self._db.executemany("INSERT OR REPLACE INTO entry VALUES (?, ?, ?, ?, ?, ?, ?, ?)", self._rows)
            self._rows = []

    # -- writing -------------------------------------------------------------------------------
    def begin(self, expected: dict[str, Any]) -> None:
        """Start this call's journal: appended to an earlier one when resuming, else a new file
        (header, expected, the earlier format's entries); state ``in_progress``."""
        if self.resume and self.path.is_file():
            self._journal = self.path.open("ab")
            if self.path.stat().st_size and not self._ends_with_newline():
                self._journal.write(b"\n")  # after a line torn by a kill
            self._append({"kind": "expected", **expected}, flush=True)
        else:
            write_atomic(self.path, self._document(expected, None, "in_progress"))
            self._journal = self.path.open("ab")
        (self.dest / LEGACY_MANIFEST).unlink(missing_ok=True)
        self._append({"kind": "state", "state": "in_progress", "at": now_text()}, flush=True)

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as handle:
            handle.seek(-1, 2)
            return handle.read(1) == b"\n"

    def _append(self, record: dict[str, Any], *, flush: bool = False) -> None:
        """Append a line; lines reach the file at least every :data:`FLUSH_SECONDS` (a flush per line
        costs a write per file, which slows a download on a busy disk)."""
        assert self._journal is not None
        self._journal.write(_line(record))
        now = time.monotonic()
        if flush or now >= self._flush_due:
            self._journal.flush()
            self._flush_due = now + FLUSH_SECONDS

    def entry(self, kind: Kind, identifier: str) -> tuple[int, str] | None:
        """(bytes, sha256) of the file an earlier call recorded for ``identifier``, or None (this call
        fetches each file once: its own records are never looked up)."""
        if not self._earlier:
            return None
        row = self._db.execute("SELECT bytes, sha256 FROM entry WHERE kind = ? AND id = ?",
                               (kind, identifier)).fetchone()
        return (row[0], row[1]) if row else None

    def record(self, kind: Kind, identifier: str, *, file: str, nbytes: int, sha256: str,
               episode_id: str | None = None, run_step: int | None = None,
               outcome: dict[str, Any] | None = None) -> None:
        """A file landed (or was checked): index it and append its line to the journal. ``outcome``:
        the :data:`OUTCOME_KEYS` of its kind."""
        entry: dict[str, Any] = {"kind": kind, _ID[kind]: identifier, "file": file}
        if kind == "trace":
            entry.update(episode_id=episode_id, run_step=run_step)
        entry.update(bytes=nbytes, sha256=sha256, **{k: v for k, v in (outcome or {}).items()
                                                      if k in OUTCOME_KEYS[kind]})
        self._remember(entry)
        self._append(entry)

    def list_trace(self, trace_id: str, episode_id: str | None) -> bool:
        """Note a trace the host listed (and its episode); False when it was listed before."""
        if self._db.execute("INSERT OR IGNORE INTO listed VALUES (?)", (trace_id,)).rowcount == 0:
            return False
        if episode_id:
            self.add_episode(episode_id)
        return True

    def was_listed(self, trace_id: str) -> bool:
        """True when the host listed ``trace_id`` in this call."""
        return self._db.execute("SELECT 1 FROM listed WHERE id = ?", (trace_id,)).fetchone() is not None

    def add_episode(self, episode_id: str) -> None:
        """An episode to fetch (each once, in the order found)."""
        self._db.execute("INSERT OR IGNORE INTO episode (id) VALUES (?)", (episode_id,))

    def episodes(self) -> Iterator[str]:
        """The episodes to fetch, in the order found (read in batches)."""
        after = 0
        while rows := self._db.execute("SELECT n, id FROM episode WHERE n > ? ORDER BY n LIMIT ?",
                                       (after, BATCH)).fetchall():
            after = rows[-1][0]
            yield from (identifier for _, identifier in rows)

    def problem(self, kind: str, identifier: str, data: dict[str, Any]) -> None:
        """One item of the missing-upload report (``skipped``, ``gone``, ``episode_gap``)."""
        self._db.execute("INSERT OR REPLACE INTO problem VALUES (?, ?, ?)",
                         (kind, identifier, json.dumps({"kind": kind, **data}, ensure_ascii=False)))

    def finish(self, state: State, expected: dict[str, Any], missing: dict[str, Any] | None = None) -> None:
        """End the call: ``finished`` rewrites the manifest in order (atomically); otherwise the
        state is appended to the journal."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if state == "finished":
            write_atomic(self.path, self._document(expected, missing, state))
        elif self.path.is_file():
            with self.path.open("ab") as handle:
                handle.write(_line({"kind": "state", "state": state, "at": now_text()}))

    def _document(self, expected: dict[str, Any], missing: dict[str, Any] | None, state: State) -> Iterator[bytes]:
        self._index_rows()
        yield _line({"kind": "header", "format": FORMAT, "run_id": self.run_id, "source": self.source,
                     "created_at": now_text()})
        yield _line({"kind": "expected", **expected})
        for kind in ("trace", "episode"):
            last: str | None = None
            while rows := self._db.execute(
                    "SELECT id, file, episode_id, run_step, bytes, sha256, outcome FROM entry WHERE kind = ? AND "
                    "id > ? ORDER BY id LIMIT ?", (kind, last or "", BATCH)).fetchall():
                last = rows[-1][0]
                for identifier, file, episode_id, run_step, nbytes, sha256, outcome in rows:
                    entry = {"kind": kind, _ID[kind]: identifier, "file": file}
                    if kind == "trace":
                        entry.update(episode_id=episode_id, run_step=run_step)
                    yield _line({**entry, "bytes": nbytes, "sha256": sha256, **json.loads(outcome or "{}")})
        if missing is not None:
            for (data,) in self._db.execute("SELECT data FROM problem ORDER BY kind, id"):
                yield data.encode() + b"\n"
            yield _line({"kind": "missing", **missing})
        yield _line({"kind": "state", "state": state, "at": now_text()})

    def close(self) -> None:
        """Close the journal and drop the index (safe to call twice)."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        self._db.close()


def download_summary(dest: Path) -> dict[str, Any] | None:
    """What a download folder holds, read from its ``manifest.jsonl`` in one streamed pass (memory
    flat in the number of traces): ``run_id``, ``state`` (the last state line), ``traces`` and
    ``episodes`` (distinct ids with a file line), ``bytes``, ``expected_traces`` (the host's count
    at the last call), ``missing`` (the report's ``summary`` line, None until a call finished), and
    ``outcomes``: of the lines that record them (:data:`OUTCOME_KEYS`), ``traces``, ``traces_with_error``
    (``has_error``), ``traces_unscored`` (``reward`` null), ``episodes``, ``episodes_failed`` (``ok``
    false) and ``errors``: the episodes' most common errors, ``[(error, count)]``, most frequent first
    (at most 3; :data:`MAX_DISTINCT_ERRORS` distinct ones are told apart, the rest count as "other").
    None when ``dest`` has no manifest of this format."""
    path = dest / MANIFEST
    try:
        handle = path.open("rb")
    except OSError:
        return None
    out: dict[str, Any] = {"run_id": None, "state": None, "traces": 0, "episodes": 0, "bytes": 0,
                           "expected_traces": None, "missing": None}
    seen: dict[str, set[str]] = {"trace": set(), "episode": set()}
    tally = {"traces": 0, "traces_with_error": 0, "traces_unscored": 0, "episodes": 0, "episodes_failed": 0}
    errors: Counter[str] = Counter()
    with handle:
        for number, raw in enumerate(handle):
            try:
                record = json.loads(raw)
            except ValueError:  # a line torn by a killed call
                continue
            if not isinstance(record, dict):
                continue
            kind = record.get("kind")
            if number == 0:
                if kind != "header" or record.get("format") != FORMAT:
                    return None
                out["run_id"] = record.get("run_id")
            elif kind in _ID and isinstance(record.get(_ID[kind]), str):
                if record[_ID[kind]] not in seen[kind]:
                    seen[kind].add(record[_ID[kind]])
                    out["bytes"] += record.get("bytes") or 0
                    _tally(kind, record, tally, errors)
            elif kind == "expected":
                out["expected_traces"] = record.get("trace_count")
            elif kind == "missing":
                out["missing"] = record.get("summary")
            elif kind == "state":
                out["state"] = record.get("state")
    out["traces"], out["episodes"] = len(seen["trace"]), len(seen["episode"])
    out["outcomes"] = {**tally, "errors": errors.most_common(3)}
    return out


def _tally(kind: str, record: dict[str, Any], tally: dict[str, int], errors: Counter[str]) -> None:
    """Count one file line's outcome (lines written before downloads recorded outcomes have none)."""
    if kind == "trace" and "has_error" in record:
        tally["traces"] += 1
        tally["traces_with_error"] += record.get("has_error") is True
        tally["traces_unscored"] += record.get("reward") is None
    elif kind == "episode" and "ok" in record:
        tally["episodes"] += 1
        if record.get("ok") is False:
            tally["episodes_failed"] += 1
            error = record.get("error")
            error = error if isinstance(error, str) else "no error given"
            errors[error if error in errors or len(errors) < MAX_DISTINCT_ERRORS else "other"] += 1
