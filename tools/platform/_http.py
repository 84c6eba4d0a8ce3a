"""HTTP plumbing shared by :class:`~tools.platform.client.PlatformClient` and
:class:`~tools.platform.client.TracesClient`: headers, timeouts, the status -> typed
error mapping, ``Retry-After`` parsing and the tenacity retry policy of reads.

Sources: reference/prime-api.md §1.3 (platform client: headers, timeouts, error mapping)
and §6.1 (traces SDK: error envelope, ``Retry-After`` in seconds or HTTP-date, retry
statuses 429/502/503/504).

Typed errors are raised outside ``except`` blocks, so no httpx exception (whose request
carries the ``Authorization`` header) is attached as ``__cause__`` or ``__context__``;
messages are scrubbed of the API key and of request-body secrets by value.
"""

from __future__ import annotations

import logging
import random
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import tenacity
from pydantic import BaseModel, ValidationError

from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.bounds import Deadline, RetryPolicy
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


#: ``service_code`` of a 404 that did not come from the Model Factory API (wrong base URL).
NOT_THE_API = "not_the_api"


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
        generic = detail.strip().lower() in ("", "unauthorized", "not authenticated", "http 401")
        extra = "" if generic else f" ({detail})"
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
        if "json" not in response.headers.get("content-type", ""):
            # the platform and the traces host answer 404s with a JSON error body; a page or plain text
            # means the URL points elsewhere (a wrong PRIME_API_BASE_URL / PRIME_TRACES_URL)
            kwargs["service_code"] = NOT_THE_API
            origin = str(response.request.url.copy_with(path="/", query=None, fragment=None)).rstrip("/")
            message = (f"{where}: the server at {origin} did not answer like the Model Factory API "
                       "(a 404 page, not a JSON error body)")
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
    if isinstance(exc, perr.Unavailable):  # no answer, a 5xx worth retrying, or a 2xx read that arrived garbled
        return exc.status is None or exc.status in _RETRY_STATUSES or 200 <= exc.status < 300
    return False


