"""What every tool call runs with: credentials, clients, state folder, human channels.

A :class:`Context` is cheap to build and resolves everything lazily, so importing
``tools`` and building a context costs no I/O. Tests and hosts build one explicitly
(``Context(env={...}, home=tmp)``); the CLI and MCP server use :meth:`Context.from_environment`.

The :func:`tool` decorator is the single place where a tool's outcome is normalised:
a result model, or a :class:`~tools.errors.ToolError` (from ``ToolFailure`` or a
``PlatformError``), always scrubbed of every known secret value.

The secrets guardrail is applied here, at runtime: :attr:`Context.scrubber` is a
:class:`tools.guardrails.scrubbing.Scrubber` and :func:`tool` calls
:func:`tools.guardrails.secret_detection.refuse_secret_values` (hence core sits above the guardrails;
see :mod:`tools.core`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from tools.errors import ToolError, ToolFailure, fail, from_os_error, from_platform
from tools.guardrails.scrubbing import Scrubber, argument_scrubber
from tools.guardrails.secret_detection import refuse_secret_values
from tools.platform.bounds import Deadline, RetryPolicy, Timeouts
from tools.platform.errors import PlatformError

if TYPE_CHECKING:
    from tools.guardrails.store import Store
    from tools.platform.client import PlatformClient, TracesClient
    from tools.platform.settings import Settings

#: ``progress(done, total, message)``: ``total`` is ``None`` when unknown.
ProgressCallback = Callable[[float, "float | None", str], None]

#: ``approver(request) -> bool``: a human-facing channel (host UI, MCP elicitation,
#: terminal prompt) that shows ``request.summary`` to a person and returns their answer.
Approver = Callable[[Any], bool]

STATE_DIR_ENV = "MODEL_FACTORY_STATE_DIR"
#: The seconds one read tool call may wait for the platform in all (default ``Timeouts.call_seconds``,
#: 50): a host that gives tools less than 60 s sets less.
CALL_SECONDS_ENV = "MODEL_FACTORY_CALL_SECONDS"
#: The range :data:`CALL_SECONDS_ENV` accepts, in seconds.
CALL_SECONDS_RANGE = (1.0, 3600.0)


@dataclass
class Context:
    """Per-session environment of the tools.

    Attributes:
        env: environment variables to read (default: ``os.environ`` at construction).
            Secrets are read from here by *name*, in-process, only when needed.
        home: home folder holding ``.prime/config.json`` (default: ``env["HOME"]``, else
            ``Path.home()``; see :func:`tools.platform.settings.home_folder`).
        state_dir: the state folder: plans, approvals, launches, the audit trail (default: the
            per-user one, :func:`tools.guardrails.store.state_folder`: ``$MODEL_FACTORY_STATE_DIR``,
            else ``$XDG_STATE_HOME/model-factory``, else ``<home>/.local/state/model-factory``).
        approver: optional host callback that asks a human to approve a plan.
        progress: optional callback for long calls (downloads, waits).
        cwd: folder relative paths are resolved against (default: current directory).
        clock: monotonic seconds for bounded waits (default ``time.monotonic``).
        sleep: how a tool waits between polls and read retries, seconds (default ``time.sleep``).
            Tests inject both, with a sleep that moves the emulator's clock, instead of waiting.
        timeouts: HTTP timeouts of the clients this context builds
            (:class:`~tools.platform.bounds.Timeouts`; default: ``prime``'s 30 s / 10 s / 120 s).
        retry: the read retry policy of those clients (:class:`~tools.platform.bounds.RetryPolicy`;
            default: 3 attempts, backing off and honouring ``Retry-After`` with :attr:`sleep`).

    ``clock``, ``sleep``, ``timeouts`` and ``retry`` are the test seam for time: a harness passes
    ``Context(timeouts=Timeouts(read_seconds=0.5, ...), clock=..., sleep=...)`` so that a held answer
    fails in half a second and no poll, back-off or ``Retry-After`` takes wall time, with no global
    patching.
    """

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    home: Path | None = None
    state_dir: Path | None = None
    approver: Approver | None = None
    progress: ProgressCallback | None = None
    cwd: Path | None = None
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    timeouts: Timeouts | None = None
    retry: RetryPolicy | None = None
    _settings: Settings | None = field(default=None, repr=False)
    _platform: PlatformClient | None = field(default=None, repr=False)
    _traces: TracesClient | None = field(default=None, repr=False)
    _scrubber: Scrubber | None = field(default=None, repr=False)
    _deadline: Any = field(default=None, repr=False)
    _store: Store | None = field(default=None, repr=False)
    _account: tuple[str | None] | None = field(default=None, repr=False)

    @classmethod
    def from_environment(cls, **overrides: Any) -> Context:
        """A context over the current process environment."""
        return cls(**overrides)

    # -- lazily resolved pieces ---------------------------------------------------------
    @property
    def settings(self) -> Settings:
        """Resolved credentials and URLs, with the ``prime`` CLI's precedence (read-only)."""
        if self._settings is None:
            from tools.platform.settings import resolve_settings

            self._settings = resolve_settings(env=self.env, home=self.home)
        return self._settings

    def platform(self) -> PlatformClient:
        """The platform API client (``{base}/api/v1``), built on first use. What its methods
        return is scrubbed on arrival (see :class:`_Scrubbed`)."""
        if self._platform is None:
            self._platform = self.platform_client()
            self._platform.deadline = self._deadline
        return _Scrubbed(self._platform, self.scrubber)  # type: ignore[return-value]

    def traces(self) -> TracesClient:
        """The traces-host client (``{traces_url}/api/v1``), built on first use; results
        scrubbed on arrival like :meth:`platform`'s."""
        if self._traces is None:
            self._traces = self.traces_client()
            self._traces.deadline = self._deadline
        return _Scrubbed(self._traces, self.scrubber)  # type: ignore[return-value]

    def http_timeouts(self) -> Timeouts:
        """:attr:`timeouts`, or the defaults."""
        return self.timeouts or Timeouts()

    def call_seconds(self) -> float:
        """How long one read tool call may wait for the platform in all, in seconds:
        ``$MODEL_FACTORY_CALL_SECONDS``, else :attr:`timeouts`' ``call_seconds`` (50). Raises
        ToolFailure ``bad_arguments`` for a value that is not a number of seconds in range."""
        text = self.env.get(CALL_SECONDS_ENV, "").strip()
        if not text:
            return self.http_timeouts().call_seconds
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        low, high = CALL_SECONDS_RANGE
        if not low <= value <= high:  # NaN fails too
            raise fail("bad_arguments", f"{CALL_SECONDS_ENV} is not a number of seconds from {low:g} to {high:g}.",
                       f"Set {CALL_SECONDS_ENV} to the seconds a tool call may wait (for example 50), or unset it.")
        return value

    @contextlib.contextmanager
    def within(self, seconds: float | None = None) -> Iterator[None]:
        """During the block, every request of the shared clients (:meth:`platform`, :meth:`traces`)
        ends within ``seconds`` in all (default :meth:`call_seconds`), retries included; a request cut
        short is ``Unavailable`` saying so (:class:`~tools.platform.bounds.Deadline`)."""
        self._deadline = Deadline.after(self.call_seconds() if seconds is None else seconds, self.clock)
        try:
            for client in (self._platform, self._traces):
                if client is not None:
                    client.deadline = self._deadline
            yield
        finally:
            self._deadline = None
            for client in (self._platform, self._traces):
                if client is not None:
                    client.deadline = None

    def retry_policy(self, attempts: int | None = None) -> RetryPolicy:
        """:attr:`retry` (default: waiting with :attr:`sleep`), with ``attempts`` in total when given."""
        policy = self.retry or RetryPolicy(sleep=self.sleep)
        return policy if attempts is None else replace(policy, max_attempts=attempts)

    def platform_client(self, timeouts: Timeouts | None = None, *, attempts: int | None = None) -> PlatformClient:
        """A new platform client with ``timeouts`` (default :meth:`http_timeouts`) and
        :meth:`retry_policy`; not shared and not scrubbed: the caller closes it. For calls with a
        time bound of their own (``mf_wait_for_run``, ``mf_preflight``); others use :meth:`platform`."""
        from tools.platform.client import PlatformClient

        t = timeouts or self.http_timeouts()
        return PlatformClient(self.settings, timeout=t.read_seconds, connect_timeout=t.connect_seconds,
                              create_timeout=t.create_seconds, retry=self.retry_policy(attempts))

    def traces_client(self, timeouts: Timeouts | None = None, *, attempts: int | None = None) -> TracesClient:
        """A new traces-host client, as :meth:`platform_client` (the caller closes it)."""
        from tools.platform.client import TracesClient

        t = timeouts or self.http_timeouts()
        return TracesClient(self.settings, timeout=t.traces_seconds, connect_timeout=t.connect_seconds,
                            retry=self.retry_policy(attempts))

    @property
    def scrubber(self) -> Scrubber:
        """Replaces every known secret value in outputs (see :mod:`tools.guardrails.scrubbing`)."""
        if self._scrubber is None:
            self._scrubber = Scrubber.from_context(self)
        return self._scrubber

    def resolve_path(self, path: str | os.PathLike[str]) -> Path:
        """``path`` made absolute against :attr:`cwd` (``~`` expanded). Raises ToolFailure
        ``bad_arguments``, without echoing the path, for one holding a NUL character (no file
        system takes one; the OS calls would raise ValueError) or starting with ``~user`` of an
        unknown user."""
        if "\x00" in os.fspath(path):
            raise fail("bad_arguments", "A path argument holds a NUL character (\\x00); no file can be named so.",
                       "Pass the path without control characters.")
        try:
            p = Path(path).expanduser()
        except RuntimeError:  # ~name of a user this machine does not have
            raise fail("bad_arguments", "A path argument starts with ~ and a user name this machine does not have.",
                       "Pass an absolute path, or one relative to the project folder.") from None
        return p if p.is_absolute() else (self.cwd or Path.cwd()) / p

    def state_path(self) -> Path:
        """The state folder (not created here): :attr:`state_dir`, else the per-user one
        (:func:`tools.guardrails.store.state_folder`), the same from any working folder."""
        if self.state_dir is not None:
            return Path(self.state_dir)
        from tools.guardrails.store import state_folder
        from tools.platform.settings import home_folder

        return state_folder(self.env, home_folder(self.env, self.home))

    def state_assignments(self) -> dict[str, str]:
        """What a command printed for a person sets so that it finds this context's state folder:
        ``{MODEL_FACTORY_STATE_DIR: <folder>}`` when the folder is not the per-user default a person's
        shell finds by itself (given explicitly, or from ``MODEL_FACTORY_STATE_DIR`` or
        ``XDG_STATE_HOME``), else nothing."""
        if self.state_dir is None and not any(self.env.get(k, "").strip() for k in (STATE_DIR_ENV, "XDG_STATE_HOME")):
            return {}
        return {STATE_DIR_ENV: str(self.state_path().resolve())}

    def store(self) -> Store:
        """The state store of this context (opened on first use, closed by :meth:`close`), scrubbed
        with :attr:`scrubber`; an old ``./.model-factory/launches.jsonl`` of the working folder (or one
        in the state folder) is imported once, for the record (:mod:`tools.guardrails.store`)."""
        if self._store is None:
            from tools.guardrails.store import LEGACY_FOLDER, LEGACY_LEDGER, Store

            state = self.state_path()
            legacy = [state / LEGACY_LEDGER]
            old = (self.cwd or Path.cwd()) / LEGACY_FOLDER
            if old.resolve() != state.resolve():
                legacy.insert(0, old / LEGACY_LEDGER)
            platform = None
            if any(p.is_file() for p in legacy):
                try:
                    platform = self.settings.base_url
                except Exception:  # noqa: BLE001 - unreadable settings: the plans are recorded without one
                    platform = None
            self._store = Store(state, self.scrubber, legacy=legacy, legacy_platform=platform)
        return self._store

    def account_id(self) -> str | None:
        """The account the API key acts as (GET /user/whoami ``id``), asked once per context; None
        when the platform does not say. Raises PlatformError (no key, rejected, unreachable)."""
        if self._account is None:
            self._account = (self.platform().whoami().id,)
        return self._account[0]

    def report(self, done: float, total: float | None, message: str) -> None:
        """Send a progress update when a callback is attached (no-op otherwise)."""
        if self.progress is not None:
            self.progress(done, total, self.scrubber.scrub_text(message))

    def close(self) -> None:
        """Close the HTTP clients and the state store (safe to call twice)."""
        for client in (self._platform, self._traces):
            if client is not None:
                client.close()
        self._platform = self._traces = None
        if self._store is not None:
            self._store.close()


class _Scrubbed:
    """A view of a platform or traces client whose method results (models, lists, dicts,
    strings; items of returned iterators) are scrubbed as they arrive, before a tool cuts,
    masks or summarises server text: a secret clipped or with its digits masked could no
    longer be found by the final scrub of the ``@tool`` wrapper. Bytes (raw traces) pass
    unchanged; other attributes are the client's own."""

    def __init__(self, client: Any, scrubber: Scrubber) -> None:
        self._client, self._scrubber = client, scrubber

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if isinstance(result, Iterator):
                return self._items(result)
            return self._scrubber.scrub_obj(result)

        setattr(self, name, call)  # made once per method: later look-ups find it without coming here
        return call

    def _items(self, items: Iterator[Any]) -> Iterator[Any]:
        """The items scrubbed; closing this iterator closes ``items`` (a stream's response)."""
        try:
            for item in items:
                yield self._scrubber.scrub_obj(item)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()


M = TypeVar("M", bound=BaseModel)


def tool(fn: Callable[[Any, Context], M]) -> Callable[..., M | ToolError]:
    """Wrap a tool body ``fn(input, ctx) -> Model``.

    The wrapper supplies a default :class:`Context`, refuses arguments holding a
    secret-looking value (``secret_in_input``, locations only; nothing is sent), turns
    ``ToolFailure``, ``PlatformError`` and file-system ``OSError`` (``file_error``) into
    :class:`ToolError`, and scrubs secret values
    out of whatever it returns (from an error also every argument token shaped like a credential:
    :func:`~tools.guardrails.scrubbing.argument_scrubber`). Unexpected exceptions are *not* swallowed
    here (the surfaces report them as ``internal_error``), so bugs stay visible in tests.
    """

    @functools.wraps(fn)
    def wrapper(inp: Any, ctx: Context | None = None) -> M | ToolError:
        own = ctx is None
        ctx = ctx or Context.from_environment()
        try:
            refuse_secret_values(inp, root="arguments", known_values=ctx.scrubber.known_values())
            result: M | ToolError = fn(inp, ctx)
        except ToolFailure as failure:
            result = failure.error
        except PlatformError as exc:
            result = from_platform(exc)
        except OSError as exc:  # a path that cannot be read or written is bad input, not a bug
            result = from_os_error(exc)
        finally:
            if own:
                ctx.close()
        if isinstance(result, ToolError):  # an error may quote an argument: never one shaped like a credential
            result = argument_scrubber(inp).scrub_model(result)
        return ctx.scrubber.scrub_model(result)

    wrapper.__wrapped_tool__ = fn  # type: ignore[attr-defined]
    return wrapper
