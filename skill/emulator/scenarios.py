"""Run scenarios: how a simulated run misbehaves, chosen per run (or for the next run).

=================  =====================================================================
name               effect (parameters, defaults)
=================  =====================================================================
``fail``           FAILED while running step ``at_step`` (3) with ``error_message`` and,
                   unless ``analysis`` is false, ``failureAnalysis {rootCause, evidence[],
                   confidence}``; ERROR lines in trainer and orchestrator logs.
``stall``          after step ``at_step`` (2) the run stays RUNNING with no new steps, no new
                   lines, and progress ``lastUpdatedAt`` frozen.
``crash_loop``     after step ``at_step`` (2) env server ``env_name`` (the first) goes
                   ``CrashLoopBackOff``: error lines every 30 s in its logs, WARNINGs in the
                   orchestrator's, no new steps.
``stay_queued``    QUEUED forever with ``runs_ahead`` (3) and ``queue_reason``.
``echo_wandb_key`` the trainer logs the forwarded ``wandbApiKey`` value at start-up (a
                   secret-leak canary).
``missing_traces`` the trace uploads of ``steps`` ([2]) never land (metrics still have them).
=================  =====================================================================

A restart (``PUT /rft/runs/{id}/restart``) clears ``stall`` and ``crash_loop``.
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, dict[str, Any]] = {
    "fail": {"at_step": 3, "error_message": "trainer pod OOMKilled", "root_cause": None, "evidence": None,
             "confidence": 0.86, "analysis": True},
    "stall": {"at_step": 2},
    "crash_loop": {"at_step": 2, "env_name": None},
    "stay_queued": {"runs_ahead": 3, "queue_reason": None},
    "echo_wandb_key": {},
    "missing_traces": {"steps": [2]},
}

#: Scenario names accepted by :func:`scenario`.
SCENARIOS = tuple(DEFAULTS)


def scenario(name: str, **params: Any) -> dict[str, Any]:
    """Validated parameters of a scenario (defaults filled in); ValueError on a bad name or key."""
    if name not in DEFAULTS:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    unknown = set(params) - set(DEFAULTS[name])
    if unknown:
        raise ValueError(f"scenario {name!r} takes no parameter(s) {sorted(unknown)}")
    merged = {**DEFAULTS[name], **{k: v for k, v in params.items() if v is not None}}
    if "at_step" in merged and (not isinstance(merged["at_step"], int) or merged["at_step"] < (1 if name == "fail" else 0)):
        raise ValueError("at_step must be an integer >= 1 (>= 0 for stall and crash_loop)")
    if name == "missing_traces" and not all(isinstance(s, int) for s in merged["steps"]):
        raise ValueError("steps must be a list of integers")
    return merged
