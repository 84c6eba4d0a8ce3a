"""Conformance of our config validation with the platform's, and its cost, in one run.

    uv run python benchmarks/validation_conformance.py [--configs DIR] [--no-real] [--show N] [--only PREFIX]

The corpus (benchmarks/_conformance/corpus.py): the ten bundled examples and their mutations,
plus every ``*.toml`` under ``--configs DIR`` (configs this corpus has not seen). Each config
goes through the reference -- prime 0.18.0's own ``_hosted_config`` and
``training_schema_worker`` on the fixture's prime-rl 559b447 (provenance check skipped), then
the full schema with the environment sources kept, as the platform checks at run start
(benchmarks/_conformance/reference.py) -- and through each of our back-ends:

- ``real``: schema_staging.check_real on the fixture's schema environment (with the tasksets);
- ``snapshot (schema only)``: the shipped JSON Schemas, without the structural rules;
- ``snapshot + rules``: the snapshot back-end as shipped;
- ``structural rules (today)``: tools.configs as it is on main, for comparison.

"Agree": same verdict and, for a rejection, the same first error key path. Printed per
back-end: agreement, misses (the platform rejects, we accept), false alarms, different first
errors; with ``--show`` the cases that disagree. Then timings: the snapshot in-process (the
largest example; cold = first check in a fresh interpreter after ``import schema_staging``,
which loads and compiles the schema; warm = the config changed; cached = the same config
again; goals < 50 ms cold, < 5 ms cached) and the real back-end
(cold = worker start with the prime-rl import plus the first check, warm = a check with the
worker running). Goals: real agrees on every config; snapshot + rules on at least 95%.

The environments are built when missing (benchmarks/_conformance/envs.py): the fixture's
schema venv with ``build-venv.sh --with-tasksets`` and prime 0.18.0 from PyPI; the build
time is printed. Needs ``../shared/fixtures/prime-rl-schema``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import schema_staging  # noqa: E402
from benchmarks._conformance import corpus, envs  # noqa: E402
from benchmarks._conformance.compare import Tally, summary_rows  # noqa: E402
from benchmarks._conformance.reference import Reference  # noqa: E402
from schema_staging import Verdict  # noqa: E402


def _today(raw: dict[str, Any], mode: str) -> Verdict | None:
    """tools.configs's structural rules (main's validate_config), as a Verdict, when importable."""
    try:
        from tools.configs import analyze
    except ImportError:
        return None
    try:
        report = analyze(raw, ROOT / "config.toml", mode=mode)  # type: ignore[arg-type]
    except Exception as exc:  # main's rules crash on some values: count it as their verdict
        return Verdict("snapshot", mode, [schema_staging.Finding((), f"crashed: {type(exc).__name__}: {exc}",  # type: ignore[arg-type]
                                                                   "crash")])
    findings = [schema_staging.Finding(_loc(found.path), found.message, found.rule) for found in report.errors]
    return Verdict("snapshot", report.mode, findings)


def _loc(path: str) -> tuple[str | int, ...]:
    return tuple(corpus._parts(path)) if path else ()


def _items(configs: Path | None, fuzz: int, seed: int) -> list[tuple[str, dict[str, Any], Path | None]]:
    items: list[tuple[str, dict[str, Any], Path | None]] = [(c.id, corpus.build(c), None) for c in corpus.cases()]
    items += [(c.id, corpus.build(c), None) for c in corpus.fuzz(fuzz, seed)]
    if configs is not None:
        for path in sorted(configs.rglob("*.toml")):
            try:
                items.append((f"file/{path.relative_to(configs)}", tomllib.loads(path.read_text()), path))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                print(f"skipped {path}: not TOML that tomllib reads ({exc})", file=sys.stderr)
    return items


_COLD_SNIPPET = """
import sys, time, tomllib
sys.path.insert(0, {root!r})
t = time.perf_counter(); import schema_staging; imported = time.perf_counter() - t
a = tomllib.loads(open({a!r}).read()); b = dict(a, max_steps=999)
t = time.perf_counter(); schema_staging.check_snapshot(a); cold = time.perf_counter() - t
t = time.perf_counter(); schema_staging.check_snapshot(b); warm = time.perf_counter() - t
t = time.perf_counter(); schema_staging.check_snapshot(b); cached = time.perf_counter() - t
print(imported, cold, warm, cached)
"""


def _snapshot_timings(runs: int) -> list[list[float]]:
    """[import, cold, warm, cached] seconds per run, each run a fresh interpreter, on the
    largest example (advanced/glm-4.5-air/swe; warm: the same with another max_steps)."""
    a = ROOT / "tools" / "examples" / "advanced" / "glm-4.5-air" / "swe.toml"
    columns: list[list[float]] = [[], [], [], []]
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _COLD_SNIPPET.format(root=str(ROOT), a=str(a))],
                             capture_output=True, text=True, check=True).stdout.split()
        for column, value in zip(columns, out, strict=True):
            column.append(float(value))
    return columns


def _real_timings(python: Path, runs: int) -> tuple[list[float], list[float]]:
    raw = corpus.load_example("rt")
    other = corpus.load_example("glm45")
    cold, warm = [], []
    for _ in range(runs):
        schema_staging.close_workers()
        started = time.perf_counter()
        schema_staging.check_real(raw, python=python)
        cold.append(time.perf_counter() - started)
        for config in (other, raw, other):
            started = time.perf_counter()
            schema_staging.check_real(config, python=python)
            warm.append(time.perf_counter() - started)
    return cold, warm


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:9.1f} ms ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=Path, help="also check every *.toml under this folder")
    parser.add_argument("--no-real", action="store_true", help="leave out the real back-end")
    parser.add_argument("--show", type=int, default=15, help="disagreements to print per back-end (default 15)")
    parser.add_argument("--only", default="", help="only corpus cases whose id starts with this")
    parser.add_argument("--fuzz", type=int, default=0, help="also N random mutations (ids fuzz/...)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random mutations (default 0)")
    parser.add_argument("--runs", type=int, default=5, help="repetitions of each timing (default 5)")
    args = parser.parse_args(argv)

    started = time.monotonic()
    schema_python = envs.schema_python(tasksets=True)
    prime_python = envs.prime_python()
    print(f"environments ready in {time.monotonic() - started:.1f} s (schema venv build: "
          f"{envs.build_seconds(schema_python) or 'unrecorded'} s when built; {schema_python})")

    items = [i for i in _items(args.configs, args.fuzz, args.seed) if i[0].startswith(args.only)]
    backends: list[tuple[Tally, Callable[[dict[str, Any], str], Verdict | None]]] = []
    if not args.no_real:
        backends.append((Tally("real"), lambda raw, mode: schema_staging.check_real(raw, mode=mode,
                                                                                    python=schema_python)))
    backends += [
        (Tally("snapshot (schema only)"), lambda raw, mode: schema_staging.check_snapshot(raw, mode=mode, rules=False)),
        (Tally("snapshot + rules"), lambda raw, mode: schema_staging.check_snapshot(raw, mode=mode)),
        (Tally("structural rules (today)"), _today),
    ]
    stages: dict[str, int] = {}
    unknown = 0
    with Reference(prime_python, schema_python, envs.prime_worker_file(prime_python)) as reference:
        for case_id, raw, path in items:
            ref = reference.judge(raw if path is None else None, path=path)
            stages[ref.stage] = stages.get(ref.stage, 0) + 1
            unknown += ref.run_start_unknown
            for tally, run in backends:
                verdict = run(raw, ref.mode)  # type: ignore[arg-type]
                if verdict is not None:
                    tally.add(case_id, ref, verdict)
    tallies = [t for t, _ in backends if t.total]
    fuzzed = sum(1 for i in items if i[0].startswith("fuzz/"))
    print(f"\n{len(items)} configs ({len(items) - fuzzed - sum(1 for i in items if i[2])} corpus cases from the 10 "
          f"examples{f', {fuzzed} random mutations (seed {args.seed})' if fuzzed else ''}"
          f"{f', {sum(1 for i in items if i[2])} files' if args.configs else ''}); reference verdicts by stage: "
          + ", ".join(f"{k} {v}" for k, v in sorted(stages.items()))
          + f"; run-start check unknown (taskset not in the fixture) for {unknown}\n")
    for row in summary_rows(tallies):
        print(row)
    goals = {"real": 1.0, "snapshot + rules": 0.95}
    print()
    for tally in tallies:
        if tally.name in goals:
            met = tally.agreement >= goals[tally.name]
            print(f"goal {tally.name}: >= {goals[tally.name]:.0%} agreement -> {tally.agreement:.1%} "
                  f"{'met' if met else 'NOT met'}")
    for tally in tallies:
        if tally.disagreements and args.show:
            print(f"\n{tally.name}: {len(tally.disagreements)} disagreements"
                  f"{f' (first {args.show})' if len(tally.disagreements) > args.show else ''}")
            for case_id, outcome, detail in tally.disagreements[:args.show]:
                print(f"  {outcome:<18} {case_id:<48} {detail}")

    print("\ntimings, median (min-max) of", args.runs, "runs")
    imported, cold, warm, cached = _snapshot_timings(args.runs)
    print(f"  import schema_staging (fresh interpreter){_ms(imported):>40}")
    print(f"  snapshot, cold (first check after the import){_ms(cold):>35}   goal < 50 ms: "
          f"{'met' if statistics.median(cold) < 0.05 else 'NOT met'}")
    print(f"  snapshot, warm (the config changed){_ms(warm):>46}")
    print(f"  snapshot, cached (the same config again){_ms(cached):>41}   goal < 5 ms: "
          f"{'met' if statistics.median(cached) < 0.005 else 'NOT met'}")
    if not args.no_real:
        real_cold, real_warm = _real_timings(schema_python, min(args.runs, 3))
        print(f"  real, cold (worker start + prime-rl import + check){_ms(real_cold):>30}")
        print(f"  real, warm (worker running){_ms(real_warm):>54}")
    schema_staging.close_workers()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
