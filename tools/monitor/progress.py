"""Is a run actually progressing, not just RUNNING? (:func:`check_progress`)

Sources (reference/prime-api.md): GET ``/rft/runs/{id}`` (§2.2), ``/progress`` (§5.8),
``/metrics`` (§5.7), ``/env-servers`` (§2.3, §5.6), ``/logs`` (§5.5). Ages ("no new step for
12 min") are measured against the server's clock (:mod:`._clock`), never the local one.
"""

from __future__ import annotations

import itertools
import statistics
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.core import RUN_ID, Context, require_run, tool
from tools.errors import Call, call
from tools.monitor._clock import parse_time, seconds_since, server_now
from tools.monitor._logtext import parse_logs
from tools.monitor._series import is_number, reward_key
from tools.monitor._views import FailureAnalysisView, clip, failure_analysis_view, minutes
from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.client import PlatformClient

Verdict = Literal["queued", "starting", "progressing", "stalled", "failing", "crash_looping", "completed", "failed",
                  "stopped", "paused", "unknown"]

#: A RUNNING run with no new step for this long (seconds) is stalled, whatever its step time.
STALL_FLOOR_SECONDS = 600
#: Default stall threshold in step times (the median of recent steps).
STALL_STEP_MULTIPLE = 5
#: A RUNNING run with no first step this long after its start is stalled.
STARTUP_GRACE_SECONDS = 1800
#: Window (seconds) in which ERROR log lines make a running run "failing".
ERROR_WINDOW_SECONDS = 900
CRASH_POD_STATES = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerError",
                              "CreateContainerConfigError", "RunContainerError", "InvalidImageName"})
FAILED_POD_STATES = frozenset({"Error", "Failed", "OOMKilled"})
_VERDICT_OF_STATUS = {"QUEUED": "queued", "PENDING": "queued", "COMPLETED": "completed", "FAILED": "failed",
                      "STOPPED": "stopped", "PAUSED": "paused", "PAUSING": "paused"}


