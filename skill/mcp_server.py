"""``model-factory mcp``: every registry tool over MCP on stdio, with the official ``mcp`` SDK.

What a client gets:

- ``tools/list``: :func:`skill.registry.mcp_tools` (name, title, description, inputSchema,
  outputSchema, annotations).
- ``tools/call``: :func:`skill.registry.call_tool` in a worker thread. The result model
  dump is ``structuredContent``; the text block carries a one-line summary and the same
  JSON without its null fields (for clients that ignore ``structuredContent``, and most hosts
  show the model only the text: a null says nothing a reader needs, so the text leaves it out).
  A :class:`~tools.errors.ToolError` is an ``isError: true`` result, with structured content too. A tool with an
  ``image_field`` (``mf_plot_metrics``) also returns its PNG as an image block.
- Progress: when the request carries a ``progressToken``, ``ctx.report(done, total,
  message)`` calls from the tool become ``notifications/progress``.
- Confirmation gate: when the client declared the ``elicitation`` capability, the tool
  context gets an approver that shows the plan summary through an elicitation form and
  asks for an explicit yes (never for a secret). Without it, ``mf_dispatch_run`` returns
  ``confirmation_required`` and the user approves with ``model-factory approve PLAN_ID``.
- stdout carries protocol messages only: while serving, file descriptor 1 points at
  stderr (stray prints land there), logs go to stderr, and no traceback reaches the client.

Fast start. Importing the SDK takes about a second on a small machine, longer than a
client should wait for ``tools/list``. So :func:`main` answers ``initialize``,
``tools/list`` and ``ping`` itself, from the SDK's own earlier answers cached on disk,
while the SDK imports in a background thread; then it hands the connection over (the
``initialize`` request is replayed to the SDK under a private id and its duplicate answer
dropped). The cache (``$XDG_CACHE_HOME/model-factory/``) is keyed by a digest of the tool
sources and the installed SDK/pydantic/Python versions, so a changed tool never gets a
stale list; with no usable entry (first start, or ``MODEL_FACTORY_MCP_FAST_START=0``)
the SDK answers everything and its answers are cached for the next start. Only the
standard library is imported before the hand-over.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

SERVER_NAME = "model-factory"
INSTRUCTIONS = (
    "Train models on Prime Intellect's hosted Model Factory. Start with mf_preflight. "
    "Launching is two steps: mf_plan_run (free; show its summary and cost to the user), then "
    "mf_dispatch_run, which needs the user's approval (asked here when the client supports "
    "elicitation, else the user runs `model-factory approve PLAN_ID` in a terminal). Never "
    "retry a dispatch whose outcome was ambiguous; reconcile with mf_list_launches. Secrets "
    "are passed by NAME only (WANDB_API_KEY, HF_TOKEN), never by value."
)
FAST_START_ENV = "MODEL_FACTORY_MCP_FAST_START"
CACHE_DIR_ENV = "MODEL_FACTORY_CACHE_DIR"
#: Id under which the already-answered ``initialize`` is replayed to the SDK.
REPLAY_ID = "model-factory-replayed-initialize"
#: How long a person has to answer an approval form, in seconds.
ELICITATION_TIMEOUT_SECONDS = 600.0
#: Largest PNG returned as an image block, in bytes.
MAX_IMAGE_BYTES = 4_000_000

_EOF = object()
_READY = object()


# -- the SDK server -----------------------------------------------------------------------


def _summary_line(name: str, payload: dict[str, Any], error: bool) -> str:
    """One line for people and clients that only read text."""
    if error:  # message and fix follow in the JSON
        return f"{name} failed [{payload.get('code')}]"
    facts = [f"{k}={v}" for k, v in payload.items() if isinstance(v, (str, int, float, bool)) and len(str(v)) <= 40][:3]
    return f"{name} ok" + (": " + ", ".join(facts) if facts else "")


def without_nulls(value: Any) -> Any:
    """``value`` with every ``null`` member of its objects left out (lists keep their items)."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def result_content(name: str, spec: Any, result: Any) -> Any:
    """The MCP ``CallToolResult`` for a registry result of tool ``name`` (see module docstring)."""
    import base64

    import mcp_types as types

    from skill.registry import is_error

    error = is_error(result)
    payload = result.model_dump(mode="json", by_alias=True)
    text = _summary_line(name, payload, error) + "\n" + json.dumps(without_nulls(payload), separators=(",", ":"))
    content: list[Any] = [types.TextContent(text=text)]
    path = payload.get(spec.image_field) if spec and spec.image_field and not error else None
    if isinstance(path, str) and path.lower().endswith(".png"):
        try:
            data = Path(path).read_bytes()
        except OSError:
            data = b""
        if data.startswith(b"\x89PNG") and len(data) <= MAX_IMAGE_BYTES:
            content.append(types.ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type="image/png"))
    return types.CallToolResult(content=content, structured_content=payload, is_error=error)


