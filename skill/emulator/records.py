"""Trace and episode records of the traces host: what a stored (or generated) trace or
episode holds, and its JSON summary (rows 29-33). Shared by the stored uploads
(:mod:`~skill.emulator.traces`) and the generated runs (:mod:`~skill.emulator.bulk`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TraceRecord:
    """One stored trace: its summary columns and its exact raw bytes."""

    trace_id: str
    upload_id: str
    episode_id: str
    run_id: str
    environment_id: str
    task_id: str
    model_id: str
    agent_name: str
    reward: float | None
    outcome: str
    has_error: bool
    is_truncated: bool
    duration_ms: int
    total_tokens: int
    created_at: float
    ingested_at: float
    context: dict[str, str]
    run_step: int
    user_id: str
    team_id: str | None
    raw: bytes | None
    #: Generated traces: their size and their bytes, in chunks (``raw`` is None then).
    raw_size: int = 0
    raw_source: Callable[[], Iterable[bytes]] | None = field(default=None, repr=False, compare=False)

    @property
    def size_bytes(self) -> int:
        """Length of the raw document, in bytes."""
        return len(self.raw) if self.raw is not None else self.raw_size

    def raw_chunks(self) -> Iterable[bytes]:
        """The raw document, in chunks."""
        if self.raw is not None:
            return [self.raw]
        assert self.raw_source is not None
        return self.raw_source()

    def raw_bytes(self) -> bytes:
        """The whole raw document."""
        return self.raw if self.raw is not None else b"".join(self.raw_chunks())

    def summary(self, iso: Callable[[float], str]) -> dict[str, Any]:
        """``TraceSummary`` JSON (every key present) plus the extras ``run_step`` and ``user_id``."""
        return {
            "trace_id": self.trace_id, "upload_id": self.upload_id, "episode_id": self.episode_id,
            "created_at": iso(self.created_at), "ingested_at": iso(self.ingested_at),
            "run_id": self.run_id, "environment_id": self.environment_id,
            "model": {"provider": "prime", "id": self.model_id},
            "task_id": self.task_id, "agent_name": self.agent_name,
            "score": {"reward": self.reward, "outcome": self.outcome},
            "execution": {"has_error": self.has_error, "is_truncated": self.is_truncated},
            "duration_ms": self.duration_ms, "total_tokens": self.total_tokens, "size_bytes": self.size_bytes,
            "context": dict(self.context), "run_step": self.run_step, "user_id": self.user_id,
        }


@dataclass
class EpisodeRecord:
    """One stored episode: its own fields and its member trace ids."""

    episode_id: str
    upload_id: str
    run_id: str
    environment_id: str
    task_id: str
    outcome: str
    has_error: bool
    error_type: str | None
    error_message: str | None
    created_at: float
    ingested_at: float
    run_step: int
    user_id: str
    team_id: str | None
    context: dict[str, str]
    trace_ids: list[str] = field(default_factory=list)

    def summary(self, iso: Callable[[float], str]) -> dict[str, Any]:
        """``EpisodeSummary`` JSON."""
        return {
            "episode_id": self.episode_id, "upload_id": self.upload_id, "schema_version": 1,
            "created_at": iso(self.created_at), "ingested_at": iso(self.ingested_at),
            "run_id": self.run_id, "environment_id": self.environment_id, "outcome": self.outcome,
            "has_error": self.has_error, "error": {"type": self.error_type, "message": self.error_message},
        }

    def raw(self) -> bytes:
        """The stored episode envelope, ``traces`` narrowed to member ids."""
        doc = {"env": {"id": self.environment_id}, "task": {"id": self.task_id},
               "group": {"id": f"{self.run_id}-{self.run_step}"}, "run": {"id": self.run_id, "step": self.run_step},
               "ok": not self.has_error,
               "errors": [{"type": self.error_type, "message": self.error_message}] if self.has_error else [],
               "traces": list(self.trace_ids)}
        return json.dumps(doc, separators=(",", ":")).encode()


# -- query parameter parsing ------------------------------------------------------------
