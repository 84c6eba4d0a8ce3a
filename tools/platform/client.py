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
- Every failure is one of the typed errors of :mod:`tools.platform.errors`. Messages
  never contain the API key or a request-body secret (``wandbApiKey``, ``hfToken``),
  and exceptions are raised ``from None`` so no httpx request (with its headers) hangs
  off them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import quote

import httpx
import tenacity
from pydantic import BaseModel, ValidationError

from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.settings import Settings

log = logging.getLogger("tools.platform")

M = TypeVar("M", bound=BaseModel)


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("model-factory-skill")
    except Exception:  # pragma: no cover - not installed as a distribution
        return "0.1.0"


def default_user_agent() -> str:
    """``model-factory-skill/<version> python/X.Y.Z httpx/<version>``."""
    py = ".".join(str(part) for part in sys.version_info[:3])
    return f"model-factory-skill/{_package_version()} python/{py} httpx/{httpx.__version__}"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries for idempotent reads (seconds throughout).

    Attributes:
        max_attempts: attempts in total, first included (1 = no retry).
        backoff_base_seconds: first backoff; doubles per attempt, times a 0.5..1.5 jitter.
        backoff_max_seconds: cap of one computed backoff.
        retry_after_cap_seconds: cap applied to a server ``Retry-After``.
        total_wait_cap_seconds: give up (raise the last error) rather than sleep past this
            much waiting in total.
        jitter: multiply computed backoffs by a random 0.5..1.5 (off for tests).
        sleep: the sleep function (tests pass a recorder).
    """

    max_attempts: int = 3
    backoff_base_seconds: float = 1.0
    backoff_max_seconds: float = 10.0
    retry_after_cap_seconds: float = 30.0
    total_wait_cap_seconds: float = 60.0
    jitter: bool = True
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)


#: Transport failures where the request cannot have reached the server.
_NOT_SENT = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.ProxyError,
    httpx.UnsupportedProtocol,
    httpx.LocalProtocolError,
)
_RETRY_STATUSES = frozenset({502, 503, 504})


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP-date; ``None`` if unusable."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        target = parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    if target.tzinfo is None:
        target = target.replace(tzinfo=UTC)
    return max(0.0, (target - (now or datetime.now(UTC))).total_seconds())


def _redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


def _format_detail(detail: Any) -> tuple[str, list[tuple[str, str]]]:
    """(message, field_errors) from a FastAPI ``detail`` (string, list of ``{loc, msg}``, other)."""
    if isinstance(detail, list):
        fields: list[tuple[str, str]] = []
        for item in detail:
            if isinstance(item, dict):
                loc = item.get("loc") or []
                loc = loc if isinstance(loc, list) else [loc]
                path = ".".join(str(part) for part in loc if part != "body")
                fields.append((path, str(item.get("msg", "unknown error"))))
            else:
                fields.append(("", str(item)))
        lines = ["Validation failed:"] + [f"  - {path}: {msg}" for path, msg in fields]
        return "\n".join(lines), fields
    return str(detail), []


def _parse_error_body(response: httpx.Response) -> tuple[str | None, str, list[tuple[str, str]]]:
    """(service code, message, field errors): traces envelope, FastAPI ``detail``, then text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            message = error.get("message") or response.reason_phrase
            return (str(code) if code else None), str(message), []
        if "detail" in body and body["detail"] not in (None, ""):
            message, fields = _format_detail(body["detail"])
            return None, message, fields
    text = (response.text or "").strip()
    return None, (text[:500] or response.reason_phrase or f"HTTP {response.status_code}"), []


