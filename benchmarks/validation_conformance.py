"""Conformance of mf_validate_config with the platform's validation, and its cost, in one run.

    uv run python benchmarks/validation_conformance.py [--fuzz N] [--seed S] [--configs DIR] [--no-real] [--show N]

The corpus (tests/_conformance/corpus.py): the ten bundled examples and their mutations,
seeded random mutations (``--fuzz``), and every ``*.toml`` under ``--configs DIR`` (configs this
corpus has not seen). Each config goes through the reference -- prime 0.18.0's own
``_hosted_config`` and ``training_schema_worker`` on the fixture's prime-rl 559b447 (provenance
check skipped), then the full schema with the environment sources kept, as the platform checks
at run start (tests/_conformance/reference.py) -- and, written to a file, through
mf_validate_config (the registry, as every surface calls it) with each of our back-ends:

- ``real``: ``schema="real"``, prime-rl in the fixture's schema environment (with the tasksets),
  named by MODEL_FACTORY_SCHEMA_PYTHON;
- ``snapshot``: ``schema="snapshot"``, the shipped JSON Schemas with the validator mirrors.

("prime", ``prime train validate``, cannot build its schema environment offline; the tests
check its fall-back.) "Agree": same verdict and, for a rejection, the same first error key path.
Printed per back-end: agreement, misses (the platform rejects, we accept), false alarms,
different first errors; with ``--show`` the cases that disagree. Then timings of one
mf_validate_config call (and, in brackets, of its schema check alone): the snapshot in a fresh
interpreter on the largest example (cold = the first call after importing the registry and
tools.configs: it loads the shipped schema; warm = another config; cached = the same config again; disk = a new process
whose state folder remembers the verdict; goals < 50 ms cold, < 5 ms cached) and the real
back-end (cold = worker start with the prime-rl import and the check; warm = the worker
running; cached = the same config again). Goals: real agrees on every config; the snapshot on
at least 95%.

The environments are built when missing (tests/_conformance/envs.py): the fixture's
schema venv with ``build-venv.sh --with-tasksets`` and prime 0.18.0 from PyPI; the build time
is printed. Needs ``../shared/fixtures/prime-rl-schema``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests._conformance import corpus, envs  # noqa: E402
from tests._conformance.compare import Tally, summary_rows, validate, write_table  # noqa: E402
from tests._conformance.reference import Reference  # noqa: E402
from tools.configs import EXAMPLES_DIR, close_schema_workers  # noqa: E402
from tools.core import Context  # noqa: E402

LARGEST = EXAMPLES_DIR / "advanced" / "glm-4.5-air" / "swe.toml"


def _items(folder: Path, configs: Path | None, fuzz: int, seed: int) -> list[tuple[str, Path, dict[str, Any] | None]]:
    """(case id, file, table or None for a file the reference reads itself)."""
    items = []
    for n, case in enumerate([*corpus.cases(), *corpus.fuzz(fuzz, seed)]):
        table = corpus.build(case)
        try:
            items.append((case.id, write_table(table, folder / f"{n:05d}.toml"), table))
        except ValueError as exc:
            print(f"skipped {case.id}: {exc}", file=sys.stderr)
    if configs is not None:
        for path in sorted(configs.rglob("*.toml")):
            try:
                tomllib.loads(path.read_text())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                print(f"skipped {path}: not TOML that tomllib reads ({exc})", file=sys.stderr)
                continue
            items.append((f"file/{path.relative_to(configs)}", path, None))
    return items


def _ctx(folder: Path, **env: str) -> Context:
    return Context(env={"HOME": str(folder), "PATH": "/usr/bin:/bin", **env}, home=folder, cwd=folder,
                   state_dir=folder / "state")


_SNIPPET = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
t = time.perf_counter()
from skill.registry import call_tool
from tools.core import Context
import tools.configs
imported = time.perf_counter() - t
folder = Path({folder!r})
ctx = Context(env={{"HOME": str(folder), "PATH": "/usr/bin:/bin"}}, home=folder, cwd=folder, state_dir=folder / "state")
out = {{"import": imported}}
for label, path in (("cold", {a!r}), ("warm", {b!r}), ("cached", {b!r})):
    t = time.perf_counter()
    report = call_tool("mf_validate_config", {{"config_path": path, "schema": "snapshot"}}, ctx)
    out[label] = [time.perf_counter() - t, report.schema_seconds, report.schema_cached]
print(json.dumps(out))
"""

