"""The traces of a run with the ``many_traces`` scenario: generated on demand, never stored.

A :class:`BulkTraces` spreads ``count`` traces over the run's ``max_steps`` steps (step
``k`` lands when the run reaches it, like any upload) in episodes of ``per_episode``. Trace
``j`` of step ``k`` is a pure function of ``(run, k, j)``: its id, time, reward and raw
document, whose ``trace_bytes`` bytes are streamed in chunks. The traces host's queries walk
these lazily (newest first, by arithmetic on the step times), so serving a page of a
50,000-trace run makes about one page of records (:attr:`BulkTraces.records_made` counts
them) and a raw download holds one chunk at a time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache, partial

from .content import WORDS, hex_id, mix64, rollout_text
from .records import EpisodeRecord, TraceRecord

CHUNK_BYTES = 256 * 1024
_PAD_MARK = "@@PAD@@"


@cache
def _pad_block() -> bytes:
    """1 MiB of words (valid inside a JSON string), the filler of every bulk raw document."""
    words, out, size, i = [w.encode() for w in WORDS], bytearray(), 1 << 20, 0
    while len(out) < size:
        out += words[(i * 7 + i // 13) % len(words)] + b" "
        i += 1
    return bytes(out[:size])


@dataclass
class StepStats:
    """Aggregates of one landed step (cached: a landed step never changes)."""

    traces: int
    episodes: int
    reward_sum: float
    rewards: int
    has_error: bool
    first_created: float
    last_created: float
    ingested: float


class BulkTraces:
    """The generated traces and episodes of one run.

    Args:
        run_id, user_id, team_id: the trace run and its owner.
        count: traces in all; step ``k`` of ``1..max_steps`` gets ``count // max_steps`` (the
            first ``count % max_steps`` steps one more).
        trace_bytes: size of each raw document, in bytes.
        per_episode: traces per episode.
        step_times: the run's ``{step: simulated time it finished}`` (read live).
        landed: whether a step's traces land at all (``missing_traces``).
        ingest_seconds, spread_seconds: a step's traces are created in the ``spread_seconds``
            before the step's time and become visible ``ingest_seconds`` after it.
        envs, model, context: their environment ids (rotating), model id and context.
        mean_reward: mean reward of a step.
    """

    def __init__(self, *, run_id: str, user_id: str, team_id: str | None, count: int, trace_bytes: int,
                 per_episode: int, max_steps: int | None, step_times: dict[int, float],
                 landed: Callable[[int], bool], ingest_seconds: float, spread_seconds: float, envs: list[str],
                 model: str, context: dict[str, str], mean_reward: Callable[[int], float]) -> None:
        self.run_id, self.user_id, self.team_id = run_id, user_id, team_id
        self.count, self.trace_bytes, self.per_episode = count, trace_bytes, per_episode
        self.steps = max(1, max_steps or 20)
        self._base, self._extra = divmod(count, self.steps)
        self.step_times, self.landed = step_times, landed
        self.ingest_seconds, self.spread_seconds = ingest_seconds, spread_seconds
        self.envs, self.model, self.context, self.mean_reward = envs or ["default"], model, context, mean_reward
        self.prefix = hex_id(run_id, "bulk", length=10)
        self._salt = int(hex_id(run_id, "bulk-salt", length=16), 16)
        self._stats: dict[tuple[int, float], StepStats] = {}
        #: How many trace records have been generated so far (the lazy-generation hook).
        self.records_made = 0

    # -- shape --------------------------------------------------------------------------------
    def per_step(self, k: int) -> int:
        """Traces of step ``k``."""
        if not 1 <= k <= self.steps:
            return 0
        return self._base + (1 if k <= self._extra else 0)

    def episodes_of(self, k: int) -> int:
        """Episodes of step ``k``."""
        return math.ceil(self.per_step(k) / self.per_episode)

    def visible_steps(self, now: float) -> list[int]:
        """Steps whose traces have landed by ``now``, oldest first."""
        return sorted(k for k, t in self.step_times.items()
                      if self.per_step(k) and t + self.ingest_seconds <= now and self.landed(k))

    def visible_count(self, now: float) -> int:
        """Traces visible at ``now``."""
        return sum(self.per_step(k) for k in self.visible_steps(now))

    def owned_by(self, user_id: str, team_id: str | None) -> bool:
        """Whether an owner (team, else personal account) sees these traces."""
        return self.team_id == team_id if team_id else self.team_id is None and self.user_id == user_id

    def created(self, k: int, j: int) -> float:
        """Simulated creation time of trace ``j`` of step ``k``."""
        return self.step_times[k] - self.spread_seconds + self.spread_seconds * (j + 0.5) / self.per_step(k)

    def trace_id(self, k: int, j: int) -> str:
        """Id of trace ``j`` of step ``k``: ``tr-<prefix>-<step>-<index>`` (sorts with the index)."""
        return f"tr-{self.prefix}-{k:06d}-{j:07d}"

    def episode_id(self, k: int, e: int) -> str:
        """Id of episode ``e`` of step ``k``: ``ep-<prefix>-<step>-<index>``."""
        return f"ep-{self.prefix}-{k:06d}-{e:06d}"

    def parse(self, record_id: str) -> tuple[int, int] | None:
        """``(step, index)`` of one of our trace or episode ids, else None."""
        parts = record_id.split("-")
        if len(parts) != 4 or parts[1] != self.prefix or not (parts[2].isdigit() and parts[3].isdigit()):
            return None
        return int(parts[2]), int(parts[3])

    # -- records ------------------------------------------------------------------------------
    def trace(self, k: int, j: int) -> TraceRecord:
        """Trace ``j`` of step ``k`` (a summary record; its raw bytes are streamed by ``raw_source``)."""
        self.records_made += 1
        h = mix64(self._salt ^ (k << 32) ^ j)
        h2 = mix64(h)
        env = self.envs[(j // self.per_episode) % len(self.envs)]
        has_error = h2 % 100 < 3
        truncated = not has_error and (h2 >> 8) % 100 < 5
        u1, u2 = ((h & 0xFFFFFFFF) + 1) / 4294967297, (h >> 32) / 4294967296
        gauss = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
        reward = None if has_error else round(min(1.0, max(0.0, self.mean_reward(k) + 0.15 * gauss)), 4)
        trace_id = self.trace_id(k, j)
        return TraceRecord(
            trace_id=trace_id, upload_id=hex_id(self.run_id, "bulk-upload", k), episode_id=self.episode_id(
                k, j // self.per_episode), run_id=self.run_id, environment_id=env,
            task_id=f"task-{(h2 >> 16) % 10000:04d}", model_id=self.model, agent_name="solver", reward=reward,
            outcome="error" if has_error else ("truncated" if truncated else "done"), has_error=has_error,
            is_truncated=truncated, duration_ms=400 + (h2 >> 32) % 2600, total_tokens=self.trace_bytes // 4,
            created_at=self.created(k, j), ingested_at=self.step_times[k] + self.ingest_seconds,
            context=dict(self.context), run_step=k, user_id=self.user_id, team_id=self.team_id, raw=None,
            raw_size=self.trace_bytes, raw_source=lambda: self.raw_chunks(k, j, trace_id, env, reward))

    def members(self, k: int, e: int) -> list[TraceRecord]:
        """The traces of episode ``e`` of step ``k``."""
        first = e * self.per_episode
        return [self.trace(k, j) for j in range(first, min(self.per_step(k), first + self.per_episode))]

    def episode(self, k: int, e: int) -> EpisodeRecord:
        """Episode ``e`` of step ``k``."""
        members = self.members(k, e)
        failed = any(t.has_error for t in members)
        return EpisodeRecord(
            episode_id=self.episode_id(k, e), upload_id=members[0].upload_id, run_id=self.run_id,
            environment_id=members[0].environment_id, task_id=members[0].task_id,
            outcome="error" if failed else "done", has_error=failed, error_type="RolloutError" if failed else None,
            error_message="sandbox command timed out" if failed else None, created_at=members[0].created_at,
            ingested_at=members[0].ingested_at, run_step=k, user_id=self.user_id, team_id=self.team_id,
            context=dict(self.context), trace_ids=[t.trace_id for t in members])

    def find_trace(self, trace_id: str, now: float) -> TraceRecord | None:
        """A landed trace by id, or None."""
        at = self.parse(trace_id)
        if at is None or not trace_id.startswith("tr-") or at[0] not in self.visible_steps(now):
            return None
        return self.trace(*at) if at[1] < self.per_step(at[0]) else None

    def find_episode(self, episode_id: str, now: float) -> EpisodeRecord | None:
        """A landed episode by id, or None."""
        at = self.parse(episode_id)
        if at is None or not episode_id.startswith("ep-") or at[0] not in self.visible_steps(now):
            return None
        return self.episode(*at) if at[1] < self.episodes_of(at[0]) else None

    # -- walks, newest first ---------------------------------------------------------------------
    def _trace_key(self, k: int, j: int) -> tuple[float, str]:
        return self.created(k, j), self.trace_id(k, j)

    def _episode_key(self, k: int, e: int) -> tuple[float, str]:
        return self.created(k, e * self.per_episode), self.episode_id(k, e)

    def _last_below(self, n: int, key: Callable[[int], tuple[float, str]], before: tuple[float, str]) -> int:
        """The largest index ``i < n`` with ``key(i) < before`` (-1 if none); keys rise with ``i``."""
        lo, hi = -1, n - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if key(mid) < before:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def traces_desc(self, now: float, before: tuple[float, str] | None = None) -> Iterator[TraceRecord]:
        """Landed traces, newest first (``(created_at, trace_id)`` descending), those below ``before``."""
        for k in reversed(self.visible_steps(now)):
            n = self.per_step(k)
            last = n - 1 if before is None else self._last_below(
                n, partial(self._trace_key, k), before)
            for j in range(last, -1, -1):
                yield self.trace(k, j)

    def episodes_desc(self, now: float, before: tuple[float, str] | None = None,
                      step: int | None = None) -> Iterator[EpisodeRecord]:
        """Landed episodes, newest first (``(created_at, episode_id)`` descending), below ``before``."""
        for k in reversed(self.visible_steps(now)):
            if step is not None and k != step:
                continue
            n = self.episodes_of(k)
            last = n - 1 if before is None else self._last_below(
                n, partial(self._episode_key, k), before)
            for e in range(last, -1, -1):
                yield self.episode(k, e)

    def step_stats(self, k: int) -> StepStats:
        """Aggregates of a landed step (computed once per step time)."""
        cached = self._stats.get((k, self.step_times[k]))
        if cached is None:
            rewards = [0.0, 0]
            has_error = False
            for j in range(self.per_step(k)):
                t = self.trace(k, j)
                has_error = has_error or t.has_error
                if t.reward is not None:
                    rewards[0] += t.reward
                    rewards[1] += 1
            cached = StepStats(self.per_step(k), self.episodes_of(k), rewards[0], int(rewards[1]), has_error,
                               self.created(k, 0), self.created(k, self.per_step(k) - 1),
                               self.step_times[k] + self.ingest_seconds)
            self._stats[(k, self.step_times[k])] = cached
        return cached

    # -- raw documents --------------------------------------------------------------------------
    def raw_chunks(self, k: int, j: int, trace_id: str, env: str, reward: float | None) -> Iterator[bytes]:
        """The raw document of trace ``j`` of step ``k``: exactly ``trace_bytes`` bytes of JSON, in
        chunks of at most :data:`CHUNK_BYTES` (the assistant message is long filler text)."""
        prompt, _ = rollout_text((self.run_id, "bulk", k, j), env)
        doc = {
            "version": 4, "id": trace_id, "episode_id": self.episode_id(k, j // self.per_episode),
            "run_id": self.run_id, "run_step": k, "environment_id": env,
            "model": {"provider": "prime", "id": self.model},
            "nodes": [
                {"node_idx": 0, "parent_idx": None, "sampled": False,
                 "message": {"role": "system", "content": "You reverse text character by character."}},
                {"node_idx": 1, "parent_idx": 0, "sampled": False, "message": {"role": "user", "content": prompt}},
                {"node_idx": 2, "parent_idx": 1, "sampled": True,
                 "message": {"role": "assistant", "content": _PAD_MARK, "reasoning_content": None}},
            ],
            "calls": [{"call_idx": 0, "node_idx": 2, "model": self.model, "endpoint": "chat/completions",
                       "finish_reason": "length"}],
            "score": {"reward": reward},
        }
        head, tail = (part.encode() for part in json.dumps(doc, separators=(",", ":")).split(_PAD_MARK))
        pad = max(0, self.trace_bytes - len(head) - len(tail))
        block = _pad_block()
        at = mix64(self._salt ^ j ^ (k << 40)) % len(block)
        yield head
        while pad > 0:
            piece = block[at:at + min(pad, CHUNK_BYTES)]
            yield piece
            pad -= len(piece)
            at = (at + len(piece)) % len(block)
        yield tail
