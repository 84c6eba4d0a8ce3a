"""Validation of prime-rl configs against the real prime-rl schema, as the platform runs it.

Staging package: it moves to ``tools/configs/_schema_*.py`` (imports nothing from ``tools``).
Two back-ends give a :class:`Verdict` for a parsed TOML table:

- :func:`check_real`: prime-rl's own ``RLConfig``/``SFTConfig`` in a Python 3.12 interpreter
  that has ``prime_rl.configs`` (a checkout, the prime CLI's cached schema environments, or
  ``MODEL_FACTORY_SCHEMA_PYTHON``), in a kept-alive subprocess. Raises
  :class:`RealBackendUnavailable` (with a finding) when no interpreter works.
- :func:`check_snapshot`: the JSON Schemas shipped in ``snapshot/`` (exported at the platform's
  schema commit), checked in-process with ``jsonschema``, plus the structural rules for what
  JSON Schema cannot say. Needs nothing installed.

:func:`check` picks (``schema="auto"``: real when an interpreter works, else snapshot) and falls
back to the snapshot with a warning finding when the real back-end cannot run. Both back-ends
run the same hosted pipeline (:mod:`schema_staging._hosted`): the CLI's key handling, the
worker's set-aside blocks and hosted rejections, and the full check the platform does when the
run starts. NOTES.md describes the prime 0.18.0 behaviour mirrored here.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from schema_staging._findings import Backend, Finding, Mode, Verdict, dotted, key_path
from schema_staging._hosted import run_pipeline, sniff_mode
from schema_staging._real import (
    Interpreter,
    RealBackendUnavailable,
    close_workers,
    find_interpreters,
    validate_with,
    worker_for,
)
from schema_staging._snapshot import snapshot_metadata, snapshot_schema

__all__ = [
    "Backend",
    "Finding",
    "Interpreter",
    "Mode",
    "RealBackendUnavailable",
    "Verdict",
    "check",
    "check_real",
    "check_snapshot",
    "close_workers",
    "dotted",
    "find_interpreters",
    "key_path",
    "sniff_mode",
    "snapshot_metadata",
]

SchemaChoice = Literal["auto", "real", "snapshot"]
#: Version of our rules and pipeline; part of every cache key (bump when a rule changes).
RULES_VERSION = "1"
_CACHE_SIZE = 256
_cache: OrderedDict[str, Verdict] = OrderedDict()
_cache_lock = threading.Lock()


def check_snapshot(config: Mapping[str, Any], *, mode: Mode | None = None, run_start: bool = True,
                   rules: bool = True) -> Verdict:
    """The snapshot's verdict on ``config`` (a parsed TOML table; not changed).

    ``mode``: ``rl``/``sft``, or None to decide like ``prime train`` (``[data]`` and no
    ``[trainer]``/``[orchestrator]`` is SFT). ``run_start``: also check the RL environment
    sources the way the platform does when the run starts. ``rules=False``: JSON Schema only,
    without the structural rules and hosted rejections (for measuring them). Results are kept
    in memory by (schema commit, mode, rules version, config sha256). Never raises for bad input."""
    raw = dict(config)
    mode = mode or sniff_mode(raw)
    commit = snapshot_metadata()["schema_commit"]
    key = _cache_key(f"snapshot{'' if rules else '-schema-only'}", commit, mode, run_start, raw)
    started = time.perf_counter()
    hit = _cached(key)
    if hit is not None:
        return _timed(hit, time.perf_counter() - started)
    schema = snapshot_schema(mode)
    findings = run_pipeline(raw, mode, lambda data: schema.validate(data, rules=rules), run_start=run_start,
                            hosted_rules=rules)
    verdict = Verdict("snapshot", mode, findings, schema_commit=commit,
                      schema_source="snapshot shipped with the package", elapsed_seconds=time.perf_counter() - started)
    _remember(key, verdict)
    return verdict


def check_real(config: Mapping[str, Any], *, mode: Mode | None = None, python: str | Path | None = None,
               prime_rl_dir: str | Path | None = None, timeout: float = 60.0, run_start: bool = True,
               env: Mapping[str, str] | None = None) -> Verdict:
    """The real schema's verdict on ``config`` (see :mod:`schema_staging._real` for where the
    interpreter comes from). ``timeout``: seconds for the interpreter's start (import) and for
    each validation. The first interpreter that works decides; those that failed before it
    are warnings in the verdict.

    Raises :class:`RealBackendUnavailable` when none works (its ``finding`` says why)."""
    raw = dict(config)
    mode = mode or sniff_mode(raw)
    candidates = find_interpreters(python=python, prime_rl_dir=prime_rl_dir, env=env)
    if not candidates:
        raise RealBackendUnavailable(Finding(
            (), "real prime-rl schema unavailable: no interpreter with prime_rl.configs found. Set "
            "MODEL_FACTORY_SCHEMA_PYTHON to a Python 3.12 that has prime-rl-configs, set PRIME_RL_DIR to a prime-rl "
            "checkout, or run `prime train validate` once (it caches a schema environment).",
            "backend:not_found", severity="warning", stage="backend", kind="backend"))
    failures: list[Finding] = []
    for interpreter in candidates:
        started = time.perf_counter()
        try:
            worker = worker_for(interpreter, timeout=timeout, env=env)
            findings = run_pipeline(raw, mode, lambda data, w=worker: validate_with(w, data, mode, timeout),
                                    run_start=run_start)
        except RealBackendUnavailable as unavailable:
            failures.append(unavailable.finding)
            continue
        return Verdict("real", mode, [*_errors(findings), *failures, *_others(findings)], schema_commit=worker.commit,
                       schema_source=worker.commit_source, interpreter=interpreter.label,
                       elapsed_seconds=time.perf_counter() - started)
    raise RealBackendUnavailable(failures[0] if len(failures) == 1 else Finding(
        (), " | ".join(f.message for f in failures), failures[0].rule, severity="warning", stage="backend",
        kind="backend"))


def check(config: Mapping[str, Any], *, mode: Mode | None = None, schema: SchemaChoice = "auto",
          python: str | Path | None = None, prime_rl_dir: str | Path | None = None, timeout: float = 60.0,
          run_start: bool = True, env: Mapping[str, str] | None = None) -> Verdict:
    """The verdict of the chosen back-end: ``snapshot``; ``real`` (falls back to the snapshot,
    with the reason as a warning, when no interpreter works); ``auto`` (real when an
    interpreter is found, else the snapshot, silently). Never raises for bad input."""
    if schema == "snapshot":
        return check_snapshot(config, mode=mode, run_start=run_start)
    if schema == "auto" and not find_interpreters(python=python, prime_rl_dir=prime_rl_dir, env=env):
        return check_snapshot(config, mode=mode, run_start=run_start)
    try:
        return check_real(config, mode=mode, python=python, prime_rl_dir=prime_rl_dir, timeout=timeout,
                          run_start=run_start, env=env)
    except RealBackendUnavailable as unavailable:
        verdict = check_snapshot(config, mode=mode, run_start=run_start)
        return Verdict("snapshot", verdict.mode, [*_errors(verdict.findings), unavailable.finding,
                                                  *_others(verdict.findings)],
                       schema_commit=verdict.schema_commit, schema_source=verdict.schema_source,
                       elapsed_seconds=verdict.elapsed_seconds, fallback_from="real")


def _errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def _others(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity != "error"]


def _cache_key(backend: str, commit: str, mode: Mode, run_start: bool, raw: dict[str, Any]) -> str:
    canonical = json.dumps(raw, sort_keys=True, default=str, separators=(",", ":")).encode()
    return f"{backend}:{commit}:{mode}:{int(run_start)}:{RULES_VERSION}:{hashlib.sha256(canonical).hexdigest()}"


def _cached(key: str) -> Verdict | None:
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
        return hit


def _remember(key: str, verdict: Verdict) -> None:
    with _cache_lock:
        _cache[key] = verdict
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def _timed(verdict: Verdict, seconds: float) -> Verdict:
    return Verdict(verdict.backend, verdict.mode, list(verdict.findings), schema_commit=verdict.schema_commit,
                   schema_source=verdict.schema_source, interpreter=verdict.interpreter, elapsed_seconds=seconds,
                   fallback_from=verdict.fallback_from)
