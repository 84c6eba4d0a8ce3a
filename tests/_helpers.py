"""Helpers shared by the test modules (their fixtures are in conftest.py): the bundled example, the
emulator's timeline, the environment that points a process at the emulator, tool results, a launch
a person approves at the terminal, a budget policy, the CLI in a new process or at a
pseudo-terminal, and what ``model-factory emulator`` prints.

Import them by name: ``from _helpers import CLI, in_terminal``.
"""
from __future__ import annotations

import fcntl
import json
import os
import queue
import re
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import termios
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest
import yaml

from skill import registry
from skill.emulator import EmulatorServer, Timing
from tools.configs import EXAMPLES_DIR
from tools.core import Context
from tools.errors import ToolError
from tools.launch import DispatchRunInput, PlanRunInput, approve_plan, dispatch_run, plan_run

# -- facts: the skill, the example, the CLI, a confirmation code, the emulator's timeline ----------

#: The skill's entry point (frontmatter and body).
SKILL_MD = Path(__file__).resolve().parent.parent / "SKILL.md"
#: The reverse-text RL example (20 steps, 2 GPUs), as bundled.
EXAMPLE = EXAMPLES_DIR / "basic" / "reverse-text" / "rl.toml"
#: The installed ``model-factory`` console script beside this interpreter.
CLI = Path(sys.executable).parent / ("model-factory.exe" if os.name == "nt" else "model-factory")
#: A confirmation code as ``model-factory approve`` prints it.
TOKEN = re.compile(r"mfc_\S+_[0-9a-f]{40}")
#: The emulator's default timeline of a run, in simulated seconds.
T = Timing()


def at_step(k: int) -> float:
    """Simulated seconds from a run's creation until its step ``k`` is done."""
    return T.queue_seconds + T.startup_seconds + k * T.step_seconds


def past_step(k: int) -> float:
    """Simulated seconds from a run's creation to 1 s after its step ``k`` is done."""
    return at_step(k) + 1.0


def unavailable(reason: str, required_by: str) -> NoReturn:
    """Skip the test, saying ``reason``; fail it instead when the environment variable ``required_by``
    is 1 (``.ci/run`` sets MF_REQUIRE_SCHEMA, MF_REQUIRE_INTEROP, MF_REQUIRE_INSTALL: there those
    tests must run)."""
    if os.environ.get(required_by) == "1":
        pytest.fail(f"{required_by}=1 but the test cannot run: {reason}")
    pytest.skip(reason)


def split_skill() -> tuple[dict[str, Any], str]:
    """SKILL.md as (its YAML frontmatter, its body)."""
    match = re.match(r"\A---\n(.*?)\n---\n(.*)\Z", SKILL_MD.read_text(encoding="utf-8"), re.S)
    assert match, "SKILL.md must start with a --- YAML frontmatter block ---"
    return yaml.safe_load(match[1]), match[2]


@dataclass
class FakeTime:
    """Injected time for a Context (``ctx.clock``, ``ctx.sleep``): ``sleep(s)`` returns at once,
    moving this clock and the emulator's by ``s`` seconds; ``slept`` lists every wait asked for."""

    emulator: EmulatorServer
    now: float = 0.0
    slept: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        self.emulator.state.advance(seconds)


# -- the environment of a process on the emulator ---------------------------------------------------


def emulator_env(server: EmulatorServer, base_url: str | None = None, **extra: str) -> dict[str, str]:
    """What points the tools at ``server``: PRIME_API_KEY, PRIME_API_BASE_URL and PRIME_TRACES_URL
    (``base_url`` in both URLs instead of the server's: another address), then ``extra``."""
    url = base_url or server.base_url
    return {"PRIME_API_KEY": server.api_key, "PRIME_API_BASE_URL": url, "PRIME_TRACES_URL": url, **extra}


def cli_env(server: EmulatorServer, home: Path, state: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``model-factory`` process on ``server``: :func:`emulator_env`, ``HOME``,
    ``MODEL_FACTORY_STATE_DIR``, no version check and this ``PATH``, then ``extra``."""
    return emulator_env(server, **{"HOME": str(home), "MODEL_FACTORY_STATE_DIR": str(state),
                                   "PRIME_DISABLE_VERSION_CHECK": "1", "PATH": os.environ.get("PATH", ""), **extra})


def make_ctx(server: EmulatorServer, tmp_path: Path, env: dict[str, str] | None = None, **kw: Any) -> Context:
    """A Context on ``server`` (:func:`emulator_env` plus ``env``) working in ``tmp_path/project``, with
    home ``tmp_path/home`` and state folder ``tmp_path/state``; ``kw`` go to the Context."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    return Context(env=emulator_env(server, **(env or {})), home=home, state_dir=tmp_path / "state", cwd=project,
                   **kw)