def path_segment(value: str, what: str, *, allow_slash: bool = True) -> str:
    """``value`` encoded as one URL path segment; InvalidRequest (nothing sent) if unusable."""
    if not isinstance(value, str) or not value:
        raise perr.InvalidRequest(f"{what} must be a non-empty string")
    if not allow_slash and "/" in value:
        raise perr.InvalidRequest(f"{what} cannot contain '/' (the traces service cannot address it)")
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def clean_params(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
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


class BaseClient:
    """Shared transport, headers, error mapping and retries of both clients (see :mod:`tools.platform.client`)."""

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
        self._key_problem = settings.api_key_problem
        headers = dict(base_headers)
        if self._api_key and not self._key_problem:  # an unusable key is never put in a header
            headers["Authorization"] = f"Bearer {self._api_key}"
        headers["User-Agent"] = user_agent or default_user_agent()
        self._connect_timeout = min(connect_timeout, timeout)
        self._read_timeout = timeout
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=self._connect_timeout),
            follow_redirects=True,
            transport=transport,
        )
        self._server_date: tuple[datetime, float] | None = None
        self._retry_made: tuple[RetryPolicy, tenacity.Retrying] | None = None
        #: When set, every request ends by then (see :class:`Deadline`); the owner sets and clears it.
        self.deadline: Deadline | None = None

    def bound_requests(self, seconds: float) -> None:
        """Make every next request of this client end within ``seconds``: connect gets at most a
        quarter, and each read or write at most half of the rest (an answer held before its headers
        and again mid-body still ends in time), none longer than this client's own timeouts. For
        calls with an overall bound (``mf_wait_for_run``), set before each request to the time left.
        A body trickling in gaps shorter than the read timeout is not bounded here."""
        self._http.timeout = self._within(seconds)

    def _within(self, seconds: float) -> httpx.Timeout:
        """Timeouts that end a request within ``seconds`` (see :meth:`bound_requests`)."""
        seconds = max(0.01, seconds)
        connect = min(self._connect_timeout, seconds / 4)
        read = min(self._read_timeout, (seconds - connect) / 2)
        return httpx.Timeout(read, connect=connect, write=read, pool=read)

    def _late(self, endpoint: str, what: str, *, sent: bool) -> perr.Unavailable:
        """The error of a request the call's deadline cut (or left no time for)."""
        assert self.deadline is not None
        return perr.Unavailable(
            f"The {self._service} did not answer {endpoint} within {self.deadline.seconds:g} s, the time one tool "
            f"call waits ({what})", sent=sent, endpoint=endpoint)

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

    def server_now(self) -> datetime | None:
        """The server's current time (UTC): the ``Date`` header of the last response plus the
        time elapsed since, or ``None`` before any dated response.

        Age server timestamps (``lastUpdatedAt``, ``createdAt``) against this, not the local
        clock: robust against clock skew, and consistent with the emulator's fast clock.
        """
        if self._server_date is None:
            return None
        stamp, received = self._server_date
        return stamp + timedelta(seconds=time.monotonic() - received)

    def _note_date(self, response: httpx.Response) -> None:
        try:
            stamp = parsedate_to_datetime(response.headers.get("Date", ""))
        except (TypeError, ValueError, OverflowError, IndexError):
            return
        if stamp is not None:
            self._server_date = (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC), time.monotonic())

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
        if self._key_problem:
            raise perr.CredentialsMissing(
                f"No usable API key: {self._key_problem}. Set PRIME_API_KEY again to the key alone. Nothing was sent."
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
        """The retry loop of this client's current policy, made once per policy and shared by its threads
        (tenacity keeps each attempt's state per thread); the deadline is read at each decision."""
        policy = self.retry_policy
        if self._retry_made is not None and self._retry_made[0] is policy:
            return self._retry_made[1]

        def wait(state: tenacity.RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            retry_after = getattr(exc, "retry_after", None)
            if retry_after is not None:
                return min(float(retry_after), policy.retry_after_cap_seconds)
            delay = min(policy.backoff_max_seconds, policy.backoff_base_seconds * 2 ** (state.attempt_number - 1))
            return delay * (random.uniform(0.5, 1.5) if policy.jitter else 1.0)

        attempts = tenacity.stop_after_attempt(max(1, policy.max_attempts))

        def stop(state: tenacity.RetryCallState) -> bool:
            """The last attempt, or a wait past the deadline or the total wait cap."""
            late = self.deadline is not None and state.upcoming_sleep >= self.deadline.left()
            return attempts(state) or late or state.idle_for + state.upcoming_sleep > policy.total_wait_cap_seconds

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.debug("retrying %s after %.2fs: %s", self._service, state.upcoming_sleep, exc)

        retrying = tenacity.Retrying(
            stop=stop,
            wait=wait,
            retry=tenacity.retry_if_exception(_is_transient),
            sleep=policy.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        self._retry_made = (policy, retrying)
        return retrying

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
        kwargs: dict[str, Any] = {"params": clean_params(params), "headers": dict(headers or {})}
        if body is not None:
            kwargs["json"] = body
        if timeout is not None:
            kwargs["timeout"] = timeout
        deadline = self.deadline
        if deadline is not None and not creates:
            if deadline.left() <= 0:
                raise self._late(endpoint, "no time was left for it", sent=False)
            kwargs["timeout"] = self._within(deadline.left())
        failure: perr.PlatformError | None = None
        try:
            response = self._http.request(method, self.url(path), **kwargs)
        except httpx.TimeoutException as exc:
            failure = self._transport_error(exc, endpoint, creates=creates, secrets=secrets)
            if deadline is not None and not creates:
                failure = self._late(endpoint, _redact(type(exc).__name__, secrets),
                                     sent=not isinstance(exc, _NOT_SENT))
        except httpx.TransportError as exc:
            failure = self._transport_error(exc, endpoint, creates=creates, secrets=secrets)
        except httpx.InvalidURL as exc:
            failure = perr.InvalidRequest(f"invalid URL for {endpoint}: {exc}", endpoint=endpoint)
        if failure is not None:
            raise failure  # outside the except block: no httpx exception (or request) attached
        log.debug("%s %s -> %s", method, path, response.status_code)
        self._note_date(response)
        if not response.is_success:
            error = error_from_response(response, endpoint, secrets)
            if creates and response.status_code >= 500:
                raise perr.Ambiguous(
                    f"{error.message}; the create was sent and may have taken effect. Do not re-send: "
                    "reconcile by listing runs first.",
                    status=response.status_code,
                    endpoint=endpoint,
                )
            raise error
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
                )
            # Cut short or garbled on the way, as after a 5xx: a read is retried; a write that is not a create
            # (prepare, a volume transfer route, stop, pause, restart) was sent and its answer lost: the control
            # tools then read the run's state instead of trusting or repeating the request.
            raise perr.Unavailable(f"{message} (cut short or garbled)", sent=True, status=response.status_code,
                                   endpoint=endpoint)
        return data

    def _get(self, path: str, params: Mapping[str, Any] | None = None,
             headers: Mapping[str, str] | None = None) -> dict[str, Any]:
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
            )
        raise perr.InvalidRequest(message, endpoint=endpoint)

    def _parse_list(self, model: type[M], data: dict[str, Any], key: str, endpoint: str) -> list[M]:
        items = data.get(key) or []
        if not isinstance(items, list):
            raise perr.InvalidRequest(f"{endpoint}: '{key}' is not a list", endpoint=endpoint)
        return [self._parse(model, item, endpoint) for item in items]
