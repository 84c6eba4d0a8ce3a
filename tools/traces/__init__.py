"""Trace tools: list a run's traces, episodes or eval runs one cursor page at a time
(``listing``: :func:`list_traces`), and download a whole run to a folder with a manifest, resume
and a missing-upload report (``download``: :func:`download_traces`; its manifest and index in
``_manifest``). ``_scope`` holds what both share: which team the traces host is asked for, and
its page size. Every walk over the host's cursors stops, with a note, when a cursor repeats,
cycles or comes back empty (:mod:`tools.platform.paging`).

Sources (reference/prime-api.md §6): GET ``/traces`` (filters, cursor pages of at most
100, newest first), ``/traces/{id}?raw=true`` (the exact stored document),
``/episodes`` (``run_step`` matches an episode when any member trace is from that step),
``/episodes/{id}/traces``, ``/episodes/{id}?raw=true`` (the envelope; ``traces`` = member
trace ids), ``/runs?run_type=eval``, ``/runs/{id}`` (``RunSummary`` totals) and
``/runs/{id}/steps`` (per-step counts), all on the traces host with ``X-Prime-Team-ID``.
The team is the platform run's ``teamId`` (GET ``/rft/runs/{id}``), else the configured owner.

Decisions where the platform is silent:

- Per-step traces (``list_traces(kind="traces", step=N)``): ``/traces`` has no step filter,
  so the page walks ``/episodes?run_id=R&run_step=N`` (server-side filter, fixed pages of
  20) and each episode's ``/episodes/{id}/traces``, keeping member traces whose
  ``run_step`` is N.
- ``list_traces``'s ``next_cursor`` is our own (prefix ``mfl1.``): the host's cursor (for a
  step, the episode page cursor, the episode's index in it and the member-trace cursor), the
  kind and step it belongs to, and the walk's trail (digests of the last 32 cursors sent and
  the pages read), so an agent following it one call at a time is stopped like an in-process
  walk; it works only with the same kind and step.
- Eval runs of a training run: traces-host runs with ``run_type`` ``eval`` whose
  ``context.train_run_id`` is the run id, or whose id is the run id or starts with
  ``<run id>-`` (how eval uploads are tagged is not pinned by the CLI, §9).
- Hosted-training run ids are the traces host's ``run_id`` (as the emulator assumes, §9).
"""

from tools.traces._manifest import MANIFEST, download_summary
from tools.traces.download import (
    DownloadTracesInput,
    DownloadTracesResult,
    MissingReport,
    download_traces,
)
from tools.traces.listing import ListTracesInput, ListTracesResult, list_traces

__all__ = [
    "DownloadTracesInput",
    "DownloadTracesResult",
    "ListTracesInput",
    "ListTracesResult",
    "MANIFEST",
    "MissingReport",
    "download_summary",
    "download_traces",
    "list_traces",
]
