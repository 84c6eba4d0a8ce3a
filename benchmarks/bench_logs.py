"""The error digest of a day-long run, side by side in one run: ``mf_summarize_logs`` against what
``prime train logs`` (0.18.0) prints, on a run of 210,000 log lines within 24 h with 8 distinct
error signatures spread over it (the emulator's ``long_run`` scenario, in its own process).

    uv run python benchmarks/bench_logs.py [--hours 23] [--lines 210000]

For each, it prints how many of the 8 signatures the output names, its size in characters, the
requests or commands it took, and the wall time:

1. ``mf_summarize_logs`` called in-process (``registry.call_tool``), JSON as an agent gets it.
   Goal: all 8 found within 6,000 characters.
2. ``prime train logs RUN``: the CLI's default (orchestrator, newest 1,000 lines; its snapshot holds 200).
3. ``prime train logs RUN -c COMPONENT --level ERROR --since 24h`` for each component and env server:
   what a person who knows where to look runs (the issue's best case).

A signature counts as found when the output holds its message up to the first varying number.
prime 0.18.0 runs from its own environment (tests/_conformance/envs.py builds it with uv
when missing). Nothing leaves loopback.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._emulator import Emulator  # noqa: E402
from skill import registry  # noqa: E402
from skill.emulator.logvolume import SIGNATURES  # noqa: E402
from tests._conformance import envs  # noqa: E402
from tools.core import Context  # noqa: E402
from tools.monitor import normalise  # noqa: E402

#: Each signature's message as a pattern (its varying parts as any non-space text): what an output must hold.
PATTERNS = [re.compile(r"\S+?".join(map(re.escape, re.split(r"\{\w+\}", sig.message)))) for sig in SIGNATURES]
#: The same messages as mf_summarize_logs masks them.
MASKED = {normalise(sig.message.format(step=1, n=1, v=1, tokens=1)) for sig in SIGNATURES}


def found(text: str) -> int:
    """How many of the signatures ``text`` names."""
    return sum(1 for pattern in PATTERNS if pattern.search(text))


def prime(exe: Path, env: dict[str, str], *args: str) -> tuple[str, float]:
    start = time.perf_counter()
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=600, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"prime {' '.join(args)} exited {done.returncode}: {done.stderr[-500:]}")
    return done.stdout, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=23.0, help="the run's length (within 24 h)")
    parser.add_argument("--lines", type=int, default=210_000, help="routine log lines over those hours")
    args = parser.parse_args()
    exe = envs.prime_python().parent / "prime"
    emu = Emulator()
    try:
        run_id = emu.finished_run("long_run", seconds=60 + 90 + args.hours * 3600 + 10 + 60, hours=args.hours,
                                  lines=args.lines)
        with tempfile.TemporaryDirectory() as tmp:
            env = {**emu.env(Path(tmp)), "PATH": "/usr/bin:/bin", "COLUMNS": "200", "NO_COLOR": "1"}
            ctx = Context(env=env, home=Path(tmp), state_dir=Path(tmp) / "state")
            assert registry.get("mf_summarize_logs").function  # imported before the clock starts
            start = time.perf_counter()
            result = registry.call_tool("mf_summarize_logs", {"run_id": run_id}, ctx)
            ours_seconds = time.perf_counter() - start
            ours = result.model_dump_json()
            requests = sum(s.requests for s in result.streams)
            default, default_seconds = prime(exe, env, "train", "logs", run_id)
            per_component = [("orchestrator",), ("trainer",), ("inference",), ("env-server", "--env", "reverse-text")]
            outputs, prime_seconds = [], 0.0
            for component in per_component:
                text, seconds = prime(exe, env, "train", "logs", run_id, "-c", component[0], *component[1:],
                                      "--level", "ERROR", "--since", "24h")
                outputs.append(text)
                prime_seconds += seconds
            ctx.close()
    finally:
        emu.close()
    ours_found = len(MASKED & {s.pattern for s in result.errors})
    print(f"Run {run_id}: long_run over {args.hours:g} h, {args.lines:,} routine lines, {len(SIGNATURES)} error "
          "signatures\n")
    print(f"{'output':<58}{'found':>7}{'characters':>12}{'calls':>14}{'seconds':>9}")
    rows = [("mf_summarize_logs (JSON, in-process)", ours_found, len(ours), f"{requests} requests", ours_seconds),
            ("prime train logs RUN (default)", found(default), len(default), "1 command", default_seconds),
            ("prime train logs -c C --level ERROR --since 24h (x4)", found("".join(outputs)),
             sum(map(len, outputs)), "4 commands", prime_seconds)]
    for label, hits, chars, calls, seconds in rows:
        print(f"{label:<58}{f'{hits}/{len(SIGNATURES)}':>7}{chars:>12,}{calls:>14}{seconds:>9.2f}")
    met = ours_found == len(SIGNATURES) and len(ours) <= 6000
    print(f"\ngoal: every signature found within 6,000 characters: {'met' if met else 'NOT met'} "
          f"(covers_whole_run={result.covers_whole_run}, looked back {result.looked_back_seconds} s, "
          f"caps: {json.dumps(result.caps)})")


if __name__ == "__main__":
    main()