def _approval_message(request: Any) -> str:
    """The form's text: what is approved, the plan summary, and what answering means."""
    summary = getattr(request, "summary", None) or str(request)
    plan_id = getattr(request, "plan_id", "?")
    if getattr(request, "action", "launch") == "stop":
        head, money = f"Approve stopping a run (plan {plan_id})? Stopping cannot be undone.", ""
    else:
        high = getattr(request, "usd_high", None)
        head = f"Approve launching plan {plan_id} on Model Factory?"
        money = (f" It may cost up to about ${high:,.2f}." if isinstance(high, (int, float))
                 else " Its cost could not be estimated.") + " This spends money on the paying account."
    return (f"{head}\n\n{summary}\n\nTick 'approve' and submit to approve exactly this plan; decline to "
            f"refuse.{money} Nothing secret is asked here.")


#: The approval form: one explicit yes/no, never anything secret.
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Tick to approve exactly this plan; leave unticked to refuse.",
            "default": False,
        }
    },
    "required": ["approve"],
}


class NeedsApproval(BaseException):
    """Raised by the approver on a connection without server-to-client requests (protocol
    2026-07-28): the call ends as an ``input_required`` round carrying the approval form.

    A ``BaseException`` so that no tool layer turns it into an error; only
    :func:`build_server`'s call handler catches it. Tools ask for approval before they write
    anything (the gate precedes the ledger claim), so ending the call there is safe.
    """

    def __init__(self, request: Any) -> None:
        super().__init__("approval needed")
        self.request = request


class Approvals:
    """Approval forms asked in an ``input_required`` round and not yet answered.

    ``request_state`` is a random id the client echoes on its retry; the answer counts only
    for the same action and plan hash, once, within :data:`ELICITATION_TIMEOUT_SECONDS`.
    """

    def __init__(self) -> None:
        self._pending: dict[str, tuple[float, str, str]] = {}
        self._lock = threading.Lock()

    def ask(self, request: Any) -> str:
        """Remember a form asked for ``request`` (its action and plan hash); returns the
        ``request_state`` the client must echo. Expired entries are dropped here."""
        import secrets

        state = secrets.token_urlsafe(24)
        with self._lock:
            now = time.monotonic()
            self._pending = {k: v for k, v in self._pending.items() if v[0] > now}
            self._pending[state] = (now + ELICITATION_TIMEOUT_SECONDS, str(getattr(request, "action", "")),
                                    str(getattr(request, "plan_hash", "")))
        return state

    def answer(self, state: str | None, responses: Any) -> tuple[str, str, bool] | None:
        """(action, plan_hash, approved) for a retry that answers a pending form, else None."""
        with self._lock:
            pending = self._pending.pop(state, None) if state else None
        if pending is None or pending[0] < time.monotonic():
            return None
        response = (responses or {}).get("approval")
        approved = (getattr(response, "action", None) == "accept"
                    and (getattr(response, "content", None) or {}).get("approve") is True)
        return pending[1], pending[2], approved


def _elicitation_declared(session: Any) -> bool:
    caps = session.client_capabilities
    return caps is not None and caps.elicitation is not None


def _tool_context(request_ctx: Any, params: Any, approvals: Approvals, make_context: Callable[[], Any]) -> Any:
    """A fresh tools Context for one call (``make_context()``), with progress and approval wired
    to the client."""
    import logging

    import anyio.from_thread

    log = logging.getLogger("model_factory.mcp")
    session = request_ctx.session
    tool_ctx = make_context()
    meta = request_ctx.meta or {}
    if meta.get("progress_token", meta.get("progressToken")) is not None:
        last = [float("-inf")]

        def progress(done: float, total: float | None, message: str) -> None:
            if done <= last[0]:  # the protocol wants strictly increasing progress
                return
            last[0] = done
            try:
                anyio.from_thread.run(session.report_progress, float(done),
                                      None if total is None else float(total), message)
            except Exception:  # noqa: BLE001 - a lost notification must not fail the tool
                log.debug("progress notification failed", exc_info=True)

        tool_ctx.progress = progress
    if not _elicitation_declared(session):
        return tool_ctx
    if session.can_send_request:  # handshake era: ask now, from the worker thread

        async def ask(request: Any) -> bool:
            with anyio.fail_after(ELICITATION_TIMEOUT_SECONDS):
                answer = await session.elicit_form(_approval_message(request), APPROVAL_SCHEMA,
                                                   related_request_id=request_ctx.request_id)
            return answer.action == "accept" and (answer.content or {}).get("approve") is True

        def approver(request: Any) -> bool:
            return anyio.from_thread.run(ask, request)

    else:  # 2026-07-28: answer a form this call's retry carries, else end the call with one
        answered = approvals.answer(getattr(params, "request_state", None), getattr(params, "input_responses", None))

        def approver(request: Any) -> bool:
            if answered is None:
                raise NeedsApproval(request)
            action, plan_hash, approved = answered
            return approved and action == request.action and plan_hash == request.plan_hash

    approver.channel = "mcp_elicitation"  # type: ignore[attr-defined] - for the ledger's audit record
    tool_ctx.approver = approver
    return tool_ctx


