"""The durable launch ledger: an append-only JSONL file in the state folder.

``<state>/launches.jsonl`` (state folder: ``ctx.state_path()``, default ``./.model-factory``;
created with mode 0700 on first write, the file with 0600). One JSON object per line::

    {"ts": "2025-01-01T12:00:00.000+00:00", "event": "plan" | "approval" | "attempt" | "outcome", ...}

The events and their fields are defined by :mod:`tools.guardrails.confirmation`, which is
the only intended writer. Guarantees:

* **Durable**: each record is one ``write`` on an ``O_APPEND`` descriptor followed by
  ``os.fsync`` (and an fsync of the folder when the file is created), so a record that
  :meth:`Ledger.append` returned from survives a crash or power loss.
* **Scrubbed**: records pass through the :class:`~tools.guardrails.scrubbing.Scrubber` before
  they are written, so no known secret value reaches the disk.
* **Serialised**: :meth:`Ledger.locked` is a cross-process lock (``filelock``, a
  ``launches.jsonl.lock`` file next to the ledger). Hold it around any read-check-append
  sequence; :meth:`append` takes it too (it is re-entrant within a thread).
* **Crash tolerant**: a crash mid-write leaves a torn last line. :meth:`read` skips lines
  that are not complete JSON objects, and the next append starts on a fresh line. A torn
  record never describes something that happened: its writer died before going on.
* **Damage is said, never hidden**: :meth:`damage` names every unreadable line (1-based
  numbers). A torn *last* line (no newline at the end of the file) is the crash case above: the
  record was never complete, so nothing it would have said happened. Any other unreadable line
  (garbage, an edit, a bad copy) may have held records of a plan: its attempts or outcomes, so a
  launch the ledger cannot see (``LedgerDamage.may_hide_records``). The launch tools then ask the
  platform before sending a create, and refuse when it cannot answer (``tools.launch._reconcile``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.errors import fail

if TYPE_CHECKING:
    from tools.core import Context
    from tools.guardrails.scrubbing import Scrubber

LEDGER_FILE = "launches.jsonl"


def utc_now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def iso(ts: datetime) -> str:
    """``ts`` as ISO 8601 with milliseconds and offset (naive datetimes are taken as UTC)."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.astimezone(timezone.utc).isoformat(timespec="milliseconds")


class Ledger:
    """Append-only JSONL ledger at ``state_dir / "launches.jsonl"``.

    Args:
        state_dir: the state folder (created 0700 on the first write, not before).
        scrubber: applied to every record before it is written (``None``: not scrubbed;
            tools should pass ``ctx.scrubber``, see :meth:`for_context`).
        lock_timeout: seconds to wait for the cross-process lock before failing with
            ``ToolFailure(ledger_busy)`` (retryable).
    """

    def __init__(self, state_dir: str | os.PathLike[str], scrubber: Scrubber | None = None,
                 *, lock_timeout: float = 30.0) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / LEDGER_FILE
        self.scrubber = scrubber
        self._lock_timeout = lock_timeout
        self._lock: Any = None  # a filelock.FileLock, made on first use (reads need no lock)

    @classmethod
    def for_context(cls, ctx: Context) -> Ledger:
        """The ledger of a tool context: ``ctx.state_path()``, scrubbed with ``ctx.scrubber``."""
        return cls(ctx.state_path(), ctx.scrubber)

    def _ensure_dir(self) -> None:
        if not self.state_dir.is_dir():
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    @contextmanager
    def locked(self) -> Iterator[Ledger]:
        """Hold the cross-process lock (re-entrant in one thread). Creates the state folder.

        Raises ``ToolFailure(ledger_busy)`` after ``lock_timeout`` seconds.
        """
        from filelock import FileLock, Timeout

        self._ensure_dir()
        if self._lock is None:
            self._lock = FileLock(str(self.path) + ".lock", timeout=self._lock_timeout, mode=0o600)
        try:
            self._lock.acquire()
        except Timeout:
            raise fail(
                "ledger_busy",
                f"The launch ledger {self.path} is locked by another process.",
                "Wait a few seconds and retry; if it persists, check for a stuck model-factory process.",
                retryable=True,
            ) from None
        try:
            yield self
        finally:
            self._lock.release()

    def append(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append ``{"ts": now, "event": event, **fields}`` (scrubbed) and fsync it.

        ``fields`` must be JSON-serialisable (other objects are written as ``str(obj)``) and
        may not be named ``ts`` or ``event``. Returns the record as written.
        """
        if "ts" in fields or "event" in fields:
            raise ValueError("'ts' and 'event' are set by the ledger")
        with self.locked():
            record: dict[str, Any] = {"ts": iso(utc_now()), "event": event, **fields}
            if self.scrubber is not None:
                record = self.scrubber.scrub_obj(record)
            data = (json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n").encode()
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data  # close a torn line left by a crash
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                _fsync_dir(self.state_dir)
        return record

    def read(self) -> list[dict[str, Any]]:
        """All complete records, oldest first (``[]`` when the file does not exist).

        Lines that are not a JSON object with an ``event`` (a torn write) are skipped; :meth:`damage`
        names them. Reading does not lock; hold :meth:`locked` when the answer decides a write.
        """
        return self._scan()[0]

    def damage(self) -> LedgerDamage:
        """The unreadable lines of the file now (none when it does not exist)."""
        return self._scan()[1]

    def _scan(self) -> tuple[list[dict[str, Any]], LedgerDamage]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], LedgerDamage()
        records: list[dict[str, Any]] = []
        bad: list[int] = []
        lines = data.split(b"\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if isinstance(record, dict) and isinstance(record.get("event"), str):
                records.append(record)
            else:
                bad.append(number)
        torn = bool(bad) and bad[-1] == len(lines) and not data.endswith(b"\n")
        return records, LedgerDamage(lines=bad, torn_last=torn)


@dataclass(frozen=True)
class LedgerDamage:
    """The unreadable lines of a ledger file: ``lines`` (1-based), ``torn_last`` (the last one is
    a torn write: the file does not end with a newline)."""

    lines: list[int] = field(default_factory=list)
    torn_last: bool = False

    @property
    def may_hide_records(self) -> bool:
        """True when a line other than a torn last line is unreadable: a record of any plan may be lost."""
        return len(self.lines) > (1 if self.torn_last else 0)

    def words(self, path: Path) -> str | None:
        """One sentence for people and agents, or None when every line is readable."""
        if not self.lines:
            return None
        shown = ", ".join(str(n) for n in self.lines[:10]) + (f" and {len(self.lines) - 10} more"
                                                             if len(self.lines) > 10 else "")
        count = f"{len(self.lines)} unreadable line{'s' if len(self.lines) > 1 else ''}"
        why = ("a write torn by a crash (it recorded nothing that happened)" if not self.may_hide_records else
               "records there are not counted: a launch they held is checked on the platform before any create")
        return f"The launch ledger {path} has {count} (line {shown}): {why}."


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
