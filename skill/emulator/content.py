"""Deterministic made-up content: rewards, metric records, rollout text, raw trace documents.

Everything is a pure function of its arguments (seeded with sha256, never ``hash()``), so a
step re-read later, or by another process, yields the same numbers and bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Mapping
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


#: Scenarios (:mod:`.scenarios`) that shape the metric curves; their noise is seeded by the scenario and the step,
#: not the run id, so every run of a scenario tells the same story (a demo or a test never meets a flat run whose
#: noise happens to read as a trend).
CURVE_SCENARIOS = ("learning", "flat", "saturated", "entropy_collapse", "kl_spike", "trainer_bound",
                   "orchestrator_bound", "sft_eval_loss", "rollouts_degrade")
_NO_CURVES: Mapping[str, Mapping[str, Any]] = {}


def _noise(run_id: str, curves: Mapping[str, Any], what: str, step: int) -> random.Random:
    shaped = [name for name in CURVE_SCENARIOS if name in curves]
    return rng(*shaped, what, step) if shaped else rng(run_id, what, step)


def reward_mean(run_id: str, step: int, max_steps: int | None,
                curves: Mapping[str, Mapping[str, Any]] = _NO_CURVES) -> float:
    """Mean reward at ``step``: rises from ~0.15 towards ~0.85, with noise, within [0, 1]. Still rising
    over a run's last ten steps by more than the noise (so a healthy run's trend reads "rising",
    not a coin toss between "rising" and "flat"). ``curves`` (the run's scenarios): ``learning`` sets
    the start and end, ``flat`` holds it at ``level``, ``saturated`` at ``value`` with no noise,
    ``entropy_collapse`` freezes it where the entropy collapsed."""
    if "saturated" in curves:
        return float(curves["saturated"]["value"])
    noise = _noise(run_id, curves, "reward", step).gauss(0.0, 0.025)
    if "flat" in curves:
        trend = float(curves["flat"]["level"])
    else:
        shape = curves.get("learning", {"start": 0.15, "end": 0.85})
        horizon = max(3.0, (max_steps or 60) / 2.0)
        at = min(step, curves["entropy_collapse"]["by_step"]) if "entropy_collapse" in curves else step
        trend = shape["start"] + (shape["end"] - shape["start"]) * (1.0 - math.exp(-at / horizon))
    return round(min(1.0, max(0.0, trend + noise)), 4)


def metrics_record(run_id: str, step: int, max_steps: int | None, *, sft: bool, timestamp: str,
                   step_seconds: float, batch_size: int | None, learning_rate: float | None,
                   curves: Mapping[str, Mapping[str, Any]] = _NO_CURVES) -> dict[str, Any]:
    """One ``/metrics`` record: ``step``, ``timestamp`` and flat numeric keys; ``curves`` (the run's
    scenarios) shape them (README, Scenarios).

    RL records also carry prime-rl's stability and performance metrics under their prime-rl names
    (``skills/training/monitor-run/SKILL.md``): ``mismatch_kl/all/mean``, ``time/wait_for_batch``
    (the trainer waiting for the orchestrator), ``time/wait_for_policy`` (the orchestrator waiting for
    the trainer), ``train/agg/effective/agent/is_truncated/mean`` and ``train/agg/all/agent/has_error/mean``
    (fractions of rollouts); SFT records with ``sft_eval_loss`` carry ``val/loss`` every ``interval`` steps."""
    r = _noise(run_id, curves, "metrics", step)
    progress = step / max(1, max_steps or 60)
    loss = max(0.05, (1.2 if sft else 0.9) * math.exp(-2.0 * progress) + r.gauss(0, 0.03))
    record: dict[str, Any] = {"step": step, "timestamp": timestamp}
    if not sft:
        mean = reward_mean(run_id, step, max_steps, curves)
        record["reward/all/mean"] = mean
        spread = 0.0 if "saturated" in curves else 0.1 + 0.15 * (1 - mean) + abs(r.gauss(0, 0.01))
        record["reward/all/std"] = round(spread, 4)
    entropy = 1.1 * math.exp(-1.2 * progress) + r.gauss(0, 0.02)
    if "entropy_collapse" in curves:  # to ~1% of its start by by_step, then stays there
        entropy = 1.1 * math.exp(-4.6 * min(1.0, step / curves["entropy_collapse"]["by_step"])) + abs(r.gauss(0, 0.002))
    grad_norm = abs(0.4 + r.gauss(0, 0.08))
    spike = curves.get("kl_spike")
    if spike and step == spike["at_step"]:
        grad_norm *= spike["factor"]
    record.update({
        "loss": round(loss, 4),
        "entropy": round(max(0.005, entropy), 4),
        "grad_norm": round(grad_norm, 4),
        "learning_rate": learning_rate if learning_rate is not None else 1e-6,
        "seq_len/mean": round(180 + 40 * progress + r.gauss(0, 5), 1),
        "throughput/tokens_per_sec": round(9000 + r.gauss(0, 400), 1),
        "time/step_seconds": round(step_seconds * (1 + r.gauss(0, 0.05)), 2),
        "batch_size": batch_size,
    })
    if sft:
        val = curves.get("sft_eval_loss")
        if val and step % val["interval"] == 0:
            overfit = val["overfit_after"]
            rise = 0.04 * (step - overfit) if overfit is not None and step > overfit else 0.0
            at = min(step, overfit) / max(1, max_steps or 60) if overfit is not None else progress
            record["val/loss"] = round(max(0.05, 1.25 * math.exp(-1.6 * at) + 0.05 + rise + r.gauss(0, 0.01)), 4)
        return record
    kl = 0.002 + abs(r.gauss(0, 0.0004))
    if spike and step == spike["at_step"]:
        kl *= spike["factor"]
    wait_batch, wait_policy = 0.08 + abs(r.gauss(0, 0.01)), 0.1 + abs(r.gauss(0, 0.01))
    if "orchestrator_bound" in curves:
        wait_batch = curves["orchestrator_bound"]["share"] + r.gauss(0, 0.01)
    if "trainer_bound" in curves:
        wait_policy = curves["trainer_bound"]["share"] + r.gauss(0, 0.01)
    truncated, errors = 0.03 + r.gauss(0, 0.004), 0.015 + abs(r.gauss(0, 0.003))
    degrade = curves.get("rollouts_degrade")
    if degrade and step > degrade["from_step"]:
        truncated += 0.03 * (step - degrade["from_step"])
        errors += 0.02 * (step - degrade["from_step"])
    record.update({
        "mismatch_kl/all/mean": round(kl, 5),
        "time/wait_for_batch": round(max(0.0, wait_batch) * step_seconds, 2),
        "time/wait_for_policy": round(max(0.0, wait_policy) * step_seconds, 2),
        "train/agg/effective/agent/is_truncated/mean": round(min(1.0, max(0.0, truncated)), 4),
        "train/agg/all/agent/has_error/mean": round(min(1.0, max(0.0, errors)), 4),
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


def histogram(values: list[float], bins: int = 10, lo: float = 0.0) -> list[dict[str, Any]]:
    """Bins over [lo, 1] (rewards: [0, 1]; advantages: [-1, 1]): ``{binStart, binEnd, count, range}``."""
    out = []
    width = (1.0 - lo) / bins
    for i in range(bins):
        start, end = lo + i * width, lo + (i + 1) * width
        count = sum(1 for v in values if start <= v < end or (i == bins - 1 and v == 1.0))
        out.append({"binStart": round(start, 2), "binEnd": round(end, 2), "count": count,
                    "range": f"{start:.1f}-{end:.1f}"})
    return out