class CheckProgressInput(BaseModel):
    """Which run, and how long without a new step counts as stalled."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    stall_after_seconds: int | None = Field(default=None, ge=60, le=86400, description=(
        "Seconds without a new step after which a RUNNING run is 'stalled' (60..86400). Default: 5 x the recent step "
        "time, at least 600."))


class EnvServerView(BaseModel):
    """An environment-server pod (GET ``/rft/runs/{id}/env-servers``)."""

    env_name: str | None = Field(default=None, description="Environment name.")
    pod_name: str = Field(description="Pod name.")
    status: str | None = Field(default=None, description="Kubernetes status text, e.g. Running, CrashLoopBackOff.")


class CheckProgressResult(BaseModel):
    """Whether a run is progressing, with the evidence and the next call to make."""

    run_id: str = Field(description="Run id.")
    status: str = Field(description="Wire status.")
    terminal: bool = Field(description="True for a terminal status.")
    verdict: Verdict = Field(description=(
        "queued | starting | progressing | stalled | failing | crash_looping | completed | failed | stopped | paused "
        "| unknown."))
    healthy: bool = Field(description="True for queued, starting, progressing and completed.")
    latest_step: int | None = Field(default=None, description="Latest step with results (GET /progress latestStep).")
    max_steps: int | None = Field(default=None, description="Steps planned.")
    percent_complete: float | None = Field(default=None, description="latest_step / max_steps x 100.")
    last_step_age_seconds: float | None = Field(default=None, description=(
        "Seconds since the latest step was recorded (progress lastUpdatedAt vs the server's clock)."))
    stall_threshold_seconds: float | None = Field(default=None, description=(
        "No new step for longer than this means stalled."))
    seconds_per_step: float | None = Field(default=None, description=(
        "Median step time of the recent steps (metric timestamps)."))
    reward_metric: str | None = Field(default=None, description="Metric used for the reward trend.")
    reward_last: float | None = Field(default=None, description="Latest value of reward_metric.")
    reward_trend: Literal["rising", "flat", "falling", "unknown"] = Field(default="unknown", description=(
        "Second half vs first half of the recent steps (difference above 0.02)."))
    recent_error_lines: int | None = Field(default=None, description=(
        "ERROR lines of orchestrator + trainer in the last 15 minutes (null when not read)."))
    env_servers: list[EnvServerView] = Field(default_factory=list, description=(
        "Environment-server pods and their status."))
    failure_analysis: FailureAnalysisView | None = Field(default=None, description=(
        "The platform's diagnosis of a FAILED run."))
    error_message: str | None = Field(default=None, description="The platform's error text.")
    evidence: list[str] = Field(description="Facts behind the verdict, one per line.")
    next_step: str = Field(description="What to call next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


def next_step(verdict: str, run_id: str, status: str, env: str | None) -> tuple[str, list[Call]]:
    """What to do next for ``verdict``, and the calls the text names (complete, for run ``run_id``)."""
    wait = call("mf_wait_for_run", run_id=run_id)
    logs = call("mf_summarize_logs", run_id=run_id)
    stop = call("mf_stop_run", run_id=run_id)
    metrics = call("mf_get_metrics", run_id=run_id)
    traces = call("mf_download_traces", run_id=run_id, dest=f"traces-{run_id}")
    training = call("mf_summarize_logs", run_id=run_id, components=["trainer", "orchestrator"])
    if verdict == "queued":
        wait = call("mf_wait_for_run", run_id=run_id, until="running")
        return f"Waiting for capacity: {wait} (it costs nothing while queued).", [wait]
    if verdict == "starting":
        first = call("mf_wait_for_run", run_id=run_id, step=1)
        return (f"Pods are starting: {first}; if no step appears within 30 minutes, {logs}.", [first, logs])
    if verdict == "progressing":
        return f"Healthy: keep watching with {wait}, or read the curves with {metrics}.", [wait, metrics]
    if verdict == "stalled":
        return (f"No new steps: {logs} shows why (orchestrator, trainer, env servers); then ask the user whether to "
                f"stop the run ({stop}) so it stops costing money.", [logs, stop])
    if verdict == "failing":
        errors = call("mf_get_logs", run_id=run_id, component="trainer", level="ERROR")
        return (f"Errors are being logged: {training}, then the failing component's errors, e.g. {errors}.",
                [training, errors])
    if verdict == "crash_looping":
        errors = call("mf_get_logs", run_id=run_id, component="env-server", env_name=env, level="ERROR") if env \
            else call("mf_summarize_logs", run_id=run_id)
        return (f"An environment server keeps crashing: read its errors with {errors}; fix the environment, and ask "
                f"the user whether to stop the run ({stop}) meanwhile: it is paying for GPUs without training.",
                [errors, stop])
    if verdict == "completed":
        checkpoints = call("mf_list_checkpoints", run_id=run_id)
        return (f"Done: {metrics} for the final numbers, {checkpoints} for the weights and {traces} to fetch the "
                "rollouts.", [metrics, checkpoints, traces])
    if verdict == "failed":
        return (f"Read the failure analysis and the error message, then {training} for the traceback; fix the "
                "config and plan a new run (mf_plan_run).", [training])
    if verdict == "stopped":
        return (f"The run was stopped. {metrics} and {traces} still work on what it produced.", [metrics, traces])
    if verdict == "paused":
        return (f"The run is paused (checkpoint kept): `prime train resume {run_id}` (needs the prime CLI) continues "
                "it as a new run.", [])
    run = call("mf_get_run", run_id=run_id)
    return f"Status {status} is not one this tool knows: {run} and {logs}.", [run, logs]


def _step_seconds(records: list[dict]) -> float | None:
    stamps = [(r["step"], parse_time(r.get("timestamp"))) for r in records if isinstance(r.get("step"), int)]
    stamps = sorted((s, t) for s, t in stamps if t is not None)
    gaps = [(t2 - t1).total_seconds() / (s2 - s1) for (s1, t1), (s2, t2) in itertools.pairwise(stamps) if s2 > s1]
    gaps = [g for g in gaps if g > 0]
    return round(statistics.median(gaps), 1) if gaps else None


def _trend(values: list[float]) -> str:
    if len(values) < 4:
        return "unknown"
    half = len(values) // 2
    delta = statistics.fmean(values[-half:]) - statistics.fmean(values[:half])
    return "rising" if delta > 0.02 else "falling" if delta < -0.02 else "flat"


def _recent_errors(platform: PlatformClient, run: wire.RLRun) -> int | None:
    total = 0
    components = ["trainer"] if run.is_sft else [None, "trainer"]
    for component in components:
        try:
            text = platform.get_logs(run.id, tail_lines=1000, component=component, level="ERROR",
                                     since_seconds=ERROR_WINDOW_SECONDS)
        except perr.NotFound:
            continue
        total += sum(1 for ln in parse_logs(text.logs).lines if ln.level in ("ERROR", "CRITICAL"))
    return total


@tool
def check_progress(inp: CheckProgressInput, ctx: Context) -> CheckProgressResult:
    """Decide whether a run is progressing, not just RUNNING.

    Reads GET ``/rft/runs/{id}``; for a RUNNING run also ``/progress`` (latestStep,
    lastUpdatedAt), ``/metrics`` of the last 10 steps (step time, reward trend),
    ``/env-servers`` (pod states) and ERROR lines of the last 15 minutes from ``/logs``
    (orchestrator and trainer). Verdicts, in order of precedence for a RUNNING run:
    ``crash_looping`` (a pod in CrashLoopBackOff/ImagePullBackOff...), ``failing`` (a pod
    in Error, or ERROR lines in the window), ``stalled`` (no new step for longer than the
    threshold; no first step 30 min after start), ``starting`` (no step yet),
    ``progressing``. Other statuses map directly (QUEUED/PENDING -> queued, PAUSING ->
    paused...). Errors: ``not_found``, the platform codes.
    """
    platform = ctx.platform()
    run = require_run(ctx, inp.run_id)
    status = run.status.upper()
    fa = run.failure_analysis
    result = CheckProgressResult(
        run_id=run.id, status=run.status, terminal=run.is_terminal(), verdict="unknown", healthy=False,
        max_steps=run.max_steps, error_message=clip(run.error_message), evidence=[], next_step="",
        failure_analysis=failure_analysis_view(fa))
    evidence = result.evidence
    if status in ("QUEUED", "PENDING"):
        evidence.append(f"Status {run.status}" + (f", {run.runs_ahead} run(s) ahead" if run.runs_ahead else "")
                        + (f": {run.queue_reason}" if run.queue_reason else "") + ".")
    else:
        progress = platform.get_progress(run.id)
        result.latest_step = progress.latest_step
        now = server_now(platform)
        if run.max_steps and progress.latest_step is not None:
            result.percent_complete = round(100.0 * progress.latest_step / run.max_steps, 1)
        if progress.latest_step is not None:
            first = max(0, progress.latest_step - 9)
            records = platform.get_metrics(run.id, min_step=first).metrics
            result.seconds_per_step = _step_seconds(records)
            key = reward_key(records)
            values = [r[key] for r in sorted(records, key=lambda r: r.get("step", 0)) if key and is_number(r.get(key))]
            if values:
                result.reward_metric, result.reward_last, result.reward_trend = key, values[-1], _trend(values)
            result.last_step_age_seconds = seconds_since(parse_time(progress.last_updated_at), now)
            pace = f"; {result.seconds_per_step:.0f} s per step recently" if result.seconds_per_step else ""
            evidence.append(f"Latest step {progress.latest_step}/{run.max_steps or '?'}, recorded "
                            f"{minutes(result.last_step_age_seconds)} ago{pace}.")
            if values:
                trend = f" ({result.reward_trend})" if result.reward_trend != "unknown" else ""
                evidence.append(f"{key} {values[0]:.4g} -> {values[-1]:.4g} over the last {len(values)} "
                                f"step(s){trend}.")
        if status == "RUNNING":
            _judge_running(inp, run, platform, now, result)
    if result.verdict == "unknown":
        result.verdict = _VERDICT_OF_STATUS.get(status, "unknown")
    if result.verdict == "failed":
        if run.error_message:
            evidence.append(f"Error: {clip(run.error_message, 200)}")
        if fa and fa.root_cause:
            evidence.append(f"Failure analysis ({_pct(fa.confidence)}): {clip(fa.root_cause, 200)}")
    if status == "PAUSING":
        evidence.append("Pausing: a checkpoint is being saved.")
    if result.verdict == "unknown":
        evidence.append(f"Status {run.status!r} is not one of the statuses the prime CLI knows.")
    result.healthy = result.verdict in ("queued", "starting", "progressing", "completed")
    bad_env = next((e.env_name for e in result.env_servers if e.status in CRASH_POD_STATES), None)
    result.next_step, result.next_calls = next_step(result.verdict, run.id, run.status, bad_env)
    return result


def _pct(confidence: float | None) -> str:
    return "confidence unknown" if confidence is None else f"confidence {confidence:.0%}"


def _judge_running(inp: CheckProgressInput, run: wire.RLRun, platform: PlatformClient, now: datetime,
                   result: CheckProgressResult) -> None:
    evidence = result.evidence
    servers = platform.list_env_servers(run.id)
    result.env_servers = [EnvServerView(env_name=s.env_name, pod_name=s.pod_name, status=s.status) for s in servers]
    crashing = [s for s in servers if s.status in CRASH_POD_STATES]
    failed_pods = [s for s in servers if s.status in FAILED_POD_STATES]
    for s in crashing + failed_pods:
        evidence.append(f"Env server {s.env_name or s.pod_name} is {s.status}.")
    result.recent_error_lines = _recent_errors(platform, run)
    if result.recent_error_lines:
        evidence.append(f"{result.recent_error_lines} ERROR line(s) in orchestrator/trainer logs in the last "
                        f"{ERROR_WINDOW_SECONDS // 60} minutes.")
    threshold = inp.stall_after_seconds or max(STALL_FLOOR_SECONDS,
                                               STALL_STEP_MULTIPLE * (result.seconds_per_step or 0))
    result.stall_threshold_seconds = float(threshold)
    since_start = seconds_since(run.started_at, now)
    if crashing:
        result.verdict = "crash_looping"
    elif failed_pods or result.recent_error_lines:
        result.verdict = "failing"
    elif result.latest_step is None:
        grace = max(STARTUP_GRACE_SECONDS, threshold)
        stalled = since_start is not None and since_start > grace
        result.verdict = "stalled" if stalled else "starting"
        evidence.append(f"No step yet, {minutes(since_start)} after start"
                        + (f" (more than {minutes(grace)})." if stalled else " (pods starting, model loading)."))
    elif result.last_step_age_seconds is not None and result.last_step_age_seconds > threshold:
        result.verdict = "stalled"
        evidence.append(f"No new step for {minutes(result.last_step_age_seconds)}, longer than the stall threshold "
                        f"of {minutes(threshold)}.")
    else:
        result.verdict = "progressing"