# -- tool results -----------------------------------------------------------------------------------


def call(ctx: Context, name: str, **arguments: Any) -> Any:
    """Tool ``name`` called through the registry, as every surface calls it: its result or ToolError."""
    return registry.call_tool(name, arguments, ctx)


def ok(result: Any) -> Any:
    """``result``, asserted not to be a ToolError."""
    assert not isinstance(result, ToolError), result
    return result


def err(result: Any, code: str) -> ToolError:
    """``result``, asserted to be a ToolError of ``code``."""
    assert isinstance(result, ToolError), f"expected {code}, got a result: {result!r}"
    assert result.code == code, f"{result.code}: {result.message}"
    return result


def progress(ctx: Context, run_id: str, **arguments: Any) -> Any:
    """mf_check_progress of ``run_id`` (asserted not an error)."""
    return ok(call(ctx, "mf_check_progress", run_id=run_id, **arguments))


def size(result: Any) -> int:
    """Characters of ``result`` as JSON: what the output budget counts."""
    return len(result.model_dump_json())


# -- launches and files a test writes ---------------------------------------------------------------


def store_bytes(folder: Path) -> bytes:
    """Every byte the state store in ``folder`` holds on disk (the database and its write-ahead log):
    what a secret must never be found in."""
    return b"".join(p.read_bytes() for p in sorted(folder.glob("state.db*")) if p.is_file())


def planned(ctx: Context, config: str | Path, **arguments: Any) -> Any:
    """mf_plan_run of the config file ``config`` with ``arguments`` (asserted not an error): the plan."""
    return ok(plan_run(PlanRunInput(config_path=str(config), **arguments), ctx))


def dispatch(ctx: Context, plan_id: str, confirmation: str | None = None) -> Any:
    """mf_dispatch_run of ``plan_id`` with ``confirmation``: its result or ToolError."""
    return dispatch_run(DispatchRunInput(plan_id=plan_id, confirmation=confirmation), ctx)


def dispatch_approved(ctx: Context, plan_id: str) -> Any:
    """mf_dispatch_run of ``plan_id`` with the code a person got from ``model-factory approve`` at the
    terminal: its result or ToolError."""
    return dispatch(ctx, plan_id, approve_plan(plan_id, "terminal", ctx))


def approved_launch(ctx: Context, config: str | Path, **arguments: Any) -> tuple[Any, Any]:
    """``config`` planned (for the personal account unless ``team`` is given), approved by a person at
    the terminal and dispatched: (the plan, the dispatch result), neither an error."""
    plan = planned(ctx, config, **{"team": "personal", **arguments})
    return plan, ok(dispatch_approved(ctx, plan.plan_id))


def write_policy(home: Path, text: str) -> Path:
    """A person's budget policy ``text`` at its default place under ``home`` (mode 0600); its path."""
    path = Path(home) / ".config" / "model-factory" / "policy.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
    return path


