"""The state store: one SQLite database per user, outside the agent's working folder.

``<state>/state.db``, where the state folder is ``$MODEL_FACTORY_STATE_DIR``, else
``$XDG_STATE_HOME/model-factory``, else ``~/.local/state/model-factory``
(:func:`state_folder`); folder created 0700, the database 0600 (SQLite gives its ``-wal`` and
``-shm`` files the same mode). It holds plans, approvals, attempts, outcomes, run links (which run
a plan made, and which run it continues) and the audit trail of every tool call, and returns them
as the typed records of :mod:`tools.guardrails.records`.

One database per user rather than one per platform and account: every row that belongs to a
platform carries its ``platform_url`` (and a plan its ``account_id`` and team), and every check and
view is scoped by them (launch-once compares owners as platform + team, or platform + account for a
personal account; ``mf_list_launches`` shows the current platform's plans). So one file, one schema
and one migration path serve every key, and ``model-factory history`` reads everything a person did
in one place. The emulator's plans (its own loopback URL) never mix with the platform's.

Guarantees:

* **Concurrency by the database**: the standard library's ``sqlite3`` in WAL mode, a busy timeout
  (:data:`BUSY_SECONDS`), one ``BEGIN IMMEDIATE`` transaction per state change (:meth:`Store.write`):
  a check-and-record (claiming a plan's one request) is atomic across processes. Busy beyond the
  timeout: ``state_busy`` (retryable).
* **Durable**: ``synchronous=FULL``: a change :meth:`Store.write` committed survives a crash or
  power loss (the audit trail's rows are synced with the next such change: a call's row may be
  lost with the power, never a plan, approval, attempt or outcome).
* **Scrubbed**: every record passes through the :class:`~tools.guardrails.scrubbing.Scrubber`
  before it is written.
* **Damage is said, never read silently**: a file that is not a database, a page SQLite finds
  malformed, a record that does not parse, or a schema newer than this version: ``state_unusable``
  naming the file; nothing is sent while it lasts.
* **Unwritable is said**: where the folder cannot be written (an agent sandbox that allows writes
  only in the workspace), the store opens read-only (reads work) and every action refuses before
  sending anything (:meth:`Store.require_writable`, ``state_read_only``), saying how to allow the
  folder or to use the MCP server.
* **Versioned**: ``PRAGMA user_version`` is the schema version; :data:`MIGRATIONS` bring an older
  database up to date, each in one transaction (tests/test_state_store.py runs them).
* **Bounded**: the audit trail keeps at most :data:`AUDIT_MAX_ROWS` calls and none older than
  :data:`AUDIT_MAX_DAYS` days (pruned on each write of a call). Plans and their records are kept:
  they are what launch-once rests on.
* **An old ledger is imported once, for the record**: a ``launches.jsonl`` of an earlier version
  (``./.model-factory`` of the working folder, or the state folder itself) is read once: its plans
  and outcomes, never its approvals (an imported plan is never approved or sent; it counts for
  launch-once and spend reports). It is never written again. :attr:`Store.imported` says what the
  current open imported.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from tools.errors import fail
from tools.guardrails.records import (
    ApprovalRecord,
    AttemptRecord,
    AuditRecord,
    ImportRecord,
    OutcomeFacts,
    OutcomeRecord,
    PlanRecord,
    RunLink,
    iso,
    utc_now,
)

if TYPE_CHECKING:
    from tools.guardrails.scrubbing import Scrubber

STATE_FILE = "state.db"
#: The file of an earlier version's launch ledger (JSONL), imported once.
LEGACY_LEDGER = "launches.jsonl"
#: The folder an earlier version kept its state in, in the working folder.
LEGACY_FOLDER = ".model-factory"
#: Seconds a write waits for another process's transaction before ``state_busy``.
BUSY_SECONDS = 30.0
AUDIT_MAX_ROWS = 20_000
AUDIT_MAX_DAYS = 180
#: Characters of a call's arguments (JSON) the audit trail keeps.
AUDIT_ARGUMENT_CHARS = 2_000

_V1 = """
CREATE TABLE plans (
    plan_id TEXT PRIMARY KEY, action TEXT NOT NULL, plan_hash TEXT NOT NULL, platform_url TEXT,
    account_id TEXT, team_id TEXT, run_id TEXT, file_sha256 TEXT, planned_at TEXT NOT NULL,
    imported_from TEXT, record TEXT NOT NULL);
