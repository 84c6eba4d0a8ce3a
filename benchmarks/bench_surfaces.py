"""Side-by-side timings of the agent surfaces, in one run against a local emulator.

    uv run python benchmarks/bench_surfaces.py [--runs 7] [--calls 50]

Prints medians (and min/max) of:

1. ``model-factory mcp`` (the SDK's server): wall time from spawning the process to the
   ``tools/list`` answer, the way a client does it (``initialize``, wait,
   ``notifications/initialized`` + ``tools/list``), and to the answer of a first ``tools/call``.
   No goal: MCP hosts wait seconds for a server to start.
2. The import time of the ``tools`` package, and of every tool module (what an in-process
   host pays once), each in a fresh interpreter.
3. ``mf_get_run`` called in-process through the registry vs ``prime train get RUN -o json``
   as a subprocess (prime 0.18.0). Goal: at least 100x faster.
4. ``model-factory get-run RUN --json`` as a subprocess vs the same ``prime`` command.
   Goal: at least 2x faster.

``prime`` 0.18.0 runs from its own virtual environment (the one tests/test_prime_cli_interop.py
builds: ``~/.cache/model-factory-skill/prime-0.18.0``, or ``$MF_PRIME_VENV``); it is built
with uv when missing. Nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from skill.emulator import EmulatorServer  # noqa: E402
from tools.configs import EXAMPLES_DIR  # noqa: E402

PRIME_VERSION = "0.18.0"
PRIME_VENV = Path(os.environ.get("MF_PRIME_VENV") or
                  Path.home() / ".cache" / "model-factory-skill" / f"prime-{PRIME_VERSION}")
BIN = Path(sys.executable).parent
MODEL_FACTORY = str(BIN / ("model-factory.exe" if os.name == "nt" else "model-factory"))


# -- measuring ----------------------------------------------------------------------------


def timed(fn: Callable[[], Any], runs: int) -> list[float]:
    """Wall seconds of ``fn`` over ``runs`` runs."""
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def mcp_session(env: dict[str, str]) -> tuple[float, float]:
    """Seconds from spawning ``model-factory mcp`` to its ``tools/list`` answer, and to the
    answer of a first ``tools/call`` (``mf_list_examples``) sent right after."""
    start = time.perf_counter()
    proc = subprocess.Popen([MODEL_FACTORY, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    def answer(request_id: int) -> dict[str, Any]:
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("model-factory mcp closed stdout")
            message = json.loads(line)
            if message.get("id") == request_id:
                return message

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "bench", "version": "1"}}})
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = answer(2)["result"]["tools"]
        listed = time.perf_counter() - start
        assert tools, "empty tool list"
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
              "params": {"name": "mf_list_examples", "arguments": {}}})
        assert answer(3)["result"]["isError"] is False
        return listed, time.perf_counter() - start
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def import_seconds(statement: str, env: dict[str, str]) -> float:
    """Seconds ``statement`` takes in a fresh interpreter (measured inside it)."""
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env, cwd=ROOT)
    return float(done.stdout.strip())


def run_quiet(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(command, check=False, capture_output=True, text=True, env=env, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} exited {done.returncode}: {done.stderr[-400:]}")
    return done.stdout


def prime_exe() -> Path | None:
    """prime 0.18.0 from its own venv, built with uv when missing; None when impossible."""
    exe = PRIME_VENV / ("Scripts/prime.exe" if os.name == "nt" else "bin/prime")
    if exe.exists():
        return exe
    uv = shutil.which("uv")
    if uv is None:
        return None
    print(f"(building prime {PRIME_VERSION} in {PRIME_VENV} ...)", file=sys.stderr)
    PRIME_VENV.parent.mkdir(parents=True, exist_ok=True)
    for step in ([uv, "venv", "--quiet", "--python", sys.executable, str(PRIME_VENV)],
                 [uv, "pip", "install", "--quiet", "--python", str(PRIME_VENV / "bin" / "python"),
                  f"prime=={PRIME_VERSION}"]):
        if subprocess.run(step, check=False, capture_output=True).returncode != 0:
            return None
    return exe if exe.exists() else None


# -- reporting ----------------------------------------------------------------------------


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:9.1f} ms  ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def row(label: str, ours: list[float] | None, theirs: list[float] | None, goal: str, verdict: str) -> list[str]:
    return [label, ms(ours) if ours else "n/a", ms(theirs) if theirs else "-", goal, verdict]


def ratio(ours: list[float] | None, theirs: list[float] | None) -> float | None:
    if not ours or not theirs:
        return None
    return statistics.median(theirs) / statistics.median(ours)


def print_table(rows: list[list[str]]) -> None:
    header = ["measurement", "ours: median (min-max)", "compared with: median (min-max)", "goal", "result"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print(line)
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


# -- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="subprocess runs per figure (default 7)")
    parser.add_argument("--calls", type=int, default=50, help="in-process calls per figure (default 50)")
    args = parser.parse_args()

    from skill import registry
    from tools.core import Context
    from tools.platform import wire
    from tools.platform.client import PlatformClient
    from tools.platform.settings import resolve_settings

    with EmulatorServer(speed=0) as emu, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = {
            "PRIME_API_KEY": emu.api_key, "PRIME_API_BASE_URL": emu.base_url, "PRIME_TRACES_URL": emu.base_url,
            "PRIME_DISABLE_VERSION_CHECK": "1", "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
            "MODEL_FACTORY_STATE_DIR": str(Path(tmp) / "state"), "PATH": os.environ.get("PATH", ""),
            "NO_COLOR": "1", "COLUMNS": "200",
        }
        config = tomllib.loads((EXAMPLES_DIR / "basic/reverse-text/rl.toml").read_text())
        settings = resolve_settings(env=env, home=home)
        with PlatformClient(settings) as client:
            run_id = client.create_run(wire.build_create_body(config, name="bench")).run_id
        emu.state.advance(600)  # running, with some steps
        print(f"emulator {emu.base_url}, run {run_id}; {args.runs} subprocess runs, {args.calls} in-process calls "
              f"per figure; {os.cpu_count()} CPUs, Python {sys.version.split()[0]}\n", file=sys.stderr)

        rows: list[list[str]] = []

        # 1. MCP start -> tools/list, and the first call
        mcp_session(env)  # once untimed: the OS file cache
        sessions = [mcp_session(env) for _ in range(args.runs)]
        listed, first_call = [s[0] for s in sessions], [s[1] for s in sessions]
        rows.append(row("mcp: start -> tools/list", listed, None, "(SDK server)", ""))
        rows.append(row("mcp: start -> first tools/call answered", first_call, None, "(SDK server)", ""))

        # 2. import time
        imports = [import_seconds("import tools", env) for _ in range(args.runs)]
        modules = sorted({s.target.split(":")[0] for s in registry.TOOLS})
        all_tools = [import_seconds("; ".join(f"import {m}" for m in modules), env) for _ in range(args.runs)]
        rows.append(row("import tools", imports, None, "cheap", ""))
        rows.append(row(f"import every tool module ({len(modules)})", all_tools, None, "(once per host)", ""))

        # 3/4. get_run: in-process, our CLI, prime
        ctx = Context(env=env, home=home, state_dir=Path(tmp) / "state")
        first = registry.call_tool("mf_get_run", {"run_id": run_id}, ctx)
        if registry.is_error(first):
            raise SystemExit(f"mf_get_run failed: {first.message}")
        in_process = timed(lambda: registry.call_tool("mf_get_run", {"run_id": run_id}, ctx), args.calls)
        ctx.close()
        ours_cli = timed(lambda: run_quiet([MODEL_FACTORY, "get-run", run_id, "--json"], env), args.runs)
        exe = prime_exe()
        prime_runs = None
        if exe is not None:
            json.loads(run_quiet([str(exe), "train", "get", run_id, "-o", "json"], env))
            prime_runs = timed(lambda: run_quiet([str(exe), "train", "get", run_id, "-o", "json"], env), args.runs)
        r3, r4 = ratio(in_process, prime_runs), ratio(ours_cli, prime_runs)
        rows.append(row("get_run in-process vs `prime train get -o json`", in_process, prime_runs, ">= 100x faster",
                        f"{r3:.0f}x {'met' if r3 >= 100 else 'NOT met'}" if r3 else "prime n/a"))
        rows.append(row("`model-factory get-run --json` vs prime", ours_cli, prime_runs, ">= 2x faster",
                        f"{r4:.1f}x {'met' if r4 >= 2 else 'NOT met'}" if r4 else "prime n/a"))

    print_table(rows)


if __name__ == "__main__":
    main()
