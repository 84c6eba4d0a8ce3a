"""The log lines of a long run (scenario ``long_run``), generated on demand, never stored.

A :class:`LogVolume` gives each component (trainer, orchestrator, inference, each env server)
a stream of routine lines at a constant rate, so that ``lines`` lines fall in every
``hours`` hours, plus the occurrences of :data:`SIGNATURES`: distinct errors, each in its own
component, repeating ``count`` times over its own stretch of the run's life (some with a
traceback in the ``exception`` key). Line ``i`` of a stream sits at a computed time and its
text is a pure function of ``i``, so a read finds its window by arithmetic (an index by
time) and generates only the lines it looks at.
"""

from __future__ import annotations

import heapq
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .content import hex_id, mix64
from .logs import LogLine

#: Share of the lines per component (env servers split theirs).
WEIGHTS = {"trainer": 0.30, "orchestrator": 0.25, "inference": 0.25, "env-server": 0.20}
PREFIXES = {"trainer": "[rank0]: "}


@dataclass(frozen=True)
class Signature:
    """A distinct error: its component (``env`` 0 = first env server, -1 = last), message
    template (``{step}``, ``{n}``, ``{v}``, ``{tokens}`` vary per occurrence), optional traceback, and when it
    occurs: ``count`` times evenly between fractions ``first`` and ``last`` of the run's hours."""

    key: str
    component: str
    message: str
    first: float
    last: float
    count: int
    traceback: str | None = None
    env: int | None = None


def _tb(*frames: str) -> str:
    return "Traceback (most recent call last):\n" + "\n".join(frames)


