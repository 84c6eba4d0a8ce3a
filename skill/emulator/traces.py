"""The traces host's data: trace and episode records, and the queries of rows 29-33.

Records become visible once their ``ingested_at`` (simulated) has passed, and only to their
owner: the team named by ``X-Prime-Team-ID``, or without it the uploading user's personal
account. Lists are newest first with keyset cursors (opaque base64 JSON bound to the filters).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError

Params = Mapping[str, Sequence[str]]
MAX_LIMIT = 100


@dataclass
class Owner:
    """Who is asking: a team (``team_id``) or a personal account (``team_id`` None)."""

    user_id: str
    team_id: str | None

    def sees(self, record: TraceRecord | EpisodeRecord) -> bool:
        """Whether a record belongs to this owner."""
        if self.team_id:
            return record.team_id == self.team_id
        return record.team_id is None and record.user_id == self.user_id


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
    raw: bytes

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
            "duration_ms": self.duration_ms, "total_tokens": self.total_tokens, "size_bytes": len(self.raw),
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

def _one(params: Params, name: str) -> str | None:
    values = params.get(name) or []
    return values[-1] if values else None


def _bool(params: Params, name: str) -> bool | None:
    value = _one(params, name)
    if value is None:
        return None
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise ApiError(400, f"{name} must be true or false", code="invalid_filter")


def _num(params: Params, name: str, kind: type = float) -> Any:
    value = _one(params, name)
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        raise ApiError(400, f"{name} must be a number", code="invalid_filter") from None


def _time(params: Params, name: str, from_iso: Callable[[str], float]) -> float | None:
    value = _one(params, name)
    if value is None:
        return None
    try:
        return from_iso(value)
    except ValueError:
        raise ApiError(400, f"{name} must be an ISO 8601 datetime", code="invalid_filter") from None


def _limit(params: Params, default: int) -> int:
    limit = _num(params, "limit", int)
    if limit is None:
        return default
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, f"limit must be between 1 and {MAX_LIMIT}", code="invalid_filter")
    return limit


def _context(params: Params) -> dict[str, str]:
    return {k[len("context."):]: v[-1] for k, v in params.items() if k.startswith("context.") and v}


def _filter_hash(params: Params) -> str:
    canon = sorted((k, list(v)) for k, v in params.items() if k not in ("cursor", "limit"))
    return hashlib.sha256(json.dumps(canon).encode()).hexdigest()[:16]


def _page(items: list[Any], key: Callable[[Any], tuple], params: Params, default_limit: int) -> tuple[list[Any], str | None]:
    """Sort newest first by ``key``, apply the cursor and limit; returns (page, next_cursor)."""
    limit = _limit(params, default_limit)
    fhash = _filter_hash(params)
    items = sorted(items, key=key, reverse=True)
    cursor = _one(params, "cursor")
    if cursor:
        try:
            decoded = json.loads(base64.urlsafe_b64decode(cursor.encode() + b"=" * (-len(cursor) % 4)))
            after = tuple(decoded["k"])
            if decoded["f"] != fhash:
                raise ValueError("filters changed")
        except (ValueError, KeyError, TypeError):
            raise ApiError(400, "cursor is invalid for these filters", code="invalid_cursor") from None
        items = [i for i in items if key(i) < after]
    page = items[:limit]
    if len(items) <= limit:
        return page, None
    token = json.dumps({"k": list(key(page[-1])), "f": fhash}, separators=(",", ":")).encode()
    return page, base64.urlsafe_b64encode(token).decode().rstrip("=")


def _trace_matches(t: TraceRecord, params: Params, from_iso: Callable[[str], float], *, run_id: bool = True) -> bool:
    checks: list[tuple[str, Any]] = [
        ("environment_id", t.environment_id), ("task_id", t.task_id), ("model_id", t.model_id),
        ("outcome", t.outcome),
    ]
    if run_id:
        checks.append(("run_id", t.run_id))
    for name, value in checks:
        wanted = _one(params, name)
        if wanted is not None and wanted != value:
            return False
    if _one(params, "model_provider") not in (None, "prime"):
        return False
    uploads = params.get("upload_id") or []
    if uploads and t.upload_id not in uploads:
        return False
    for name, value in (("has_error", t.has_error), ("is_truncated", t.is_truncated)):
        wanted = _bool(params, name)
        if wanted is not None and wanted != value:
            return False
    lo, hi = _num(params, "reward_min"), _num(params, "reward_max")
    if (lo is not None or hi is not None) and t.reward is None:
        return False
    if lo is not None and t.reward < lo or hi is not None and t.reward > hi:
        return False
    after, before = _time(params, "created_after", from_iso), _time(params, "created_before", from_iso)
    if after is not None and t.created_at < after or before is not None and t.created_at >= before:
        return False
    return all(t.context.get(k) == v for k, v in _context(params).items())


class TraceStore:
    """All traces and episodes, with the traces host's queries."""

    def __init__(self, iso: Callable[[float], str], from_iso: Callable[[str], float]) -> None:
        self.iso = iso
        self.from_iso = from_iso
        self.traces: dict[str, TraceRecord] = {}
        self.episodes: dict[str, EpisodeRecord] = {}

    def add(self, episode: EpisodeRecord, traces: list[TraceRecord]) -> None:
        """Store an episode and its member traces."""
        self.episodes[episode.episode_id] = episode
        for t in traces:
            self.traces[t.trace_id] = t
            if t.trace_id not in episode.trace_ids:
                episode.trace_ids.append(t.trace_id)

    def _visible_traces(self, owner: Owner, now: float) -> list[TraceRecord]:
        return [t for t in self.traces.values() if t.ingested_at <= now and owner.sees(t)]

    def visible_traces(self, owner: Owner, now: float, run_id: str | None = None) -> list[TraceRecord]:
        """Traces this owner can see now (optionally of one run), in no particular order."""
        return [t for t in self._visible_traces(owner, now) if run_id is None or t.run_id == run_id]

    # -- traces --------------------------------------------------------------------------
    def list_traces(self, owner: Owner, now: float, params: Params) -> dict[str, Any]:
        """GET /traces."""
        sort = _one(params, "sort") or "created_at"
        keys: dict[str, Callable[[TraceRecord], tuple]] = {
            "created_at": lambda t: (t.created_at, t.trace_id),
            "reward": lambda t: (t.reward is not None, t.reward or 0.0, t.created_at, t.trace_id),
            "duration_ms": lambda t: (t.duration_ms, t.created_at, t.trace_id),
        }
        if sort not in keys:
            raise ApiError(400, "sort must be one of created_at, reward, duration_ms", code="invalid_filter")
        found = [t for t in self._visible_traces(owner, now) if _trace_matches(t, params, self.from_iso)]
        page, cursor = _page(found, keys[sort], params, 50)
        return {"items": [t.summary(self.iso) for t in page], "next_cursor": cursor}

    def get_trace(self, owner: Owner, now: float, trace_id: str) -> TraceRecord:
        """One visible trace, or 404 ``trace_not_found``."""
        t = self.traces.get(trace_id)
        if t is None or t.ingested_at > now or not owner.sees(t):
            raise ApiError(404, f"no trace {trace_id}", code="trace_not_found")
        return t

    # -- episodes ------------------------------------------------------------------------
    def _members(self, e: EpisodeRecord, now: float) -> list[TraceRecord]:
        return [self.traces[i] for i in e.trace_ids if i in self.traces and self.traces[i].ingested_at <= now]

    def get_episode(self, owner: Owner, now: float, episode_id: str) -> EpisodeRecord:
        """One visible episode, or 404 ``episode_not_found``."""
        e = self.episodes.get(episode_id)
        if e is None or e.ingested_at > now or not owner.sees(e):
            raise ApiError(404, f"no episode {episode_id}", code="episode_not_found")
        return e

    def episode_detail(self, owner: Owner, now: float, episode_id: str) -> dict[str, Any]:
        """GET /episodes/{id}: the summary plus the member-trace aggregate."""
        e = self.get_episode(owner, now, episode_id)
        members = self._members(e, now)
        detail = e.summary(self.iso)
        detail["traces"] = {
            "trace_count": len(members), "total_tokens": sum(t.total_tokens for t in members),
            "total_duration_ms": sum(t.duration_ms for t in members),
            "any_trace_error": any(t.has_error for t in members),
            "agent_names": sorted({t.agent_name for t in members}),
        }
        return detail

    def list_episodes(self, owner: Owner, now: float, params: Params) -> dict[str, Any]:
        """GET /episodes."""
        step = _num(params, "run_step", int)
        lo, hi = _num(params, "step_min", int), _num(params, "step_max", int)
        after, before = _time(params, "created_after", self.from_iso), _time(params, "created_before", self.from_iso)
        wanted_ctx = _context(params)
        uploads = params.get("upload_id") or []
        found = []
        for e in self.episodes.values():
            if e.ingested_at > now or not owner.sees(e):
                continue
            if any(_one(params, n) not in (None, v) for n, v in
                   (("run_id", e.run_id), ("environment_id", e.environment_id), ("outcome", e.outcome))):
                continue
            if uploads and e.upload_id not in uploads:
                continue
            has_error = _bool(params, "has_error")
            if has_error is not None and has_error != e.has_error:
                continue
            if after is not None and e.created_at < after or before is not None and e.created_at >= before:
                continue
            members = self._members(e, now)
            if step is not None and not any(t.run_step == step for t in members):
                continue
            if lo is not None and not any(t.run_step >= lo for t in members):
                continue
            if hi is not None and not any(t.run_step <= hi for t in members):
                continue
            if wanted_ctx and not any(all(t.context.get(k) == v for k, v in wanted_ctx.items()) for t in members):
                continue
            found.append(e)
        page, cursor = _page(found, lambda e: (e.created_at, e.episode_id), params, 50)
        return {"items": [e.summary(self.iso) for e in page], "next_cursor": cursor}

    def list_episode_traces(self, owner: Owner, now: float, episode_id: str, params: Params) -> dict[str, Any]:
        """GET /episodes/{id}/traces."""
        e = self.get_episode(owner, now, episode_id)
        found = [t for t in self._members(e, now) if _trace_matches(t, params, self.from_iso)]
        page, cursor = _page(found, lambda t: (t.created_at, t.trace_id), params, 50)
        return {"items": [t.summary(self.iso) for t in page], "next_cursor": cursor}

    # -- runs ----------------------------------------------------------------------------
    def _run_summary(self, run_id: str, traces: list[TraceRecord]) -> dict[str, Any]:
        by_created = sorted(traces, key=lambda t: (t.created_at, t.trace_id))
        steps = sorted({t.run_step for t in traces if t.run_step is not None})
        rewards = [t.reward for t in traces if t.reward is not None]
        return {
            "run_id": run_id,
            "first_trace_created_at": self.iso(by_created[0].created_at),
            "last_trace_created_at": self.iso(by_created[-1].created_at),
            "last_trace_ingested_at": self.iso(max(t.ingested_at for t in traces)),
            "trace_count": len(traces),
            "episode_count": len({t.episode_id for t in traces}),
            "avg_reward": round(sum(rewards) / len(rewards), 6) if rewards else None,
            "step_min": steps[0] if steps else None,
            "step_max": steps[-1] if steps else None,
            "step_count": len(steps),
            "has_error": any(t.has_error for t in traces),
            "first_user_id": by_created[0].user_id,
            "environment_ids": sorted({t.environment_id for t in traces}),
            "model_ids": sorted({t.model_id for t in traces}),
            "context": dict(by_created[-1].context),
        }

    def _by_run(self, owner: Owner, now: float, params: Params | None = None) -> dict[str, list[TraceRecord]]:
        after = before = None
        if params is not None:
            after = _time(params, "created_after", self.from_iso)
            before = _time(params, "created_before", self.from_iso)
        runs: dict[str, list[TraceRecord]] = {}
        for t in self._visible_traces(owner, now):
            if after is not None and t.created_at < after or before is not None and t.created_at >= before:
                continue
            runs.setdefault(t.run_id, []).append(t)
        return runs

    def list_runs(self, owner: Owner, now: float, params: Params) -> dict[str, Any]:
        """GET /runs: run summaries, most recently ingested first."""
        run_types = params.get("run_type") or []
        created_by = params.get("created_by") or []
        summaries = []
        for run_id, traces in self._by_run(owner, now, params).items():
            summary = self._run_summary(run_id, traces)
            kind = summary["context"].get("run_type", "unknown")
            if run_types and (kind if kind in ("eval", "train") else "unknown") not in run_types:
                continue
            if created_by and not any(t.user_id in created_by for t in traces):
                continue
            summaries.append(summary)
        page, cursor = _page(summaries, lambda s: (s["last_trace_ingested_at"], s["run_id"]), params, 50)
        return {"items": page, "next_cursor": cursor}

    def run_summary(self, owner: Owner, now: float, run_id: str) -> dict[str, Any]:
        """GET /runs/{id}, or 404 ``run_not_found``."""
        traces = self.visible_traces(owner, now, run_id)
        if not traces:
            raise ApiError(404, f"no traces for run {run_id}", code="run_not_found")
        return self._run_summary(run_id, traces)

    def run_steps(self, owner: Owner, now: float, run_id: str) -> dict[str, Any]:
        """GET /runs/{id}/steps: every step oldest first (empty for an unknown run)."""
        per_step: dict[int, list[TraceRecord]] = {}
        for t in self.visible_traces(owner, now, run_id):
            per_step.setdefault(t.run_step, []).append(t)
        items = []
        for step in sorted(per_step):
            traces = per_step[step]
            rewards = [t.reward for t in traces if t.reward is not None]
            items.append({"step": step, "trace_count": len(traces),
                          "episode_count": len({t.episode_id for t in traces}),
                          "avg_reward": round(sum(rewards) / len(rewards), 6) if rewards else None})
        return {"step_min": items[0]["step"] if items else None, "step_max": items[-1]["step"] if items else None,
                "step_count": len(items), "items": items}

    def search(self, owner: Owner, now: float, run_id: str, params: Params) -> dict[str, Any]:
        """GET /runs/{id}/search: first literal match per node, newest traces first."""
        query = _one(params, "query") or ""
        if not 3 <= len(query) <= 256:
            raise ApiError(400, "query must be 3 to 256 characters", code="invalid_filter")
        field_name = _one(params, "field") or "content"
        if field_name not in ("content", "reasoning_content", "tool_calls"):
            raise ApiError(400, "field must be content, reasoning_content or tool_calls", code="invalid_filter")
        role, step = _one(params, "role"), _num(params, "run_step", int)
        traces = [t for t in self.visible_traces(owner, now, run_id)
                  if (step is None or t.run_step == step) and _trace_matches(t, params, self.from_iso, run_id=False)]
        matches = []
        for t in traces:
            for node in json.loads(t.raw).get("nodes", []):
                message = node.get("message") or {}
                if role and message.get("role") != role:
                    continue
                value = message.get(field_name)
                if value is None:
                    continue
                text, representation = (value, "text") if isinstance(value, str) else (json.dumps(value), "json")
                start = text.find(query)
                if start < 0:
                    continue
                lo = max(0, start - 40)
                matches.append({
                    "trace_id": t.trace_id, "upload_id": t.upload_id, "generation": 1, "episode_id": t.episode_id,
                    "node_idx": node.get("node_idx", 0), "role": message.get("role") or "", "field": field_name,
                    "representation": representation, "match_start": start, "match_end": start + len(query),
                    "excerpt": text[lo:start + len(query) + 40], "excerpt_start": lo,
                    "_key": (t.created_at, t.trace_id, -int(node.get("node_idx", 0))),
                })
        page, cursor = _page(matches, lambda m: m["_key"], params, 50)
        items = [{k: v for k, v in m.items() if k != "_key"} for m in page]
        result: dict[str, Any] = {"items": items, "next_cursor": cursor}
        if not _one(params, "cursor"):
            result["coverage"] = {"examined_traces": len(traces), "unindexed_trace_ids": [], "partial_index": False}
        return result