_DISK_SNIPPET = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from skill.registry import call_tool
from tools.core import Context
import tools.configs
folder = Path({folder!r})
ctx = Context(env={{"HOME": str(folder), "PATH": "/usr/bin:/bin"}}, home=folder, cwd=folder, state_dir=folder / "state")
t = time.perf_counter()
report = call_tool("mf_validate_config", {{"config_path": {b!r}, "schema": "snapshot"}}, ctx)
print(json.dumps({{"disk": [time.perf_counter() - t, report.schema_seconds, report.schema_cached]}}))
"""


def _fresh(snippet: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _snapshot_timings(runs: int) -> dict[str, list[list[float]]]:
    """Per phase, [tool seconds, schema seconds, cached] of each run, each run in fresh interpreters
    with an empty state folder (the disk phase: a second interpreter on the same folder)."""
    phases: dict[str, list[list[float]]] = {}
    for run in range(runs):
        with tempfile.TemporaryDirectory(prefix="mf-bench-") as name:
            folder = Path(name)
            other = folder / "other.toml"
            other.write_text(LARGEST.read_text().replace("max_steps = 1000", f"max_steps = {1001 + run}"))
            formats = {"root": str(ROOT), "folder": str(folder), "a": str(LARGEST), "b": str(other)}
            answers = _fresh(_SNIPPET.format(**formats)) | _fresh(_DISK_SNIPPET.format(**formats))
            for phase, value in answers.items():
                phases.setdefault(phase, []).append(value if isinstance(value, list) else [value, 0.0, False])
    return phases


def _real_timings(python: Path, runs: int) -> dict[str, list[list[float]]]:
    phases: dict[str, list[list[float]]] = {"cold": [], "warm": [], "cached": []}
    for run in range(runs):
        close_schema_workers()
        with tempfile.TemporaryDirectory(prefix="mf-bench-") as name:
            folder = Path(name)
            ctx = _ctx(folder, MODEL_FACTORY_SCHEMA_PYTHON=str(python))
            a = write_table(corpus.load_example("rt") | {"max_steps": 500 + run}, folder / "a.toml")
            b = write_table(corpus.load_example("glm45") | {"max_steps": 600 + run}, folder / "b.toml")
            for phase, path in (("cold", a), ("warm", b), ("cached", b)):
                started = time.perf_counter()
                report = validate(path, ctx, "real", "rl")
                assert report.schema_check == "real", report.warnings
                phases[phase].append([time.perf_counter() - started, report.schema_seconds, report.schema_cached])
    return phases


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} ms ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def _row(label: str, samples: list[list[float]], goal: float | None = None) -> str:
    tool = [s[0] for s in samples]
    schema = [s[1] for s in samples]
    cached = "cached" if all(s[2] for s in samples) else "checked"
    line = f"  {label:<44}{_ms(tool):>26}   [schema {statistics.median(schema) * 1000:.1f} ms, {cached}]"
    if goal is not None:
        line += f"   goal < {goal * 1000:.0f} ms: {'met' if statistics.median(tool) < goal else 'NOT met'}"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=Path, help="also check every *.toml under this folder")
    parser.add_argument("--no-real", action="store_true", help="leave out the real back-end")
    parser.add_argument("--show", type=int, default=15, help="disagreements to print per back-end (default 15)")
    parser.add_argument("--only", default="", help="only cases whose id starts with this")
    parser.add_argument("--fuzz", type=int, default=0, help="also N random mutations (ids fuzz/...)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random mutations (default 0)")
    parser.add_argument("--runs", type=int, default=5, help="repetitions of each timing (default 5)")
    args = parser.parse_args(argv)

    started = time.monotonic()
    schema_python = envs.schema_python(tasksets=True)
    prime_python = envs.prime_python()
    print(f"environments ready in {time.monotonic() - started:.1f} s (schema venv build: "
          f"{envs.build_seconds(schema_python) or 'unrecorded'} s when built; {schema_python})")

    with tempfile.TemporaryDirectory(prefix="mf-conformance-") as name:
        folder = Path(name)
        items = [i for i in _items(folder, args.configs, args.fuzz, args.seed) if i[0].startswith(args.only)]
        ctx = _ctx(folder, MODEL_FACTORY_SCHEMA_PYTHON=str(schema_python))
        tallies = ([] if args.no_real else [Tally("real")]) + [Tally("snapshot")]
        stages: dict[str, int] = {}
        unknown = 0
        with Reference(prime_python, schema_python, envs.prime_worker_file(prime_python)) as reference:
            for case_id, path, table in items:
                ref = reference.judge(table, path=None if table is not None else path)
                stages[ref.stage] = stages.get(ref.stage, 0) + 1
                unknown += ref.run_start_unknown
                for tally in tallies:
                    tally.add(case_id, ref, validate(path, ctx, tally.name, ref.mode))
    fuzzed = sum(1 for i in items if i[0].startswith("fuzz/"))
    files = sum(1 for i in items if i[2] is None)
    print(f"\n{len(items)} configs ({len(items) - fuzzed - files} corpus cases from the 10 examples"
          f"{f', {fuzzed} random mutations (seed {args.seed})' if fuzzed else ''}"
          f"{f', {files} files' if args.configs else ''}), each through mf_validate_config; reference verdicts by "
          "stage: " + ", ".join(f"{k} {v}" for k, v in sorted(stages.items()))
          + f"; run-start check unknown (taskset not in the fixture) for {unknown}\n")
    for row in summary_rows(tallies):
        print(row)
    print("\nwhat decided: " + "; ".join(f"{t.name}: " + ", ".join(f"{k} {v}" for k, v in sorted(t.backends.items()))
                                         for t in tallies))
    goals = {"real": 1.0, "snapshot": 0.95}
    print()
    for tally in tallies:
        met = tally.agreement >= goals[tally.name]
        print(f"goal {tally.name}: >= {goals[tally.name]:.0%} agreement -> {tally.agreement:.1%} "
              f"{'met' if met else 'NOT met'}")
    for tally in tallies:
        if tally.disagreements and args.show:
            print(f"\n{tally.name}: {len(tally.disagreements)} disagreements"
                  f"{f' (first {args.show})' if len(tally.disagreements) > args.show else ''}")
            for case_id, outcome, detail in tally.disagreements[:args.show]:
                print(f"  {outcome:<18} {case_id:<48} {detail}")

    print(f"\ntimings of one mf_validate_config call, median (min-max) of {args.runs} runs "
          "[its schema check alone]")
    snap = _snapshot_timings(args.runs)
    print(f"  {'import registry + tools.configs (fresh)':<44}{_ms([s[0] for s in snap['import']]):>26}")
    print(_row("snapshot, cold (first call after the import)", snap["cold"], 0.05))
    print(_row("snapshot, warm (another config)", snap["warm"]))
    print(_row("snapshot, cached (the same config again)", snap["cached"], 0.005))
    print(_row("snapshot, new process, from the state folder", snap["disk"]))
    if not args.no_real:
        real = _real_timings(schema_python, min(args.runs, 3))
        print(_row("real, cold (worker start + prime-rl import)", real["cold"]))
        print(_row("real, warm (worker running, another config)", real["warm"]))
        print(_row("real, cached (the same config again)", real["cached"]))
    close_schema_workers()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
