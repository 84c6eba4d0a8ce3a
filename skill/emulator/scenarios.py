"""Run scenarios: how a simulated run misbehaves (or grows large), chosen per run, for the
next run, or for every run from now on.

Each scenario's parameters, defaults and effect are listed in ``README.md`` (section
Scenarios), the one place they are documented; :data:`SUMMARIES` holds one line per name
for help texts. :func:`scenario` validates parameters and fills in defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULTS: dict[str, dict[str, Any]] = {
    "fail": {"at_step": 3, "error_message": "trainer pod OOMKilled", "root_cause": None, "evidence": None,
             "confidence": 0.86, "analysis": True},
    "stall": {"at_step": 2},
    "crash_loop": {"at_step": 2, "env_name": None},
    "stay_queued": {"runs_ahead": 3, "queue_reason": None},
    "echo_wandb_key": {},
    "missing_traces": {"steps": [2]},
    "pending": {"seconds": 120.0},
    "image_pull_slow": {"seconds": 600.0, "image": None},
    "image_pull_backoff": {"image": None, "fail_after_seconds": 900.0},
    "slow_stop": {"seconds": 60.0},
    "long_run": {"hours": 24.0, "lines": 210_000, "errors": True, "storm": 0, "storm_seconds": 3600.0},
    "many_traces": {"count": 2000, "trace_bytes": 100_000, "total_bytes": 0, "per_episode": 4},
    "learning": {"start": 0.15, "end": 0.85},
    "flat": {"level": 0.4},
    "saturated": {"value": 1.0},
    "entropy_collapse": {"by_step": 8},
    "kl_spike": {"at_step": 12, "factor": 30.0},
    "trainer_bound": {"share": 0.7},
    "orchestrator_bound": {"share": 0.7},
    "sft_eval_loss": {"interval": 5, "overfit_after": None},
    "rollouts_degrade": {"from_step": 5},
}

#: Scenario names accepted by :func:`scenario`.
SCENARIOS = tuple(DEFAULTS)

#: One line per scenario, for help texts (details in README.md).
SUMMARIES: dict[str, str] = {
    "fail": "FAILED during a step, with errorMessage, failureAnalysis and ERROR lines",
    "stall": "RUNNING with no new steps or lines after a step",
    "crash_loop": "an env server in CrashLoopBackOff, no new steps",
    "stay_queued": "QUEUED forever",
    "echo_wandb_key": "the trainer logs the forwarded W&B key (secret-leak canary)",
    "missing_traces": "some steps' traces never land",
    "pending": "PENDING for a while before QUEUED",
    "image_pull_slow": "pods ContainerCreating while a slow image pull runs, then fine",
    "image_pull_backoff": "the image cannot be pulled: ErrImagePull / ImagePullBackOff, then FAILED",
    "slow_stop": "a stop tears down for a while before STOPPED",
    "long_run": "a run stretched over hours, with 210,000 log lines and 8 error signatures",
    "many_traces": "thousands of traces (and gigabytes of raw bytes), generated on demand",
    "learning": "the reward rises from start to end (the default curve, with its ends chosen)",
    "flat": "the reward stays at one level, with noise: nothing is learned",
    "saturated": "every rollout gets the same reward (1 by default): nothing to learn from",
    "entropy_collapse": "the policy's entropy falls to ~1% of its start and the reward stops rising",
    "kl_spike": "mismatch_kl and grad_norm jump at one step",
    "trainer_bound": "the orchestrator waits for the trainer most of each step",
    "orchestrator_bound": "the trainer waits for the orchestrator's batches most of each step",
    "sft_eval_loss": "an SFT run logs an eval loss (val/loss) every few steps",
    "rollouts_degrade": "more and more rollouts are truncated or fail",
}

#: Restart (``PUT /rft/runs/{id}/restart``) clears these.
CLEARED_BY_RESTART = ("stall", "crash_loop")


def _number(merged: dict[str, Any], key: str, lo: float, hi: float, *, integer: bool = False) -> None:
    value = merged[key]
    ok = isinstance(value, int if integer else (int, float)) and not isinstance(value, bool)
    if not ok or not lo <= value <= hi:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{key} must be {kind} from {lo:g} to {hi:g}")


def scenario(name: str, **params: Any) -> dict[str, Any]:
    """Validated parameters of a scenario (defaults filled in); ValueError on a bad name or value."""
    if name not in DEFAULTS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    unknown = set(params) - set(DEFAULTS[name])
    if unknown:
        raise ValueError(f"scenario {name!r} takes no parameter(s) {sorted(unknown)}")
    merged = {**DEFAULTS[name], **{k: v for k, v in params.items() if v is not None}}
    lowest_step = 1 if name == "fail" else 0
    if "at_step" in merged and (not isinstance(merged["at_step"], int) or merged["at_step"] < lowest_step):
        raise ValueError("at_step must be an integer >= 1 (>= 0 for stall and crash_loop)")
    if name == "missing_traces" and not all(isinstance(s, int) for s in merged["steps"]):
        raise ValueError("steps must be a list of integers")
    if name in ("pending", "image_pull_slow", "slow_stop"):
        _number(merged, "seconds", 0, 7 * 86400)
    if name == "image_pull_backoff":
        _number(merged, "fail_after_seconds", 0, 7 * 86400)
    if "image" in merged and merged["image"] is not None and not isinstance(merged["image"], str):
        raise ValueError("image must be a string like ghcr.io/primeintellect-ai/prime-rl:v0.5.0")
    if name == "long_run":
        _number(merged, "hours", 0.1, 24 * 30)
        _number(merged, "lines", 0, 50_000_000, integer=True)
        if not isinstance(merged["errors"], bool):
            raise ValueError("errors must be true or false")
        _number(merged, "storm", 0, 10_000_000, integer=True)
        _number(merged, "storm_seconds", 1, 30 * 86400)
    if name == "many_traces":
        _number(merged, "count", 1, 10_000_000, integer=True)
        _number(merged, "trace_bytes", 2048, 1 << 34, integer=True)
        _number(merged, "total_bytes", 0, 1 << 44, integer=True)
        _number(merged, "per_episode", 1, 64, integer=True)
        if merged["total_bytes"] and merged["total_bytes"] // merged["count"] < 2048:
            raise ValueError("total_bytes / count must be at least 2048 bytes per trace")
    if name == "learning":
        _number(merged, "start", -1e6, 1e6)
        _number(merged, "end", -1e6, 1e6)
    if name == "flat":
        _number(merged, "level", -1e6, 1e6)
    if name == "saturated" and merged["value"] not in (0, 1):
        raise ValueError("value must be 0 or 1 (every rollout failing, or every one succeeding)")
    if name == "entropy_collapse":
        _number(merged, "by_step", 1, 1_000_000, integer=True)
    if name == "kl_spike":
        _number(merged, "at_step", 1, 1_000_000, integer=True)
        _number(merged, "factor", 1, 1e6)
    if name in ("trainer_bound", "orchestrator_bound"):
        _number(merged, "share", 0, 1)
    if name == "sft_eval_loss":
        _number(merged, "interval", 1, 1_000_000, integer=True)
        if merged["overfit_after"] is not None:
            _number(merged, "overfit_after", 0, 1_000_000, integer=True)
    if name == "rollouts_degrade":
        _number(merged, "from_step", 0, 1_000_000, integer=True)
    return merged


def scenario_map(value: str | Mapping[str, Mapping[str, Any] | None] | None) -> dict[str, dict[str, Any]]:
    """Validated scenarios from a name or a ``{name: params}`` mapping (None: none); ValueError."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = {value: {}}
    return {name: scenario(name, **dict(params or {})) for name, params in value.items()}