SIGNATURES: tuple[Signature, ...] = (
    Signature("cuda_oom", "trainer",
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {v}.00 GiB (GPU 0; 79.10 GiB total "
              "capacity) at step {step}", 0.04, 0.10, 12,
              _tb('  File "prime_rl/trainer/train.py", line 412, in train_step',
                  "    loss.backward()",
                  '  File "torch/_tensor.py", line 581, in backward',
                  "torch.OutOfMemoryError: CUDA out of memory.")),
    Signature("nccl_timeout", "trainer",
              "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE) "
              "ran for 600000 milliseconds before timing out", 0.25, 0.30, 5),
    Signature("checkpoint_upload", "trainer",
              "Checkpoint upload for step {step} failed: ReadTimeoutError: Read timeout on endpoint URL; "
              "retrying in 30s", 0.45, 0.65, 9,
              _tb('  File "prime_rl/trainer/ckpt.py", line 188, in upload',
                  "    client.upload_file(path, bucket, key)",
                  '  File "botocore/httpsession.py", line 501, in send',
                  "botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL")),
    Signature("nan_grad_norm", "trainer", "Gradient norm is NaN at step {step}; skipping the optimizer step",
              0.83, 0.96, 4),
    Signature("rollout_timeout", "orchestrator",
              "Rollout request {n} to the env server failed after 3 attempts: httpx.ReadTimeout", 0.12, 0.38, 30,
              _tb('  File "prime_rl/orchestrator/client.py", line 97, in generate',
                  "    response = await client.post(url, json=payload)",
                  '  File "httpx/_client.py", line 1730, in send',
                  "httpx.ReadTimeout: timed out")),
    Signature("prompt_too_long", "inference",
              "Request {n} aborted: the prompt has {tokens} tokens, more than max_model_len 2048", 0.02, 0.92, 60),
    Signature("reward_zero_division", "env-server",
              "Reward function raised ZeroDivisionError: division by zero (task task-{n})", 0.33, 0.75, 40,
              _tb('  File "environment/reward.py", line 41, in score',
                  "    return correct / attempted",
                  "ZeroDivisionError: division by zero"), env=0),
    Signature("sandbox_timeout", "env-server", "Sandbox command timed out after 30s (task task-{n})",
              0.55, 0.85, 25, env=-1),
)
#: The ``storm`` of a long run: one more signature, ``storm`` times within ``storm_seconds`` around mid-run
#: (more ERROR lines than one logs read returns).
STORM_MESSAGE = "Heartbeat from the trainer missed: no weights for {n} ms"

#: Routine lines per component: (level, template), cycled by line index.
ROUTINE: dict[str, tuple[tuple[str, str], ...]] = {
    "trainer": (
        ("INFO", "Step {step} | microbatch {a}/8 | loss {f:.4f} | grad_norm {g:.4f}"),
        ("INFO", "Step {step} | {b} tokens/s | mfu {c}.{a}%"),
        ("INFO", "Step {step} | microbatch {a}/8 | loss {f:.4f} | grad_norm {g:.4f}"),
        ("DEBUG", "Peak memory {c}.{a} GiB, reserved {d}.{a} GiB"),
        ("INFO", "Weights broadcast to inference in {a}.{c}s"),
        ("INFO", "Step {step} | microbatch {a}/8 | loss {f:.4f} | grad_norm {g:.4f}"),
        ("INFO", "Received {b} samples from the orchestrator"),
        ("INFO", "Step {step} | microbatch {a}/8 | loss {f:.4f} | grad_norm {g:.4f}"),
        ("DEBUG", "Data loader: {a} batches buffered"),
        ("WARNING", "Step {step} took {d}.{a}s, longer than the moving average"),
    ),
    "orchestrator": (
        ("INFO", "Rollout batch {b}: {c} rollouts in {a}.{d}s (mean reward {g:.3f})"),
        ("INFO", "Buffer: {c} rollouts pending, {d} in flight"),
        ("INFO", "Rollout batch {b}: {c} rollouts in {a}.{d}s (mean reward {g:.3f})"),
        ("DEBUG", "Sampling params: temperature 1.0, max_tokens {c}"),
        ("INFO", "Rollout batch {b}: {c} rollouts in {a}.{d}s (mean reward {g:.3f})"),
        ("INFO", "Sent batch for step {step} to the trainer"),
        ("INFO", "Rollout batch {b}: {c} rollouts in {a}.{d}s (mean reward {g:.3f})"),
        ("WARNING", "Async level {a}: the orchestrator is {a} steps ahead of the trainer"),
    ),
    "inference": (
        ("INFO", "Avg prompt throughput: {b}.{a} tokens/s, Avg generation throughput: {c}{a}.{d} tokens/s, "
                 "Running: {d} reqs, Waiting: {a} reqs, GPU KV cache usage: {c}.{a}%"),
        ("INFO", '"POST /v1/chat/completions HTTP/1.1" 200 OK'),
        ("INFO", '"POST /v1/chat/completions HTTP/1.1" 200 OK'),
        ("INFO", '"POST /v1/chat/completions HTTP/1.1" 200 OK'),
        ("DEBUG", "Scheduler: {d} running, {a} swapped"),
        ("INFO", '"POST /v1/chat/completions HTTP/1.1" 200 OK'),
        ("WARNING", "KV cache usage {c}.{a}%; preempting {a} requests"),
    ),
    "env-server": (
        ("INFO", "Scored rollout for task task-{b}: reward {g:.3f}"),
        ("INFO", '"GET /health HTTP/1.1" 200'),
        ("INFO", "Scored rollout for task task-{b}: reward {g:.3f}"),
        ("DEBUG", "Sandbox pool: {d} warm, {a} starting"),
        ("INFO", "Scored rollout for task task-{b}: reward {g:.3f}"),
        ("WARNING", "Slow sandbox start for task task-{b}: {c}.{a}s"),
    ),
}


@dataclass(frozen=True)
class _Stream:
    component: str
    env_name: str | None
    dt: float  # simulated seconds between lines
    salt: int
    #: Per routine template: (level, JSON text between the timestamp and the message, the
    #: message template escaped for JSON, the JSON text after it).
    parts: tuple[tuple[str, str, str, str], ...]


def _stream_parts(component: str, env_name: str | None) -> tuple[tuple[str, str, str, str], ...]:
    """The constant pieces of a stream's lines, JSON-escaped once (the numbers filled in later
    need no escaping)."""
    lead = json.dumps(f"{env_name}: " if env_name else "")[1:-1]
    tail = f'","tag":{json.dumps(component)}}}'
    return tuple((level, f'","level":"{level}","message":"{lead}', json.dumps(template)[1:-1], tail)
                 for level, template in ROUTINE[component])


class LogVolume:
    """The generated lines of one long run.

    Args:
        start: simulated time the run's pods started (first line just after).
        hours: the stretch in which ``lines`` routine lines fall (the rate; lines go on
            at that rate until the run ends).
        lines: routine lines per ``hours``, all components together (rounded up per stream).
        errors: whether the :data:`SIGNATURES` occur.
        storm, storm_seconds: that many more ERROR lines (:data:`STORM_MESSAGE`, orchestrator) within that many
            seconds around mid-run.
        components: the run's components other than env servers; ``env_names`` its env servers.
        epoch: wall time of simulated second 0 (for timestamps).
        step_at: the training step at a simulated time (for messages).
    """

    def __init__(self, *, run_id: str, start: float, hours: float, lines: int, errors: bool,
                 components: list[str], env_names: list[str], epoch: float,
                 step_at: Callable[[float], int], storm: int = 0, storm_seconds: float = 3600.0) -> None:
        self.start, self.span, self.epoch, self.step_at = start, hours * 3600.0, epoch, step_at
        self._dates: dict[int, str] = {}
        #: How many lines have been generated so far (the lazy-generation hook).
        self.lines_made = 0
        weights: list[tuple[str, str | None, float]] = [(c, None, WEIGHTS[c]) for c in components]
        weights += [("env-server", env, WEIGHTS["env-server"] / len(env_names)) for env in env_names]
        total = sum(w for *_, w in weights) or 1.0
        self.streams: list[_Stream] = []
        for index, (component, env, weight) in enumerate(weights):
            count = math.ceil(lines * weight / total)
            if count:
                salt = _salt(run_id, f"stream-{index}")
                self.streams.append(_Stream(component, env, self.span / count, salt, _stream_parts(component, env)))
        self.signatures: list[tuple[Signature, str | None, int]] = []
        if storm and "orchestrator" in components:
            half = min(0.5, storm_seconds / self.span / 2)
            self.signatures.append((Signature("storm", "orchestrator", STORM_MESSAGE, 0.5 - half, 0.5 + half, storm),
                                    None, _salt(run_id, "storm")))
        if errors:
            for sig in SIGNATURES:
                if sig.component == "env-server":
                    if env_names:
                        self.signatures.append((sig, env_names[sig.env or 0], _salt(run_id, sig.key)))
                elif sig.component in components:
                    self.signatures.append((sig, None, _salt(run_id, sig.key)))

    # -- routine lines -----------------------------------------------------------------------
    def _index_range(self, s: _Stream, lo: float, hi: float) -> range:
        """Indices ``i`` with ``lo <= t(i) <= hi``, ``t(i) = start + (i + 0.5) * dt``."""
        first = 0 if lo <= self.start else max(0, math.ceil((lo - self.start) / s.dt - 0.5))
        last = math.floor((hi - self.start) / s.dt - 0.5)
        while first <= last and self.start + (first + 0.5) * s.dt < lo:
            first += 1
        while last >= first and self.start + (last + 0.5) * s.dt > hi:
            last -= 1
        return range(first, last + 1)

    def _stamp(self, t: float) -> str:
        """ISO 8601 UTC with milliseconds, like the clock's (dates cached per day: this is hot)."""
        wall = self.epoch + t
        whole = math.floor(wall)
        day, second = divmod(whole, 86400)
        date = self._dates.get(day)
        if date is None:
            date = self._dates[day] = time.strftime("%Y-%m-%d", time.gmtime(day * 86400))
        hour, rest = divmod(second, 3600)
        return f"{date}T{hour:02d}:{rest // 60:02d}:{rest % 60:02d}.{int((wall - whole) * 1000):03d}Z"

    def _routine(self, s: _Stream, i: int) -> LogLine:
        self.lines_made += 1
        t = self.start + (i + 0.5) * s.dt
        level, head, template, tail = s.parts[i % len(s.parts)]
        h = mix64(s.salt ^ i)
        message = template.format(step=self.step_at(t), a=h % 8 + 1, b=(h >> 8) % 9000 + 1000,
                                  c=(h >> 24) % 90 + 10, d=(h >> 32) % 60 + 2,
                                  f=0.2 + ((h >> 40) % 1000) / 1500, g=((h >> 50) % 1000) / 1000)
        text = f'{PREFIXES.get(s.component, "")}{{"timestamp":"{self._stamp(t)}{head}{message}{tail}'
        return LogLine(t, s.component, s.env_name, level, text)

    def _line(self, t: float, component: str, env_name: str | None, level: str, message: str,
              exception: str | None = None) -> LogLine:
        self.lines_made += 1
        entry = {"timestamp": self._stamp(t), "level": level, "message": message, "tag": component}
        if exception:
            entry["exception"] = exception
        text = PREFIXES.get(component, "") + json.dumps(entry, separators=(",", ":"))
        return LogLine(t, component, env_name, level, text)

    # -- errors ------------------------------------------------------------------------------
    def _occurrence_times(self, sig: Signature, lo: float, hi: float) -> list[tuple[int, float]]:
        """``(j, t)`` of the occurrences of ``sig`` with ``lo <= t <= hi``."""
        times = ((j, self.start + self.span * (sig.first + (sig.last - sig.first) * (j + 0.5) / sig.count))
                 for j in range(sig.count))
        return [(j, t) for j, t in times if lo <= t <= hi]

    def _error(self, sig: Signature, env_name: str | None, salt: int, j: int, t: float) -> LogLine:
        h = mix64(salt ^ j)
        message = sig.message.format(step=self.step_at(t), n=h % 90000 + 10000, v=2 + j % 6,
                                     tokens=2049 + (h >> 20) % 4000)
        return self._line(t, sig.component, env_name, "ERROR", message, sig.traceback)

    def lines_desc(self, component: str, env_name: str | None, lo: float, hi: float,
                   level: str | None) -> Iterator[LogLine]:
        """See :class:`~skill.emulator.logs.LineSource`: generated as they are consumed."""
        errors: list[tuple[float, int, Signature, str | None, int]] = []
        if level in (None, "ERROR"):
            for sig, env, salt in self.signatures:
                if sig.component == component and (env_name is None or env == env_name):
                    errors += [(t, j, sig, env, salt) for j, t in self._occurrence_times(sig, lo, hi)]
        errors.sort(key=lambda e: e[0], reverse=True)
        streams = [s for s in self.streams if s.component == component and (env_name is None or s.env_name == env_name)]
        yield from heapq.merge((self._error(sig, env, salt, j, t) for t, j, sig, env, salt in errors),
                               *(self._stream_desc(s, lo, hi, level) for s in streams),
                               key=lambda ln: ln.t, reverse=True)

    def _stream_desc(self, s: _Stream, lo: float, hi: float, level: str | None) -> Iterator[LogLine]:
        parts = s.parts
        if level is not None and all(part[0] != level for part in parts):
            return
        for i in reversed(self._index_range(s, lo, hi)):
            if level is None or parts[i % len(parts)][0] == level:
                yield self._routine(s, i)

    def count(self, lo: float, hi: float) -> int:
        """How many lines (routine and errors, every component) fall in ``[lo, hi]``."""
        routine = sum(len(self._index_range(s, lo, hi)) for s in self.streams)
        return routine + sum(len(self._occurrence_times(sig, lo, hi)) for sig, _, _ in self.signatures)


def _salt(run_id: str, key: str) -> int:
    return int(hex_id(run_id, key, length=16), 16)
