"""Is a run actually progressing, not just RUNNING? (:func:`check_progress`)

Sources (reference/prime-api.md): GET ``/rft/runs/{id}`` (§2.2), ``/progress`` (§5.8),
``/metrics`` (§5.7), ``/env-servers`` (§2.3, §5.6), ``/logs`` (§5.5), ``/billing/runs/{id}/usage``
(§2.6, :mod:`.spend`). Ages ("no new step for 12 min") are measured against the server's clock
(:mod:`._clock`), never the local one.

Start-up is not a problem until it lasts longer than it normally does. Each phase has its own
allowance (the ``*_GRACE_SECONDS`` below, each with why that long), measured from when the
phase began: PENDING from ``createdAt``; pods Pending from ``startedAt``; an image pull from the
platform's pod event ``Pulling image`` in the logs (``[adminlog]`` lines), else from
``startedAt``. Within it the verdict is ``pending`` or ``starting`` and the evidence says which
phase, for how long, and the allowance; past it, ``stalled``. An image that cannot be pulled
(``ErrImagePull``, ``ImagePullBackOff``) is ``image_pull_failing`` and a crash loop
``crash_looping``, with the pod states and the platform's messages as evidence. Decisions where the
platform is silent: the allowances are ours (no platform figure exists); pod states come only from
``/env-servers``.

Beside the health verdict, ``learning`` says whether the run learns (:mod:`._learning`), over the last
:data:`~tools.monitor._learning.TREND_WINDOW_STEPS` steps; for a resumed run whose own steps are fewer, the
window reaches into the run it continues (:func:`tools.core.predecessors`), and the evidence says which steps
are whose.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tools.core import RUN_ID, Context, predecessors, require_run, tool
from tools.errors import Call, call
from tools.monitor._clock import parse_time, seconds_since, server_now
from tools.monitor._learning import TREND_WINDOW_STEPS, Learning, judge
from tools.monitor._logreads import Target, fetch, targets, window_seconds
from tools.monitor._logtext import parse_logs
from tools.monitor._series import OVERDUE_STEP_MULTIPLE, merge_steps, overdue_multiple, step_seconds
from tools.monitor._views import FailureAnalysisView, clip, failure_analysis_view, minutes
from tools.monitor.spend import SpendSoFar, spend_so_far
from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.client import PlatformClient

Verdict = Literal["pending", "queued", "starting", "progressing", "stalled", "failing", "image_pull_failing",
                  "crash_looping", "completed", "failed", "stopped", "paused", "unknown"]

#: A RUNNING run with no new step for this long (seconds) is stalled, whatever its step time.
STALL_FLOOR_SECONDS = 600
#: Default stall threshold in step times (the median of recent steps).
STALL_STEP_MULTIPLE = 5
#: PENDING (accepted, not yet in the capacity queue) is normal this long: the platform checks the run and queues it
#: within minutes; nothing is billed meanwhile.
PENDING_GRACE_SECONDS = 600
#: Pods Pending (no node yet) are normal this long after the start: a node with free GPUs is found or provisioned.
POD_SCHEDULING_GRACE_SECONDS = 900
#: An image pull (pods ContainerCreating) is normal this long: prime-rl images are tens of GB and each new node pulls
#: them once.
IMAGE_PULL_GRACE_SECONDS = 1200
#: A RUNNING run with no first step this long after its start is stalled: scheduling, the pull, the model's download
#: and load and the inference server's start all fit in it.
STARTUP_GRACE_SECONDS = 1800
#: Window (seconds) in which ERROR log lines make a running run "failing".
ERROR_WINDOW_SECONDS = 900
PULL_FAILED_POD_STATES = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName"})
CRASH_POD_STATES = frozenset({"CrashLoopBackOff", "CreateContainerError", "CreateContainerConfigError",
                              "RunContainerError"})
FAILED_POD_STATES = frozenset({"Error", "Failed", "OOMKilled"})
_VERDICT_OF_STATUS: dict[str, Verdict] = {"QUEUED": "queued", "PENDING": "pending", "COMPLETED": "completed",
                                          "FAILED": "failed", "STOPPED": "stopped", "PAUSED": "paused",
                                          "PAUSING": "paused"}


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
        "pending | queued | starting (normal start-up, within its allowance) | progressing | stalled | failing | "
        "image_pull_failing | crash_looping | completed | failed | stopped | paused | unknown."))
    healthy: bool = Field(description=(
        "True for pending, queued, starting, progressing (unless step_overdue) and completed."))
    startup_phase: str | None = Field(default=None, description=(
        "While starting: pending, queued, scheduling (pods Pending), pulling_image (ContainerCreating) or loading "
        "(pods Running, no step yet)."))
    phase_seconds: float | None = Field(default=None, description="How long the start-up phase has lasted so far.")
    phase_allowance_seconds: float | None = Field(default=None, description=(
        "How long that phase is normal before it is reported as a problem."))
    latest_step: int | None = Field(default=None, description="Latest step with results (GET /progress latestStep).")
    max_steps: int | None = Field(default=None, description="Steps planned.")
    percent_complete: float | None = Field(default=None, description="latest_step / max_steps x 100.")
    last_step_age_seconds: float | None = Field(default=None, description=(
        "Seconds since the latest step was recorded (progress lastUpdatedAt vs the server's clock)."))
    stall_threshold_seconds: float | None = Field(default=None, description=(
        "No new step for longer than this means stalled."))
    seconds_per_step: float | None = Field(default=None, description=(
        "Median step time of the recent steps (metric timestamps)."))
    step_overdue: bool | None = Field(default=None, description=(
        f"True when a RUNNING run's latest step is older than {OVERDUE_STEP_MULTIPLE} x seconds_per_step but not "
        "yet past stall_threshold_seconds: the verdict is still progressing, the evidence says how overdue the "
        "next step is and when it will be called stalled, and next_step reads the logs. Null otherwise."))
    learning: Learning | None = Field(default=None, description=(
        f"Whether it learns, over the last {TREND_WINDOW_STEPS} steps: the reward's trend with its uncertainty "
        "(SFT: the loss), saturation, entropy collapse, spikes, rollout rates, which side waits; act on findings "
        "with ok false."))
    recent_error_lines: int | None = Field(default=None, description=(
        "ERROR lines of every component and env server in the last 15 minutes (null when not read)."))
    recent_errors_by_component: dict[str, int] = Field(default_factory=dict, description=(
        "Those ERROR lines per component (orchestrator, trainer, inference, env-server/<name>), when any."))
    spend: SpendSoFar | None = Field(default=None, description=(
        "Spend so far beside the plan's estimate (mf_get_spend has the details); null before the run started."))
    env_servers: list[EnvServerView] = Field(default_factory=list, description=(
        "Environment-server pods and their status."))
    failure_analysis: FailureAnalysisView | None = Field(default=None, description=(
        "The platform's diagnosis of a FAILED run."))
    error_message: str | None = Field(default=None, description="The platform's error text.")
    evidence: list[str] = Field(description="Facts behind the verdict, one per line.")
    next_step: str = Field(description="What to call next.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


def next_step(verdict: str, run_id: str, status: str, env: str | None, *,
              overdue: bool = False, sft: bool = False) -> tuple[str, list[Call]]:
    """What to do next for ``verdict`` (``overdue``: a progressing run's next step is late; ``sft``: the run has
    no traces to offer), and the calls the text names (complete, for run ``run_id``)."""
    wait = call("mf_wait_for_run", run_id=run_id)
    logs = call("mf_summarize_logs", run_id=run_id)
    stop = call("mf_stop_run", run_id=run_id)
    metrics = call("mf_get_metrics", run_id=run_id)
    traces = call("mf_download_traces", run_id=run_id, dest=f"traces-{run_id}")
    training = call("mf_summarize_logs", run_id=run_id, components=["trainer", "orchestrator"])
    if verdict in ("queued", "pending"):
        wait = call("mf_wait_for_run", run_id=run_id, until="running")
        why = "Waiting for capacity" if verdict == "queued" else "The platform is accepting the run"
        return f"{why}: {wait} (it costs nothing before it runs).", [wait]
    if verdict == "image_pull_failing":
        return (f"The run's image cannot be pulled (see the evidence): a wrong image_tag or source_ref in the plan, or "
                f"a registry problem. It bills while its pods cannot start: ask the person whether to stop it "
                f"({stop}), then plan again with a correct image_tag.", [stop])
    if verdict == "starting":
        first = call("mf_wait_for_run", run_id=run_id, step=1)
        return (f"Normal start-up so far: {first}, and check again when a wait's next step names "
                f"mf_check_progress (a failing pod, a start-up past {POD_SCHEDULING_GRACE_SECONDS // 60} minutes).",
                [first])
    if verdict == "progressing" and overdue:
        again = call("mf_check_progress", run_id=run_id)
        return (f"The next step is late (see the evidence): {logs} shows what the components are doing now; then "
                f"{again} again, or {wait} to see whether a step arrives.", [logs, again, wait])
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
    report = call("mf_run_report", run_id=run_id)
    if verdict == "completed" and sft:
        checkpoints = call("mf_list_checkpoints", run_id=run_id)
        return (f"Done: {report} for the final loss and cost, {checkpoints} for the weights (an SFT run has no "
                "reward and no traces).", [report, checkpoints])
    if verdict == "completed":
        checkpoints = call("mf_list_checkpoints", run_id=run_id)
        return (f"Done: {metrics} for the final numbers, {checkpoints} for the weights and {traces} to fetch the "
                "rollouts.", [metrics, checkpoints, traces])
    if verdict == "failed":
        return (f"Read the failure analysis and the error message, then {training} for the traceback; fix the "
                "config and plan a new run (mf_plan_run).", [training])
    if verdict == "stopped":
        if sft:
            return f"The run was stopped. {report} sums up what it did.", [report]
        return (f"The run was stopped. {metrics} and {traces} still work on what it produced.", [metrics, traces])
    if verdict == "paused":
        resume = call("mf_resume_run", run_id=run_id)
        return (f"The run is paused (checkpoint kept). If the person wants it to go on, {resume} plans resuming it as "
                "a new billed run, approved like a launch.", [resume])
    run = call("mf_get_run", run_id=run_id)
    return (f"Unknown status {status}: not one the prime CLI knows, so whether the run goes on, bills or has ended "
            f"cannot be told. Read it with {run}, what it did last with {logs}, and ask the person before acting on "
            "it.", [run, logs])


def _learning(ctx: Context, run: wire.RLRun, latest: int, records: list[dict], evidence: list[str]) -> Learning:
    """The learning verdict over the last :data:`TREND_WINDOW_STEPS` steps up to ``latest``; ``records`` are the
    run's own in that window. A resumed run whose own steps start inside the window borrows the rest from the run
    it continues (said in ``evidence``); entropy is judged against the run's first record."""
    start = max(1, latest - TREND_WINDOW_STEPS + 1)
    platform = ctx.platform()
    own_first = records[0]["step"] if records else None
    window = records
    if own_first is not None and own_first > start:
        chain = predecessors(ctx, run, first=own_first)
        if chain and chain[0].last_step == own_first - 1:
            before = chain[0]
            borrowed = merge_steps(platform.get_metrics(before.run_id, min_step=max(start, before.first_step),
                                                        max_step=before.last_step).metrics)
            window = borrowed + records
            used = f" (steps {borrowed[0]['step']}-{borrowed[-1]['step']} of it are in the trend)" if borrowed else ""
            evidence.append(f"Resumed: {before.steps} are in run {before.run_id}{used}; this run's own start at "
                            f"step {own_first}.")
    first = None
    if window is records and records and records[0]["step"] > 1:  # the run's first record is before the window
        first = merge_steps(platform.get_metrics(run.id, limit=1).metrics)
    return judge(window, sft=run.is_sft, first=first[0] if first else None)