CREATE INDEX plans_by_run ON plans (run_id);
CREATE TABLE approvals (
    approval_id INTEGER PRIMARY KEY, plan_id TEXT NOT NULL REFERENCES plans (plan_id), plan_hash TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE, channel TEXT NOT NULL, checked TEXT NOT NULL, owner TEXT,
    terms TEXT NOT NULL DEFAULT '{}', minted_at TEXT NOT NULL, expires_at TEXT NOT NULL);
CREATE TABLE attempts (
    attempt_id TEXT PRIMARY KEY, plan_id TEXT NOT NULL REFERENCES plans (plan_id), plan_hash TEXT NOT NULL,
    approval_id INTEGER REFERENCES approvals (approval_id), token_sha256 TEXT, channel TEXT,
    started_at TEXT NOT NULL);
CREATE TABLE outcomes (
    outcome_id INTEGER PRIMARY KEY, attempt_id TEXT NOT NULL REFERENCES attempts (attempt_id),
    outcome TEXT NOT NULL, run_id TEXT, facts TEXT NOT NULL DEFAULT '{}', at TEXT NOT NULL);
CREATE TABLE run_links (
    run_id TEXT NOT NULL, platform_url TEXT, plan_id TEXT NOT NULL REFERENCES plans (plan_id), continues TEXT,
    at TEXT NOT NULL, UNIQUE (run_id, plan_id));
CREATE TABLE audit (
    audit_id INTEGER PRIMARY KEY, at TEXT NOT NULL, surface TEXT NOT NULL, tool TEXT NOT NULL,
    arguments TEXT NOT NULL, outcome TEXT NOT NULL, run_id TEXT, plan_id TEXT, usd_approved REAL,
    usd_spent REAL, platform_url TEXT);
CREATE INDEX audit_by_time ON audit (at);
CREATE INDEX audit_by_run ON audit (run_id);
CREATE TABLE imports (
    source TEXT PRIMARY KEY, imported_at TEXT NOT NULL, plans INTEGER NOT NULL, outcomes INTEGER NOT NULL,
    approvals_ignored INTEGER NOT NULL)
