"""Serving the emulator: :class:`EmulatorServer` (background thread), :func:`serve` (blocking),
and :func:`closed_port` (a loopback port that refuses connections, for connection-refused faults)."""

from __future__ import annotations

import ipaddress
import socket
import sys
import textwrap
import threading
import time
from collections.abc import Mapping
from typing import Any, Self

import uvicorn

from .app import create_app
from .dashboard import dashboard_url
from .faults import FaultInjector
from .routes_admin import is_loopback
from .seed import DEFAULT_API_KEY, DEFAULT_SPEED
from .state import EmulatorState

#: Connections the kernel queues before the server accepts them (uvicorn's own default backlog).
BACKLOG = 2048


def _listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (``OSError`` if the address is taken or invalid).

    It listens before anything is printed or returned: a client that connects the moment it reads the
    banner (or right after :meth:`EmulatorServer.start`) waits in the kernel's queue until uvicorn accepts,
    instead of being refused. proto IPPROTO_TCP (not 0): asyncio then sets TCP_NODELAY, so no 40 ms Nagle
    stalls per request.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def _config(app: Any, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(app, host=host, port=port, http="h11", lifespan="off", access_log=False,
                          log_level="warning", server_header=False, date_header=False,
                          timeout_graceful_shutdown=1)


class EmulatorServer:
    """The emulator on real HTTP, served by uvicorn in a daemon thread; a context manager.

    ``EmulatorServer(speed=200.0)`` listens on a free loopback port. Attributes:
    ``base_url`` (``http://127.0.0.1:PORT``, no ``/api/v1``; use it for both
    ``PRIME_API_BASE_URL`` and ``PRIME_TRACES_URL``), ``api_key`` (the default user's key),
    ``state`` (:class:`~skill.emulator.state.EmulatorState`, for set-up and assertions) and
    ``faults`` (:class:`~skill.emulator.faults.FaultInjector`).

    Keyword arguments other than ``speed``/``host``/``port`` go to
    :class:`~skill.emulator.state.EmulatorState` (``seed``, ``timing``, ``shape``,
    ``prepare_submission_supported``, ``prepare_available``, ``rng_seed``, and ``scenario``:
    a scenario name or ``{name: params}`` applied to every run, e.g.
    ``scenario={"many_traces": {"count": 50000}}``; ValueError if unknown).
    """

    def __init__(self, speed: float = DEFAULT_SPEED, host: str = "127.0.0.1", port: int = 0,
                 **state_options: Any) -> None:
        self.state = EmulatorState(speed, **state_options)
        self.faults = FaultInjector()
        self.app = create_app(self.state, self.faults)
        self.host = host
        self.api_key = DEFAULT_API_KEY
        self._sock = _listening_socket(host, port)
        self.port: int = self._sock.getsockname()[1]
        self._server = uvicorn.Server(_config(self.app, host, self.port))
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (no ``/api/v1``); also the dashboard's root (``PRIME_FRONTEND_URL``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def dashboard_url(self, run_id: str) -> str:
        """The emulator's page of a run: ``{base_url}/dashboard/training/{run_id}``."""
        return dashboard_url(self.base_url, run_id)

    def start(self, timeout: float = 10.0) -> Self:
        """Start serving; returns once the server accepts connections."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name=f"emulator-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the emulator did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and wait for the thread (in-flight slow requests are cut)."""
        if self._thread is None:
            self._sock.close()
            return
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)
        self._sock.close()
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def serve(host: str = "127.0.0.1", port: int = 8765, speed: float | None = None,
          scenario: str | Mapping[str, Mapping[str, Any] | None] | None = None, **state_options: Any) -> None:
    """Serve the emulator in the foreground until interrupted (``model-factory emulator``).

    Prints the base URL that reaches it from this machine (:func:`local_url`: the loopback for a
    wildcard bind), the API key and the environment to point ``prime`` or the tools at it, at 80
    columns but for the one ``export`` line (a command is never broken). ``speed`` None means real
    time (1.0). ``scenario`` (a name, or ``{name: params}``) applies to every run created; other
    keyword arguments go to :class:`~skill.emulator.state.EmulatorState` (``timing``, ``shape``,
    ...). Raises ``ValueError`` for an unknown scenario or parameter and ``OSError`` when the
    address cannot be bound (port taken, bad host), both before printing anything. A ``host`` other
    than the loopback (``0.0.0.0``, a network address) gets a warning, printed first (before the
    exports a person pastes): other machines can reach the emulator, and its API key is the fixed,
    published one.
    """
    state = EmulatorState(DEFAULT_SPEED if speed is None else speed, scenario=scenario, **state_options)
    sock = _listening_socket(host, port)
    app = create_app(state, FaultInjector())
    base = local_url(host, port)
    scenarios = ", ".join(state.every_run_scenarios) or "none"
    every = " (every interface)" if _every_interface(host) else ""
    if not is_loopback(host):  # before the exports: a person reads it before pasting them
        _say(f"Warning: listening on {host or '0.0.0.0'}{every}, not the loopback: other machines that reach this "
             f"one can use the emulator, with the fixed key {DEFAULT_API_KEY} that anyone can read. It is for testing "
             "only: keep real keys and data out of it, and leave --host at 127.0.0.1 (the default) unless another "
             "machine must reach it." + (f" This machine reaches it at {base} (the exports below); others at this "
                                         "machine's address." if every else ""))
    _say(f"Model Factory emulator on {base} (clock speed {state.clock.speed}x; scenarios for every run: "
         f"{scenarios}). Ctrl-C stops.")
    print(f"  {export_line(base)}", file=sys.stderr, flush=True)
    _say(f"Runs: {base}/dashboard/training")
    _say(f"Admin: {base}/_emulator/state (loopback clients only)")
    uvicorn.Server(_config(app, host, port)).run(sockets=[sock])


