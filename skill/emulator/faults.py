"""Fault injection: rules matched by method and path, applied by an ASGI middleware.

What each kind does, its fields and defaults are listed in ``README.md`` (section Faults),
the one place they are documented. A rule matches a request by method (``*`` = any) and
path: a glob (``fnmatch``; ``*`` crosses ``/``) or, with a ``re:`` prefix, a regular
expression, against the path without the query; a path not starting with ``/api/``, ``/_``
or ``/dashboard`` is taken relative to ``/api/v1``. ``skip`` lets that many matching
requests through first; ``times`` is how many it then hits (``None``: every one, until
removed). The first matching rule wins; ``/_emulator/...`` is never faulted.
"""

from __future__ import annotations

import asyncio
import collections
import fnmatch
import itertools
import json
import logging
import re
import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.routing import Match

from .errors import ApiError

KINDS = ("status", "delay", "cut", "truncate", "drip", "stall", "commit_then_timeout", "cursor", "patch")
STATUSES = (400, 401, 402, 403, 404, 405, 409, 422, 429, 500, 502, 503, 504)
#: Modes per kind; the first is the default.
MODES = {
    "cut": ("close", "reset"),
    "commit_then_timeout": ("drop", "delay"),
    "cursor": ("repeat", "cycle", "empty"),
}
ADMIN_PREFIX = "/_emulator"
#: The platform's page-numbered list (``page``/``limit``/``total``); every other list uses cursors.
PAGED_RUNS_PATH = "/api/v1/rft/runs"
#: Beyond ``prime``'s 120 s create/read timeouts: what ``stall`` and ``commit_then_timeout``
#: (``mode="delay"``) hold an answer by default.
LONG_HOLD_SECONDS = 150.0

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
    """One fault (see ``README.md``, Faults, for each kind's fields).

    ``delay``, ``interval``: wall seconds. ``after_bytes``, ``chunk_bytes``: bytes of the
    response body. ``memo``: the cursors a ``cursor`` rule has seen (its state).
    """

    kind: str = "status"
    method: str = "*"
    path: str = "*"
    status: int | None = None
    retry_after: float | None = None
    delay: float = 0.0
    after_bytes: int | None = None
    chunk_bytes: int = 64
    interval: float = 0.25
    mode: str | None = None
    detail: Any = None
    patch: dict[str, Any] | None = None
    rows: str | None = None
    row: int = 0
    row_value: Any = None
    times: int | None = 1
    skip: int = 0
    id: int = 0
    hits: int = 0
    memo: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.kind == "status":
            if self.status not in STATUSES:
                raise ValueError(f"status must be one of {STATUSES}")
            if self.status == 429 and self.retry_after is None:
                self.retry_after = 1
        modes = MODES.get(self.kind)
        if modes:
            self.mode = self.mode or modes[0]
            if self.mode not in modes:
                raise ValueError(f"mode of a {self.kind} fault must be one of {', '.join(modes)}")
        elif self.mode is not None:
            raise ValueError(f"a {self.kind} fault takes no mode")
        if self.times is not None and self.times < 1:
            raise ValueError("times must be >= 1 (or None for every request)")
        if self.delay < 0 or self.skip < 0 or (self.after_bytes is not None and self.after_bytes < 0):
            raise ValueError("delay, after_bytes and skip must be >= 0")
        if self.kind == "patch" and self.patch is None and self.rows is None:
            raise ValueError("a patch fault needs patch (keys to set) or rows (the list whose row to change)")
        if self.row < 0:
            raise ValueError("row must be >= 0")
        if self.chunk_bytes < 1 or self.interval < 0:
            raise ValueError("chunk_bytes must be >= 1 and interval >= 0")
        if self.delay <= 0 and (self.kind == "stall" or self.kind == "commit_then_timeout" and self.mode == "delay"):
            self.delay = LONG_HOLD_SECONDS
        self.method = self.method.upper()
        if not (self.path.startswith(("/api/", "/_", "/dashboard", "re:")) or self.path == "*"):
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


def route_path(template: str) -> str:
    """The rule path (``re:``) matching exactly the requests of a route ``template`` such as
    ``/api/v1/rft/runs/{run_id}/logs`` (a ``{name}`` is one path segment), as :class:`Seen` names it."""
    parts = re.split(r"(\{[^/{}]+\})", template)
    return "re:" + "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts)


