"""The report a person wants at the end of a run: ``mf_run_report`` (:func:`run_report`).

One markdown text, built from what the other phases already read: the run (``mf_get_run``:
GET ``/rft/runs/{id}``), its latest step (GET ``/progress``), spend so far against the plan
(:func:`tools.monitor.spend_so_far`: GET ``/billing/runs/{id}/usage`` and the state store; with no
plan in this store, :func:`tools.monitor.missing_plan` says where to point instead), the
learning verdict over the whole run (:func:`tools.monitor.judge`, GET ``/metrics``) with a PNG
(``mf_plot_metrics``), the runs a resumed run continues (:func:`tools.core.predecessors`), READY checkpoints
(``mf_list_checkpoints``), the traces (a download folder's ``manifest.jsonl`` via
:func:`tools.traces.download_summary`, else the traces host's totals, GET ``/runs/{id}``), and
from the state store the forwarded secret *names* and the approval channel.

Decisions where the platform is silent:

- The report finds a traces download through its ``traces_dir`` argument (the agent knows
  where it downloaded); without one it gives the host's totals and the download call.
- Failed rollouts are counted, never hidden: from a download, the manifest's outcome of each file
  (episode envelope ``ok`` false, trace ``has_error``, trace ``reward`` null = unscored, and the
  episodes' most common error); without one, the host's ``has_error`` of the run and one page of
  its failed episodes (GET ``/episodes?run_id=&has_error=true&limit=100``).
- Checkpoints are fetched with ``mf_download_checkpoint`` from the run's volume (where the platform
  writes a run's outputs); the report reads that download's manifest through ``checkpoint_dir``
  (:func:`tools.monitor.checkpoint_download`) and says what was fetched, where, how big, and that it is
  DCP. A run without a volume keeps them in platform storage, which ``prime`` 0.18.0 lists
  (``prime train checkpoints``) but does not download.
- No checkpoint: the report advises adding ``[ckpt]`` only when the run's config (``runConfig``
  of GET ``/rft/runs/{id}``, the config as sent) has none (:func:`tools.configs.checkpoint_of`);
  with one it says when the run saves them.
- A run that has not ended is judged as ``mf_check_progress`` judges it (:func:`tools.monitor.check_progress`:
  its verdict and evidence make the Progress line, and its next step is the report's, so a stalled run gets
  the logs and the stop, never a wait that would not end); the report adds only what finishes it.
- An SFT run trains on a dataset: the report says it has a loss and no reward, and no traces, and
  offers no download.
- Each part that cannot be read says so in its line; only the run itself is required
  (``not_found`` otherwise).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from tools import monitor
from tools.configs import checkpoint_of
from tools.core import RUN_ID, Context, predecessors, require_run, tool
from tools.errors import Call, ToolError, ToolFailure, call
from tools.platform import errors as perr
from tools.platform import wire
from tools.traces import download_summary

__all__ = ["RunReportResult", "RunReportInput", "run_report"]

#: Checkpoints listed by step at most; the rest are counted.
MAX_CHECKPOINTS_LISTED = 5
#: Characters of the failure analysis and error message kept.
MAX_FAILURE_CHARS = 400
#: Characters of a rollout's error message kept; failed episodes read from the traces host without a download.
MAX_ROLLOUT_ERROR_CHARS = 160
FAILED_EPISODES_PAGE = 100


class RunReportInput(BaseModel):
    """Which run to report on, and where its traces were downloaded."""

    model_config = ConfigDict(extra="forbid")
    run_id: str = RUN_ID
    traces_dir: str | None = Field(default=None, description=(
        "The folder mf_download_traces wrote for this run (its dest): the report reads its manifest for "
        "completeness. Null: the traces host's totals only."))
    checkpoint_dir: str | None = Field(default=None, description=(
        "The folder mf_download_checkpoint wrote for this run (its dest): the report says what it holds."))
    plot: bool = Field(default=True, description=(
        "Write the metrics PNG (mf_plot_metrics' default path) and name it in the report."))


class RunReportResult(BaseModel):
    """The end-of-run report (markdown) and the few facts a program needs."""

    run_id: str = Field(description="Run id.")
    status: str = Field(description="The run's status now.")
    terminal: bool = Field(description="True when the run has ended (the report is final).")
    markdown: str = Field(description="The report for the person, as markdown: show it as it is.")
    plot_path: str | None = Field(default=None, description="The metrics PNG written, if any.")
    traces_complete: bool | None = Field(default=None, description=(
        "True when the traces download in traces_dir finished with nothing missing; null when not known."))
    failed_episodes: int | None = Field(default=None, description=(
        "Episodes whose rollout failed (envelope ok false, from traces_dir's manifest; without traces_dir the "
        "traces host's failed episodes, counted up to 100); null when not known."))
    unscored_traces: int | None = Field(default=None, description=(
        "Traces with no reward (score.reward null: unscored, not 0), from traces_dir's manifest; null when not "
        "known."))
    verdict: monitor.Verdict | None = Field(default=None, description=(
        "For a run that has not ended: mf_check_progress's verdict (progressing, stalled, crash_looping, ...); null "
        "for an ended run or when it could not be judged."))
    learning: monitor.LearningVerdict | None = Field(default=None, description=(
        "Over the whole run: learning, flat, worsening, saturated, overfitting, too_early or unknown (the Learning "
        "line has the evidence)."))
    next_step: str | None = Field(default=None, description="What is left to do, if anything.")
    next_calls: list[Call] = Field(default_factory=list, description="The tool calls next_step names.")


M = TypeVar("M", bound=BaseModel)


def _result(value: M | ToolError) -> M | None:
    return None if isinstance(value, ToolError) else value


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def _outcome(run: monitor.GetRunResult, step: int | None) -> str:
    steps = f"{step if step is not None else 0} of {run.max_steps if run.max_steps else 'an unlimited number of'} steps"
    status = run.status.upper()
    words = {"COMPLETED": f"completed ({steps})", "STOPPED": f"stopped after {steps}",
             "PAUSED": f"paused after {steps}", "FAILED": f"failed after {steps}"}
    text = words.get(status, f"still {run.status} ({steps} so far)")
    if status == "FAILED":
        fa = run.failure_analysis
        if fa and fa.root_cause:
            confidence = f" (confidence {fa.confidence:.0%})" if fa.confidence is not None else ""
            text += f". Platform diagnosis{confidence}: {fa.root_cause[:MAX_FAILURE_CHARS]}"
        if run.error_message:
            text += f". Error: {run.error_message[:MAX_FAILURE_CHARS]}"
    return text


def _learning(ctx: Context, run: monitor.GetRunResult) -> tuple[str, monitor.Learning | None]:
    """The Learning line (the verdict over the whole run, its findings with what to do) and the verdict."""
    try:
        records = monitor.records_of(ctx.platform(), run.run_id, None, None)
    except perr.PlatformError as exc:
        return f"not readable ({exc.message})", None
    if not records:
        return "no metrics logged yet", None
    learning = monitor.judge(records, sft=run.mode == "sft")
    parts = [f.text.rstrip(".") + (f" (what to do: {f.fix.rstrip('.')})" if f.fix else "") for f in learning.findings]
    return f"{_LEARNING_WORDS[learning.verdict]}. " + "; ".join(parts), learning


#: The learning verdict as the report's Learning line opens.
_LEARNING_WORDS = {"learning": "it learns", "flat": "flat, not learning", "worsening": "worsening",
                   "saturated": "saturated, nothing to learn", "overfitting": "overfitting", "too_early": "too early "
                   "to tell", "unknown": "unknown"}


def _earlier(ctx: Context, run: wire.RLRun) -> tuple[str, list[Call]]:
    """The Resumed line of a run that continues others: which steps are whose, and their downloads."""
    try:
        chain = predecessors(ctx, run)
    except perr.PlatformError:
        return "", []
    calls = [call("mf_download_traces", run_id=e.run_id, dest=f"traces-{e.run_id}") for e in chain]
    return "; ".join(f"{e.steps} are in run {e.run_id} ({c})" for e, c in zip(chain, calls, strict=True)), calls


def _none_saved(run: monitor.GetRunResult, config: dict[str, Any] | None) -> str:
    """No checkpoint yet, and why, from the run's config as the platform holds it: advice to add a
    ``[ckpt]`` only when the config has none."""
    if config is None:
        return "none (the platform gave no config for this run; without `[ckpt]` a run saves no weights)"
    table, key = checkpoint_of(config)
    if table is None:
        return "none: the config has no `[ckpt]`, so the run saves no weights (add one to the config of the next run)"
    every = table.get("interval")
    when = f"every {every} steps" if isinstance(every, int) and not isinstance(every, bool) and every > 0 else \
        "at the end of the run"
    return f"none{'' if run.terminal else ' yet'} (the config's `[{key}]` saves them {when})"


def _checkpoints(ctx: Context, run: monitor.GetRunResult, config: dict[str, Any] | None,
                 checkpoint_dir: str | None) -> tuple[str, Call | None]:
    """The Checkpoints line, and the download to make when a READY checkpoint is on a volume and not fetched."""
    listed = _result(monitor.list_checkpoints(monitor.ListCheckpointsInput(run_id=run.run_id), ctx))
    if listed is None:
        return "not readable now.", None
    fetched = None
    if checkpoint_dir:
        folder = ctx.resolve_path(checkpoint_dir)
        got = monitor.checkpoint_download(folder)
        if got and got["run_id"] == run.run_id and got["state"] == "finished":
            fetched = (f" Fetched: step {got['step']}, {got['files']} files, {got['bytes'] / 1e9:.2f} GB in {folder} "
                       f"({got['md5_verified']} verified by MD5). {monitor.DCP_NOTE}")
        else:
            fetched = f" No finished download of this run in {folder}."
    text, download = _checkpoint_text(run, config, listed)
    if fetched and fetched.startswith(" Fetched"):
        return text + fetched, None
    return text + (fetched or ""), download


def _checkpoint_text(run: monitor.GetRunResult, config: dict[str, Any] | None,
                     listed: monitor.ListCheckpointsResult) -> tuple[str, Call | None]:
    ready = [c for c in listed.checkpoints if (c.status or "").upper() == "READY"]
    busy = [c for c in listed.checkpoints if (c.status or "").upper() in ("PENDING", "UPLOADING")]
    if not ready and not busy and not run.volume_name:
        return _none_saved(run, config) + ".", None
    steps = ", ".join(str(c.step) for c in ready[:MAX_CHECKPOINTS_LISTED])
    more = f" and {len(ready) - MAX_CHECKPOINTS_LISTED} more" if len(ready) > MAX_CHECKPOINTS_LISTED else ""
    size = sum(c.size_bytes or 0 for c in ready)
    shown = f"{size / 1e9:.1f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB"
    text = f"{len(ready)} READY (steps {steps}{more}; {shown})" if ready else "none READY yet"
    if not ready and not busy:
        text = _none_saved(run, config)
    if busy:
        text += f"; {len(busy)} still uploading: wait until they are READY before fetching"
    download = None
    if run.volume_name:
        text += f". They are on volume {run.volume_name} under runs/{run.run_id}/checkpoints/"
        if ready and run.terminal:
            download = call("mf_download_checkpoint", run_id=run.run_id, dest=f"checkpoint-{run.run_id}")
            text += f"; fetch the latest with {download} ({size / 1e9:.1f} GB of disk per checkpoint)."
        else:
            text += "; fetch one once the run has ended or paused (the volume syncs then)."
    elif ready:
        text += (". No volume is attached: they stay in platform storage (storage_url in mf_list_checkpoints), "
                 "which the prime CLI lists (`prime train checkpoints`) but does not download; attach a volume to "
                 "keep weights you can fetch with mf_download_checkpoint.")
    return text, download


class _Traces(BaseModel):
    """The traces line and what it found."""

    text: str
    complete: bool | None = None
    download: Call | None = None
    failed_episodes: int | None = None
    unscored_traces: int | None = None


def _error_words(errors: list[tuple[str, int]]) -> str:
    if not errors:
        return ""
    error, count = errors[0]
    return f"; most common error ({count}x): {error[:MAX_ROLLOUT_ERROR_CHARS]}"


def _downloaded_rollouts(outcomes: dict, traces: int) -> str:
    """The rollout outcomes a download's manifest recorded, in words (``traces``: files it lists)."""
    if not outcomes["traces"] and not outcomes["episodes"]:
        return ("Rollout outcomes: none (no traces downloaded)." if not traces else
                "Rollout outcomes: not in this manifest (an earlier version wrote it).")
    parts = []
    if outcomes["episodes"]:
        parts.append(f"{outcomes['episodes_failed']}/{outcomes['episodes']} episodes")
    if outcomes["traces"]:
        parts.append(f"{outcomes['traces_with_error']}/{outcomes['traces']} traces with an error, "
                     f"{outcomes['traces_unscored']} unscored (no reward)")
    return "Failed rollouts: " + ", ".join(parts) + _error_words(outcomes["errors"]) + "."