def _recent_errors(platform: PlatformClient, run: wire.RLRun) -> dict[str, int]:
    """ERROR lines of the last :data:`ERROR_WINDOW_SECONDS` per component and env server (those with any)."""
    found = {}
    for target in targets(platform, run):
        try:
            text = fetch(platform, run.id, target, 1000, level="ERROR", since=ERROR_WINDOW_SECONDS)
        except perr.NotFound:
            continue
        count = sum(1 for ln in parse_logs(text.logs).lines if ln.level in ("ERROR", "CRITICAL"))
        if count:
            found[target.label] = count
    return found


def _pod_events(platform: PlatformClient, run: wire.RLRun, now: datetime, search: str) -> list[tuple[datetime, str]]:
    """The platform's pod events (``[adminlog]`` lines) matching ``search`` since the run started, oldest first:
    (time, message). Read from the trainer's logs (every component carries them)."""
    try:
        text = fetch(platform, run.id, Target("trainer"), 50, search=search,
                     since=window_seconds(run.started_at, now)).logs
    except (perr.NotFound, perr.InvalidRequest):
        return []
    events = []
    for line in parse_logs(text).lines:
        stamp = parse_time(line.timestamp)
        if stamp is not None and line.source and "adminlog" in line.source:
            events.append((stamp, line.message))
    return events