def build_server(make_context: Callable[[], Any] | None = None) -> Any:
    """The low-level SDK server over the registry (imports the SDK and every tool module).

    ``make_context``: builds the tools Context of each call (default: one over the process
    environment); in-process harnesses pass one with their own env, folders, clock and sleep."""
    import logging

    import anyio.to_thread
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from skill import registry
    from tools.core import Context

    log = logging.getLogger("model_factory.mcp")
    make_context = make_context or Context.from_environment
    listing = types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in registry.mcp_tools()])
    approvals = Approvals()

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return listing

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        try:
            spec = registry.get(params.name)
        except KeyError:
            spec = None
        try:
            tool_ctx = _tool_context(ctx, params, approvals, make_context)
            try:
                result = await anyio.to_thread.run_sync(registry.call_tool, params.name, params.arguments or {},
                                                        tool_ctx, abandon_on_cancel=True)
            finally:
                tool_ctx.close()
            return result_content(params.name, spec, result)
        except NeedsApproval as needed:
            form = types.ElicitRequest(params=types.ElicitRequestFormParams(
                message=_approval_message(needed.request), requested_schema=APPROVAL_SCHEMA))
            return types.InputRequiredResult(input_requests={"approval": form},
                                             request_state=approvals.ask(needed.request))
        except Exception as exc:  # noqa: BLE001 - never a traceback to the client
            log.exception("tools/call %s failed", params.name)
            from tools.errors import ToolError

            return result_content(params.name, spec, ToolError(
                code="internal_error", message=f"{params.name} failed unexpectedly: {type(exc).__name__}",
                fix="This is a bug in model-factory-skill; retry once, then report it with the server's stderr log."))

    return Server(SERVER_NAME, version=_version(), title="Model Factory", instructions=INSTRUCTIONS,
                  on_list_tools=on_list_tools, on_call_tool=on_call_tool)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("model-factory-skill")
    except PackageNotFoundError:
        return "0+unknown"


# -- the wire: private stdin/stdout ---------------------------------------------------------


class _Wire:
    """The protocol's stdin/stdout, moved off file descriptors 0 and 1.

    fd 1 is pointed at stderr and fd 0 at the null device, so anything else in the process
    that prints or reads cannot corrupt the protocol stream.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        try:
            in_fd, out_fd = os.dup(0), os.dup(1)
            os.dup2(2, 1)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        except OSError:  # no real descriptors (embedded use): serve the sys streams in place
            self.reader: BinaryIO = sys.stdin.buffer
            self.writer: BinaryIO = sys.stdout.buffer
        else:
            self.reader = os.fdopen(in_fd, "rb")
            self.writer = os.fdopen(out_fd, "wb", buffering=0)

    def write(self, data: bytes) -> None:
        with self.lock:
            self.writer.write(data)
            self.writer.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")


def _read_lines(wire: _Wire, inbox: queue.Queue[Any]) -> None:
    try:
        for line in wire.reader:
            if line.strip():
                inbox.put(line)
    except (OSError, ValueError):
        pass
    inbox.put(_EOF)


class _Inbound:
    """Async line source for the SDK's stdio transport: replayed lines, then the inbox."""

    def __init__(self, replay: list[bytes], inbox: queue.Queue[Any], observe: Callable[[bytes], None]) -> None:
        self.replay = list(replay)
        self.inbox = inbox
        self.observe = observe

    def __aiter__(self) -> _Inbound:
        return self

    async def __anext__(self) -> str:
        import anyio.to_thread

        if self.replay:
            line = self.replay.pop(0)
        else:
            line = await anyio.to_thread.run_sync(self.inbox.get, abandon_on_cancel=True)
            if line is _EOF:
                raise StopAsyncIteration
        self.observe(line)
        return line.decode("utf-8", errors="replace")