def example(tmp_path: Path, rel: str = "reverse-text/rl.toml", name: str | None = None) -> Path:
    """The bundled example ``basic/<rel>`` copied into ``tmp_path/project`` (as ``name``, else ``rel``
    with ``-`` for ``/``); its path."""
    dest = tmp_path / "project" / (name or rel.replace("/", "-"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES_DIR / "basic" / rel, dest)
    return dest


def free_port() -> int:
    """A loopback port free now (bound, then released): for a server a test starts on it, or one that
    nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def emulator_banner(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[list[str], dict[str, str]]:
    """What ``model-factory emulator`` (``proc``, stderr piped as text) prints before it serves, read up to its
    last line (``Admin: ...``): the lines, and the variables of its export line (name -> value). Fails the test
    when the banner has not ended within ``timeout`` seconds (read by a thread: a banner that never ends is a
    failure, not a hang)."""
    got: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in proc.stderr:
            got.put(line)
            if line.startswith("Admin:"):
                return
        got.put(None)

    threading.Thread(target=read, daemon=True).start()
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while not lines or not lines[-1].startswith("Admin:"):
        try:
            line = got.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail(f"the emulator's banner did not end (an Admin: line) within {timeout} s: {lines}")
        if line is None:
            pytest.fail(f"the emulator ended before its banner did: {lines}")
        lines.append(line.rstrip("\n"))
    export = next(line for line in lines if line.lstrip().startswith("export "))
    return lines, dict(word.split("=", 1) for word in export.split("export ", 1)[1].split())


def script(folder: Path, name: str, body: str) -> Path:
    """An executable shell script ``folder/name`` running ``body`` (a program that misbehaves on cue);
    its path. ``folder`` is created if missing."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# -- the CLI in a new process or at a pseudo-terminal ----------------------------------------------


def pasted(command: str, env: dict[str, str], cwd: Path | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``command``, as printed for a person, pasted into their bash: the finished process, output as text."""
    return subprocess.run(["bash", "-c", command], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def mf(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None,
       timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``model-factory ARGS`` in a new process with an empty stdin (``env`` None: this process's
    environment): its exit code and output as text."""
    return subprocess.run([str(CLI), *map(str, args)], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def cli(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None,
        stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``model-factory ARGS`` run by the CLI's own entry point (:func:`skill.cli.main`) in this process, as
    :func:`mf` runs it in a new one: its environment exactly ``env`` (None: this process's), working folder
    ``cwd``, standard input ``stdin`` (not a terminal), output captured; the exit code and output as text.
    For tests of what a command does and prints; :func:`mf` where the process itself is what is tested
    (signals, start-up, a closed pipe, what a later process finds)."""
    import contextlib
    import io

    from skill.cli import main

    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    saved_term = signal.getsignal(signal.SIGTERM)
    out, errs = io.StringIO(), io.StringIO()
    code = 0
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = [str(CLI), *map(str, args)]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errs), \
                _stdin(io.StringIO(stdin)):
            try:
                main([str(a) for a in args])
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        signal.signal(signal.SIGTERM, saved_term)
    return subprocess.CompletedProcess([str(CLI), *map(str, args)], code, out.getvalue(), errs.getvalue())


def cli_json(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, Any]:
    """``model-factory ARGS --json`` (:func:`cli`, in this process): its exit code and the JSON it printed."""
    done = cli(*args, "--json", env=env, cwd=cwd)
    return done.returncode, json.loads(done.stdout)


class _stdin:  # noqa: N801 - used as a context manager, like contextlib.redirect_stdout
    """``sys.stdin`` replaced for the block."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def __enter__(self) -> None:
        self.saved, sys.stdin = sys.stdin, self.stream

    def __exit__(self, *exc: object) -> None:
        sys.stdin = self.saved


def mf_json(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> tuple[int, Any]:
    """``model-factory ARGS --json`` (:func:`mf`): its exit code and the JSON it printed on stdout."""
    done = mf(*args, "--json", env=env, cwd=cwd)
    return done.returncode, json.loads(done.stdout)


#: An answer :func:`in_terminal` types as the person would: the check word the approval prompt shows.
CHALLENGE = "<the letters shown>"


def in_terminal(args: list[str | Path], env: dict[str, str], cwd: Path,
                answers: str | list[str | signal.Signals] | None = None, *,
                columns: int = 80, timeout: float = 120) -> tuple[int, str]:
    """Run ``args`` with stdin, stdout and stderr on a pseudo-terminal of ``columns`` x 24, typing
    ``answers`` at the approval prompts (a list: one answer per prompt, in order; :data:`CHALLENGE` types
    the check word the prompt shows, as a person reading the screen would; a signal is sent to
    the program at its prompt, as Ctrl-C or ``kill`` would, in place of an answer): the exit code and
    everything written to the terminal (its CR LF line ends read as LF). Fails the test when the
    program has not ended within ``timeout`` seconds."""
    pending = [answers] if isinstance(answers, str) else list(answers or [])
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))

    def own_terminal() -> None:  # the pseudo-terminal is the program's controlling terminal (its /dev/tty)
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([str(a) for a in args], stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                            close_fds=True, preexec_fn=own_terminal)
    os.close(slave)
    out, prompts = b"", 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
                asked = re.findall(rb"type\s+the\s+letters\s+([a-z]+):", out)
                if pending and len(asked) > prompts and not (
                        isinstance(pending[0], signal.Signals) and out.endswith(b"\n")):  # a signal: once it reads
                    prompts += 1
                    answer = pending.pop(0)
                    if isinstance(answer, signal.Signals):
                        proc.send_signal(answer)
                    else:
                        typed = asked[-1].decode() if answer == CHALLENGE else answer
                        os.write(master, typed.encode() + b"\n")
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            proc.wait(timeout=30)
            pytest.fail(f"{args} did not end within {timeout} s; output so far: {out.decode(errors='replace')}")
        return proc.wait(timeout=30), out.decode(errors="replace").replace("\r\n", "\n")
    finally:
        os.close(master)