def _host_rollouts(ctx: Context, run: monitor.GetRunResult, has_error: bool | None) -> tuple[str, int | None]:
    """Failed episodes as the traces host tells them: none when its run summary has no error, else one page of
    them (GET ``/episodes?has_error=true``)."""
    if has_error is False:
        return "no rollout errors", 0
    try:
        page = ctx.traces().list_episodes(team_id=run.team_id, run_id=run.run_id, has_error=True,
                                          limit=FAILED_EPISODES_PAGE)
    except perr.PlatformError as exc:
        return f"failed rollouts not readable ({exc.message})", None
    count = len(page.items)
    errors = Counter(": ".join(filter(None, (e.error.type, e.error.message))) or "no error given"
                     for e in page.items if e.error is not None)
    more = " or more" if page.next_cursor else ""
    return f"{count}{more} failed episode(s){_error_words(errors.most_common(1))}", \
        None if more else count


def _traces(ctx: Context, run: monitor.GetRunResult, traces_dir: str | None) -> _Traces:
    if run.mode == "sft":
        return _Traces(text="none: an SFT run trains on a dataset and uploads no rollouts (its online evals' traces, "
                            "if any, are eval runs: mf_list_traces with kind eval_runs).", complete=True)
    download = call("mf_download_traces", run_id=run.run_id, dest=traces_dir or f"traces-{run.run_id}")
    if traces_dir:
        folder = ctx.resolve_path(traces_dir)
        summary = download_summary(folder)
        if summary is None or summary["run_id"] != run.run_id:
            return _Traces(text=f"no download of this run in {folder}. Download with {download}.", download=download)
        missing = summary["missing"] or "not checked (the download did not finish)"
        complete = summary["state"] == "finished" and missing.startswith("complete")
        outcomes = summary["outcomes"]
        text = (f"{summary['traces']} traces ({summary['bytes'] / 1e6:.1f} MB) in {folder} (index: its "
                f"manifest.jsonl); download {summary['state']}; {missing}"
                f"{'' if missing.endswith('.') else '.'} {_downloaded_rollouts(outcomes, summary['traces'])}")
        return _Traces(text=text, complete=complete, download=None if complete else download,
                       failed_episodes=outcomes["episodes_failed"] if outcomes["episodes"] else None,
                       unscored_traces=outcomes["traces_unscored"] if outcomes["traces"] else None)
    failed = None
    try:
        totals = ctx.traces().get_run(run.run_id, team_id=run.team_id)
        rollouts, failed = _host_rollouts(ctx, run, totals.has_error)
        host = f"{totals.trace_count} traces on the traces host, {rollouts}"
    except perr.PlatformError as exc:
        host = f"the traces host gave no totals ({exc.message})"
    return _Traces(text=f"{host}; not downloaded here: {download}.", download=download, failed_episodes=failed)