@dataclass(frozen=True)
class Seen:
    """One request the emulator received: ``method``, ``path`` (no query) and the ``route``
    template that served it (``/api/v1/rft/runs/{run_id}``; the path itself when no route did)."""

    method: str
    path: str
    route: str


#: Requests :attr:`FaultInjector.seen` keeps (the newest).
SEEN_LIMIT = 10_000


#: Fields a client may set (``POST /_emulator/faults``); the rest is the rule's own state.
SETTABLE = tuple(name for name in FaultRule.__dataclass_fields__ if name not in ("id", "hits", "memo"))


class FaultInjector:
    """The active fault rules (thread-safe): add from tests or the admin route, consumed by the app."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._ids = itertools.count(1)
        #: Every fault fired: ``(rule id, kind, method, path)``.
        self.fired: list[tuple[int, str, str, str]] = []
        #: The newest :data:`SEEN_LIMIT` requests received (admin routes aside), oldest first.
        self.seen: collections.deque[Seen] = collections.deque(maxlen=SEEN_LIMIT)
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)

    @property
    def in_flight(self) -> int:
        """Requests being answered now (a held ``delay`` answer counts until it is processed)."""
        with self._lock:
            return self._in_flight

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until no request is being answered (False after ``timeout`` wall seconds): after a
        client gave up on a held answer, the server may still process it."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def wait_fired(self, rule_id: int, timeout: float = 60.0) -> bool:
        """Block until the rule ``rule_id`` has fired at least once (False after ``timeout`` wall seconds): a
        test acts the moment the emulator holds the request it faulted, not after a guessed delay."""
        with self._idle:
            return self._idle.wait_for(lambda: any(fired[0] == rule_id for fired in self.fired), timeout)

    def _begin(self, seen: Seen | None) -> None:
        with self._lock:
            self._in_flight += 1
            if seen is not None:
                self.seen.append(seen)

    def _end(self) -> None:
        with self._idle:
            self._in_flight -= 1
            if not self._in_flight:
                self._idle.notify_all()

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
        """Hold the whole answer (headers included) ``seconds`` of wall time, then answer normally:
        beyond the client's read timeout, a read timeout before the first byte."""
        return self.add(kind="delay", delay=seconds, method=method, path=path, times=times, skip=skip)

    def cut(self, after_bytes: int, method: str = "*", path: str = "*", *, times: int | None = 1,
            skip: int = 0, mode: str = "close") -> FaultRule:
        """Send the headers (full Content-Length) and ``after_bytes`` body bytes, then close the
        connection (``mode="close"``) or reset it (``"reset"``, a TCP RST)."""
        return self.add(kind="cut", after_bytes=after_bytes, method=method, path=path, times=times, skip=skip,
                        mode=mode)

    def truncate(self, method: str = "*", path: str = "*", *, after_bytes: int | None = None,
                 times: int | None = 1, skip: int = 0) -> FaultRule:
        """Answer the real status and headers with the body cut to ``after_bytes`` (default: half)
        and a Content-Length that matches the cut body: a complete answer of invalid JSON."""
        return self.add(kind="truncate", after_bytes=after_bytes, method=method, path=path, times=times, skip=skip)

    def drip(self, method: str = "*", path: str = "*", *, chunk_bytes: int = 64, interval: float = 0.25,
             times: int | None = 1, skip: int = 0) -> FaultRule:
        """Send the headers at once, then the body ``chunk_bytes`` at a time, ``interval`` wall
        seconds apart (each gap below the client's read timeout; the whole answer slow)."""
        return self.add(kind="drip", chunk_bytes=chunk_bytes, interval=interval, method=method, path=path,
                        times=times, skip=skip)

    def stall(self, seconds: float, method: str = "*", path: str = "*", *, after_bytes: int = 0,
              times: int | None = 1, skip: int = 0) -> FaultRule:
        """Send the headers and ``after_bytes`` body bytes, then hold the rest ``seconds`` of wall
        time: a read timeout in the middle of the body."""
        return self.add(kind="stall", delay=seconds, after_bytes=after_bytes, method=method, path=path,
                        times=times, skip=skip)

    def commit_then_timeout(self, method: str = "POST", path: str = "/training/runs", *, mode: str = "drop",
                            delay: float = 0.0, times: int | None = 1) -> FaultRule:
        """Process the request, then drop the connection (or hold the answer ``delay`` s)."""
        return self.add(kind="commit_then_timeout", method=method, path=path, mode=mode, delay=delay, times=times)

    def patch(self, method: str = "GET", path: str = "*", *, patch: dict[str, Any] | None = None,
              rows: str | None = None, row: int = 0, row_value: Any = None, times: int | None = None,
              skip: int = 0) -> FaultRule:
        """Answer as the platform would, with the JSON changed: ``patch`` sets top-level keys
        (``{"total": 100000}``); ``rows``/``row``/``row_value`` change one row of a list (an object
        is merged into it, ``{"status": None}``; anything else replaces it). 2xx JSON objects only."""
        return self.add(kind="patch", method=method, path=path, patch=patch, rows=rows, row=row, row_value=row_value,
                        times=times, skip=skip)

    def cursor(self, mode: str, method: str = "GET", path: str = "/traces", *, times: int | None = None,
               skip: int = 0) -> FaultRule:
        """Misbehave on paging: ``repeat`` the same next cursor, ``cycle`` A -> B -> A, or answer an
        ``empty`` cursor while more remain (on ``/rft/runs``: the same page again, pages 1, 2, 1,
        2, or an empty page). ``times`` counts list requests, the first page included."""
        return self.add(kind="cursor", mode=mode, method=method, path=path, times=times, skip=skip)

    def remove(self, rule_id: int) -> bool:
        """Remove one rule; False if it was not there."""
        with self._lock:
            before = len(self._rules)
            self._rules = [r for r in self._rules if r.id != rule_id]
            return len(self._rules) != before

    def clear(self) -> None:
        """Remove every rule and forget what fired and what was seen."""
        with self._lock:
            self._rules.clear()
            self.fired.clear()
            self.seen.clear()

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
                self._idle.notify_all()
                return rule
        return None