def error_from_response(response: httpx.Response, endpoint: str, secrets: Sequence[str] = ()) -> perr.PlatformError:
    """Map a non-2xx response to the typed error set (reference §1.3 and §6.1).

    401 Unauthorized, 402 PaymentRequired, 403 Forbidden, 404 NotFound, 409 Conflict,
    429 RateLimited (``retry_after``), 5xx Unavailable (``sent=True``), any other status
    InvalidRequest (400/405/422 with ``field_errors`` from a ``detail`` list, ``body``
    left out of each location).
    """
    status = response.status_code
    code, detail, fields = _parse_error_body(response)
    detail = _redact(detail, secrets)
    where = f"HTTP {status} from {endpoint}"
    kwargs: dict[str, Any] = {"status": status, "service_code": code, "endpoint": endpoint}
    if status == 401:
        extra = f" ({detail})" if code or detail.lower() not in ("", "unauthorized", "not authenticated") else ""
        return perr.Unauthorized(
            f"API key unauthorized{extra} [{where}]. Check PRIME_API_KEY or run `prime login`.", **kwargs
        )
    if status == 402:
        return perr.PaymentRequired(
            f"Payment required [{where}]: {detail}. Check billing at https://app.primeintellect.ai/dashboard/billing.",
            **kwargs,
        )
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    message = f"{where}: {detail}"
    if status == 403:
        return perr.Forbidden(message, **kwargs)
    if status == 404:
        return perr.NotFound(message, **kwargs)
    if status == 409:
        return perr.Conflict(message, **kwargs)
    if status == 429:
        return perr.RateLimited(message, retry_after=retry_after, **kwargs)
    if status >= 500:
        return perr.Unavailable(message, sent=True, retry_after=retry_after, **kwargs)
    return perr.InvalidRequest(message, field_errors=fields, **kwargs)


def _shape_error(model: type[BaseModel], exc: ValidationError) -> str:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
        for err in exc.errors(include_input=False, include_url=False)[:5]
    )
    return f"response is not a valid {model.__name__}: {problems}"


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, perr.RateLimited):
        return True
    if isinstance(exc, perr.Unavailable):
        return exc.status is None or exc.status in _RETRY_STATUSES
    return False


