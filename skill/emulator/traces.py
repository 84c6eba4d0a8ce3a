"""The traces host's data: trace and episode records, and the queries of rows 29-33.

Records become visible once their ``ingested_at`` (simulated) has passed, and only to their
owner: the team named by ``X-Prime-Team-ID``, or without it the uploading user's personal
account. Lists are newest first with keyset cursors (opaque base64 JSON bound to the filters).

Two kinds of source: records stored by ordinary step uploads (:attr:`TraceStore.traces`,
:attr:`TraceStore.episodes`), and the generated traces of ``many_traces`` runs
(:class:`~skill.emulator.bulk.BulkTraces`). Lists walk both newest first, lazily: a page
takes what it shows (plus one), so a 50,000-trace run's first page generates about one page.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from .bulk import BulkTraces
from .errors import ApiError
from .records import EpisodeRecord, TraceRecord

Params = Mapping[str, Sequence[str]]
MAX_LIMIT = 100
#: A search reads at most this many raw bytes (beyond: 400 ``search_limit_exceeded``).
SEARCH_BYTES_LIMIT = 64 * 1024 * 1024


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

    def sees_bulk(self, bulk: BulkTraces) -> bool:
        """Whether a generated run's traces belong to this owner."""
        return bulk.owned_by(self.user_id, self.team_id)


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


def _cursor(params: Params, fhash: str) -> tuple | None:
    """The key a ``cursor`` points below (None on a first page); 400 ``invalid_cursor`` if it does
    not decode or was made under other filters."""
    cursor = _one(params, "cursor")
    if not cursor:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor.encode() + b"=" * (-len(cursor) % 4)))
        if decoded["f"] != fhash:
            raise ValueError("filters changed")
        return tuple(decoded["k"])
    except (ValueError, KeyError, TypeError):
        raise ApiError(400, "cursor is invalid for these filters", code="invalid_cursor") from None


def _take(newest_first: Iterable[Any], key: Callable[[Any], tuple], limit: int,
          fhash: str) -> tuple[list[Any], str | None]:
    """The first ``limit`` items of a newest-first walk, and the cursor after them (None at the end)."""
    items = list(islice(newest_first, limit + 1))
    if len(items) <= limit:
        return items, None
    token = json.dumps({"k": list(key(items[limit - 1])), "f": fhash}, separators=(",", ":")).encode()
    return items[:limit], base64.urlsafe_b64encode(token).decode().rstrip("=")


def _page(items: list[Any], key: Callable[[Any], tuple], params: Params,
          default_limit: int) -> tuple[list[Any], str | None]:
    """Sort newest first by ``key``, apply the cursor and limit; returns (page, next_cursor)."""
    limit = _limit(params, default_limit)
    fhash = _filter_hash(params)
    after = _cursor(params, fhash)
    ordered = sorted(items, key=key, reverse=True)
    return _take((i for i in ordered if after is None or key(i) < after), key, limit, fhash)


def _trace_key(t: TraceRecord) -> tuple[float, str]:
    return t.created_at, t.trace_id


def _episode_key(e: EpisodeRecord) -> tuple[float, str]:
    return e.created_at, e.episode_id


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
        flag = _bool(params, name)
        if flag is not None and flag != value:
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


