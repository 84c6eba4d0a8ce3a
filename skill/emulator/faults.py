"""Fault injection: rules matched by method and path, applied by an ASGI middleware.

Kinds of fault (:data:`KINDS`):

- ``status``: answer ``status`` at once, in the host's error shape (platform ``{"detail"}``,
  traces ``{"error": {code, message}}``), with ``Retry-After: retry_after`` when given
  (429 gets 1 s by default). The request is not processed.
- ``delay``: wait ``delay`` wall seconds, then process and answer normally.
- ``cut``: process the request, send the headers and the first ``after_bytes`` bytes of the
  body, then drop the connection.
- ``commit_then_timeout``: process the request (a create *does* create the run), then either
  hold the answer for ``delay`` wall seconds (``mode="delay"``, beyond the client's timeout)
  or drop the connection without answering (``mode="drop"``, the default): the ambiguous
  launch.

A rule matches when the method matches (``*`` = any) and the path matches ``path``: a glob
(``fnmatch``; ``*`` crosses ``/``) or, with a ``re:`` prefix, a regular expression. A path
that does not start with ``/api/`` or ``/_`` is taken relative to ``/api/v1`` (so
``/training/runs`` means ``/api/v1/training/runs``). The query string is not matched.
``skip`` lets that many matching requests through first; ``times`` is how many requests the
rule then hits (``None`` = every one, until removed). Admin routes (``/_emulator/...``) are
never faulted. The first matching rule wins.
"""

from __future__ import annotations

import asyncio
import fnmatch
import itertools
import json
import logging
import re
import threading
from dataclasses import asdict, dataclass
from typing import Any

from .errors import ApiError

KINDS = ("status", "delay", "cut", "commit_then_timeout")
STATUSES = (400, 401, 402, 403, 404, 405, 409, 422, 429, 500, 502, 503, 504)
ADMIN_PREFIX = "/_emulator"

_DETAILS = {
    400: "Bad request (injected fault)",
    401: "Invalid or missing API key (injected fault)",
    402: "Payment required (injected fault)",
    403: "Forbidden (injected fault)",
    404: "Not found (injected fault)",
    405: "Method Not Allowed",
    409: "Conflict (injected fault)",
    422: [{"loc": ["body"], "msg": "Injected validation failure", "type": "value_error"}],
    429: "Rate limit exceeded (injected fault)",
    500: "Internal server error (injected fault)",
    502: "Bad gateway (injected fault)",
    503: "Service unavailable (injected fault)",
    504: "Gateway timeout (injected fault)",
}


@dataclass
class FaultRule:
    """One fault. See the module docstring for the fields' meaning."""

    kind: str = "status"
    method: str = "*"
    path: str = "*"
    status: int | None = None
    retry_after: float | None = None
    delay: float = 0.0
    after_bytes: int = 0
    mode: str = "drop"
    detail: Any = None
    times: int | None = 1
    skip: int = 0
    id: int = 0
    hits: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.kind == "status":
            if self.status not in STATUSES:
                raise ValueError(f"status must be one of {STATUSES}")
            if self.status == 429 and self.retry_after is None:
                self.retry_after = 1
        if self.kind == "commit_then_timeout" and self.mode not in ("drop", "delay"):
            raise ValueError("mode must be 'drop' or 'delay'")
        if self.kind == "commit_then_timeout" and self.mode == "delay" and self.delay <= 0:
            self.delay = 150.0  # beyond prime's 120 s create timeout
        if self.times is not None and self.times < 1:
            raise ValueError("times must be >= 1 (or None for every request)")
        if self.delay < 0 or self.after_bytes < 0 or self.skip < 0:
            raise ValueError("delay, after_bytes and skip must be >= 0")
        self.method = self.method.upper()
        if not (self.path.startswith(("/api/", "/_", "re:")) or self.path == "*"):
            self.path = "/api/v1" + (self.path if self.path.startswith("/") else "/" + self.path)
        if self.path.startswith("re:"):
            re.compile(self.path[3:])

    def matches(self, method: str, path: str) -> bool:
        """Whether a request is this rule's (ignoring its remaining count)."""
        if self.method not in ("*", method.upper()):
            return False
        if self.path.startswith("re:"):
            return re.fullmatch(self.path[3:], path) is not None
        return fnmatch.fnmatchcase(path, self.path)

    def to_json(self) -> dict[str, Any]:
        """The rule as JSON (what ``GET /_emulator/faults`` lists)."""
        return asdict(self)