class _Outbound:
    """Async writer for the SDK's stdio transport: drops the replayed ``initialize``'s
    answer and lets the handshake cache see the answers it records."""

    def __init__(self, wire: _Wire, observe: Callable[[dict[str, Any]], None]) -> None:
        self.wire = wire
        self.observe = observe
        self._pending = ""

    async def write(self, text: str) -> None:
        self._pending += text
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self._emit(line)

    def _emit(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" not in message:
            self.observe(message)
            if message.get("id") == REPLAY_ID:
                return
        self.wire.write(line.encode() + b"\n")

    async def flush(self) -> None:
        return None


# -- the handshake cache ----------------------------------------------------------------------


def _cache_dir() -> Path:
    configured = os.environ.get(CACHE_DIR_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "model-factory"


def _dist_names(*packages: str) -> list[str]:
    """Installed distribution folder names (``mcp-2.3.0.dist-info``) without importing anything."""
    import importlib.util

    names = []
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.origin:
            names.append(f"{package}:missing")
            continue
        site = Path(spec.origin).parent.parent
        try:
            names += sorted(n for n in os.listdir(site) if n.startswith(f"{package}-") and n.endswith(".dist-info"))
        except OSError:
            names.append(f"{package}:unknown")
    return names


def source_digest() -> str:
    """sha256 over everything the handshake answers depend on: the tool and registry
    sources, this module, our own version, and the Python/SDK/pydantic versions."""
    here = Path(__file__).resolve().parent
    tools_dir = here.parent / "tools"
    digest = hashlib.sha256(sys.version.encode())
    for name in _dist_names("mcp", "mcp_types", "pydantic", "pydantic_core"):
        digest.update(name.encode())
    try:  # our own version (serverInfo): the installed dist-info name, or a checkout's pyproject
        digest.update(" ".join(sorted(n for n in os.listdir(here.parent) if n.startswith("model_factory_skill-")))
                      .encode())
    except OSError:
        pass
    files = [here / "registry.py", here / "mcp_server.py", here.parent / "pyproject.toml",
             *sorted(tools_dir.rglob("*.py"))]
    for path in files:
        digest.update(str(path.relative_to(here.parent)).encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"missing")
    return digest.hexdigest()


class HandshakeCache:
    """The SDK's ``initialize`` and ``tools/list`` answers, per protocol version, on disk."""

    def __init__(self, digest: str, directory: Path | None = None) -> None:
        self.digest = digest
        self.path = (directory or _cache_dir()) / f"mcp-handshake-{digest[:20]}.json"
        self.versions: dict[str, dict[str, Any]] = {}
        try:
            data = json.loads(self.path.read_text())
            if data.get("digest") == digest:
                self.versions = data.get("versions", {})
        except (OSError, ValueError, AttributeError):
            pass

    def answers(self, version: str) -> dict[str, Any] | None:
        """``{"initialize": ..., "tools/list": ...}`` for protocol ``version``, or None when either is missing."""
        entry = self.versions.get(version)
        return entry if entry and "initialize" in entry and "tools/list" in entry else None

    def record(self, version: str, method: str, result: dict[str, Any]) -> None:
        """Keep the SDK's answer to ``method``; the file is rewritten once both answers of ``version`` are known."""
        entry = self.versions.setdefault(version, {})
        if entry.get(method) == result:
            return
        entry[method] = result
        if self.answers(version) is not None:
            self._save()

    def _save(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            week_ago = time.time() - 7 * 86400  # other installs' entries, unused for a week
            for old in self.path.parent.glob("mcp-handshake-*.json"):
                if old != self.path and old.stat().st_mtime < week_ago:
                    old.unlink(missing_ok=True)
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps({"digest": self.digest, "versions": self.versions}))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache we cannot write only costs speed


class _Handshake:
    """Answers ``initialize`` / ``tools/list`` / ``ping`` before the SDK is loaded, and
    records the SDK's own answers afterwards."""

    def __init__(self, cache: HandshakeCache, wire: _Wire) -> None:
        self.cache = cache
        self.wire = wire
        self.version: str | None = None  # negotiated protocol version, once known
        self.supported: list[str] = cache.versions.get("_supported", {}).get("list", [])
        self._asked: dict[Any, str] = {}  # request id -> method, for answers to record

    # before the hand-over ------------------------------------------------------------------
    def answer_early(self, line: bytes) -> bytes | None:
        """Answer ``line`` from the cache if possible. Returns the line the SDK must still see
        (the ``initialize`` under :data:`REPLAY_ID`, or ``line`` unchanged), or None when the
        message is fully handled."""
        try:
            message = json.loads(line)
        except ValueError:
            return line
        if not isinstance(message, dict) or "id" not in message or not isinstance(message.get("method"), str):
            return line
        method, params = message["method"], message.get("params") or {}
        if method == "initialize" and self.version is None and isinstance(params, dict):
            requested = params.get("protocolVersion")
            default = self.cache.versions.get("_supported", {}).get("latest")
            version = requested if requested in self.supported else default
            answers = self.cache.answers(version) if isinstance(version, str) else None
            if answers is None or "_meta" in params:
                return line
            self.version = version
            self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": answers["initialize"]})
            return json.dumps({**message, "id": REPLAY_ID}).encode()
        if method == "tools/list" and self.version is not None:
            listing = self.cache.answers(self.version)["tools/list"]
            self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": listing})
            return None
        if method == "ping" and self.version is not None:
            self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
            return None
        return line

    # after the hand-over -------------------------------------------------------------------
    def saw_request(self, line: bytes) -> None:
        if b'"initialize"' not in line and b'"tools/list"' not in line:
            return
        try:
            message = json.loads(line)
        except ValueError:
            return
        if isinstance(message, dict) and message.get("method") in ("initialize", "tools/list") and "id" in message:
            params = message.get("params") or {}
            if isinstance(params, dict) and "_meta" not in params:
                self._asked[_key(message["id"])] = message["method"]

    def saw_answer(self, message: dict[str, Any]) -> None:
        method = self._asked.pop(_key(message.get("id")), None)
        result = message.get("result")
        if method is None or not isinstance(result, dict):
            return
        if method == "initialize":
            self.version = result.get("protocolVersion")
        if isinstance(self.version, str):
            self.cache.record(self.version, method, result)

    def remember_supported(self) -> None:
        """Store the SDK's handshake versions (call once the SDK is imported)."""
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

        self.cache.versions["_supported"] = {"list": list(HANDSHAKE_PROTOCOL_VERSIONS),
                                            "latest": LATEST_HANDSHAKE_VERSION}


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def _awaits_answer(line: bytes) -> bool:
    """True when ``line`` is a request the client still waits for (not our replay)."""
    try:
        message = json.loads(line)
    except ValueError:
        return True
    return not isinstance(message, dict) or ("id" in message and message["id"] != REPLAY_ID)


# -- entry point ------------------------------------------------------------------------------


def _configure_logging() -> None:
    import logging

    level = os.environ.get("MODEL_FACTORY_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level, logging.WARNING),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")


def main() -> None:
    """Serve MCP on stdio until the client closes stdin (``model-factory mcp``)."""
    wire = _Wire()
    inbox: queue.Queue[Any] = queue.Queue()
    threading.Thread(target=_read_lines, args=(wire, inbox), name="mcp-stdin", daemon=True).start()

    fast = os.environ.get(FAST_START_ENV, "1").strip().lower() not in ("0", "false", "no", "off")
    digest = source_digest()
    cache = HandshakeCache(digest)
    handshake = _Handshake(cache, wire)  # answers are always recorded; early answers are optional
    early = handshake if fast else None

    loaded: dict[str, Any] = {}

    def load() -> None:
        try:
            _configure_logging()
            loaded["server"] = build_server()
            handshake.remember_supported()
        except BaseException as exc:  # noqa: BLE001 - reported on stderr below
            loaded["error"] = exc
        inbox.put(_READY)

    threading.Thread(target=load, name="mcp-load", daemon=True).start()

    pending: list[bytes] = []
    closed = False
    while True:
        item = inbox.get()
        if item is _READY:
            break
        if item is _EOF:
            if not any(_awaits_answer(line) for line in pending):
                sys.stderr.flush()
                os._exit(0)  # nothing left to answer; do not wait for the SDK to load
            closed = True  # serve what was asked, then stop
            continue
        rest = early.answer_early(item) if early else item
        if rest is not None:
            pending.append(rest)
    if closed:
        inbox.put(_EOF)

    if "error" in loaded:
        import traceback

        traceback.print_exception(loaded["error"], file=sys.stderr)
        sys.exit(1)
    import anyio

    anyio.run(_serve, loaded["server"], pending, inbox, wire, handshake)


async def _serve(server: Any, pending: list[bytes], inbox: queue.Queue[Any], wire: _Wire,
                 handshake: _Handshake) -> None:
    from mcp.server.stdio import stdio_server

    inbound = _Inbound(pending, inbox, handshake.saw_request)
    outbound = _Outbound(wire, handshake.saw_answer)
    async with stdio_server(stdin=inbound, stdout=outbound) as (read_stream, write_stream):  # type: ignore[arg-type]
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    main()