class _RunTotals:
    """A trace run's summary, accumulated trace by trace (or step by step for generated runs)."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.count = 0
        self.episodes: set[str] = set()
        self.bulk_episodes = 0
        self.steps: set[int] = set()
        self.reward_sum, self.rewards = 0.0, 0
        self.has_error = False
        self.first: tuple[tuple[float, str], str] | None = None  # (key, user id)
        self.last: tuple[tuple[float, str], dict[str, str]] | None = None  # (key, context)
        self.ingested = float("-inf")
        self.envs: set[str] = set()
        self.models: set[str] = set()
        self.users: set[str] = set()

    def add(self, t: TraceRecord) -> None:
        self.count += 1
        self.episodes.add(t.episode_id)
        if t.run_step is not None:
            self.steps.add(t.run_step)
        if t.reward is not None:
            self.reward_sum += t.reward
            self.rewards += 1
        self.has_error = self.has_error or t.has_error
        key = _trace_key(t)
        if self.first is None or key < self.first[0]:
            self.first = (key, t.user_id)
        if self.last is None or key > self.last[0]:
            self.last = (key, t.context)
        self.ingested = max(self.ingested, t.ingested_at)
        self.envs.add(t.environment_id)
        self.models.add(t.model_id)
        self.users.add(t.user_id)

    def add_step(self, bulk: BulkTraces, k: int) -> None:
        stats = bulk.step_stats(k)
        self.count += stats.traces
        self.bulk_episodes += stats.episodes
        self.steps.add(k)
        self.reward_sum += stats.reward_sum
        self.rewards += stats.rewards
        self.has_error = self.has_error or stats.has_error
        first = (stats.first_created, bulk.trace_id(k, 0))
        last = (stats.last_created, bulk.trace_id(k, stats.traces - 1))
        if self.first is None or first < self.first[0]:
            self.first = (first, bulk.user_id)
        if self.last is None or last > self.last[0]:
            self.last = (last, bulk.context)
        self.ingested = max(self.ingested, stats.ingested)
        self.envs.update(bulk.envs[:stats.episodes])
        self.models.add(bulk.model)
        self.users.add(bulk.user_id)

    def summary(self, iso: Callable[[float], str]) -> dict[str, Any]:
        assert self.first is not None and self.last is not None
        steps = sorted(self.steps)
        return {
            "run_id": self.run_id,
            "first_trace_created_at": iso(self.first[0][0]),
            "last_trace_created_at": iso(self.last[0][0]),
            "last_trace_ingested_at": iso(self.ingested),
            "trace_count": self.count,
            "episode_count": len(self.episodes) + self.bulk_episodes,
            "avg_reward": round(self.reward_sum / self.rewards, 6) if self.rewards else None,
            "step_min": steps[0] if steps else None,
            "step_max": steps[-1] if steps else None,
            "step_count": len(steps),
            "has_error": self.has_error,
            "first_user_id": self.first[1],
            "environment_ids": sorted(self.envs),
            "model_ids": sorted(self.models),
            "context": dict(self.last[1]),
        }


class TraceStore:
    """All traces and episodes, with the traces host's queries."""

    def __init__(self, iso: Callable[[float], str], from_iso: Callable[[str], float]) -> None:
        self.iso = iso
        self.from_iso = from_iso
        self.traces: dict[str, TraceRecord] = {}
        self.episodes: dict[str, EpisodeRecord] = {}
        #: Generated runs (``many_traces``), by id prefix.
        self.bulk: dict[str, BulkTraces] = {}

    def add(self, episode: EpisodeRecord, traces: list[TraceRecord]) -> None:
        """Store an episode and its member traces."""
        self.episodes[episode.episode_id] = episode
        for t in traces:
            self.traces[t.trace_id] = t
            if t.trace_id not in episode.trace_ids:
                episode.trace_ids.append(t.trace_id)

    def add_bulk(self, bulk: BulkTraces) -> None:
        """Serve a generated run's traces from now on."""
        self.bulk[bulk.prefix] = bulk

    def count(self, now: float) -> int:
        """Stored traces plus the generated ones landed by ``now``."""
        return len(self.traces) + sum(b.visible_count(now) for b in self.bulk.values())

    @property
    def records_made(self) -> int:
        """Trace records generated so far for ``many_traces`` runs (all of them)."""
        return sum(b.records_made for b in self.bulk.values())

    def _bulks(self, owner: Owner, run_id: str | None = None) -> list[BulkTraces]:
        return [b for b in self.bulk.values() if owner.sees_bulk(b) and (run_id is None or b.run_id == run_id)]

    def _bulk_of(self, record_id: str) -> BulkTraces | None:
        parts = record_id.split("-")
        return self.bulk.get(parts[1]) if len(parts) == 4 else None

    # -- walks -------------------------------------------------------------------------------
    def _traces_desc(self, owner: Owner, now: float, run_id: str | None = None,
                     before: tuple | None = None) -> Iterator[TraceRecord]:
        """Visible traces (of one run), newest first, below ``before``; lazy over generated runs."""
        stored = sorted((t for t in self.traces.values() if t.ingested_at <= now and owner.sees(t)
                         and (run_id is None or t.run_id == run_id)
                         and (before is None or _trace_key(t) < before)), key=_trace_key, reverse=True)
        walks = [b.traces_desc(now, before) for b in self._bulks(owner, run_id)]
        return heapq.merge(stored, *walks, key=_trace_key, reverse=True) if walks else iter(stored)

    def _episodes_desc(self, owner: Owner, now: float, run_id: str | None = None, before: tuple | None = None,
                       step: int | None = None) -> Iterator[EpisodeRecord]:
        stored = sorted((e for e in self.episodes.values() if e.ingested_at <= now and owner.sees(e)
                         and (run_id is None or e.run_id == run_id)
                         and (before is None or _episode_key(e) < before)), key=_episode_key, reverse=True)
        walks = [b.episodes_desc(now, before, step) for b in self._bulks(owner, run_id)]
        return heapq.merge(stored, *walks, key=_episode_key, reverse=True) if walks else iter(stored)

    def _find_trace(self, trace_id: str, now: float) -> TraceRecord | None:
        found = self.traces.get(trace_id)
        if found is None and (bulk := self._bulk_of(trace_id)) is not None:
            found = bulk.find_trace(trace_id, now)
        return found

    # -- traces --------------------------------------------------------------------------
    def list_traces(self, owner: Owner, now: float, params: Params) -> dict[str, Any]:
        """GET /traces."""
        sort = _one(params, "sort") or "created_at"
        keys: dict[str, Callable[[TraceRecord], tuple]] = {
            "created_at": _trace_key,
            "reward": lambda t: (t.reward is not None, t.reward or 0.0, t.created_at, t.trace_id),
            "duration_ms": lambda t: (t.duration_ms, t.created_at, t.trace_id),
        }
        if sort not in keys:
            raise ApiError(400, "sort must be one of created_at, reward, duration_ms", code="invalid_filter")
        limit, fhash = _limit(params, 50), _filter_hash(params)
        run_id = _one(params, "run_id")
        if sort == "created_at":  # the walk's own order: lazy
            after = _cursor(params, fhash)
            found = (t for t in self._traces_desc(owner, now, run_id, after)
                     if _trace_matches(t, params, self.from_iso))
            page, cursor = _take(found, _trace_key, limit, fhash)
        else:  # another order needs every match's key
            found_all = [t for t in self._traces_desc(owner, now, run_id) if _trace_matches(t, params, self.from_iso)]
            page, cursor = _page(found_all, keys[sort], params, 50)
        return {"items": [t.summary(self.iso) for t in page], "next_cursor": cursor}

    def get_trace(self, owner: Owner, now: float, trace_id: str) -> TraceRecord:
        """One visible trace, or 404 ``trace_not_found``."""
        t = self._find_trace(trace_id, now)
        if t is None or t.ingested_at > now or not owner.sees(t):
            raise ApiError(404, f"no trace {trace_id}", code="trace_not_found")
        return t

    # -- episodes ------------------------------------------------------------------------
    def _members(self, e: EpisodeRecord, now: float) -> list[TraceRecord]:
        members = (self._find_trace(i, now) for i in e.trace_ids)
        return [t for t in members if t is not None and t.ingested_at <= now]

    def get_episode(self, owner: Owner, now: float, episode_id: str) -> EpisodeRecord:
        """One visible episode, or 404 ``episode_not_found``."""
        e = self.episodes.get(episode_id)
        if e is None and (bulk := self._bulk_of(episode_id)) is not None:
            e = bulk.find_episode(episode_id, now)
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
        has_error = _bool(params, "has_error")
        wanted_ctx = _context(params)
        uploads = params.get("upload_id") or []
        limit, fhash = _limit(params, 50), _filter_hash(params)

        def matches(e: EpisodeRecord) -> bool:
            if any(_one(params, n) not in (None, v) for n, v in
                   (("environment_id", e.environment_id), ("outcome", e.outcome))):
                return False
            if uploads and e.upload_id not in uploads:
                return False
            if has_error is not None and has_error != e.has_error:
                return False
            if after is not None and e.created_at < after or before is not None and e.created_at >= before:
                return False
            if step is None and lo is None and hi is None and not wanted_ctx:
                return True
            members = self._members(e, now)
            if step is not None and not any(t.run_step == step for t in members):
                return False
            if lo is not None and not any(t.run_step >= lo for t in members):
                return False
            if hi is not None and not any(t.run_step <= hi for t in members):
                return False
            return not wanted_ctx or any(all(t.context.get(k) == v for k, v in wanted_ctx.items()) for t in members)

        walk = self._episodes_desc(owner, now, _one(params, "run_id"), _cursor(params, fhash), step)
        page, cursor = _take((e for e in walk if matches(e)), _episode_key, limit, fhash)
        return {"items": [e.summary(self.iso) for e in page], "next_cursor": cursor}

    def list_episode_traces(self, owner: Owner, now: float, episode_id: str, params: Params) -> dict[str, Any]:
        """GET /episodes/{id}/traces."""
        e = self.get_episode(owner, now, episode_id)
        found = [t for t in self._members(e, now) if _trace_matches(t, params, self.from_iso)]
        page, cursor = _page(found, _trace_key, params, 50)
        return {"items": [t.summary(self.iso) for t in page], "next_cursor": cursor}

    # -- runs ----------------------------------------------------------------------------
    def _run_totals(self, owner: Owner, now: float, run_id: str | None = None,
                    after: float | None = None, before: float | None = None) -> dict[str, _RunTotals]:
        """Per trace run, the totals of its visible traces created in ``[after, before)``."""
        totals: dict[str, _RunTotals] = {}
        for t in self.traces.values():
            if t.ingested_at > now or not owner.sees(t) or run_id is not None and t.run_id != run_id:
                continue
            if after is not None and t.created_at < after or before is not None and t.created_at >= before:
                continue
            totals.setdefault(t.run_id, _RunTotals(t.run_id)).add(t)
        for bulk in self._bulks(owner, run_id):
            for k in bulk.visible_steps(now):
                stats = bulk.step_stats(k)
                if (after is None or stats.first_created >= after) and (before is None or stats.last_created < before):
                    totals.setdefault(bulk.run_id, _RunTotals(bulk.run_id)).add_step(bulk, k)
                elif not (after is not None and stats.last_created < after or
                          before is not None and stats.first_created >= before):  # partly inside
                    for j in range(bulk.per_step(k)):
                        t = bulk.trace(k, j)
                        if (after is None or t.created_at >= after) and (before is None or t.created_at < before):
                            totals.setdefault(bulk.run_id, _RunTotals(bulk.run_id)).add(t)
        return totals

    def list_runs(self, owner: Owner, now: float, params: Params) -> dict[str, Any]:
        """GET /runs: run summaries, most recently ingested first."""
        run_types = params.get("run_type") or []
        created_by = params.get("created_by") or []
        window = _time(params, "created_after", self.from_iso), _time(params, "created_before", self.from_iso)
        summaries = []
        for totals in self._run_totals(owner, now, None, *window).values():
            summary = totals.summary(self.iso)
            kind = summary["context"].get("run_type", "unknown")
            if run_types and (kind if kind in ("eval", "train") else "unknown") not in run_types:
                continue
            if created_by and not totals.users & set(created_by):
                continue
            summaries.append(summary)
        page, cursor = _page(summaries, lambda s: (s["last_trace_ingested_at"], s["run_id"]), params, 50)
        return {"items": page, "next_cursor": cursor}

    def run_summary(self, owner: Owner, now: float, run_id: str) -> dict[str, Any]:
        """GET /runs/{id}, or 404 ``run_not_found``."""
        totals = self._run_totals(owner, now, run_id).get(run_id)
        if totals is None:
            raise ApiError(404, f"no traces for run {run_id}", code="run_not_found")
        return totals.summary(self.iso)

    def run_steps(self, owner: Owner, now: float, run_id: str) -> dict[str, Any]:
        """GET /runs/{id}/steps: every step oldest first (empty for an unknown run)."""
        per_step: dict[int, list[Any]] = {}  # step -> [traces, episode ids, extra episodes, reward sum, rewards]
        for t in self.traces.values():
            if t.ingested_at <= now and owner.sees(t) and t.run_id == run_id:
                row = per_step.setdefault(t.run_step, [0, set(), 0, 0.0, 0])
                row[0] += 1
                row[1].add(t.episode_id)
                if t.reward is not None:
                    row[3] += t.reward
                    row[4] += 1
        for bulk in self._bulks(owner, run_id):
            for k in bulk.visible_steps(now):
                stats = bulk.step_stats(k)
                row = per_step.setdefault(k, [0, set(), 0, 0.0, 0])
                row[0] += stats.traces
                row[2] += stats.episodes
                row[3] += stats.reward_sum
                row[4] += stats.rewards
        items = [{"step": step, "trace_count": row[0], "episode_count": len(row[1]) + row[2],
                  "avg_reward": round(row[3] / row[4], 6) if row[4] else None}
                 for step, row in sorted(per_step.items())]
        return {"step_min": items[0]["step"] if items else None, "step_max": items[-1]["step"] if items else None,
                "step_count": len(items), "items": items}

    def search(self, owner: Owner, now: float, run_id: str, params: Params) -> dict[str, Any]:
        """GET /runs/{id}/search: first literal match per node, newest traces first.

        Reads at most :data:`SEARCH_BYTES_LIMIT` raw bytes (400 ``search_limit_exceeded`` beyond:
        narrow it with ``run_step`` or the time window).
        """
        query = _one(params, "query") or ""
        if not 3 <= len(query) <= 256:
            raise ApiError(400, "query must be 3 to 256 characters", code="invalid_filter")
        field_name = _one(params, "field") or "content"
        if field_name not in ("content", "reasoning_content", "tool_calls"):
            raise ApiError(400, "field must be content, reasoning_content or tool_calls", code="invalid_filter")
        role, step = _one(params, "role"), _num(params, "run_step", int)
        examined, read = 0, 0
        matches = []
        for t in self._traces_desc(owner, now, run_id):
            if step is not None and t.run_step != step or not _trace_matches(t, params, self.from_iso, run_id=False):
                continue
            examined += 1
            read += t.size_bytes
            if read > SEARCH_BYTES_LIMIT:
                raise ApiError(400, f"search would read more than {SEARCH_BYTES_LIMIT // (1024 * 1024)} MiB of traces; "
                                    "narrow it with run_step or created_after/created_before",
                               code="search_limit_exceeded")
            for node in json.loads(t.raw_bytes()).get("nodes", []):
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
            result["coverage"] = {"examined_traces": examined, "unindexed_trace_ids": [], "partial_index": False}
        return result