# -- the middleware ----------------------------------------------------------------------------

class _Dropped(Exception):
    """Raised to abandon a response once its connection is gone."""


class _DropFilter(logging.Filter):
    """Keeps uvicorn quiet about answers a fault abandoned on purpose, including one still held
    (``delay``, ``stall``, ``drip``) when the server shuts down."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, _Dropped | asyncio.CancelledError):
            return False
        return "timeout graceful shutdown exceeded" not in record.getMessage()


logging.getLogger("uvicorn.error").addFilter(_DropFilter())

Message = dict[str, Any]


def _drop_connection(send: Any, *, reset: bool = False) -> bool:
    """Close the client connection under a uvicorn response cycle (with a TCP RST when
    ``reset``); False if the transport is not reachable."""
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if cycle is None or transport is None:
        return False
    cycle.disconnected = True  # uvicorn then neither logs nor answers 500 for us
    sock = transport.get_extra_info("socket") if reset else None
    if sock is not None:
        try:  # linger 0: close() sends RST instead of FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        transport.abort()
    else:
        transport.close()
    return True


async def _received(receive: Any) -> list[Message]:
    """The request's messages, read to the end of its body."""
    messages = [await receive()]
    while messages[-1].get("type") == "http.request" and messages[-1].get("more_body"):
        messages.append(await receive())
    return messages


def _replay(messages: list[Message], receive: Any) -> Any:
    """A ``receive`` giving ``messages`` first, then what the connection gives (a disconnect)."""
    pending = iter(messages)

    async def replay() -> Message:
        return next(pending, None) or await receive()

    return replay


def _with_length(start: Message, length: int) -> Message:
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
    return {**start, "headers": [*headers, (b"content-length", str(length).encode())]}


def _body_of(messages: list[Message]) -> bytes:
    return b"".join(m.get("body", b"") for m in messages[1:])