def export_line(base: str) -> str:
    """The shell command that points ``prime`` and model-factory at the emulator at ``base`` (its root URL,
    ``http://127.0.0.1:PORT``): ``export`` of the API, traces and dashboard URLs, its fixed API key
    (:data:`~skill.emulator.seed.DEFAULT_API_KEY`, published: no secret) and no version check. One line, pasted
    whole."""
    return (f"export PRIME_API_BASE_URL={base} PRIME_TRACES_URL={base} PRIME_FRONTEND_URL={base} "
            f"PRIME_API_KEY={DEFAULT_API_KEY} PRIME_DISABLE_VERSION_CHECK=1")


def _every_interface(host: str) -> bool:
    """True for a wildcard bind (``0.0.0.0``, ``::``, empty): every interface."""
    try:
        return not host or ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:  # a name
        return False


def local_url(host: str, port: int) -> str:
    """The base URL that reaches an emulator listening on ``host:port`` from this machine: ``host`` itself,
    except that a wildcard bind (every interface) is reached on the loopback (``http://127.0.0.1:PORT``,
    ``http://[::1]:PORT`` for ``::``): a wildcard is an address to listen on, not to connect to, and the admin
    routes and the demo take loopback URLs only."""
    if _every_interface(host):
        host = "::1" if ":" in host else "127.0.0.1"
    return f"http://[{host.strip('[]')}]:{port}" if ":" in host else f"http://{host}:{port}"


def _say(text: str) -> None:
    """One banner paragraph on stderr, at 80 columns (a URL is never broken)."""
    print(textwrap.fill(text, 80, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False),
          file=sys.stderr, flush=True)


class ClosedPort:
    """A TCP port on ``host`` that refuses connections for as long as this object is open.

    The socket is bound but never listens: the kernel answers every connection attempt with
    a reset (``ECONNREFUSED``), and no other process can take the port meanwhile. Use as a
    context manager, or call :meth:`close`. ``port``; ``url`` is ``http://HOST:PORT``.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.bind((host, 0))
        self.host = host
        self.port: int = self._sock.getsockname()[1]

    @property
    def url(self) -> str:
        """``http://HOST:PORT``: a base URL whose every request fails with connection refused."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        """Release the port."""
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def closed_port(host: str = "127.0.0.1") -> ClosedPort:
    """A loopback port that refuses connections (connection-refused faults); see :class:`ClosedPort`."""
    return ClosedPort(host)
