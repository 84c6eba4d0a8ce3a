"""The files of one checkpoint download: where they go, the journal that makes a download resumable, and the
parallel, verified, per-file atomic transfer of their parts.

Layout in ``dest`` (the checkpoint's ``step_<n>/`` folder, as ``prime volumes get VOLUME .../step_<n>/ DEST``
lays it out): the checkpoint's files at their relative paths, and ``.model-factory/`` with ``manifest.jsonl``
and ``partial/`` (files being fetched, pre-sized and written part by part). A file gets its name only once
every part is on disk and its size and checksum match what the store gives (then renamed into place, with
the object's mtime, as the CLI's ``_restore_mtime``): no partial file ever sits under a checkpoint name.

``manifest.jsonl``, one JSON object per line, told apart by ``kind``: ``header`` (``format``, ``run_id``,
``step``, ``volume``, ``team_id``, ``path``, ``created_at``), ``part`` (``file``, ``etag``, ``index``: one part
of a file in ``partial/`` landed), ``file`` (``file``, ``bytes``, ``etag``, ``md5``, ``verified``: ``md5`` or
``size``), ``state`` (``in_progress`` | ``interrupted`` | ``finished``, ``at``). The last line for a file counts.
A finished call rewrites it in order (header, files by name, state). A killed call leaves its journal as it
was: the next call keeps the parts it names (of the same object version, by ETag) and fetches the rest.

Parts are ``part_bytes`` (:data:`tools.monitor.checkpoints.PART_BYTES`, 64 MiB, the CLI's ``_R2_PART_SIZE``),
``workers`` in flight (``WORKERS`` there, 8: the CLI has 8 files x 4 parts = 32; 8 reach 1.2 GB/s on loopback).
Each part is retried :data:`PART_ATTEMPTS` times over a cut connection, waiting with the context's sleep. A
file's MD5 is computed as its parts land, in order, by reading them back (the page cache) on :data:`HASHERS`
threads, so files are verified while others download and no second pass is needed at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.core import Context
from tools.errors import fail
from tools.guardrails.text import shown
from tools.platform import errors as perr
from tools.platform.files import write_atomic
from tools.platform.storage import StoredObject, VolumeReader

FORMAT = "model-factory-checkpoint/1"
STATE_DIR = ".model-factory"
MANIFEST = f"{STATE_DIR}/manifest.jsonl"
#: Threads computing files' MD5 (hashlib releases the GIL: one per core of the machines this runs on).
HASHERS = 2
PART_ATTEMPTS = 3
_MAX_SEGMENT = 255
_READ_BACK = 4 * 2**20


# -- names -----------------------------------------------------------------------------------------


def unsafe_reason(rel: str) -> str | None:
    """Why ``rel`` (a key relative to the checkpoint's prefix) cannot be a file under ``dest``, or None:
    an empty, ``.`` or ``..`` segment or a backslash (prime 0.18.0 ``_get_plan`` skips those), a control
    character, a segment over 255 bytes, or our own folder's name."""
    parts = rel.removesuffix("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "an empty, '.' or '..' path segment"
    if "\\" in rel or any(ord(c) < 32 or ord(c) == 127 for c in rel):
        return "a backslash or a control character"
    if any(len(p.encode("utf-8", "surrogateescape")) > _MAX_SEGMENT for p in parts):
        return f"a name longer than {_MAX_SEGMENT} bytes"
    if parts[0] == STATE_DIR:
        return f"the name of this tool's own folder ({STATE_DIR})"
    return None


def refuse_linked(dest: Path, rels: list[str]) -> None:
    """ToolFailure ``unsafe_path`` if an existing component below ``dest`` on a planned path is a symbolic
    link (the download would write through it, outside dest), as prime's ``_refuse_linked_dest``; ``dest``
    itself may be a link the person chose."""
    seen: set[Path] = set()
    for rel in [STATE_DIR + "/partial/x", *rels]:
        cur = dest
        for part in rel.removesuffix("/").split("/"):
            cur = cur / part
            if cur in seen:
                continue
            seen.add(cur)
            if cur.is_symlink():
                raise fail("unsafe_path", f"{shown(str(cur))} is a symbolic link inside dest: the download would "
                           "write through it, outside dest. Nothing was written.",
                           "Remove the link, or pass another dest.")
            if not cur.exists():
                break


# -- the journal -------------------------------------------------------------------------------------


@dataclass
class Journal:
    """``dest/.model-factory/manifest.jsonl``: what earlier calls left (``files``, ``parts``) and this call's lines."""

    path: Path
    header: dict[str, Any]
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    parts: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    _handle: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def read(cls, path: Path, header: dict[str, Any]) -> Journal:
        """The journal at ``path`` (lines that do not parse are ignored: a torn last line), for ``header``."""
        journal = cls(path, header)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (FileNotFoundError, UnicodeDecodeError):
            lines = []
        for line in lines:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if not isinstance(item, dict):
                continue
            if item.get("kind") == "file" and isinstance(item.get("file"), str):
                journal.files[item["file"]] = item
            elif item.get("kind") == "part" and isinstance(item.get("index"), int):
                journal.parts.setdefault((str(item.get("file")), str(item.get("etag"))), set()).add(item["index"])
            elif item.get("kind") == "discard":
                journal.parts.pop((str(item.get("file")), str(item.get("etag"))), None)
        return journal

    def begin(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("a", encoding="utf-8")
        self.write(self.header)
        self.write({"kind": "state", "state": "in_progress", "at": _now()})

    def write(self, item: dict[str, Any]) -> None:
        with self._lock:
            self._handle.write(json.dumps(item, separators=(",", ":")) + "\n")
            self._handle.flush()

    def finish(self, state: str) -> None:
        """Close the journal: ``interrupted`` appends that state; ``finished`` rewrites it whole (header, files)."""
        if self._handle is None:
            return
        if state != "finished":
            self.write({"kind": "state", "state": state, "at": _now()})
            self._handle.close()
            self._handle = None
            return
        self._handle.close()
        self._handle = None
        lines = [self.header, *(self.files[f] for f in sorted(self.files)),
                 {"kind": "state", "state": "finished", "at": _now()}]
        write_atomic(self.path, [("\n".join(json.dumps(x, separators=(",", ":")) for x in lines) + "\n").encode()])


def _now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- one file --------------------------------------------------------------------------------------


@dataclass
class FileJob:
    """One object to have on disk: where it goes, its parts, what is done, its running MD5."""

    rel: str
    obj: StoredObject
    final: Path
    partial: Path
    part_bytes: int
    done: set[int] = field(default_factory=set)
    hashed: int = 0
    digest: Any = None
    fd: int | None = None
    attempt: int = 1
    fetched_parts: int = 0
    hashing: bool = False
    settled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def opened(self) -> int:
        """The partial file's descriptor (opened before any part is fetched)."""
        if self.fd is None:
            raise RuntimeError(f"{self.rel}: the partial file is not open")
        return self.fd

    def close(self) -> None:
        """Close the partial file."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def span(self, index: int) -> tuple[int, int]:
        start = index * self.part_bytes
        return start, min(self.obj.size, start + self.part_bytes) - 1

    @property
    def parts(self) -> int:
        return -(-self.obj.size // self.part_bytes)


def md5_file(path: Path) -> str:
    """Hex MD5 of a file on disk."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "md5").hexdigest()


def local_ok(path: Path, obj: StoredObject) -> str | None:
    """How a file on disk matches ``obj`` (``md5`` or ``size``), or None when it does not."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size != obj.size:
            return None
    except OSError:
        return None
    want = obj.md5()
    if want is None:
        return "size"
    return "md5" if md5_file(path) == want else None


@dataclass
class Counts:
    """What one call did."""

    files_fetched: int = 0
    files_kept: int = 0
    refetched: int = 0
    parts_fetched: int = 0
    parts_resumed: int = 0
    bytes_fetched: int = 0
    md5_verified: int = 0
    size_only: int = 0
    retries: int = 0


class _Stopped(Exception):
    """The call is stopping: abandon this part at its next chunk."""


class Transfer:
    """The parts of every file that is not on disk yet, fetched by ``workers`` threads and hashed by
    :data:`HASHERS`; results handled on the calling thread (journal, verification, the rename, progress)."""

    def __init__(self, ctx: Context, reader: VolumeReader, journal: Journal, jobs: list[FileJob],
                 total_bytes: int, counts: Counts, workers: int) -> None:
        self.ctx, self.reader, self.journal, self.jobs, self.workers = ctx, reader, journal, jobs, workers
        self.total_bytes, self.counts = total_bytes, counts
        self.stop = threading.Event()
        self.done_bytes = total_bytes - sum(j.obj.size for j in jobs)
        self.files_total = 0
        self.files_done = 0
        self.mismatched: list[str] = []
        #: Parts of files whose checksum did not match, fetched once more.
        self.again: list[tuple[FileJob, int]] = []

    def _fetch_part(self, job: FileJob, index: int) -> int:
        start, end = job.span(index)
        for attempt in range(1, PART_ATTEMPTS + 1):
            pos = start
            try:
                for chunk in self.reader.read(job.obj.key, start, end, etag=job.obj.etag):
                    if self.stop.is_set():
                        raise _Stopped
                    os.pwrite(job.opened(), chunk, pos)
                    pos += len(chunk)
                return end - start + 1
            except perr.Unavailable:
                if attempt == PART_ATTEMPTS or self.stop.is_set():
                    raise
                self.counts.retries += 1
                self.ctx.sleep(0.5 * 2 ** (attempt - 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def run(self) -> None:
        """Fetch every missing part; hash each file's parts in order on :data:`HASHERS` threads as they land (so
        files are verified while others download); settle each file on this thread once it is hashed whole."""
        fetching: dict[Future[int], tuple[FileJob, int]] = {}
        hashing: dict[Future[None], FileJob] = {}
        queue = self._parts()
        with ThreadPoolExecutor(self.workers, thread_name_prefix="mf-checkpoint") as pool, \
                ThreadPoolExecutor(HASHERS, thread_name_prefix="mf-checkpoint-md5") as hashers:
            self._hash_now = lambda job: hashing.__setitem__(hashers.submit(self._hash, job), job)
            try:
                while True:
                    while len(fetching) < 2 * self.workers:
                        nxt = self.again.pop(0) if self.again else next(queue, None)
                        if nxt is None:
                            break
                        fetching[pool.submit(self._fetch_part, *nxt)] = nxt
                    if not fetching and not hashing:
                        break
                    pending: list[Future[Any]] = [*fetching, *hashing]
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        if future in hashing:
                            job = hashing.pop(future)
                            future.result()
                            if job.hashed == job.parts and not job.settled:
                                self._settle(job)
                            continue
                        job, index = fetching.pop(future)
                        self._landed(job, index, future.result())
            finally:
                self.stop.set()
                for future, (job, index) in list(fetching.items()):
                    if future.done() and not future.cancelled() and future.exception() is None:
                        self.journal.write({"kind": "part", "file": job.rel, "etag": job.obj.etag, "index": index})
                    future.cancel()
                for future in hashing:
                    future.cancel()
        for job in self.jobs:
            job.close()

    def _parts(self) -> Iterator[tuple[FileJob, int]]:
        """Every part still to fetch, file by file (a file's parts in order, so its MD5 keeps up)."""
        for job in self.jobs:
            self._open(job)
            for index in range(job.parts):
                if index not in job.done:
                    yield job, index

    def _open(self, job: FileJob) -> None:
        job.partial.parent.mkdir(parents=True, exist_ok=True)
        fresh = not job.done
        job.fd = os.open(job.partial, os.O_RDWR | os.O_CREAT | (os.O_TRUNC if fresh else 0), 0o600)
        os.ftruncate(job.fd, job.obj.size)
        job.digest, job.hashed = hashlib.md5(), 0
        self.counts.parts_resumed += len(job.done)
        self.done_bytes += sum(job.span(i)[1] - job.span(i)[0] + 1 for i in job.done)
        self._wake(job)

    def _landed(self, job: FileJob, index: int, nbytes: int) -> None:
        with job.lock:
            job.done.add(index)
        job.fetched_parts += 1
        self.counts.parts_fetched += 1
        self.counts.bytes_fetched += nbytes
        self.done_bytes += nbytes
        self.journal.write({"kind": "part", "file": job.rel, "etag": job.obj.etag, "index": index})
        self._wake(job)
        self.ctx.report(self.done_bytes, self.total_bytes,
                        f"{self.files_done}/{self.files_total} files, {self.done_bytes // 2**20} MiB")

    def _wake(self, job: FileJob) -> None:
        """Start hashing ``job`` on a hasher thread unless one is at it (or it has nothing new to hash)."""
        with job.lock:
            if job.hashing or (job.hashed not in job.done and job.hashed < job.parts):
                return
            job.hashing = True
        self._hash_now(job)

    def _hash(self, job: FileJob) -> None:
        """Extend the file's MD5 over the parts on disk in order (a hasher thread; one per file at a time)."""
        while True:
            with job.lock:
                if job.hashed not in job.done or self.stop.is_set():
                    job.hashing = False
                    return
            start, end = job.span(job.hashed)
            buffer = bytearray(_READ_BACK)  # read back through one buffer (a map would count as resident memory)
            pos = start
            while pos <= end:
                with memoryview(buffer)[:min(_READ_BACK, end + 1 - pos)] as piece:
                    got = os.preadv(job.opened(), [piece], pos)
                    if not got:
                        break
                    job.digest.update(piece[:got])
                pos += got
            with job.lock:
                job.hashed += 1

    def _settle(self, job: FileJob) -> None:
        """Every part is on disk: verify, then rename into place (or fetch it all once more)."""
        want = job.obj.md5()
        got = job.digest.hexdigest() if job.parts else hashlib.md5().hexdigest()
        if want is not None and got != want:
            self.journal.write({"kind": "discard", "file": job.rel, "etag": job.obj.etag})
            if job.attempt == 1:  # fetch it all once more
                job.attempt = 2
                with job.lock:
                    job.done.clear()
                    job.digest, job.hashed = hashlib.md5(), 0
                self.counts.refetched += 1
                self.done_bytes -= job.obj.size
                self.again += [(job, i) for i in range(job.parts)]
                if not job.parts:
                    self._wake(job)
                return
            job.settled = True
            self.mismatched.append(job.rel)
            job.close()
            job.partial.unlink(missing_ok=True)
            return
        job.settled = True
        job.close()  # no fsync: a file a crash leaves short is caught by the next call's MD5 check
        mtime = job.obj.mtime_ns()
        if mtime is not None:
            os.utime(job.partial, ns=(mtime, mtime))
        job.final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(job.partial, job.final)
        verified = "md5" if want is not None else "size"
        self.counts.md5_verified += verified == "md5"
        self.counts.size_only += verified == "size"
        self.counts.files_fetched += 1
        self.files_done += 1
        line = {"kind": "file", "file": job.rel, "bytes": job.obj.size, "etag": job.obj.etag, "md5": want,
                "verified": verified}
        self.journal.files[job.rel] = line
        self.journal.write(line)


def free_bytes(folder: Path) -> int:
    """Free bytes on the file system of ``folder`` (its first existing ancestor)."""
    probe = folder
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free


def partial_path(dest: Path, rel: str) -> Path:
    return dest / STATE_DIR / "partial" / (hashlib.sha1(rel.encode()).hexdigest()[:20] + ".part")