class FaultInjector:
    """The active fault rules (thread-safe): add from tests or the admin route, consumed by the app."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._ids = itertools.count(1)
        #: Every fault fired: ``(rule id, kind, method, path)``.
        self.fired: list[tuple[int, str, str, str]] = []

    def add(self, rule: FaultRule | None = None, **fields: Any) -> FaultRule:
        """Add a rule (a :class:`FaultRule` or its fields); returns it, with its ``id``."""
        rule = rule or FaultRule(**fields)
        with self._lock:
            rule.id = next(self._ids)
            self._rules.append(rule)
        return rule

    def status(self, status: int, method: str = "*", path: str = "*", *, times: int | None = 1,
               retry_after: float | None = None, detail: Any = None, skip: int = 0) -> FaultRule:
        """Answer ``status`` (401/402/403/404/409/422/429/500/502/503...)."""
        return self.add(kind="status", status=status, method=method, path=path, times=times,
                        retry_after=retry_after, detail=detail, skip=skip)

    def delay(self, seconds: float, method: str = "*", path: str = "*", *, times: int | None = 1,
              skip: int = 0) -> FaultRule:
        """Answer normally after ``seconds`` of wall time."""
        return self.add(kind="delay", delay=seconds, method=method, path=path, times=times, skip=skip)

    def cut(self, after_bytes: int, method: str = "*", path: str = "*", *, times: int | None = 1,
            skip: int = 0) -> FaultRule:
        """Drop the connection after ``after_bytes`` bytes of the response body."""
        return self.add(kind="cut", after_bytes=after_bytes, method=method, path=path, times=times, skip=skip)

    def commit_then_timeout(self, method: str = "POST", path: str = "/training/runs", *, mode: str = "drop",
                            delay: float = 0.0, times: int | None = 1) -> FaultRule:
        """Process the request, then drop the connection (or hold the answer ``delay`` s)."""
        return self.add(kind="commit_then_timeout", method=method, path=path, mode=mode, delay=delay, times=times)

    def remove(self, rule_id: int) -> bool:
        """Remove one rule; False if it was not there."""
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if r.id != rule_id]
            return len(self._rules) != before

    def clear(self) -> None:
        """Remove every rule and forget what fired."""
        with self._lock:
            self._rules.clear()
            self.fired.clear()

    def rules(self) -> list[FaultRule]:
        """The active rules, in match order."""
        with self._lock:
            return list(self._rules)

    def take(self, method: str, path: str) -> FaultRule | None:
        """The rule that fires for this request (counting it), or None."""
        if path.startswith(ADMIN_PREFIX):
            return None
        with self._lock:
            for rule in self._rules:
                if not rule.matches(method, path):
                    continue
                if rule.skip:
                    rule.skip -= 1
                    continue
                rule.hits += 1
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times == 0:
                        self._rules.remove(rule)
                self.fired.append((rule.id, rule.kind, method, path))
                return rule
        return None


# -- the middleware ----------------------------------------------------------------------------

class _Dropped(Exception):
    """Raised to abandon a response when the server's transport cannot be reached."""


class _DropFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _Dropped)


logging.getLogger("uvicorn.error").addFilter(_DropFilter())


def _drop_connection(send: Any) -> bool:
    """Close the client connection under a uvicorn response cycle; False if not reachable."""
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None:
        return False
    cycle.disconnected = True  # uvicorn then neither logs nor answers 500 for us
    transport.close()
    return True


class FaultMiddleware:
    """ASGI middleware applying a :class:`FaultInjector`'s rules to HTTP requests."""

    def __init__(self, app: Any, injector: FaultInjector) -> None:
        self.app = app
        self.injector = injector

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rule = self.injector.take(scope["method"], scope["path"])
        if rule is None:
            await self.app(scope, receive, send)
        elif rule.kind == "status":
            await self._status(rule, scope, send)
        elif rule.kind == "delay":
            await asyncio.sleep(rule.delay)
            await self.app(scope, receive, send)
        elif rule.kind == "cut":
            await self._cut(rule, scope, receive, send)
        else:
            await self._commit_then_timeout(rule, scope, receive, send)

    async def _status(self, rule: FaultRule, scope: dict[str, Any], send: Any) -> None:
        status = rule.status or 500
        error = ApiError(status, rule.detail if rule.detail is not None else _DETAILS.get(status, "Injected fault"))
        body = json.dumps(error.body(scope["path"])).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if rule.retry_after is not None:
            headers.append((b"retry-after", str(int(rule.retry_after) if float(rule.retry_after).is_integer()
                                                else rule.retry_after).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _cut(self, rule: FaultRule, scope: dict[str, Any], receive: Any, send: Any) -> None:
        messages = await self._collect(scope, receive)
        start, body = messages[0], b"".join(m.get("body", b"") for m in messages[1:])
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body[:rule.after_bytes], "more_body": True})
        await asyncio.sleep(0.05)  # let the partial body reach the socket
        if not _drop_connection(send):
            raise _Dropped("connection cut (injected fault)")

    async def _commit_then_timeout(self, rule: FaultRule, scope: dict[str, Any], receive: Any, send: Any) -> None:
        messages = await self._collect(scope, receive)
        if rule.mode == "delay":
            await asyncio.sleep(rule.delay)
            for message in messages:
                await send(message)
            return
        if not _drop_connection(send):
            await send({**messages[0], "headers": [(b"content-length", b"1")]})
            raise _Dropped("connection dropped (injected fault)")

    async def _collect(self, scope: dict[str, Any], receive: Any) -> list[dict[str, Any]]:
        """Run the app to completion, keeping its response messages instead of sending them."""
        messages: list[dict[str, Any]] = []

        async def keep(message: dict[str, Any]) -> None:
            messages.append(message)

        await self.app(scope, receive, keep)
        return messages
