"""Fixtures shared by the whole suite: the emulator on loopback, an env pointing at it, the
examples, runs created on it, and :class:`Recorder` (what the emulator received). Plain helpers
shared by test modules are in tests/_helpers.py."""

from __future__ import annotations

import json
import signal
import threading
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from _helpers import EXAMPLE, FakeTime, cli_env
from hypothesis import settings

from skill.approval import AGENT_MARKERS
from skill.emulator import EmulatorServer
from tools.configs import EXAMPLES_DIR
from tools.core import Context
from tools.platform import wire

# Hypothesis judges examples, not the machine: no deadline (a loaded machine makes a 200 ms example take 300 ms).
settings.register_profile("model-factory", deadline=None)
settings.load_profile("model-factory")

#: The schema environments and helpers (tests/_schema_env.py), for the schema tests.
pytest_plugins = ["_schema_env"]

# A test run started in the background of a shell (`pytest &`) ignores SIGINT, and every command a test starts
# would inherit that, so Ctrl-C tests could not reach it: take Python's own handler back, as in a terminal (a
# handler, unlike "ignore", is not inherited: the commands start with the default and install theirs).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _no_agent_shell_and_no_real_state(monkeypatch: pytest.MonkeyPatch,
                                      tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every test runs as a person's shell would, whatever shell started pytest: no agent-host marker
    (a developer's shell may carry CLAUDECODE=1), and the per-user state store in a temporary folder
    (``XDG_STATE_HOME``; ``MODEL_FACTORY_STATE_DIR`` unset), never the real home's."""
    for name, _, _ in AGENT_MARKERS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MODEL_FACTORY_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))


@pytest.fixture
def emulator() -> Iterator[EmulatorServer]:
    """A fresh emulator on a free loopback port, its clock stopped: nothing happens to a run until the
    test moves the clock (``emulator.state.advance(seconds)``, simulated seconds), so no test depends on
    how fast the machine is."""
    with EmulatorServer(speed=0) as server:
        yield server


@pytest.fixture(scope="module")
def module_emulator() -> Iterator[EmulatorServer]:
    """One emulator for a whole test module, its clock stopped (tests move it with ``state.advance``)."""
    with EmulatorServer(speed=0) as server:
        yield server


@pytest.fixture
def mf_env(emulator: EmulatorServer, tmp_path: Path) -> dict[str, str]:
    """Environment for subprocesses and tools: key, base and traces URLs of ``emulator``, no
    version check, temporary ``HOME`` and ``MODEL_FACTORY_STATE_DIR``, ``PATH`` kept."""
    home = tmp_path / "home"
    state = tmp_path / "state"
    home.mkdir(exist_ok=True)
    state.mkdir(exist_ok=True)
    return cli_env(emulator, home, state)


@pytest.fixture
def frozen_ctx(emulator: EmulatorServer, mf_env: dict[str, str], tmp_path: Path) -> Iterator[Context]:
    """A tool Context on the emulator with its clock stopped (tests move it with ``state.advance``)."""
    context = Context(env=mf_env, home=tmp_path / "home", state_dir=tmp_path / "state")
    yield context
    context.close()


@pytest.fixture
def fake_time(frozen_ctx: Context, emulator: EmulatorServer) -> FakeTime:
    """``frozen_ctx`` with injected time: a tool that waits moves the emulator's clock instead."""
    fake = FakeTime(emulator)
    frozen_ctx.clock, frozen_ctx.sleep = fake.clock, fake.sleep
    return fake


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    """``tools/configs/examples``: the verbatim prime-rl example configs bundled with the package."""
    return EXAMPLES_DIR


@pytest.fixture
def rl_config() -> dict[str, Any]:
    """The parsed reverse-text RL example (``basic/reverse-text/rl.toml``: 20 steps, 2 GPUs)."""
    return tomllib.loads(EXAMPLE.read_text())


@pytest.fixture
def launch(frozen_ctx: Context, emulator: EmulatorServer, rl_config: dict[str, Any]) -> Callable[..., str]:
    """``launch(scenario=None, *, after=0, config=None, team_id=None, wandb_api_key=None, **params)``:
    the id of a run created straight on the platform (no plan in the ledger) from ``rl_config`` (or
    ``config``), misbehaving as ``scenario`` (with ``params``) says; the frozen clock is then moved
    ``after`` simulated seconds."""

    def start(scenario: str | None = None, *, after: float = 0.0, config: dict[str, Any] | None = None,
              team_id: str | None = None, wandb_api_key: str | None = None, **params: Any) -> str:
        if scenario:
            emulator.state.set_scenario(scenario, **params)
        body = wire.build_create_body(config or rl_config, name="test-run", team_id=team_id,
                                      wandb_api_key=wandb_api_key)
        run_id = frozen_ctx.platform().create_run(body).run_id
        if after:
            emulator.state.advance(after)
        return run_id

    return start


@pytest.fixture
def recorder(emulator: EmulatorServer) -> Recorder:
    """Every request ``emulator`` receives from now on (a :class:`Recorder` installed in it)."""
    return Recorder.install(emulator)


@dataclass(frozen=True)
class Recorded:
    """One request the emulator received: method, path, raw query string, body bytes."""

    method: str
    path: str
    query: str
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (``None`` when empty)."""
        return json.loads(self.body) if self.body else None

    def params(self) -> dict[str, list[str]]:
        """The query string parsed (blank values kept)."""
        return parse_qs(self.query, keep_blank_values=True)


class Recorder:
    """ASGI layer inside the emulator that keeps every HTTP request it receives (``requests``).

    Install it with :meth:`install`: ``server.recorder`` is then the recorder.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[Recorded] = []
        self._arrived = threading.Condition()

    @classmethod
    def install(cls, server: EmulatorServer) -> Recorder:
        """Wrap ``server``'s app in a recorder; also set as ``server.recorder``."""
        server.recorder = cls(server.app.app)
        server.app.app = server.recorder
        return server.recorder

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        messages, more = [], True
        while more:
            message = await receive()
            messages.append(message)
            more = message.get("more_body", False)
        with self._arrived:
            self.requests.append(Recorded(scope["method"], scope["path"], scope["query_string"].decode("latin-1"),
                                          b"".join(m.get("body", b"") for m in messages)))
            self._arrived.notify_all()
        pending = iter(messages)

        async def replay() -> dict:
            return next(pending, None) or await receive()

        await self.app(scope, replay, send)

    def wait_for(self, method: str, path: str, *, count: int = 1, timeout: float = 120.0) -> Recorded:
        """Block until the emulator has received ``count`` ``method`` requests to ``path`` (the whole path, such as
        ``/api/v1/rft/runs/r1/stop``, or its end after ``/api/v1``); the last of them. ``timeout`` (seconds) is a
        safety net only: a test waits on the request, and fails when it never comes."""
        def matching() -> list[Recorded]:
            return [r for r in self.requests if r.method == method and (r.path == path or r.path == "/api/v1" + path)]

        with self._arrived:
            if not self._arrived.wait_for(lambda: len(matching()) >= count, timeout):
                pytest.fail(f"the emulator did not receive {count} {method} {path} within {timeout} s")
            return matching()[count - 1]

    def bodies(self, method: str, path: str) -> list[Any]:
        """JSON bodies of the ``method`` requests to ``/api/v1`` + ``path``, in order."""
        return [r.json() for r in self.requests if r.method == method and r.path == "/api/v1" + path]