class FaultMiddleware:
    """ASGI middleware applying a :class:`FaultInjector`'s rules to HTTP requests, and noting each
    request (:attr:`FaultInjector.seen`, with the template of the ``routes`` entry serving it) and
    the requests in flight."""

    def __init__(self, app: Any, injector: FaultInjector, routes: Sequence[Any] = ()) -> None:
        self.app = app
        self.injector = injector
        self.routes = list(routes)

    def _route(self, scope: dict[str, Any]) -> str:
        for route in self.routes:
            if route.matches(scope)[0] is Match.FULL:
                return getattr(route, "path", scope["path"])
        return scope["path"]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        admin = scope["path"].startswith(ADMIN_PREFIX)
        self.injector._begin(None if admin else Seen(scope["method"], scope["path"], self._route(scope)))
        try:
            await self._faulted(scope, receive, send)
        finally:
            self.injector._end()

    async def _faulted(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        rule = self.injector.take(scope["method"], scope["path"])
        if rule is None:
            await self.app(scope, receive, send)
            return
        if rule.kind == "delay":  # the request is received whole first: a slow server, not a slow client
            received = await _received(receive)
            await asyncio.sleep(rule.delay)
            await self.app(scope, _replay(received, receive), send)
            return
        try:
            await getattr(self, "_" + rule.kind)(rule, scope, receive, send)
        except _Dropped:
            pass

    async def _status(self, rule: FaultRule, scope: dict[str, Any], receive: Any, send: Any) -> None:
        status = rule.status or 500
        error = ApiError(status, rule.detail if rule.detail is not None else _DETAILS.get(status, "Injected fault"))
        body = json.dumps(error.body(scope["path"])).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if rule.retry_after is not None:
            headers.append((b"retry-after", str(int(rule.retry_after) if float(rule.retry_after).is_integer()
                                                else rule.retry_after).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _stream(self, scope: dict[str, Any], receive: Any, send: Any, on_body: Any) -> None:
        """Run the app, passing its start message through and each body message to
        ``on_body(body, last)``; the app is abandoned (``_Dropped``) once that drops the connection."""

        async def relay(message: Message) -> None:
            if message["type"] == "http.response.start":
                await send(message)
            elif message["type"] == "http.response.body":
                await on_body(message.get("body", b""), not message.get("more_body", False))

        await self.app(scope, receive, relay)

    async def _cut(self, rule: FaultRule, scope: dict[str, Any], receive: Any, send: Any) -> None:
        limit, sent, pending = rule.after_bytes or 0, 0, b""

        async def on_body(body: bytes, last: bool) -> None:
            # The last byte seen is held back, so that a body no longer than after_bytes still
            # arrives incomplete: the cut always happens.
            nonlocal sent, pending
            data, room = pending + body, limit - sent
            if not last and len(data) <= room:
                out, pending = data[:-1], data[-1:]
                if out:
                    sent += len(out)
                    await send({"type": "http.response.body", "body": out, "more_body": True})
                return
            part = data[:min(room, len(data) - 1)] if last else data[:room]
            if part:
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0.05)  # let the partial body reach the socket
            _drop_connection(send, reset=rule.mode == "reset")
            raise _Dropped("connection cut (injected fault)")

        await self._stream(scope, receive, send, on_body)

    async def _truncate(self, rule: FaultRule, scope: dict[str, Any], receive: Any, send: Any) -> None:
        messages = await self._collect(scope, receive)
        body = _body_of(messages)
        keep = len(body) // 2 if rule.after_bytes is None else rule.after_bytes
        keep = min(keep, max(0, len(body) - 1))
        await send(_with_length(messages[0], keep))
        await send({"type": "http.response.body", "body": body[:keep]})

    async def _drip(self, rule: FaultRule, scope: dict[str, Any], receive: Any, send: Any) -> None:
        first = True

        async def on_body(body: bytes, last: bool) -> None:
            nonlocal first
            for at in range(0, len(body), rule.chunk_bytes):
                if not first:
                    await asyncio.sleep(rule.interval)
                first = False
                await send({"type": "http.response.body", "body": body[at:at + rule.chunk_bytes], "more_body": True})
            if last:
                await send({"type": "http.response.body", "body": b""})

        await self._stream(scope, receive, send, on_body)

    async def _stall(self, rule: FaultRule, scope: dict[str, Any], receive: Any, send: Any) -> None:
        sent, held = 0, False

        async def on_body(body: bytes, last: bool) -> None:
            nonlocal sent, held
            if not held:
                room = (rule.after_bytes or 0) - sent
                if len(body) < room and not last:
                    sent += len(body)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                    return
                head, body = body[:max(0, room)], body[max(0, room):]
                if head:
                    await send({"type": "http.response.body", "body": head, "more_body": True})
                held = True
                await asyncio.sleep(rule.delay)
            await send({"type": "http.response.body", "body": body, "more_body": not last})

        await self._stream(scope, receive, send, on_body)

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

    async def _cursor(self, rule: FaultRule, scope: dict[str, Any], receive: Any, send: Any) -> None:
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        paged = scope["path"].rstrip("/") == PAGED_RUNS_PATH
        asked_page = query.get("page", "1")
        if paged and asked_page.isdigit() and int(asked_page) >= 1:
            served = {"repeat": 1, "cycle": (int(asked_page) - 1) % 2 + 1}.get(rule.mode or "", int(asked_page))
            scope = {**scope, "query_string": urlencode({**query, "page": str(served)}).encode()}
        messages = await self._collect(scope, receive)
        start, body = messages[0], _body_of(messages)
        try:
            doc = json.loads(body) if start.get("status") == 200 else None
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            _patched(rule, doc)
            if paged and "runs" in doc:
                doc["page"] = int(asked_page) if asked_page.isdigit() else doc.get("page")
                if rule.mode == "empty":
                    doc["runs"] = []
            elif "next_cursor" in doc:
                doc["next_cursor"] = _misbehave(rule, query.get("cursor"), doc["next_cursor"])
            body = json.dumps(doc, separators=(",", ":")).encode()
        await send(_with_length(start, len(body)))
        await send({"type": "http.response.body", "body": body})

    async def _patch(self, rule: FaultRule, scope: dict[str, Any], receive: Any, send: Any) -> None:
        messages = await self._collect(scope, receive)
        start, body = messages[0], _body_of(messages)
        try:
            doc = json.loads(body) if 200 <= start.get("status", 0) < 300 else None
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            _patched(rule, doc)
            body = json.dumps(doc, separators=(",", ":")).encode()
        await send(_with_length(start, len(body)))
        await send({"type": "http.response.body", "body": body})

    async def _collect(self, scope: dict[str, Any], receive: Any) -> list[Message]:
        """Run the app to completion, keeping its response messages instead of sending them."""
        messages: list[Message] = []

        async def keep(message: Message) -> None:
            messages.append(message)

        await self.app(scope, receive, keep)
        return messages


def _patched(rule: FaultRule, doc: dict[str, Any]) -> None:
    """Apply a rule's ``patch`` (top-level keys set, ``null`` included) and ``row_value`` (merged into
    row ``row`` of the list ``rows`` when both are objects, else put in its place; merged into ``rows``
    when that names an object) to ``doc``."""
    doc.update(rule.patch or {})
    rows = doc.get(rule.rows) if rule.rows else None
    if isinstance(rows, dict) and isinstance(rule.row_value, dict):  # an envelope such as {"run": {...}}
        rows.update(rule.row_value)
    elif isinstance(rows, list) and rule.row < len(rows):
        old = rows[rule.row]
        rows[rule.row] = {**old, **rule.row_value} if isinstance(old, dict) and isinstance(rule.row_value, dict) \
            else rule.row_value


def _misbehave(rule: FaultRule, asked: str | None, natural: str | None) -> str | None:
    """The ``next_cursor`` a ``cursor`` rule answers instead of ``natural`` (None: the last page).

    ``repeat``: once it has answered a next cursor (A), A again and again, to the end of time.
    ``cycle``: A, then the next one (B), then A again: asked A answers B, asked B answers A.
    ``empty``: "" where more remain (the last page keeps its null).
    """
    if rule.mode == "empty":
        return "" if natural else natural
    wanted = 1 if rule.mode == "repeat" else 2
    if len(rule.memo) < wanted:
        if natural and natural not in rule.memo:
            rule.memo.append(natural)
        return natural
    if rule.mode == "repeat":
        return rule.memo[0]
    return rule.memo[1] if asked == rule.memo[0] else rule.memo[0]