def _segment(value: str, what: str, *, allow_slash: bool = True) -> str:
    """``value`` encoded as one URL path segment; InvalidRequest (nothing sent) if unusable."""
    if not isinstance(value, str) or not value:
        raise perr.InvalidRequest(f"{what} must be a non-empty string")
    if not allow_slash and "/" in value:
        raise perr.InvalidRequest(f"{what} cannot contain '/' (the traces service cannot address it)")
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def _clean(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Drop ``None`` values (httpx would send them as empty strings); booleans as true/false."""
    if not params:
        return None
    out: dict[str, Any] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            value = [("true" if v else "false") if isinstance(v, bool) else v for v in value]
            if not value:
                continue
        out[key] = value
    return out or None


class _HttpClient:
    """Shared transport, headers, error mapping and retries of both clients."""

    _service = "platform"

    def __init__(
        self,
        settings: Settings,
        root_url: str,
        *,
        timeout: float,
        connect_timeout: float,
        transport: httpx.BaseTransport | None,
        retry: RetryPolicy | None,
        user_agent: str | None,
        base_headers: Mapping[str, str],
    ) -> None:
        self.settings = settings
        self.root_url = root_url.rstrip("/")
        self.retry_policy = retry or RetryPolicy()
        self._api_key = settings.api_key.get_secret_value()
        headers = dict(base_headers)
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        headers["User-Agent"] = user_agent or default_user_agent()
        self._connect_timeout = min(connect_timeout, timeout)
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=self._connect_timeout),
            follow_redirects=True,
            transport=transport,
        )

    # -- lifecycle -------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection pool (safe to call twice)."""
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(root_url={self.root_url!r}, has_api_key={bool(self._api_key)})"

    # -- plumbing --------------------------------------------------------------------
    def url(self, path: str) -> str:
        """``{root}/api/v1{path}``."""
        return f"{self.root_url}/api/v1{path}"

    def _require_key(self) -> None:
        if not self._api_key:
            raise perr.CredentialsMissing(
                "No API key configured: set PRIME_API_KEY in this process's environment or run "
                "`prime login`. Nothing was sent."
            )

    def _secrets(self, body: Any) -> list[str]:
        found = [self._api_key] if self._api_key else []
        if isinstance(body, Mapping):
            found += [str(body[k]) for k in wire.SECRET_BODY_KEYS if body.get(k)]
        return found

    def _transport_error(
        self, exc: Exception, endpoint: str, *, creates: bool, secrets: Sequence[str]
    ) -> perr.PlatformError:
        what = _redact(f"{exc.__class__.__name__}: {exc}", secrets)
        sent = not isinstance(exc, _NOT_SENT)
        if creates and sent:
            return perr.Ambiguous(
                f"{endpoint} was sent but no answer came back ({what}); it may have taken effect. "
                "Do not re-send: reconcile by listing runs first.",
                endpoint=endpoint,
            )
        verb = "failed before sending" if not sent else "failed after sending"
        return perr.Unavailable(
            f"Request {verb}: {endpoint} to {self.root_url} ({what})", sent=sent, endpoint=endpoint
        )

    def _retrying(self) -> tenacity.Retrying:
        policy = self.retry_policy

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            retry_after = getattr(exc, "retry_after", None)
            if retry_after is not None:
                return min(float(retry_after), policy.retry_after_cap_seconds)
            delay = min(policy.backoff_max_seconds, policy.backoff_base_seconds * 2 ** (state.attempt_number - 1))
            return delay * (random.uniform(0.5, 1.5) if policy.jitter else 1.0)

        def over_budget(state: tenacity.RetryCallState) -> bool:
            return state.idle_for + state.upcoming_sleep > policy.total_wait_cap_seconds

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.debug("retrying %s after %.2fs: %s", self._service, state.upcoming_sleep, exc)

        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(max(1, policy.max_attempts)) | over_budget,
            wait=wait,
            retry=tenacity.retry_if_exception(_is_transient),
            sleep=policy.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: httpx.Timeout | None = None,
        creates: bool = False,
    ) -> dict[str, Any]:
        """One attempt; returns the JSON object (``{}`` for an empty 2xx), raises typed errors."""
        endpoint = f"{method} {path}"
        secrets = self._secrets(body)
        kwargs: dict[str, Any] = {"params": _clean(params), "headers": dict(headers or {})}
        if body is not None:
            kwargs["json"] = body
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            response = self._http.request(method, self.url(path), **kwargs)
        except httpx.TransportError as exc:
            raise self._transport_error(exc, endpoint, creates=creates, secrets=secrets) from None
        except httpx.InvalidURL as exc:
            raise perr.InvalidRequest(f"invalid URL for {endpoint}: {exc}", endpoint=endpoint) from None
        log.debug("%s %s -> %s", method, path, response.status_code)
        if not response.is_success:
            error = error_from_response(response, endpoint, secrets)
            if creates and response.status_code >= 500:
                raise perr.Ambiguous(
                    f"{error.message}; the create was sent and may have taken effect. Do not re-send: "
                    "reconcile by listing runs first.",
                    status=response.status_code,
                    endpoint=endpoint,
                ) from None
            raise error from None
        if not response.content:
            return {}
        try:
            data = response.json()
        except ValueError:
            data = None
        if not isinstance(data, dict):
            message = f"{endpoint} answered HTTP {response.status_code} with a body that is not a JSON object"
            if creates:
                raise perr.Ambiguous(
                    f"{message}; the create may have taken effect. Reconcile by listing runs first.",
                    status=response.status_code,
                    endpoint=endpoint,
                ) from None
            raise perr.InvalidRequest(message, status=response.status_code, endpoint=endpoint) from None
        return data

    def _get(self, path: str, params: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """GET with the read retry policy."""
        self._require_key()
        for attempt in self._retrying():
            with attempt:
                return self._send("GET", path, params=params, headers=headers)
        raise AssertionError("unreachable")  # pragma: no cover

    def _write(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout: httpx.Timeout | None = None,
        creates: bool = False,
    ) -> dict[str, Any]:
        """A non-idempotent request: exactly one attempt."""
        self._require_key()
        return self._send(method, path, params=params, body=body, timeout=timeout, creates=creates)

    @staticmethod
    def _parse(model: type[M], data: Any, endpoint: str, *, creates: bool = False) -> M:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            message = f"{endpoint}: {_shape_error(model, exc)}"
            if creates:
                raise perr.Ambiguous(
                    f"{message}; the create was accepted but its answer is unreadable. Reconcile by listing runs.",
                    endpoint=endpoint,
                ) from None
            raise perr.InvalidRequest(message, endpoint=endpoint) from None

    def _parse_list(self, model: type[M], data: dict[str, Any], key: str, endpoint: str) -> list[M]:
        items = data.get(key) or []
        if not isinstance(items, list):
            raise perr.InvalidRequest(f"{endpoint}: '{key}' is not a list", endpoint=endpoint)
        return [self._parse(model, item, endpoint) for item in items]


class PlatformClient(_HttpClient):
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
        timeout: float = 30.0,
        connect_timeout: float = 10.0,
        create_timeout: float = 120.0,
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
        return _segment(run_id, "run_id")

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
        body = wire.build_resume_body(gpu_type=gpu_type, image_tag=image_tag, wandb_api_key=wandb_api_key, hf_token=hf_token)
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
        except perr.NotFound:
            if not missing_ok:
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
        return self._parse(wire.TeamList, self._get("/user/teams", {"offset": offset, "limit": limit}), "GET /user/teams")

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


class TracesClient(_HttpClient):
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
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
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
        params = {key: value for key, value in pairs.items() if value is not None}
        for key, value in (context or {}).items():
            params[f"context.{key}"] = value
        return params

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
            "upload_id": list(upload_id) if isinstance(upload_id, (list, tuple)) else upload_id,
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

    def iter_traces(self, *, max_pages: int | None = None, **filters: Any) -> Iterator[wire.TraceSummary]:
        """Every trace matching ``filters`` (arguments of :meth:`list_traces`), following cursors."""
        cursor = filters.pop("cursor", None)
        pages = 0
        while True:
            page = self.list_traces(cursor=cursor, **filters)
            yield from page.items
            pages += 1
            if not page.next_cursor or (max_pages is not None and pages >= max_pages):
                return
            cursor = page.next_cursor

    def get_trace(self, trace_id: str, *, team_id: str | None = None) -> wire.TraceSummary:
        """GET ``/traces/{id}`` (row 30): one trace summary."""
        path = f"/traces/{_segment(trace_id, 'trace_id', allow_slash=False)}"
        return self._parse(wire.TraceSummary, self._json(path, None, team_id), f"GET {path}")

    def stream_raw_trace(
        self, trace_id: str, *, team_id: str | None = None, chunk_size: int = 64 * 1024
    ) -> Iterator[bytes]:
        """GET ``/traces/{id}?raw=true`` (row 30), streamed: yields the exact stored bytes.

        Retries (per the read policy) only until the first byte; a cut after that raises
        ``Unavailable(sent=True)`` and the caller restarts the download.
        """
        path = f"/traces/{_segment(trace_id, 'trace_id', allow_slash=False)}"
        return self._stream(path, {"raw": "true"}, team_id, chunk_size)

    def download_raw_trace(
        self, trace_id: str, dest: IO[bytes] | str | os.PathLike[str], *, team_id: str | None = None
    ) -> int:
        """Stream the raw trace into ``dest`` and return the bytes written.

        ``dest`` is a binary file object (written as received), or a path: then the bytes
        go to a temporary sibling that replaces ``dest`` only when complete (as the SDK).
        """
        return self._download(self.stream_raw_trace(trace_id, team_id=team_id), dest)

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
            "upload_id": list(upload_id) if isinstance(upload_id, (list, tuple)) else upload_id,
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
        path = f"/episodes/{_segment(episode_id, 'episode_id', allow_slash=False)}"
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
        path = f"/episodes/{_segment(episode_id, 'episode_id', allow_slash=False)}/traces"
        pairs = {**filters, "has_error": has_error, "limit": limit, "cursor": cursor}
        data = self._json(path, self._filters(pairs, context), team_id)
        return self._parse(wire.TraceListPage, data, f"GET {path}")

    def stream_raw_episode(
        self, episode_id: str, *, team_id: str | None = None, chunk_size: int = 64 * 1024
    ) -> Iterator[bytes]:
        """GET ``/episodes/{id}?raw=true``, streamed: the stored envelope (``traces`` = member ids)."""
        path = f"/episodes/{_segment(episode_id, 'episode_id', allow_slash=False)}"
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
        """GET ``/runs`` (row 32): runs with trace totals; ``run_type`` ``eval`` | ``train`` | ``unknown`` (repeatable)."""
        pairs = {
            "run_type": list(run_type) if isinstance(run_type, (list, tuple)) else run_type,
            "created_by": list(created_by) if isinstance(created_by, (list, tuple)) else created_by,
            "created_after": created_after,
            "created_before": created_before,
            "limit": limit,
            "cursor": cursor,
        }
        data = self._json("/runs", self._filters(pairs, None), team_id)
        return self._parse(wire.RunListPage, data, "GET /runs")

    def get_run(self, run_id: str, *, team_id: str | None = None) -> wire.RunSummary:
        """GET ``/runs/{run_id}`` (row 32): totals over the run's traces; NotFound ``run_not_found`` if none."""
        path = f"/runs/{_segment(run_id, 'run_id', allow_slash=False)}"
        return self._parse(wire.RunSummary, self._json(path, None, team_id), f"GET {path}")

    def list_run_steps(self, run_id: str, *, team_id: str | None = None) -> wire.RunStepList:
        """GET ``/runs/{run_id}/steps`` (row 32): every step, oldest first (unknown run = empty list)."""
        path = f"/runs/{_segment(run_id, 'run_id', allow_slash=False)}/steps"
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
        path = f"/runs/{_segment(run_id, 'run_id', allow_slash=False)}/search"
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
        self, path: str, params: Mapping[str, Any], team_id: str | None, chunk_size: int
    ) -> tuple[httpx.Response, Iterator[bytes], bytes]:
        endpoint = f"GET {path}"
        request = self._http.build_request("GET", self.url(path), params=_clean(params), headers=self._team(team_id))
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise self._transport_error(exc, endpoint, creates=False, secrets=self._secrets(None)) from None
        try:
            if not response.is_success:
                response.read()
                raise error_from_response(response, endpoint, self._secrets(None))
            chunks = response.iter_bytes(chunk_size)
            first = next(chunks, b"")
        except httpx.TransportError as exc:
            response.close()
            raise self._transport_error(exc, endpoint, creates=False, secrets=self._secrets(None)) from None
        except BaseException:
            response.close()
            raise
        return response, chunks, first

    def _stream(self, path: str, params: Mapping[str, Any], team_id: str | None, chunk_size: int) -> Iterator[bytes]:
        self._require_key()  # eager: fail at call time, not at first iteration

        def generate() -> Iterator[bytes]:
            opened: tuple[httpx.Response, Iterator[bytes], bytes] | None = None
            for attempt in self._retrying():
                with attempt:
                    opened = self._open_stream(path, params, team_id, chunk_size)
            assert opened is not None
            response, chunks, first = opened
            received = len(first)
            try:
                if first:
                    yield first
                for chunk in chunks:
                    received += len(chunk)
                    yield chunk
            except httpx.TransportError as exc:
                raise perr.Unavailable(
                    f"GET {path} stream cut after {received} bytes ({exc.__class__.__name__}); download again",
                    sent=True,
                    endpoint=f"GET {path}",
                ) from None
            finally:
                response.close()

        return generate()

    @staticmethod
    def _download(chunks: Iterator[bytes], dest: IO[bytes] | str | os.PathLike[str]) -> int:
        if hasattr(dest, "write"):
            written = 0
            for chunk in chunks:
                dest.write(chunk)  # type: ignore[union-attr]
                written += len(chunk)
            return written
        target = Path(dest)  # type: ignore[arg-type]
        handle = tempfile.NamedTemporaryFile(
            mode="wb", dir=target.parent, prefix=f".{target.name}.", suffix=".partial", delete=False
        )
        partial = Path(handle.name)
        try:
            with handle:
                written = 0
                for chunk in chunks:
                    handle.write(chunk)
                    written += len(chunk)
            partial.replace(target)
        except BaseException:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        return written
