"""How long requests may take and how often a read is retried: :class:`Timeouts`, :class:`Deadline`,
:class:`RetryPolicy` (seconds throughout).

Plain values with no HTTP library behind them (the standard library only), so a local tool that
bounds its calls (:meth:`tools.core.Context.within`) or builds a context never loads httpx; the
clients of :mod:`tools.platform.client` read them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Deadline", "RetryPolicy", "Timeouts"]


@dataclass(frozen=True)
class Timeouts:
    """How long each phase of a request may take, in seconds (httpx timeouts: ``read_seconds``
    bounds every read and write operation, so a held answer or a body that stops mid-way
    fails after it; a slow drip whose gaps are shorter does not).

    Defaults are ``prime`` 0.18.0's (reference/prime-api.md §1.3: 30 s requests, 10 s connect,
    120 s creates; §6.1: the traces SDK's 120 s). :class:`tools.core.Context` builds its
    clients with them (``Context(timeouts=Timeouts(...))``: tests and harnesses use short ones).

    Attributes:
        read_seconds: platform requests (reads and writes other than creates).
        connect_seconds: establishing a connection (both hosts).
        create_seconds: creates and resumes (the server validates the config before answering).
        traces_seconds: traces-host requests (raw traces can be large).
        call_seconds: all the requests of one read tool call together, retries and back-offs
            included (a :class:`Deadline`): under the 60 s an MCP host waits for a tool. Our
            decision, not the CLI's (``prime`` has no such bound).
    """

    read_seconds: float = 30.0
    connect_seconds: float = 10.0
    create_seconds: float = 120.0
    traces_seconds: float = 120.0
    call_seconds: float = 50.0

    def capped(self, seconds: float, *, connect_seconds: float | None = None) -> Timeouts:
        """These timeouts, none above ``seconds`` (and connect none above ``connect_seconds``)."""
        connect = min(self.connect_seconds, seconds, connect_seconds if connect_seconds is not None else seconds)
        return Timeouts(read_seconds=min(self.read_seconds, seconds), connect_seconds=connect,
                        create_seconds=min(self.create_seconds, seconds),
                        traces_seconds=min(self.traces_seconds, seconds))


@dataclass(frozen=True)
class Deadline:
    """When the requests of one tool call must have ended: ``at`` on ``clock`` (monotonic
    seconds), ``seconds`` after the call began. A client with a deadline (its ``deadline``
    attribute, :mod:`tools.platform.client`) gives each request at most the time left, retries only
    while time is left, and says ``did not answer within N s`` when it runs out (``Unavailable``)."""

    at: float
    seconds: float
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(clock() + seconds, seconds, clock)

    def left(self) -> float:
        """Seconds left (0 or less: passed)."""
        return self.at - self.clock()


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
