"""Monitoring tools: read a run, list runs, decide whether a run is progressing, list its
checkpoints, wait for it, read and summarise its logs, read and plot its metrics, all bounded
in time and in output size (output budget: :mod:`tools.core`).

Public modules hold the tools: ``runs`` (get_run, list_runs, wait_for_run), ``checkpoints``
(list_checkpoints, download_checkpoint; private ``_ckpt_files``: the journal and the parallel verified transfer),
``progress`` (check_progress), ``logs`` (get_logs, summarize_logs), ``export`` (export_logs),
``metrics`` (get_metrics, plot_metrics), ``spend`` (get_spend), ``compare`` (compare_runs). Private helpers:
``_learning`` (the learning verdict: trends with their uncertainty, findings), ``_logreads`` (reading beyond one
request's caps: targets, sweeps in time slices), ``_logtext`` (log lines parsed as ``prime train logs`` reads
them), ``_views`` (clipped server text, failure analysis), ``_clock`` (the server's clock),
``_series`` (metric values, the reward key). Everything other packages use is re-exported here.
"""

from tools.monitor._learning import Finding, Learning, LearningVerdict, judge, trend
from tools.monitor._logtext import Signatures, normalise, parse_logs
from tools.monitor._series import reward_key
from tools.monitor.cap import SpendCap, check_cap
from tools.monitor.checkpoints import (
    DCP_NOTE,
    DownloadCheckpointInput,
    DownloadCheckpointResult,
    ListCheckpointsInput,
    ListCheckpointsResult,
    checkpoint_download,
    checkpoint_path,
    download_checkpoint,
    list_checkpoints,
)
from tools.monitor.compare import CompareRunsInput, CompareRunsResult, compare_runs
from tools.monitor.export import ExportLogsInput, ExportLogsResult, export_logs
from tools.monitor.logs import (
    GetLogsInput,
    GetLogsResult,
    SummarizeLogsInput,
    SummarizeLogsResult,
    get_logs,
    summarize_logs,
)
from tools.monitor.metrics import (
    PNG_SIGNATURE,
    GetMetricsInput,
    GetMetricsResult,
    PlotMetricsInput,
    PlotMetricsResult,
    get_metrics,
    plot_metrics,
    records_of,
)
from tools.monitor.progress import CheckProgressInput, CheckProgressResult, Verdict, check_progress
from tools.monitor.runs import (
    GetRunInput,
    GetRunResult,
    ListRunsInput,
    ListRunsResult,
    WaitForRunInput,
    WaitForRunResult,
    get_run,
    launch_of,
    list_runs,
    wait,
    wait_for_run,
)
from tools.monitor.spend import GetSpendInput, GetSpendResult, SpendSoFar, get_spend, missing_plan, spend_so_far

__all__ = [
    "CheckProgressInput",
    "CheckProgressResult",
    "CompareRunsInput",
    "CompareRunsResult",
    "DCP_NOTE",
    "DownloadCheckpointInput",
    "DownloadCheckpointResult",
    "ExportLogsInput",
    "ExportLogsResult",
    "Finding",
    "GetLogsInput",
    "GetLogsResult",
    "GetMetricsInput",
    "GetMetricsResult",
    "GetRunInput",
    "GetRunResult",
    "GetSpendInput",
    "GetSpendResult",
    "Learning",
    "LearningVerdict",
    "ListCheckpointsInput",
    "ListCheckpointsResult",
    "ListRunsInput",
    "ListRunsResult",
    "PNG_SIGNATURE",
    "PlotMetricsInput",
    "PlotMetricsResult",
    "Signatures",
    "SpendCap",
    "SpendSoFar",
    "SummarizeLogsInput",
    "SummarizeLogsResult",
    "Verdict",
    "WaitForRunInput",
    "WaitForRunResult",
    "check_cap",
    "check_progress",
    "checkpoint_download",
    "checkpoint_path",
    "compare_runs",
    "download_checkpoint",
    "export_logs",
    "get_logs",
    "get_metrics",
    "get_run",
    "get_spend",
    "judge",
    "launch_of",
    "list_checkpoints",
    "list_runs",
    "missing_plan",
    "normalise",
    "parse_logs",
    "plot_metrics",
    "records_of",
    "reward_key",
    "spend_so_far",
    "summarize_logs",
    "trend",
    "wait",
    "wait_for_run",
]
