"""httpx clients for the Model Factory platform API and the traces host.

:class:`PlatformClient` speaks ``{base_url}/api/v1`` (reference/prime-api.md §2.1 rows
1-21, 23, 25-27); :class:`TracesClient` speaks ``{traces_url}/api/v1`` (rows 29-33).
Both mirror ``prime`` 0.18.0 on the wire (§1.3, §6.1): ``Authorization: Bearer <key>``
only when a key is set, a ``User-Agent`` of our own, team as each endpoint expects
(``team_id`` / ``teamId`` query, ``teamId`` body, ``X-Prime-Team-ID`` header on traces).
Callers pass ``team_id`` explicitly on each call; ``None`` means "no team parameter"
(the server's default owner, the personal account). The tools decide the owner.

Behaviour beyond the CLI, on purpose:

- Reads (GET) retry with tenacity on 429 / 502 / 503 / 504 and on transport failures,
  bounded by :class:`RetryPolicy` and honouring ``Retry-After`` (seconds or HTTP-date).
  The CLI's platform client never retries; the traces SDK retries GETs 3 times.
- Writes never retry. :meth:`PlatformClient.create_run` (and ``resume_run`` and
  ``create_volume``, which also create something) raise :class:`Ambiguous` when the
  request was sent and no usable answer came back (read timeout, connection reset,
  5xx, an unreadable 2xx); ``Unavailable(sent=False)`` when it provably never left.
- Every failure is one of the typed errors of :mod:`tools.platform.errors` (mapping in
  :func:`~tools.platform._http.error_from_response`). Messages never contain the API key
  or a request-body secret (``wandbApiKey``, ``hfToken``), and no httpx exception (whose
  request holds the ``Authorization`` header) is chained onto them.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import httpx

from tools.platform import errors as perr
from tools.platform import wire
from tools.platform._http import (
    NOT_THE_API,
    BaseClient,
    clean_params,
    default_user_agent,
    error_from_response,
    parse_retry_after,
    path_segment,
)
from tools.platform.bounds import Deadline, RetryPolicy, Timeouts
from tools.platform.files import write_atomic
from tools.platform.paging import CursorWalk
from tools.platform.settings import Settings

__all__ = [
    "Deadline",
    "PlatformClient",
    "RetryPolicy",
    "Timeouts",
    "TracesClient",
    "default_user_agent",
    "error_from_response",
    "parse_retry_after",
]


class PlatformClient(BaseClient):
    """Model Factory platform API client (``{settings.base_url}/api/v1``), synchronous.

    Args:
        settings: resolved credentials and URLs (:func:`tools.platform.settings.resolve_settings`).
        timeout: seconds for any read/write phase of a request (connect: ``connect_timeout``).
        connect_timeout: seconds to establish a connection (CLI: 10).
        create_timeout: read timeout in seconds of create / resume (CLI: 120, the server
            validates the config before answering).
        transport: an httpx transport (``httpx.MockTransport``, ASGI, ...); default network.
        retry: :class:`RetryPolicy` of reads.
        user_agent: replaces the default ``model-factory-skill/...`` agent.

    Every method raises :class:`~tools.platform.errors.CredentialsMissing` (nothing sent)
    without a key, and otherwise the typed errors of :func:`error_from_response`.
    Run ids are sent as one URL path segment.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        timeout: float = Timeouts.read_seconds,
        connect_timeout: float = Timeouts.connect_seconds,
        create_timeout: float = Timeouts.create_seconds,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy | None = None,
        user_agent: str | None = None,
    ) -> None:
        super().__init__(
            settings,
            settings.base_url,
            timeout=timeout,
            connect_timeout=connect_timeout,
            transport=transport,
            retry=retry,
            user_agent=user_agent,
            base_headers={"Content-Type": "application/json"},
        )
        self._create_timeout = httpx.Timeout(create_timeout, connect=self._connect_timeout)

    @staticmethod
    def _run(run_id: str) -> str:
        return path_segment(run_id, "run_id")

    # -- hosted training: prepare / create / resume / pause / delete (rows 1-5) --------
    def prepare_run(
        self, *, mode: str, team_id: str | None = None, image_tag: str | None = None, source_ref: str | None = None
    ) -> wire.LocalValidationPreparation:
        """POST ``/training/runs/prepare`` with ``{mode, teamId, imageTag?, sourceRef?}`` (row 1, §4).

        ``teamId`` is always sent (``null`` without a team). Not retried. A platform without
        local validation answers 404 or 405 (NotFound / InvalidRequest with status 405).
        """
        body = wire.build_prepare_body(mode, team_id, image_tag=image_tag, source_ref=source_ref)
        data = self._write("POST", "/training/runs/prepare", body=body)
        return self._parse(wire.LocalValidationPreparation, data, "POST /training/runs/prepare")

    def create_run(self, body: wire.CreateRunBody | Mapping[str, Any]) -> wire.HostedRunCreated:
        """POST ``/training/runs`` (row 2) - launches a run that costs money. Never retried.

        ``body``: a :class:`~tools.platform.wire.CreateRunBody` or the dict from
        :func:`~tools.platform.wire.build_create_body` (sent exactly). Read timeout
        ``create_timeout`` (120 s).

        Raises: ``Unavailable(sent=False)`` when the connection could not be made (safe to
        try again); :class:`~tools.platform.errors.Ambiguous` when it was sent and no usable
        answer came (timeout, reset, 5xx, unreadable 2xx) - do not re-send, reconcile;
        the typed 4xx errors (InvalidRequest with ``field_errors`` for a 422, Conflict, ...).
        """
        payload = body.to_wire() if isinstance(body, wire.CreateRunBody) else dict(body)
        data = self._write("POST", "/training/runs", body=payload, timeout=self._create_timeout, creates=True)
        return self._parse(wire.HostedRunCreated, data, "POST /training/runs", creates=True)

    def resume_run(
        self,
        run_id: str,
        *,
        gpu_type: str | None = None,
        image_tag: str | None = None,
        wandb_api_key: str | None = None,
        hf_token: str | None = None,
    ) -> wire.HostedRunCreated:
        """POST ``/training/runs/{id}/resume`` (row 3): a *new* run continuing a PAUSED one.

        Body: whichever of ``gpuType``, ``imageTag``, ``wandbApiKey``, ``hfToken`` are set.
        Same timeout and ambiguity rules as :meth:`create_run`.
        """
        body = wire.build_resume_body(gpu_type=gpu_type, image_tag=image_tag, wandb_api_key=wandb_api_key,
                                      hf_token=hf_token)
        path = f"/training/runs/{self._run(run_id)}/resume"
        data = self._write("POST", path, body=body, timeout=self._create_timeout, creates=True)
        return self._parse(wire.HostedRunCreated, data, f"POST {path}", creates=True)

    def pause_run(self, run_id: str) -> wire.PauseResult:
        """POST ``/training/runs/{id}/pause``, no body (row 4). 409 Conflict when not pausable."""
        path = f"/training/runs/{self._run(run_id)}/pause"
        return self._parse(wire.PauseResult, self._write("POST", path), f"POST {path}")

    def delete_hosted_run(self, run_id: str) -> dict[str, Any]:
        """DELETE ``/training/runs/{id}`` (row 5; unused by CLI commands). Returns the body (``{runId, deleted}``)."""
        return self._write("DELETE", f"/training/runs/{self._run(run_id)}")

    # -- catalogue (rows 6, 7, 26, 27) ---------------------------------------------------
    def list_models(self, *, team_id: str | None = None, missing_ok: bool = True) -> wire.AvailableModels:
        """GET ``/training/available-fft-models?team_id=`` (row 6): cached models and on-demand GPUs with prices.

        Like the CLI, a 404 (older backend) gives an empty answer whose
        ``on_demand_beta_access`` is ``None`` (unknown); pass ``missing_ok=False`` to get NotFound.
        """
        try:
            data = self._get("/training/available-fft-models", {"team_id": team_id or None})
        except perr.NotFound as exc:
            if not missing_ok or exc.service_code == NOT_THE_API:  # a wrong base URL is no older backend
                raise
            return wire.AvailableModels()
        return self._parse(wire.AvailableModels, data, "GET /training/available-fft-models")

    def list_gpu_types(self, *, team_id: str | None = None) -> wire.GpuTypes:
        """GET ``/training/available-gpu-types?team_id=`` (row 7): ``gpu_types`` like ``H200_141GB``."""
        data = self._get("/training/available-gpu-types", {"team_id": team_id or None})
        return self._parse(wire.GpuTypes, data, "GET /training/available-gpu-types")

    def list_volumes(self, *, team_id: str | None = None) -> list[wire.Volume]:
        """GET ``/training/volumes?teamId=`` (row 26): the owner's named volumes."""
        data = self._get("/training/volumes", {"teamId": team_id or None})
        return self._parse_list(wire.Volume, data, "volumes", "GET /training/volumes")

    def route_volume_transfer(
        self, name: str, *, path: str = "", team_id: str | None = None
    ) -> wire.VolumeTransferRoute:
        """POST ``/training/volumes/{name}/transfer`` with ``{mode: "get", path, teamId?}`` (row 28; prime 0.18.0
        ``route_volume_transfer``): where a read of ``path`` (relative to the volume root, ``""`` = root) goes.
        Each call hands out new credentials (how a transfer refreshes them). Sent once, never retried (as the
        CLI). Raises NotFound for an unknown volume and on backends without the route (the CLI then falls back
        to an SSH session), Conflict (409) while the volume is busy or being created, Forbidden for another
        team's volume."""
        endpoint = "POST /training/volumes/{name}/transfer"
        body: dict[str, Any] = {"mode": "get", "path": path}
        if team_id:
            body["teamId"] = team_id
        data = self._write("POST", f"/training/volumes/{path_segment(name, 'volume')}/transfer", body=body)
        return self._parse(wire.VolumeTransferRoute, data, endpoint)

    def create_volume(
        self, *, name: str, size: str, team_id: str | None = None, cluster: str | None = None, warm: bool = True
    ) -> wire.Volume:
        """POST ``/training/volumes`` with ``{name, size, warm, teamId?, cluster?}`` (row 27).

        ``size`` is a quantity like ``"5Ti"``. Never retried; a timeout after sending is Ambiguous.
        """
        body = wire.build_volume_body(name, size, team_id=team_id, cluster=cluster, warm=warm)
        data = self._write("POST", "/training/volumes", body=body, creates=True)
        return self._parse(wire.Volume, data, "POST /training/volumes")

    # -- runs (rows 8-12) ----------------------------------------------------------------
    def list_runs(
        self, *, team_id: str | None = None, page: int = 1, limit: int = 20, mine: bool = False
    ) -> wire.RLRunPage:
        """GET ``/rft/runs?page=&limit=&team_id=&mine=true`` (row 8), newest first, one page."""
        params = {"page": page, "limit": limit, "team_id": team_id or None, "mine": "true" if mine else None}
        return self._parse(wire.RLRunPage, self._get("/rft/runs", params), "GET /rft/runs")

    def _run_envelope(self, data: dict[str, Any], endpoint: str) -> wire.RLRun:
        if not isinstance(data.get("run"), dict):
            raise perr.InvalidRequest(f"{endpoint}: response has no 'run' object", endpoint=endpoint)
        return self._parse(wire.RLRun, data["run"], endpoint)

    def get_run(self, run_id: str) -> wire.RLRun:
        """GET ``/rft/runs/{id}`` (row 9) -> the ``run`` object. NotFound for an unknown id / other owner."""
        path = f"/rft/runs/{self._run(run_id)}"
        return self._run_envelope(self._get(path), f"GET {path}")

    def stop_run(self, run_id: str) -> wire.RLRun:
        """PUT ``/rft/runs/{id}/stop`` (row 10) -> the run (often not yet STOPPED; poll :meth:`get_run`)."""
        path = f"/rft/runs/{self._run(run_id)}/stop"
        return self._run_envelope(self._write("PUT", path), f"PUT {path}")

    def restart_run(self, run_id: str) -> wire.RLRun:
        """PUT ``/rft/runs/{id}/restart`` (row 11): restart a RUNNING run from its latest checkpoint."""
        path = f"/rft/runs/{self._run(run_id)}/restart"
        return self._run_envelope(self._write("PUT", path), f"PUT {path}")

    def delete_run(self, run_id: str) -> None:
        """DELETE ``/rft/runs/{id}`` (row 12). The body is ignored; 204 is fine."""
        self._write("DELETE", f"/rft/runs/{self._run(run_id)}")

    # -- monitoring (rows 13-21) ---------------------------------------------------------
    @staticmethod
    def _log_filters(search: str | None, regex: bool, level: str | None, since_seconds: int | None) -> dict[str, Any]:
        return {
            "search": search or None,
            "regex": True if regex else None,
            "level": level.upper() if level else None,
            "since_seconds": since_seconds,
        }

    def get_logs(
        self,
        run_id: str,
        *,
        tail_lines: int = 1000,
        component: str | None = None,
        env_name: str | None = None,
        search: str | None = None,
        regex: bool = False,
        level: str | None = None,
        since_seconds: int | None = None,
    ) -> wire.RunLogs:
        """GET ``/rft/runs/{id}/logs`` (row 13, §5.5).

        Query: ``tail_lines`` (1..5000), ``search?``, ``regex=true?``, ``level?`` (upper-cased:
        ERROR|WARNING|SUCCESS|INFO|DEBUG), ``since_seconds?`` (60..86400), ``component?``
        (``trainer`` | ``inference`` | ``env-server``; leave out for the orchestrator),
        ``env_name?``. A 404 whose message says queued/pending/not available means "not started yet".
        """
        params = {"tail_lines": tail_lines, **self._log_filters(search, regex, level, since_seconds)}
        params.update(component=component or None, env_name=env_name or None)
        path = f"/rft/runs/{self._run(run_id)}/logs"
        return self._parse(wire.RunLogs, self._get(path, params), f"GET {path}")

    def get_env_server_logs(
        self,
        run_id: str,
        *,
        env_name: str,
        env_index: int = 0,
        tail_lines: int = 1000,
        search: str | None = None,
        regex: bool = False,
        level: str | None = None,
        since_seconds: int | None = None,
    ) -> wire.RunLogs:
        """GET ``/rft/runs/{id}/env-server-logs?env_name=&env_index=&tail_lines=`` (row 14; non-dedicated runs)."""
        params = {"env_name": env_name, "env_index": env_index, "tail_lines": tail_lines}
        params.update(self._log_filters(search, regex, level, since_seconds))
        path = f"/rft/runs/{self._run(run_id)}/env-server-logs"
        return self._parse(wire.RunLogs, self._get(path, params), f"GET {path}")

    def list_env_servers(self, run_id: str) -> list[wire.EnvServerInfo]:
        """GET ``/rft/runs/{id}/env-servers`` (row 15): environment-server pods and their k8s status."""
        path = f"/rft/runs/{self._run(run_id)}/env-servers"
        return self._parse_list(wire.EnvServerInfo, self._get(path), "env_servers", f"GET {path}")

    def get_metrics(
        self, run_id: str, *, min_step: int | None = None, max_step: int | None = None, limit: int | None = None
    ) -> wire.RunMetrics:
        """GET ``/rft/runs/{id}/metrics?min_step=&max_step=&limit=`` (row 16): metric records as dicts."""
        path = f"/rft/runs/{self._run(run_id)}/metrics"
        params = {"min_step": min_step, "max_step": max_step, "limit": limit}
        return self._parse(wire.RunMetrics, self._get(path, params), f"GET {path}")

    def get_samples(self, run_id: str, *, step: int, page: int = 1, limit: int = 100) -> wire.RolloutSamples:
        """GET ``/rft/runs/{id}/samples?page=&limit=&step=`` (row 17): rollout samples of one step."""
        path = f"/rft/runs/{self._run(run_id)}/samples"
        data = self._get(path, {"page": page, "limit": limit, "step": step})
        data.setdefault("run_id", run_id)
        return self._parse(wire.RolloutSamples, data, f"GET {path}")

    def get_progress(self, run_id: str) -> wire.RunProgress:
        """GET ``/rft/runs/{id}/progress`` (row 18): latest step, steps with samples / distributions."""
        path = f"/rft/runs/{self._run(run_id)}/progress"
        return self._parse(wire.RunProgress, self._get(path), f"GET {path}")

    def get_distributions(
        self, run_id: str, *, distribution_type: str | None = None, step: int | None = None
    ) -> wire.RunDistribution:
        """GET ``/rft/runs/{id}/distributions?type=&step=`` (row 19); ``type`` e.g. ``rewards``."""
        path = f"/rft/runs/{self._run(run_id)}/distributions"
        data = self._get(path, {"type": distribution_type, "step": step})
        return self._parse(wire.RunDistribution, data, f"GET {path}")

    def list_checkpoints(self, run_id: str, *, status_filter: str | None = None) -> list[wire.RLCheckpoint]:
        """GET ``/rft/runs/{id}/checkpoints?status_filter=`` (row 20); status READY|PENDING|UPLOADING|FAILED."""
        path = f"/rft/runs/{self._run(run_id)}/checkpoints"
        data = self._get(path, {"status_filter": status_filter or None})
        return self._parse_list(wire.RLCheckpoint, data, "checkpoints", f"GET {path}")

    def get_usage(self, run_id: str) -> wire.RunUsage:
        """GET ``/billing/runs/{id}/usage`` (row 21): tokens and cost in USD so far."""
        path = f"/billing/runs/{self._run(run_id)}/usage"
        return self._parse(wire.RunUsage, self._get(path), f"GET {path}")

    # -- account (rows 23, 25) -----------------------------------------------------------
    def list_teams(self, *, offset: int = 0, limit: int = 100) -> wire.TeamList:
        """GET ``/user/teams?offset=&limit=`` (row 23): one page of the user's teams."""
        teams = self._get("/user/teams", {"offset": offset, "limit": limit})
        return self._parse(wire.TeamList, teams, "GET /user/teams")

    def list_all_teams(self, *, page_size: int = 100, max_pages: int = 50) -> list[wire.Team]:
        """Every team, paging like the CLI's ``fetch_teams`` (offset += page_size until ``total_count``)."""
        teams: list[wire.Team] = []
        for page in range(max_pages):
            batch = self.list_teams(offset=page * page_size, limit=page_size)
            teams.extend(batch.data)
            if not batch.data or (batch.total_count is not None and len(teams) >= batch.total_count):
                break
        return teams

    def whoami(self, *, team_id: str | None = None) -> wire.WhoAmI:
        """GET ``/user/whoami?teamId=`` (row 25) -> ``data`` (id, email, name, scope, limits).

        The cheapest authenticated call: a 401 here means the key is rejected.
        """
        data = self._get("/user/whoami", {"teamId": team_id or None})
        if not isinstance(data.get("data"), dict):
            raise perr.InvalidRequest("GET /user/whoami: response has no 'data' object", endpoint="GET /user/whoami")
        return self._parse(wire.WhoAmI, data["data"], "GET /user/whoami")

    def is_local_emulator(self) -> bool:
        """True when this client talks to the local Model Factory emulator (``skill/emulator``): the
        root URL's host is loopback and its admin route GET ``{root}/_emulator/state`` answers 200
        with a JSON object holding ``run_count`` (as ``model-factory demo`` recognises it). Not a
        platform endpoint; nothing is sent to a host that is not loopback; any failure is False."""
        host = urlsplit(self.root_url).hostname or ""
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
        if not loopback:
            return False
        try:
            answer = self._http.get(f"{self.root_url}/_emulator/state")
            return answer.status_code == 200 and "run_count" in answer.json()
        except (httpx.HTTPError, ValueError, TypeError):
            return False


