"""The schema back-ends, chosen by name, each giving a :class:`Verdict` on a parsed TOML table.

- :func:`check_real`: prime-rl's own ``RLConfig``/``SFTConfig`` in a Python 3.12 interpreter
  that has ``prime_rl.configs`` (``_schema_real``: a checkout, the prime CLI's cached schema
  environments, ``MODEL_FACTORY_SCHEMA_PYTHON``), in a kept-alive subprocess.
- :func:`check_snapshot`: the JSON Schemas shipped in ``schema_snapshot/`` (exported at the
  platform's schema commit), checked in-process (``_schema_snapshot``) with the validator
  mirrors of :data:`~tools.configs._rules.RULES`. Needs nothing installed.
- ``prime``: ``prime train validate`` itself (``_schema_prime``), opt-in only.

All run the same hosted pipeline (``_schema_pipeline``): the CLI's key handling, the worker's
set-aside blocks and hosted rejections, and (real, snapshot) the full check the platform does
when the run starts. :func:`check` picks: ``snapshot``; ``real`` (falls back to the snapshot,
with the reason as a warning, when no interpreter works); ``auto`` (real when an interpreter is
found, else the snapshot, silently); ``prime`` (falls back to the snapshot, saying why, when the
CLI cannot validate). Verdicts are remembered (``_schema_cache``) by back-end, schema commit
(for the real back-end with a digest of the config sources it imports: ``schema_identity``),
mode, rules version and config sha256. None of these raise for bad input.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal

from tools.configs._facts import Mode
from tools.configs._schema_cache import VerdictCache, cache_key
from tools.configs._schema_findings import Finding, Verdict
from tools.configs._schema_pipeline import cli_config, run_pipeline
from tools.configs._schema_prime import PrimeOptions, PrimeUnavailable, run_prime_validate
from tools.configs._schema_real import (
    Interpreter,
    RealBackendUnavailable,
    checkout_problem,
    find_interpreters,
    schema_identity,
    validate_with,
    worker_for,
)
from tools.configs._schema_snapshot import snapshot_metadata, snapshot_schema

SchemaChoice = Literal["auto", "real", "snapshot", "prime"]
SNAPSHOT_SOURCE = "the JSON Schema snapshot shipped with model-factory-skill (tools/configs/schema_snapshot)"
_MEMORY = VerdictCache(None)


def check_snapshot(config: Mapping[str, Any], mode: Mode, *, run_start: bool = True, rules: bool = True,
                   cache: VerdictCache | None = None) -> Verdict:
    """The snapshot's verdict on ``config`` (a parsed TOML table; not changed). ``run_start``:
    also check the RL environment sources the way the platform does when the run starts.
    ``rules=False``: JSON Schema only, without the validator mirrors and hosted rejections (to
    measure them). ``cache``: where verdicts are remembered (default: this process's memory)."""
    started = time.perf_counter()
    raw = dict(config)
    commit = snapshot_metadata()["schema_commit"]
    cache = cache or _MEMORY
    key = cache_key("snapshot" if rules else "snapshot-schema-only", commit, mode, run_start, raw)
    hit = cache.get(key)
    if hit is not None:
        hit.elapsed_seconds = time.perf_counter() - started
        return hit
    schema = snapshot_schema(mode)
    findings = run_pipeline(raw, mode, lambda data: schema.validate(data, rules=rules), run_start=run_start,
                            hosted_rules=rules)
    verdict = Verdict("snapshot", mode, findings, schema_commit=commit, schema_source=SNAPSHOT_SOURCE,
                      elapsed_seconds=time.perf_counter() - started)
    cache.put(key, verdict)
    return verdict


def check_real(config: Mapping[str, Any], mode: Mode, *, python: str | Path | None = None,
               prime_rl_dir: str | Path | None = None, timeout: float = 60.0, run_start: bool = True,
               env: Mapping[str, str] | None = None, cwd: Path | None = None, home: Path | None = None,
               cache: VerdictCache | None = None) -> Verdict:
    """The real schema's verdict on ``config`` (see ``_schema_real`` for where the interpreter
    comes from). ``timeout``: seconds for the interpreter's start (import) and for each
    validation. The first interpreter that works decides; those that failed before it are
    warnings in the verdict. A verdict of an interpreter whose commit is known is remembered
    on disk too.

    Raises :class:`RealBackendUnavailable` when none works (its ``finding`` says why)."""
    raw = dict(config)
    cache = cache or _MEMORY
    candidates = find_interpreters(python=python, prime_rl_dir=prime_rl_dir, env=env, cwd=cwd, home=home)
    failures: list[Finding] = []
    if prime_rl_dir is not None and (problem := checkout_problem(Path(prime_rl_dir))):
        failures.append(problem)
    if not candidates:
        raise RealBackendUnavailable(failures[0] if failures else Finding(
            (), "real prime-rl schema unavailable: no interpreter with prime_rl.configs found. Set "
            "MODEL_FACTORY_SCHEMA_PYTHON to a Python 3.12 that has prime-rl-configs, set PRIME_RL_DIR (or pass "
            "prime_rl_dir) to a prime-rl checkout, or run `prime train validate` once (it caches a schema "
            "environment).", "backend:not_found", severity="warning", stage="backend", kind="backend"))
    for interpreter in candidates:
        started = time.perf_counter()
        identity = schema_identity(interpreter)
        key = cache_key("real", _identity(interpreter, identity), mode, run_start, raw)
        hit = cache.get(key)
        if hit is not None:
            hit.elapsed_seconds = time.perf_counter() - started
            hit.findings = [*_errors(hit.findings), *failures, *_others(hit.findings)]
            return hit
        try:
            worker = worker_for(interpreter, timeout=timeout, env=env, identity=identity)
            findings = run_pipeline(raw, mode, partial(validate_with, worker, mode=mode, timeout=timeout),
                                    run_start=run_start)
        except RealBackendUnavailable as unavailable:
            failures.append(unavailable.finding)
            continue
        verdict = Verdict("real", mode, findings, schema_commit=worker.commit, schema_source=worker.commit_source,
                          interpreter=interpreter.label, elapsed_seconds=time.perf_counter() - started)
        # Remembered only when the identity names every prime_rl file the worker imported and they did not
        # change while it judged (an edit during the check gives the next check another identity).
        if worker.covered and schema_identity(interpreter) == identity:
            cache.put(key, verdict, disk=interpreter.cacheable)
        return Verdict("real", mode, [*_errors(findings), *failures, *_others(findings)],
                       schema_commit=worker.commit, schema_source=worker.commit_source,
                       interpreter=interpreter.label, elapsed_seconds=verdict.elapsed_seconds)
    raise RealBackendUnavailable(failures[0] if len(failures) == 1 else Finding(
        (), " | ".join(f.message for f in failures), failures[0].rule, severity="warning", stage="backend",
        kind="backend"))


def _identity(interpreter: Interpreter, identity: str) -> str:
    """What the cache key says about the schema of ``interpreter``: its :func:`schema_identity`
    (commit plus the digest of the config sources it imports), and for one whose commit does not
    say everything (kept in memory only) the interpreter too."""
    if interpreter.cacheable and interpreter.commit:
        return identity
    return f"uncommitted:{interpreter.label}:{identity}"


def check_prime(config: Mapping[str, Any], mode: Mode, *, path: Path, options: PrimeOptions,
                env: Mapping[str, str], cache: VerdictCache | None = None) -> Verdict:
    """``prime train validate`` on the file ``path`` (whose parsed table is ``config``), with
    the launch's ``--sft`` / ``--image-tag`` / ``--ref``. When the CLI gives no verdict (not
    installed, no API key, cannot build its schema environment: offline, no uv, ...), the
    snapshot's verdict, with ``fallback_from = "prime"`` and a warning that says why."""
    try:
        verdict = run_prime_validate(config, mode, path=path, options=options, env=env)
    except PrimeUnavailable as unavailable:
        fallback = check_snapshot(config, mode, cache=cache)
        return _fallen_back(fallback, unavailable.finding, "prime")
    cli = cli_config(dict(config))[1]  # the CLI prints these to stderr; the same findings as the other back-ends
    verdict.findings = [*_errors(verdict.findings), *cli, *_others(verdict.findings)]
    return verdict


def check(config: Mapping[str, Any], mode: Mode, *, schema: SchemaChoice = "auto", python: str | Path | None = None,
          prime_rl_dir: str | Path | None = None, timeout: float = 60.0, run_start: bool = True,
          env: Mapping[str, str] | None = None, cwd: Path | None = None, home: Path | None = None,
          cache: VerdictCache | None = None, path: Path | None = None, prime: PrimeOptions | None = None) -> Verdict:
    """The verdict of the chosen back-end (see the module docstring). ``env``/``cwd``/``home``:
    where to look for interpreters (``_schema_real.find_interpreters``); ``path``/``prime``: the
    file and options for ``schema="prime"``. Never raises for bad input."""
    if schema == "snapshot":
        return check_snapshot(config, mode, run_start=run_start, cache=cache)
    if schema == "prime":
        return check_prime(config, mode, path=path or Path("config.toml"), options=prime or PrimeOptions(),
                           env=env or {}, cache=cache)
    if schema == "auto" and not find_interpreters(python=python, prime_rl_dir=prime_rl_dir, env=env, cwd=cwd,
                                                  home=home):
        verdict = check_snapshot(config, mode, run_start=run_start, cache=cache)
        if prime_rl_dir is not None and (problem := checkout_problem(Path(prime_rl_dir))):
            return _fallen_back(verdict, problem, "real")
        return verdict
    try:
        return check_real(config, mode, python=python, prime_rl_dir=prime_rl_dir, timeout=timeout,
                          run_start=run_start, env=env, cwd=cwd, home=home, cache=cache)
    except RealBackendUnavailable as unavailable:
        verdict = check_snapshot(config, mode, run_start=run_start, cache=cache)
        return _fallen_back(verdict, unavailable.finding, "real")


def _fallen_back(verdict: Verdict, why: Finding, wanted: Literal["real", "prime"]) -> Verdict:
    return Verdict(verdict.backend, verdict.mode, [*_errors(verdict.findings), why, *_others(verdict.findings)],
                   schema_commit=verdict.schema_commit, schema_source=verdict.schema_source,
                   elapsed_seconds=verdict.elapsed_seconds, fallback_from=wanted, cached=verdict.cached)


def _errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def _others(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity != "error"]