"""
#: ``MIGRATIONS[n]`` brings a database at schema version ``n`` to ``n + 1`` (statements separated by
#: ``;`` at a line end). Append to change the schema; never edit a migration that shipped.
MIGRATIONS: list[str] = [_V1]

Problem = Literal["read_only", "unusable"]


@dataclass(frozen=True)
class StoreProblem:
    """Why the store cannot be used as it should: ``kind`` ``read_only`` (reads work, writes do not)
    or ``unusable`` (damaged, or a newer schema: nothing is read), and ``detail`` in words."""

    kind: Problem
    detail: str


def state_folder(env: dict[str, str] | Any, home: Path | None) -> Path:
    """The per-user state folder: ``$MODEL_FACTORY_STATE_DIR``, else ``$XDG_STATE_HOME/model-factory``
    (an absolute ``XDG_STATE_HOME`` only, as the XDG Base Directory spec says), else
    ``<home>/.local/state/model-factory``."""
    configured = str(env.get("MODEL_FACTORY_STATE_DIR", "") or "").strip()
    if configured:
        return Path(configured).expanduser()
    xdg = str(env.get("XDG_STATE_HOME", "") or "").strip()
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "model-factory"
    return (home or Path.home()) / ".local" / "state" / "model-factory"


M = TypeVar("M", bound=BaseModel)


class Store:
    """The state database in ``folder`` (see the module docstring).

    Args:
        folder: the state folder (created 0700 on first use when it can be).
        scrubber: applied to every record before it is written.
        legacy: old ``launches.jsonl`` files to import once (a missing one is skipped).
        legacy_platform: the platform URL their plans are recorded for (old ledgers did not say: the
            one in use when they are imported).
        busy_seconds: how long a write waits for another process (``state_busy`` after that).

    Safe to share between the threads of one process (one connection, serialised by a lock).
    """

    def __init__(self, folder: str | os.PathLike[str], scrubber: Scrubber | None = None, *,
                 legacy: Iterable[Path] = (), legacy_platform: str | None = None,
                 busy_seconds: float = BUSY_SECONDS) -> None:
        self.folder = Path(folder)
        self.path = self.folder / STATE_FILE
        self.scrubber = scrubber
        self._legacy = [Path(p) for p in legacy]
        self._legacy_platform = legacy_platform
        self._busy = busy_seconds
        self._conn: sqlite3.Connection | None = None
        self._opened = False
        self._lock = threading.RLock()
        self._depth = 0
        self.problem: StoreProblem | None = None
        #: What this open imported from old ledgers (empty when nothing was imported now).
        self.imported: list[ImportRecord] = []

    # -- opening ---------------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection | None:
        """The connection (None: no database can be read here); opens, migrates and imports once."""
        if self._opened:
            return self._conn
        self._opened = True
        try:
            self._conn = self._connect()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc):
                self._unusable(exc)
                return self._conn
            self._opened = False  # held by another process: the next call opens it again
            raise self._busy_failure() from None
        except sqlite3.DatabaseError as exc:
            self._unusable(exc)
        return self._conn

    def _connect(self) -> sqlite3.Connection | None:
        try:
            if not self.folder.is_dir():
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self.path.exists():
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass
        except OSError as exc:
            self.problem = StoreProblem("read_only", f"it cannot be created ({exc.strerror or exc})")
            return self._read_only()
        conn = sqlite3.connect(self.path, timeout=self._busy, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._migrate(conn)
            self._probe(conn)
        except sqlite3.OperationalError as exc:
            if not _is_read_only(exc):
                conn.close()
                raise
            conn.close()
            self.problem = StoreProblem("read_only", f"it cannot be written ({exc})")
            return self._read_only()
        self._import_legacy(conn)
        return conn

    def _read_only(self) -> sqlite3.Connection | None:
        """A connection that only reads (the database as it is; None when there is none)."""
        if not self.path.is_file():
            return None
        for query in ("mode=ro", "immutable=1"):
            try:
                conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?{query}", uri=True, isolation_level=None,
                                       check_same_thread=False, timeout=self._busy)
                version = conn.execute("PRAGMA user_version").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if version > len(MIGRATIONS):
                conn.close()
                self._newer(version)
            return conn
        return None

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            self._newer(version)
        if version == len(MIGRATIONS):
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have migrated
            for number in range(version, len(MIGRATIONS)):
                for statement in MIGRATIONS[number].split(";\n"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {number + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _probe(conn: sqlite3.Connection) -> None:
        """A write rolled back: raises OperationalError when the database is not writable here."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE probe_write (x)")
        finally:
            conn.execute("ROLLBACK")

    def _newer(self, version: int) -> None:
        self.problem = StoreProblem("unusable", f"it was made by a newer version of model-factory (schema {version}; "
                                                f"this one knows {len(MIGRATIONS)})")
        raise self.failure()

    def _unusable(self, exc: BaseException) -> None:
        self.problem = StoreProblem("unusable", f"it is damaged ({exc})")
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the connection (safe to call twice; the next use opens it again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
            self._conn, self._opened = None, False

    # -- problems ---------------------------------------------------------------------------------

    def failure(self) -> Any:
        """The ToolFailure of :attr:`problem` (``state_read_only`` or ``state_unusable``)."""
        problem = self.problem or StoreProblem("unusable", "it cannot be opened")
        if problem.kind == "read_only":
            return fail("state_read_only", f"The state folder {self.folder} cannot be written here: {problem.detail}. "
                        "Plans, approvals, launches and run control need their record there, so nothing was "
                        "sent.", ALLOW_FOLDER.format(folder=self.folder), retryable=True)
        return fail("state_unusable", f"The state database {self.path} cannot be used: {problem.detail}. Nothing "
                    "was sent, and nothing is read from it.",
                    f"Move it aside (`mv {self.path} {self.path}.damaged`), and the next call starts a new store "
                    "(its plans and approvals stay in the moved file, for a person to read with sqlite3); or "
                    "upgrade model-factory if a newer version made it.")

    def note(self) -> str | None:
        """:attr:`problem` in one sentence (None when there is none), for read tools to show."""
        self._open()
        if self.problem is None:
            return None
        return str(self.failure().error.message)

    def require_writable(self) -> None:
        """Raise ``state_read_only`` / ``state_unusable`` unless changes can be recorded: every action
        calls this before it sends anything."""
        with self._lock:
            if self._open() is None or self.problem is not None:
                raise self.failure()

    # -- transactions -----------------------------------------------------------------------------

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction of changes (``BEGIN IMMEDIATE``; nested calls join the outer one). Raises
        ``state_busy`` (retryable), ``state_read_only`` or ``state_unusable``. ``durable=False`` (the
        audit trail): the commit is not synced to disk by itself (``synchronous=NORMAL``, still
        atomic; the next durable commit syncs it), which a state change never is."""
        with self._lock:
            self.require_writable()
            conn = self._conn
            assert conn is not None
            if self._depth:
                self._depth += 1
                try:
                    yield conn
                finally:
                    self._depth -= 1
                return
            try:
                if not durable:
                    conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise self._translate(exc) from None
            self._depth = 1
            try:
                yield conn
                conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise self._translate(exc) from None
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0
                if not durable:
                    conn.execute("PRAGMA synchronous=FULL")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection | None]:
        """A consistent snapshot for reading (None: there is no database to read). Raises
        ``state_unusable`` for a damaged one."""
        with self._lock:
            conn = self._open()
            if self.problem is not None and self.problem.kind == "unusable":
                raise self.failure()
            if conn is None or self._depth:
                yield conn
                return
            try:
                conn.execute("BEGIN")
                try:
                    yield conn
                finally:
                    if conn.in_transaction:
                        conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                raise self._translate(exc) from None

    def _translate(self, exc: sqlite3.DatabaseError) -> Any:
        if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
            return self._busy_failure()
        if isinstance(exc, sqlite3.OperationalError) and _is_read_only(exc):
            self.problem = StoreProblem("read_only", f"it cannot be written ({exc})")
            return self.failure()
        if isinstance(exc, sqlite3.IntegrityError):
            raise exc  # a bug in the caller, not damage
        self._unusable(exc)
        return self.failure()

    def _busy_failure(self) -> Any:
        return fail("state_busy", f"The state database {self.path} is held by another process.",
                    "Wait a few seconds and retry; if it persists, check for a stuck model-factory process.",
                    retryable=True)

    def _load(self, model: type[M], text: str) -> M:
        try:
            return model.model_validate_json(text)
        except ValidationError as exc:
            self.problem = StoreProblem("unusable", f"a {model.__name__} in it does not parse "
                                                    f"({exc.errors()[0]['msg']})")
            raise self.failure() from None

    def _json(self, model: BaseModel) -> str:
        if self.scrubber is not None:
            model = self.scrubber.scrub_model(model)
        return model.model_dump_json()

    # -- plans ------------------------------------------------------------------------------------

    def add_plan(self, record: PlanRecord) -> PlanRecord:
        """Record a plan (one row per plan id; its facts scrubbed). Returns the record as stored."""
        if self.scrubber is not None:
            record = self.scrubber.scrub_model(record)
        with self.write() as conn:
            conn.execute(
                "INSERT INTO plans (plan_id, action, plan_hash, platform_url, account_id, team_id, run_id, "
                "file_sha256, planned_at, imported_from, record) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (record.plan_id, record.action, record.plan_hash, record.platform_url, record.account_id,
                 record.team_id, record.run_id, record.file_sha256, record.planned_at, record.imported_from,
                 record.model_dump_json()))
        return record

    def plan(self, plan_id: str) -> PlanRecord | None:
        """The plan ``plan_id``, or None."""
        with self.read() as conn:
            row = conn.execute("SELECT record FROM plans WHERE plan_id = ?", (plan_id,)).fetchone() if conn else None
        return self._load(PlanRecord, row[0]) if row else None

    def plans(self, *, platform_url: str | None = None, run_id: str | None = None) -> list[PlanRecord]:
        """Plans, oldest first; only those of ``platform_url`` / acting on or resuming ``run_id`` when given."""
        where, args = [], []
        if platform_url is not None:
            where.append("platform_url = ?")
            args.append(platform_url)
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        sql = "SELECT record FROM plans" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY rowid"
        with self.read() as conn:
            rows = conn.execute(sql, args).fetchall() if conn else []
        return [self._load(PlanRecord, row[0]) for row in rows]

    @classmethod
    def recorded_env_files(cls, folder: Path) -> list[str]:
        """Every env file a plan recorded in ``folder``'s store forwards from, read without creating,
        migrating or importing anything (the scrubber of a later session hides their values); none
        when there is no store or it cannot be read."""
        reader = cls(folder)
        try:
            reader._opened, reader._conn = True, reader._read_only()
            return list(dict.fromkeys(path for plan in reader.plans() for path in plan.env_files))
        except Exception:  # noqa: BLE001 - a store that cannot be read hides nothing more
            return []
        finally:
            reader.close()

    # -- approvals, attempts, outcomes ------------------------------------------------------------

    def add_approval(self, *, plan_id: str, plan_hash: str, token_sha256: str, channel: str, checked: str,
                     owner: str | None, expires_at: str, terms: dict[str, Any] | None = None) -> ApprovalRecord:
        """Record an approval (inside the caller's :meth:`write` when it checks something first)."""
        minted = iso(utc_now())
        terms_json = json.dumps(self.scrubber.scrub_obj(terms or {}) if self.scrubber else (terms or {}))
        with self.write() as conn:
            cursor = conn.execute(
                "INSERT INTO approvals (plan_id, plan_hash, token_sha256, channel, checked, owner, terms, minted_at, "
                "expires_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (plan_id, plan_hash, token_sha256, channel, checked, owner, terms_json, minted, expires_at))
        return ApprovalRecord(approval_id=int(cursor.lastrowid or 0), plan_id=plan_id, plan_hash=plan_hash,
                              token_sha256=token_sha256, channel=channel, checked=checked, owner=owner,
                              terms=terms or {}, minted_at=minted, expires_at=expires_at)

    def add_attempt(self, record: AttemptRecord) -> None:
        """Record an attempt (inside the caller's :meth:`write`)."""
        with self.write() as conn:
            conn.execute("INSERT INTO attempts (attempt_id, plan_id, plan_hash, approval_id, token_sha256, channel, "
                         "started_at) VALUES (?,?,?,?,?,?,?)",
                         (record.attempt_id, record.plan_id, record.plan_hash, record.approval_id,
                          record.token_sha256, record.channel, record.started_at))

    def add_outcome(self, record: OutcomeRecord, *, link: RunLink | None = None) -> OutcomeRecord:
        """Record an outcome (scrubbed), and the run it names (``link``) in the same transaction."""
        if self.scrubber is not None:
            record = self.scrubber.scrub_model(record)
        with self.write() as conn:
            conn.execute("INSERT INTO outcomes (attempt_id, outcome, run_id, facts, at) VALUES (?,?,?,?,?)",
                         (record.attempt_id, record.outcome, record.run_id, record.facts.model_dump_json(),
                          record.at))
            if link is not None:
                conn.execute("INSERT OR IGNORE INTO run_links (run_id, platform_url, plan_id, continues, at) "
                             "VALUES (?,?,?,?,?)", (link.run_id, link.platform_url, link.plan_id, link.continues,
                                                    link.at))
        return record

    def records_of(self, plan_ids: list[str] | None = None) -> tuple[
            list[ApprovalRecord], list[AttemptRecord], list[OutcomeRecord]]:
        """Approvals, attempts and outcomes (oldest first) of ``plan_ids`` (None: of every plan)."""
        where, args = "", tuple(plan_ids or ())
        if plan_ids is not None:
            where = f" WHERE plan_id IN ({','.join('?' * len(plan_ids))})" if plan_ids else " WHERE 0"
        with self.read() as conn:
            if conn is None:
                return [], [], []
            approvals = [ApprovalRecord(approval_id=r[0], plan_id=r[1], plan_hash=r[2], token_sha256=r[3],
                                        channel=r[4], checked=r[5], owner=r[6], terms=json.loads(r[7]),
                                        minted_at=r[8], expires_at=r[9])
                         for r in conn.execute("SELECT approval_id, plan_id, plan_hash, token_sha256, channel, "
                                               "checked, owner, terms, minted_at, expires_at FROM approvals"
                                               + where + " ORDER BY approval_id", args)]
            attempts = [AttemptRecord(attempt_id=r[0], plan_id=r[1], plan_hash=r[2], approval_id=r[3],
                                      token_sha256=r[4], channel=r[5], started_at=r[6])
                        for r in conn.execute("SELECT attempt_id, plan_id, plan_hash, approval_id, token_sha256, "
                                              "channel, started_at FROM attempts" + where + " ORDER BY rowid", args)]
            ids = [a.attempt_id for a in attempts]
            rows = conn.execute("SELECT attempt_id, outcome, run_id, facts, at FROM outcomes WHERE attempt_id IN "
                                f"({','.join('?' * len(ids))}) ORDER BY outcome_id", ids).fetchall() if ids else []
        outcomes = [OutcomeRecord(attempt_id=r[0], outcome=r[1], run_id=r[2], at=r[4],
                                  facts=self._load(OutcomeFacts, r[3])) for r in rows]
        return approvals, attempts, outcomes

    def run_links(self, run_id: str, platform_url: str | None = None) -> list[RunLink]:
        """The links naming ``run_id`` (as the run made, or the run continued), oldest first."""
        with self.read() as conn:
            rows = conn.execute("SELECT run_id, platform_url, plan_id, continues, at FROM run_links WHERE "
                                "(run_id = ? OR continues = ?) ORDER BY rowid", (run_id, run_id)).fetchall() \
                if conn else []
        return [RunLink(run_id=r[0], platform_url=r[1], plan_id=r[2], continues=r[3], at=r[4]) for r in rows
                if platform_url is None or r[1] == platform_url]

    # -- the audit trail --------------------------------------------------------------------------

    def add_audit(self, record: AuditRecord) -> None:
        """Record one tool call (scrubbed, arguments cut to :data:`AUDIT_ARGUMENT_CHARS`) and prune the
        trail to :data:`AUDIT_MAX_ROWS` rows and :data:`AUDIT_MAX_DAYS` days."""
        if self.scrubber is not None:
            record = self.scrubber.scrub_model(record)
        record = record.model_copy(update={name: _text(getattr(record, name)) for name in (
            "surface", "tool", "arguments", "outcome", "run_id", "plan_id", "platform_url")})
        arguments = record.arguments
        if len(arguments) > AUDIT_ARGUMENT_CHARS:
            arguments = arguments[: AUDIT_ARGUMENT_CHARS - 10] + " ... (cut)"
        oldest = iso(utc_now() - timedelta(days=AUDIT_MAX_DAYS))
        with self.write(durable=False) as conn:
            cursor = conn.execute(
                "INSERT INTO audit (at, surface, tool, arguments, outcome, run_id, plan_id, usd_approved, usd_spent, "
                "platform_url) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (record.at, record.surface, record.tool, arguments, record.outcome, record.run_id, record.plan_id,
                 record.usd_approved, record.usd_spent, record.platform_url))
            conn.execute("DELETE FROM audit WHERE audit_id <= ? OR at < ?",
                         (int(cursor.lastrowid or 0) - AUDIT_MAX_ROWS, oldest))

    def audit(self, *, run_id: str | None = None, since: str | None = None,
              limit: int | None = None) -> list[AuditRecord]:
        """Recorded tool calls in the order they were made (the newest ``limit`` when given); only
        those naming ``run_id`` / at or after ``since`` (ISO 8601) when given."""
        where, args = [], []
        if run_id is not None:
            where.append("run_id = ?")
            args.append(run_id)
        if since is not None:
            where.append("at >= ?")
            args.append(since)
        sql = ("SELECT audit_id, at, surface, tool, arguments, outcome, run_id, plan_id, usd_approved, usd_spent, "
               "platform_url FROM audit" + (" WHERE " + " AND ".join(where) if where else "")
               + " ORDER BY audit_id DESC" + (f" LIMIT {int(limit)}" if limit else ""))
        with self.read() as conn:
            rows = conn.execute(sql, args).fetchall() if conn else []
        return [AuditRecord(audit_id=r[0], at=r[1], surface=r[2], tool=r[3], arguments=r[4], outcome=r[5],
                            run_id=r[6], plan_id=r[7], usd_approved=r[8], usd_spent=r[9], platform_url=r[10])
                for r in reversed(rows)]

    def imports(self) -> list[ImportRecord]:
        """Every old ledger imported into this store, oldest first."""
        with self.read() as conn:
            rows = conn.execute("SELECT source, imported_at, plans, outcomes, approvals_ignored FROM imports "
                                "ORDER BY rowid").fetchall() if conn else []
        return [ImportRecord(source=r[0], imported_at=r[1], plans=r[2], outcomes=r[3], approvals_ignored=r[4])
                for r in rows]

    # -- old ledgers ------------------------------------------------------------------------------

    def _import_legacy(self, conn: sqlite3.Connection) -> None:
        """Import each old ``launches.jsonl`` not imported before (one transaction each)."""
        for source in self._legacy:
            try:
                if not source.is_file():
                    continue
                key = str(source.resolve())
                data = source.read_bytes()
            except OSError:
                continue
            if conn.execute("SELECT 1 FROM imports WHERE source = ?", (key,)).fetchone():
                continue
            self._depth, self._conn = 0, conn
            with self.write():
                if conn.execute("SELECT 1 FROM imports WHERE source = ?", (key,)).fetchone():
                    continue  # another process imported it meanwhile
                record = _import_jsonl(self, key, data)
                conn.execute("INSERT INTO imports (source, imported_at, plans, outcomes, approvals_ignored) VALUES "
                             "(?,?,?,?,?)", (record.source, record.imported_at, record.plans, record.outcomes,
                                             record.approvals_ignored))
            self.imported.append(record)


#: The material keys an old ledger's plan record may hold (the rest of the record is not hashed).
_LEGACY_MATERIAL = ("action", "run_id", "config_sha256", "file_sha256", "team_id", "gpu_type", "gpu_count", "volume",
                    "source_ref", "image_tag", "secret_names", "max_steps", "mode", "name", "cost",
                    "acknowledged_unresolved", "already_resumed_as")


def _import_jsonl(store: Store, source: str, data: bytes) -> ImportRecord:
    """The plans, attempts and outcomes of an old ledger's lines, written into ``store`` (inside its
    transaction); approvals are counted and left out, unreadable lines skipped."""
    plans = outcomes = ignored = 0
    attempts: dict[str, str] = {}  # attempt id -> plan id
    known: dict[str, PlanRecord] = {}
    for line in data.split(b"\n"):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or not isinstance(event.get("plan_id"), str):
            continue
        kind, plan_id, ts = event.get("event"), event["plan_id"], str(event.get("ts") or iso(utc_now()))
        try:
            if kind == "plan" and plan_id not in known:
                material = {k: event[k] for k in _LEGACY_MATERIAL if k in event}
                facts = {k: event[k] for k in ("config_path", "env_files", "fingerprint", "owner_label", "model",
                                               "summary", "arguments") if k in event}
                record = PlanRecord.of(plan_id, str(event.get("plan_hash")), material, planned_at=ts,
                                       imported_from=source, platform_url=store._legacy_platform, **facts)
                if store.plan(plan_id) is None:
                    known[plan_id] = store.add_plan(record)
                    plans += 1
            elif kind == "approval":
                ignored += 1
            elif kind == "attempt" and plan_id in known and isinstance(event.get("attempt_id"), str):
                store.add_attempt(AttemptRecord(attempt_id=event["attempt_id"], plan_id=plan_id,
                                                plan_hash=str(event.get("plan_hash")), channel=event.get("channel"),
                                                started_at=ts))
                attempts[event["attempt_id"]] = plan_id
            elif kind == "outcome" and event.get("attempt_id") in attempts:
                facts_in = {k: v for k, v in event.items() if k in OutcomeFacts.model_fields}
                plan = known[attempts[event["attempt_id"]]]
                run_id = event.get("run_id") if isinstance(event.get("run_id"), str) else None
                link = RunLink(run_id=run_id, platform_url=plan.platform_url, plan_id=plan.plan_id,
                               continues=plan.run_id if plan.action == "resume" else None, at=ts) \
                    if run_id and event.get("outcome") in ("created", "reconciled") and \
                    plan.action in ("launch", "resume") else None
                store.add_outcome(OutcomeRecord(attempt_id=event["attempt_id"], outcome=event.get("outcome"),
                                                run_id=run_id, facts=OutcomeFacts(**facts_in), at=ts), link=link)
                outcomes += 1
        except (ValidationError, TypeError, sqlite3.IntegrityError):
            continue  # a line this version cannot read is left out, as the old ledger's reader left it
    return ImportRecord(source=source, imported_at=iso(utc_now()), plans=plans, outcomes=outcomes,
                        approvals_ignored=ignored)


def _text(value: str | None) -> str | None:
    """``value`` as SQLite can store it: a lone surrogate (a hostile argument) written as ``\\udcff``."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8") if value is not None else None


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _is_read_only(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return any(word in text for word in ("readonly", "read-only", "unable to open", "disk i/o", "permission"))


#: How to let an action record its state where the agent's shell may not write the state folder.
ALLOW_FOLDER = (
    "If this runs in an agent's sandbox, use the model-factory MCP server instead (`model-factory mcp-config` "
    "prints its entry; the host runs it outside the agent's shell, so it can write {folder}), or allow the folder "
    "in the host's sandbox settings: Claude Code: add it to sandbox.filesystem.allowWrite in ~/.claude/settings.json "
    "(https://code.claude.com/docs/en/sandboxing); Codex: add it to writable_roots under [sandbox_workspace_write] "
    "in ~/.codex/config.toml (https://developers.openai.com/codex/config-reference). Allowing it lets that shell "
    "write the store too: keep the guard hook of `model-factory install-skill --hook` in place then."
)