class TracesClient(BaseClient):
    """Traces-host client (``{settings.traces_url}/api/v1``), synchronous; rows 29-33 of §2.1.

    Team travels as the ``X-Prime-Team-ID`` header, per call (``team_id``). No default
    ``Content-Type`` (as the SDK). Timeouts: ``timeout`` seconds read/write (SDK: 120),
    ``connect_timeout`` (10). Ids are sent as one path segment; an id containing ``/``
    raises InvalidRequest without sending (as the SDK). Query booleans go out as
    ``true``/``false``; ``context={k: v}`` as ``context.<k>=<v>``; list values repeat the key.
    404s carry ``service_code`` (``trace_not_found``, ``run_not_found``, ``episode_not_found``).
    """

    _service = "traces"

    def __init__(
        self,
        settings: Settings,
        *,
        timeout: float = Timeouts.traces_seconds,
        connect_timeout: float = Timeouts.connect_seconds,
        transport: httpx.BaseTransport | None = None,
        retry: RetryPolicy | None = None,
        user_agent: str | None = None,
    ) -> None:
        super().__init__(
            settings,
            settings.traces_url,
            timeout=timeout,
            connect_timeout=connect_timeout,
            transport=transport,
            retry=retry,
            user_agent=user_agent,
            base_headers={},
        )

    @staticmethod
    def _team(team_id: str | None) -> dict[str, str]:
        return {"X-Prime-Team-ID": team_id} if team_id else {}

    @staticmethod
    def _filters(pairs: Mapping[str, Any], context: Mapping[str, str] | None) -> dict[str, Any]:
        """Query parameters: ``pairs`` plus ``context.<k>=<v>`` (``None`` values are dropped when sent)."""
        return {**pairs, **{f"context.{key}": value for key, value in (context or {}).items()}}

    @staticmethod
    def _id(value: str, what: str) -> str:
        """A traces-host id as one path segment (``/`` refused without sending, as the SDK)."""
        return path_segment(value, what, allow_slash=False)

    def _json(self, path: str, params: Mapping[str, Any] | None, team_id: str | None) -> dict[str, Any]:
        return self._get(path, params, headers=self._team(team_id))

    # -- traces (rows 29, 30) ------------------------------------------------------------
    def list_traces(
        self,
        *,
        team_id: str | None = None,
        run_id: str | None = None,
        upload_id: str | Sequence[str] | None = None,
        environment_id: str | None = None,
        task_id: str | None = None,
        model_id: str | None = None,
        model_provider: str | None = None,
        outcome: str | None = None,
        has_error: bool | None = None,
        is_truncated: bool | None = None,
        reward_min: float | None = None,
        reward_max: float | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
        sort: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        context: Mapping[str, str] | None = None,
    ) -> wire.TraceListPage:
        """GET ``/traces`` (row 29, §6.2): one page of trace summaries, newest first (``limit`` <= 100).

        ``sort``: ``created_at`` | ``reward`` | ``duration_ms``. ``created_after`` /
        ``created_before`` are ISO timestamps. Follow ``next_cursor`` with the same filters.
        """
        pairs = {
            "run_id": run_id,
            "upload_id": upload_id,
            "environment_id": environment_id,
            "model_id": model_id,
            "model_provider": model_provider,
            "task_id": task_id,
            "reward_min": reward_min,
            "reward_max": reward_max,
            "outcome": outcome,
            "has_error": has_error,
            "is_truncated": is_truncated,
            "created_after": created_after,
            "created_before": created_before,
            "sort": sort,
            "limit": limit,
            "cursor": cursor,
        }
        data = self._json("/traces", self._filters(pairs, context), team_id)
        return self._parse(wire.TraceListPage, data, "GET /traces")

    def iter_traces(self, *, max_pages: int = 1000, **filters: Any) -> Iterator[wire.TraceSummary]:
        """Every trace matching ``filters`` (arguments of :meth:`list_traces`), following cursors
        (:class:`~tools.platform.paging.CursorWalk`). Raises InvalidRequest after the last item read
        when the walk could not finish: the host's cursor repeated, cycled or came back empty, or
        ``max_pages`` pages were read (the message says which, and the last cursor)."""
        cursor = filters.pop("cursor", None)
        walk = CursorWalk(lambda c: self.list_traces(cursor=c, **filters), max_pages=max_pages, cursor=cursor)
        yield from walk.items()
        note = walk.walk.note("trace listing")
        if note:
            raise perr.InvalidRequest(note, endpoint="GET /traces")

    def get_trace(self, trace_id: str, *, team_id: str | None = None) -> wire.TraceSummary:
        """GET ``/traces/{id}`` (row 30): one trace summary."""
        path = f"/traces/{self._id(trace_id, 'trace_id')}"
        return self._parse(wire.TraceSummary, self._json(path, None, team_id), f"GET {path}")

    def stream_raw_trace(
        self, trace_id: str, *, team_id: str | None = None, chunk_size: int | None = None,
        expected_bytes: int | None = None,
    ) -> Generator[bytes, None, None]:
        """GET ``/traces/{id}?raw=true`` (row 30), streamed: yields the exact stored bytes.

        ``chunk_size``: bytes per yielded chunk (``None`` = as received from the network).
        ``expected_bytes``: the trace's ``size_bytes`` (its summary); an answer of another length
        (a body cut short yet well framed) raises ``Unavailable(sent=True)`` after the last chunk.
        Retries (per the read policy) only until the first byte; a cut after that raises
        ``Unavailable(sent=True)`` and the caller restarts the download.
        """
        path = f"/traces/{self._id(trace_id, 'trace_id')}"
        return self._stream(path, {"raw": "true"}, team_id, chunk_size, expected_bytes)

    def download_raw_trace(
        self, trace_id: str, dest: IO[bytes] | str | os.PathLike[str], *, team_id: str | None = None
    ) -> int:
        """Stream the raw trace into ``dest`` and return the bytes written.

        ``dest`` is a binary file object (written as received), or a path: then the bytes
        go to ``dest`` only when complete (:func:`~tools.platform.files.write_atomic`; as the SDK).
        """
        chunks = self.stream_raw_trace(trace_id, team_id=team_id)
        if isinstance(dest, (str, os.PathLike)):
            return write_atomic(Path(dest), chunks)[0]
        written = 0
        for chunk in chunks:
            dest.write(chunk)
            written += len(chunk)
        return written

    def get_raw_trace(self, trace_id: str, *, team_id: str | None = None) -> bytes:
        """The raw trace document in memory (prefer :meth:`download_raw_trace` for big traces)."""
        return b"".join(self.stream_raw_trace(trace_id, team_id=team_id))

    # -- episodes (row 31) ---------------------------------------------------------------
    def list_episodes(
        self,
        *,
        team_id: str | None = None,
        run_id: str | None = None,
        upload_id: str | Sequence[str] | None = None,
        environment_id: str | None = None,
        outcome: str | None = None,
        has_error: bool | None = None,
        run_step: int | None = None,
        step_min: int | None = None,
        step_max: int | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        context: Mapping[str, str] | None = None,
    ) -> wire.EpisodeListPage:
        """GET ``/episodes`` (row 31): one page of episode summaries. ``run_step`` matches an
        episode when any member trace is from that step."""
        pairs = {
            "run_id": run_id,
            "upload_id": upload_id,
            "environment_id": environment_id,
            "outcome": outcome,
            "has_error": has_error,
            "run_step": run_step,
            "step_min": step_min,
            "step_max": step_max,
            "created_after": created_after,
            "created_before": created_before,
            "limit": limit,
            "cursor": cursor,
        }
        data = self._json("/episodes", self._filters(pairs, context), team_id)
        return self._parse(wire.EpisodeListPage, data, "GET /episodes")

    def get_episode(self, episode_id: str, *, team_id: str | None = None) -> wire.EpisodeDetail:
        """GET ``/episodes/{id}`` (row 31): the episode plus its member-trace aggregate."""
        path = f"/episodes/{self._id(episode_id, 'episode_id')}"
        return self._parse(wire.EpisodeDetail, self._json(path, None, team_id), f"GET {path}")

    def list_episode_traces(
        self,
        episode_id: str,
        *,
        team_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        has_error: bool | None = None,
        context: Mapping[str, str] | None = None,
        **filters: Any,
    ) -> wire.TraceListPage:
        """GET ``/episodes/{id}/traces`` (row 31): the episode's member traces, newest first.

        ``filters``: ``run_id``, ``environment_id``, ``model_id``, ``model_provider``,
        ``task_id``, ``reward_min``, ``reward_max``, ``outcome``, ``is_truncated``,
        ``created_after``, ``created_before`` (no ``sort``, no ``upload_id``).
        """
        path = f"/episodes/{self._id(episode_id, 'episode_id')}/traces"
        pairs = {**filters, "has_error": has_error, "limit": limit, "cursor": cursor}
        data = self._json(path, self._filters(pairs, context), team_id)
        return self._parse(wire.TraceListPage, data, f"GET {path}")

    def stream_raw_episode(
        self, episode_id: str, *, team_id: str | None = None, chunk_size: int | None = None
    ) -> Generator[bytes, None, None]:
        """GET ``/episodes/{id}?raw=true``, streamed: the stored envelope (``traces`` = member ids)."""
        path = f"/episodes/{self._id(episode_id, 'episode_id')}"
        return self._stream(path, {"raw": "true"}, team_id, chunk_size)

    # -- runs and search (rows 32, 33) ---------------------------------------------------
    def list_runs(
        self,
        *,
        team_id: str | None = None,
        run_type: str | Sequence[str] | None = None,
        created_by: str | Sequence[str] | None = None,
        created_after: str | None = None,
        created_before: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> wire.RunListPage:
        """GET ``/runs`` (row 32): runs with trace totals; ``run_type`` ``eval`` | ``train`` | ``unknown``
        (repeatable)."""
        pairs = {
            "run_type": run_type,
            "created_by": created_by,
            "created_after": created_after,
            "created_before": created_before,
            "limit": limit,
            "cursor": cursor,
        }
        data = self._json("/runs", self._filters(pairs, None), team_id)
        return self._parse(wire.RunListPage, data, "GET /runs")

    def get_run(self, run_id: str, *, team_id: str | None = None) -> wire.RunSummary:
        """GET ``/runs/{run_id}`` (row 32): totals over the run's traces; NotFound ``run_not_found`` if none."""
        path = f"/runs/{self._id(run_id, 'run_id')}"
        return self._parse(wire.RunSummary, self._json(path, None, team_id), f"GET {path}")

    def list_run_steps(self, run_id: str, *, team_id: str | None = None) -> wire.RunStepList:
        """GET ``/runs/{run_id}/steps`` (row 32): every step, oldest first (unknown run = empty list)."""
        path = f"/runs/{self._id(run_id, 'run_id')}/steps"
        return self._parse(wire.RunStepList, self._json(path, None, team_id), f"GET {path}")

    def search_run(
        self,
        run_id: str,
        *,
        query: str,
        team_id: str | None = None,
        field: str = "content",
        role: str | None = None,
        run_step: int | None = None,
        has_error: bool | None = None,
        reward_min: float | None = None,
        reward_max: float | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> wire.TraceSearchPage:
        """GET ``/runs/{run_id}/search`` (row 33, §6.6): exact, case-sensitive matches (3-256 chars).

        ``field``: ``content`` | ``reasoning_content`` | ``tool_calls``; ``limit`` <= 100.
        """
        path = f"/runs/{self._id(run_id, 'run_id')}/search"
        pairs = {
            "query": query,
            "field": field,
            "role": role,
            "run_step": run_step,
            "has_error": has_error,
            "reward_min": reward_min,
            "reward_max": reward_max,
            "limit": limit,
            "cursor": cursor,
        }
        data = self._json(path, self._filters(pairs, None), team_id)
        return self._parse(wire.TraceSearchPage, data, f"GET {path}")

    # -- streaming plumbing --------------------------------------------------------------
    def _open_stream(
        self, path: str, params: Mapping[str, Any], team_id: str | None, chunk_size: int | None
    ) -> tuple[httpx.Response, Iterator[bytes], bytes]:
        endpoint = f"GET {path}"
        request = self._http.build_request("GET", self.url(path), params=clean_params(params),
                                           headers=self._team(team_id))
        secrets = self._secrets(None)
        failure: perr.PlatformError | None = None
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            failure = self._transport_error(exc, endpoint, creates=False, secrets=secrets)
        if failure is not None:
            raise failure
        try:
            if not response.is_success:
                response.read()
                failure = error_from_response(response, endpoint, secrets)
            else:
                chunks = response.iter_bytes(chunk_size)
                first = next(chunks, b"")
        except httpx.TransportError as exc:
            failure = self._transport_error(exc, endpoint, creates=False, secrets=secrets)
        except BaseException:
            response.close()
            raise
        if failure is not None:
            response.close()
            raise failure
        return response, chunks, first

    def _stream(
        self, path: str, params: Mapping[str, Any], team_id: str | None, chunk_size: int | None,
        expected_bytes: int | None = None,
    ) -> Generator[bytes, None, None]:
        self._require_key()  # eager: fail at call time, not at first iteration

        def generate() -> Generator[bytes, None, None]:
            opened: tuple[httpx.Response, Iterator[bytes], bytes] | None = None
            for attempt in self._retrying():
                with attempt:
                    opened = self._open_stream(path, params, team_id, chunk_size)
            assert opened is not None
            response, chunks, first = opened
            received = len(first)
            cut: str | None = None
            try:
                if first:
                    yield first
                for chunk in chunks:
                    received += len(chunk)
                    yield chunk
            except httpx.TransportError as exc:
                cut = exc.__class__.__name__
            finally:
                response.close()
            if cut is None and expected_bytes is not None and received != expected_bytes:
                cut = f"{expected_bytes} expected"
            if cut is not None:
                raise perr.Unavailable(
                    f"GET {path} stream cut after {received} bytes ({cut}); download again",
                    sent=True,
                    endpoint=f"GET {path}",
                )

        return generate()