@tool
def run_report(inp: RunReportInput, ctx: Context) -> RunReportResult:
    """The end-of-run report as markdown (sources in the module docstring).

    Errors: ``not_found`` (the run), the platform codes of GET ``/rft/runs/{id}``. Other parts
    that cannot be read are said so in their line.
    """
    got = monitor.get_run(monitor.GetRunInput(run_id=inp.run_id), ctx)
    if isinstance(got, ToolError):
        raise ToolFailure(got)
    run: monitor.GetRunResult = got
    try:
        step = ctx.platform().get_progress(run.run_id).latest_step
    except perr.PlatformError:
        step = None
    launch = monitor.launch_of(ctx, run.run_id)
    platform_run = require_run(ctx, run.run_id)
    spend = monitor.spend_so_far(ctx, platform_run)
    progress = None if run.terminal else _result(
        monitor.check_progress(monitor.CheckProgressInput(run_id=run.run_id), ctx))
    plot_path = None
    if inp.plot:
        plotted = _result(monitor.plot_metrics(monitor.PlotMetricsInput(run_id=run.run_id), ctx))
        plot_path = plotted.path if plotted is not None else None
    traces = _traces(ctx, run, inp.traces_dir)
    complete, download = traces.complete, traces.download
    checkpoints, fetch = _checkpoints(ctx, run, platform_run.run_config, inp.checkpoint_dir)
    learned, learning = _learning(ctx, run)
    earlier, earlier_calls = _earlier(ctx, platform_run) if step is not None else ("", [])
    channel = next((a.channel for a in reversed(launch.attempts) if a.channel), None) if launch else None
    secrets = ", ".join(run.secret_names) if run.secret_names else "none"
    lines = [
        f"## Run {run.run_id}" + (f" ({run.name})" if run.name else ""),
        f"- Link: {run.dashboard_url or 'none (not the Prime Intellect platform)'}",
        f"- Owner: {run.owner}; model {run.model or 'unknown'} ({run.mode.upper()}), {run.gpu_count or '?'} GPUs",
        f"- Outcome: {_outcome(run, step)}",
    ]
    if progress is not None:
        lines.append(f"- Progress: {_progress(progress, spend)}")
    lines += [
        f"- {'Cost' if run.terminal else 'Cost so far'}: {spend.words()}"
        + (f". {spend.warning}" if spend.warning else "")
        + ("" if spend.plan_id else f". {monitor.missing_plan(ctx, run.run_id)}"),
        f"- Learning: {learned}" + (f"; plot {plot_path}" if plot_path else ""),
        *([f"- Resumed: {earlier}"] if earlier else []),
        f"- Checkpoints: {checkpoints}",
        f"- Traces: {traces.text}",
    ]
    if launch is not None:
        lines.append(f"- Launch: plan {launch.plan_id}, approved via {channel or 'unknown'}; secrets forwarded "
                     f"by name: {secrets}")
    else:
        lines.append("- Launch: not in this state store (secret names and approval unknown here)")
    next_step, calls = _next(run, progress, download if complete is not True else None, fetch)
    return RunReportResult(run_id=run.run_id, status=run.status, terminal=run.terminal, markdown="\n".join(lines),
                           plot_path=plot_path, traces_complete=complete, failed_episodes=traces.failed_episodes,
                           unscored_traces=traces.unscored_traces, verdict=progress.verdict if progress else None,
                           learning=learning.verdict if learning else None, next_step=next_step,
                           next_calls=calls + [c for c in earlier_calls if c not in calls])