@tool
def check_progress(inp: CheckProgressInput, ctx: Context) -> CheckProgressResult:
    """Decide whether a run is progressing, not just RUNNING.

    Reads GET ``/rft/runs/{id}``; for a RUNNING run also ``/progress`` (latestStep,
    lastUpdatedAt), ``/metrics`` of the last 20 steps (step time, the learning verdict; the first
    record too, and the run a resumed run continues: :func:`_learning`),
    ``/env-servers`` (pod states), ERROR lines of the last 15 minutes of every component and
    env server from ``/logs``, the platform's pod events while starting, and the spend so far
    (:func:`~tools.monitor.spend.spend_so_far`). Verdicts, in order of precedence for a
    RUNNING run: ``image_pull_failing`` (ErrImagePull, ImagePullBackOff), ``crash_looping``
    (CrashLoopBackOff, ...), ``failing`` (a pod in Error, or ERROR lines in the window),
    ``starting`` or ``stalled`` before the first step (the start-up phase within or past its
    allowance, module doc), ``stalled`` (no new step for longer than the threshold),
    ``progressing`` (with ``step_overdue`` when the latest step is older than
    :data:`~tools.monitor._series.OVERDUE_STEP_MULTIPLE` recent step times: the first line of the
    evidence says by how much and when it will be called stalled). PENDING is ``pending`` within
    its allowance, else ``stalled``; other statuses map directly (QUEUED -> queued, PAUSING ->
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
    if status == "QUEUED":
        evidence.append(f"Status {run.status}" + (f", {run.runs_ahead} run(s) ahead" if run.runs_ahead else "")
                        + (f": {run.queue_reason}" if run.queue_reason else "") + " (waiting for capacity; nothing is "
                        "billed before it runs).")
        result.startup_phase = "queued"
    elif status == "PENDING":
        _judge_pending(run, server_now(platform), result)
    else:
        progress = platform.get_progress(run.id)
        result.latest_step = progress.latest_step
        now = server_now(platform)
        if run.max_steps and progress.latest_step is not None:
            result.percent_complete = round(100.0 * progress.latest_step / run.max_steps, 1)
        if progress.latest_step is not None:
            first = max(0, progress.latest_step - TREND_WINDOW_STEPS + 1)
            records = merge_steps(platform.get_metrics(run.id, min_step=first).metrics)
            result.seconds_per_step = step_seconds(records[-10:])
            result.last_step_age_seconds = seconds_since(parse_time(progress.last_updated_at), now)
            pace = f"; {result.seconds_per_step:.0f} s per step recently" if result.seconds_per_step else ""
            evidence.append(f"Latest step {progress.latest_step}/{run.max_steps or '?'}, recorded "
                            f"{minutes(result.last_step_age_seconds)} ago{pace}.")
            result.learning = _learning(ctx, run, progress.latest_step, records, evidence)
        if status == "RUNNING":
            _judge_running(inp, run, platform, now, result)
    if result.verdict == "unknown":
        result.verdict = _VERDICT_OF_STATUS.get(status, "unknown")
    if run.started_at is not None:
        result.spend = spend_so_far(ctx, run)
        if result.spend.warning:
            evidence.append(result.spend.warning)
    if result.verdict == "failed":
        if run.error_message:
            evidence.append(f"Error: {clip(run.error_message, 200)}")
        if fa and fa.root_cause:
            evidence.append(f"Failure analysis ({_pct(fa.confidence)}): {clip(fa.root_cause, 200)}")
    if status == "PAUSING":
        evidence.append("Pausing: a checkpoint is being saved.")
    if result.verdict == "unknown":
        evidence.append(f"Status {run.status!r} is not one of the statuses the prime CLI knows.")
    result.healthy = result.verdict in ("pending", "queued", "starting", "progressing", "completed") \
        and not result.step_overdue
    bad_env = next((e.env_name for e in result.env_servers if e.status in CRASH_POD_STATES), None)
    result.next_step, result.next_calls = next_step(result.verdict, run.id, run.status, bad_env,
                                                    overdue=bool(result.step_overdue), sft=run.is_sft)
    learning = result.learning
    problems = [f.signal for f in learning.findings if not f.ok] if learning else []
    if learning and problems and result.verdict in ("progressing", "completed", "stopped", "paused"):
        result.next_step = (f"Learning: {learning.verdict}, with {', '.join(problems)}: tell the person each such "
                            f"finding's evidence and fix. {result.next_step}")
    return result


def _pct(confidence: float | None) -> str:
    return "confidence unknown" if confidence is None else f"confidence {confidence:.0%}"


def _judge_pending(run: wire.RLRun, now: datetime, result: CheckProgressResult) -> None:
    """PENDING: normal for :data:`PENDING_GRACE_SECONDS` after the run was created, then stalled."""
    age = seconds_since(run.created_at, now)
    result.startup_phase, result.phase_seconds = "pending", age
    result.phase_allowance_seconds = float(PENDING_GRACE_SECONDS)
    if age is not None and age > PENDING_GRACE_SECONDS:
        result.verdict = "stalled"
        result.evidence.append(f"Status PENDING for {minutes(age)}, longer than the {minutes(PENDING_GRACE_SECONDS)} "
                               "the platform normally takes to accept a run and queue it.")
    else:
        result.verdict = "pending"
        result.evidence.append(f"Status PENDING for {minutes(age)}: the platform is accepting the run, normal for up "
                               f"to {minutes(PENDING_GRACE_SECONDS)} (it then queues it); nothing is billed meanwhile.")


def _startup(run: wire.RLRun, platform: PlatformClient, now: datetime, servers: list[wire.EnvServerInfo],
             threshold: float, result: CheckProgressResult) -> None:
    """RUNNING with no step yet: which start-up phase, for how long, within its allowance or not."""
    evidence = result.evidence
    since_start = seconds_since(run.started_at, now)
    states = {s.status for s in servers}
    allowance: float
    if "Pending" in states:
        phase, age, allowance = "scheduling", since_start, POD_SCHEDULING_GRACE_SECONDS
        doing = ("env server pods Pending (no node assigned yet)", "while a node with free GPUs is found or "
                 "provisioned")
    elif "ContainerCreating" in states:
        pulls = _pod_events(platform, run, now, "Pulling image")
        age = seconds_since(pulls[-1][0], now) if pulls else since_start
        image = pulls[-1][1].split("Pulling image", 1)[1].strip(' "') if pulls else None
        phase, allowance = "pulling_image", IMAGE_PULL_GRACE_SECONDS
        doing = (f"pods ContainerCreating: the image{f' {image}' if image else ''} is being pulled"
                 + ("" if pulls else " (since start-up began, at most)"),
                 "as prime-rl images are tens of GB and each new node pulls them once")
    else:
        phase, age, allowance = "loading", since_start, max(STARTUP_GRACE_SECONDS, threshold)
        doing = ("no step yet (pods up: model download and load, inference server start)",
                 "for the whole start-up before the first step")
    result.startup_phase, result.phase_seconds, result.phase_allowance_seconds = phase, age, float(allowance)
    if age is not None and age > allowance:
        result.verdict = "stalled"
        evidence.append(f"Start-up: {doing[0]} for {minutes(age)}, longer than the {minutes(allowance)} that is normal "
                        f"{doing[1]}.")
    else:
        result.verdict = "starting"
        evidence.append(f"Start-up: {doing[0]} for {minutes(age)}; normal for up to {minutes(allowance)} {doing[1]}.")


def _judge_running(inp: CheckProgressInput, run: wire.RLRun, platform: PlatformClient, now: datetime,
                   result: CheckProgressResult) -> None:
    evidence = result.evidence
    servers = platform.list_env_servers(run.id)
    result.env_servers = [EnvServerView(env_name=s.env_name, pod_name=s.pod_name, status=s.status) for s in servers]
    pull_failed = [s for s in servers if s.status in PULL_FAILED_POD_STATES]
    crashing = [s for s in servers if s.status in CRASH_POD_STATES]
    failed_pods = [s for s in servers if s.status in FAILED_POD_STATES]
    for s in pull_failed + crashing + failed_pods:
        evidence.append(f"Env server {s.env_name or s.pod_name} is {s.status}.")
    if pull_failed:
        failures = _pod_events(platform, run, now, "Failed to pull image")
        if failures:
            evidence.append(f"The platform, {minutes(seconds_since(failures[-1][0], now))} ago: "
                            f"{clip(failures[-1][1], 300)} ({len(failures)} failed pull(s) since the start).")
    by_component = _recent_errors(platform, run)
    result.recent_errors_by_component = by_component
    result.recent_error_lines = sum(by_component.values())
    if by_component:
        evidence.append(f"{result.recent_error_lines} ERROR line(s) in the last {ERROR_WINDOW_SECONDS // 60} minutes: "
                        + ", ".join(f"{c} {n}" for c, n in by_component.items()) + ".")
    threshold = inp.stall_after_seconds or max(STALL_FLOOR_SECONDS,
                                               STALL_STEP_MULTIPLE * (result.seconds_per_step or 0))
    result.stall_threshold_seconds = float(threshold)
    if pull_failed:
        result.verdict = "image_pull_failing"
    elif crashing:
        result.verdict = "crash_looping"
    elif failed_pods or result.recent_error_lines:
        result.verdict = "failing"
    elif result.latest_step is None:
        _startup(run, platform, now, servers, threshold, result)
    elif result.last_step_age_seconds is not None and result.last_step_age_seconds > threshold:
        result.verdict = "stalled"
        evidence.append(f"No new step for {minutes(result.last_step_age_seconds)}, longer than the stall threshold "
                        f"of {minutes(threshold)}.")
    else:
        result.verdict = "progressing"
        multiple = overdue_multiple(result.last_step_age_seconds, result.seconds_per_step)
        if multiple is not None:
            result.step_overdue = True
            change = "stall_after_seconds to change that" if inp.stall_after_seconds is None else \
                "the stall_after_seconds given"
            evidence.insert(0, f"No new step for {minutes(result.last_step_age_seconds)} ({multiple:g} x the recent "
                            f"step time of {minutes(result.seconds_per_step)}); it is called stalled after "
                            f"{minutes(threshold)} ({change}).")
