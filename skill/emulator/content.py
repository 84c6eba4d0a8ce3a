"""Deterministic made-up content: rewards, metric records, rollout text, raw trace documents.

Everything is a pure function of its arguments (seeded with sha256, never ``hash()``), so a
step re-read later, or by another process, yields the same numbers and bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from typing import Any

WORDS = (
    "the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "seven", "wise", "owls",
    "watch", "from", "an", "old", "oak", "tree", "near", "the", "silent", "river", "under", "pale", "morning",
    "light", "and", "distant", "bells", "ring", "softly", "across", "green", "hills", "where", "shepherds",
    "count", "their", "sheep", "before", "the", "autumn", "rain", "arrives",
)


def rng(*parts: Any) -> random.Random:
    """A ``random.Random`` seeded from the sha256 of ``parts``."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def mix64(x: int) -> int:
    """splitmix64: a cheap, well-spread 64-bit hash of an integer (for content made per line or
    per trace, where :func:`rng` would cost too much)."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def hex_id(*parts: Any, length: int = 64) -> str:
    """A stable lowercase hex id of ``length`` characters derived from ``parts``."""
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:length]


def reward_mean(run_id: str, step: int, max_steps: int | None) -> float:
    """Mean reward at ``step``: rises from ~0.15 towards ~0.85, with noise, within [0, 1]. Still rising
    over a run's last ten steps by more than the noise (so a healthy run's trend reads "rising",
    not a coin toss between "rising" and "flat")."""
    horizon = max(3.0, (max_steps or 60) / 2.0)
    trend = 0.15 + 0.70 * (1.0 - math.exp(-step / horizon))
    return round(min(1.0, max(0.0, trend + rng(run_id, "reward", step).gauss(0.0, 0.025))), 4)


def metrics_record(run_id: str, step: int, max_steps: int | None, *, sft: bool, timestamp: str,
                   step_seconds: float, batch_size: int | None, learning_rate: float | None) -> dict[str, Any]:
    """One ``/metrics`` record: ``step``, ``timestamp`` and flat numeric keys."""
    r = rng(run_id, "metrics", step)
    progress = step / max(1, max_steps or 60)
    loss = max(0.05, (1.2 if sft else 0.9) * math.exp(-2.0 * progress) + r.gauss(0, 0.03))
    record: dict[str, Any] = {"step": step, "timestamp": timestamp}
    if not sft:
        mean = reward_mean(run_id, step, max_steps)
        record["reward/all/mean"] = mean
        record["reward/all/std"] = round(0.1 + 0.15 * (1 - mean) + abs(r.gauss(0, 0.01)), 4)
    record.update({
        "loss": round(loss, 4),
        "entropy": round(max(0.05, 1.1 * math.exp(-1.2 * progress) + r.gauss(0, 0.02)), 4),
        "grad_norm": round(abs(0.4 + r.gauss(0, 0.08)), 4),
        "learning_rate": learning_rate if learning_rate is not None else 1e-6,
        "seq_len/mean": round(180 + 40 * progress + r.gauss(0, 5), 1),
        "throughput/tokens_per_sec": round(9000 + r.gauss(0, 400), 1),
        "time/step_seconds": round(step_seconds * (1 + r.gauss(0, 0.05)), 2),
        "batch_size": batch_size,
    })
    return record


def sentence(r: random.Random, n: int) -> str:
    """``n`` words from :data:`WORDS`."""
    return " ".join(r.choice(WORDS) for _ in range(n))


def rollout_text(seed: tuple[Any, ...], env: str) -> tuple[str, str]:
    """(prompt, completion) for a rollout: reverse-text style, deterministic for ``seed``."""
    r = rng(*seed, "text")
    text = sentence(r, r.randint(4, 9))
    reversed_text = text[::-1]
    if r.random() < 0.3:  # imperfect answers
        cut = r.randint(1, max(1, len(reversed_text) // 3))
        reversed_text = reversed_text[:-cut]
    return f"[{env}] Reverse the text: {text}", reversed_text


def trace_document(trace_id: str, *, episode_id: str, run_id: str, run_step: int, env: str,
                   model: str, prompt: str, completion: str, reward: float | None) -> bytes:
    """A raw trace document: ``{"version": 4, "id": ..., "nodes": [...]}`` as compact JSON bytes."""
    doc = {
        "version": 4,
        "id": trace_id,
        "episode_id": episode_id,
        "run_id": run_id,
        "run_step": run_step,
        "environment_id": env,
        "model": {"provider": "prime", "id": model},
        "nodes": [
            {"node_idx": 0, "parent_idx": None, "sampled": False,
             "message": {"role": "system", "content": "You reverse text character by character."}},
            {"node_idx": 1, "parent_idx": 0, "sampled": False, "message": {"role": "user", "content": prompt}},
            {"node_idx": 2, "parent_idx": 1, "sampled": True,
             "message": {"role": "assistant", "content": completion, "reasoning_content": None}},
        ],
        "calls": [{"call_idx": 0, "node_idx": 2, "model": model, "endpoint": "chat/completions",
                   "finish_reason": "stop"}],
        "score": {"reward": reward},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def histogram(values: list[float], bins: int = 10) -> list[dict[str, Any]]:
    """Bins over [0, 1]: ``{binStart, binEnd, count, range}``."""
    out = []
    for i in range(bins):
        lo, hi = i / bins, (i + 1) / bins
        count = sum(1 for v in values if lo <= v < hi or (i == bins - 1 and v == 1.0))
        out.append({"binStart": round(lo, 2), "binEnd": round(hi, 2), "count": count,
                    "range": f"{lo:.1f}-{hi:.1f}"})
    return out