def _progress(progress: monitor.CheckProgressResult, spend: monitor.SpendSoFar) -> str:
    """The Progress line of a run that has not ended: mf_check_progress's verdict and evidence (its spend
    warning is the Cost line's already)."""
    evidence = " ".join(e for e in progress.evidence if e != spend.warning and e != (
        progress.spend.warning if progress.spend else None))
    return f"{progress.verdict.replace('_', ' ')}" + (f". {evidence}" if evidence else ".")


def _next(run: monitor.GetRunResult, progress: monitor.CheckProgressResult | None,
          download: Call | None, fetch: Call | None = None) -> tuple[str | None, list[Call]]:
    """What is left to do: for a run that has not ended, what mf_check_progress advises for its verdict
    (one place for that advice: :func:`tools.monitor.check_progress`), then, once it has ended, the
    traces and this report again; for an ended run, the traces if they are not all here, and the checkpoint
    if one is on the volume and not fetched."""
    if run.terminal:
        todo = [c for c in (download, fetch) if c]
        return (" and ".join(map(str, todo)) + ", then this report again." if todo else None), todo
    if progress is not None:
        text, calls = f"The run has not ended ({progress.verdict.replace('_', ' ')}): {progress.next_step}", \
            list(progress.next_calls)
    else:  # not judged (the platform did not answer the progress reads): wait for its end
        wait = call("mf_wait_for_run", run_id=run.run_id)
        text, calls = f"The run has not ended: {wait}.", [wait]
    then = f"{download}, then this report again" if download else "this report again"
    return f"{text} Once it has ended: {then}.", calls + ([download] if download else [])
