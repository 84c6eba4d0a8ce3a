"""The ``prime`` back-end: ``prime train validate`` itself (prime 0.18.0), opt-in (``schema="prime"``).

It is what a person would run: the CLI reads the file with the ``toml`` package, asks the
platform which prime-rl runtime a launch would get (``POST /training/runs/prepare``: needs
``PRIME_API_KEY``), builds a Python 3.12 venv with ``prime-rl-configs`` at that runtime's schema
commit (from GitHub, cached under ``~/.cache/prime/training-schemas``) and runs its schema worker.
:func:`run_prime_validate` runs it with the same ``--sft`` / ``--image-tag`` / ``--ref`` as the
intended launch and ``-o json``, and reads the answer:

- an artifact (``{"schema_commit": ..., ...}``): valid, checked by the real schema at that commit;
- ``{"error": "Config validation failed:\\n<loc>: <message>..."}``: the schema's errors, as
  findings at their key paths; ``{"error": <a hosted rejection>}``: that rule;
- anything else (no ``prime`` on PATH, no API key, the platform unreachable, "Could not build
  local schema environment" when offline or without uv, a timeout): :class:`PrimeUnavailable`,
  and the caller falls back to the snapshot, saying why.

The CLI gets the caller's environment (it needs the API key and the prime config), with
``PRIME_DISABLE_VERSION_CHECK=1``. Environment sources are set aside by the CLI (the platform
checks them when the run starts), as in ``prime train validate``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.configs._facts import Mode
from tools.configs._rules import HOSTED_ORDER, RULE_BY_ID
from tools.configs._schema_findings import Finding, Verdict, key_path
from tools.configs._schema_snapshot import union_tags

#: Seconds ``prime train validate`` may take (its first run builds a venv from GitHub).
DEFAULT_TIMEOUT = 600.0
_FAILED = "Config validation failed:"
#: Messages of the hosted rejections, as the worker words them -> rule id.
_HOSTED_MESSAGES = {
    "[k8s] is not supported for hosted runs": "k8s",
    "clean = true is unsupported for hosted runs": "clean",
    'type = "disaggregated" is unsupported for hosted runs': "disaggregated_inference",
    "Hosted RL runs need inference GPUs": "rl_needs_inference",
}
_LINE = re.compile(r"^(?P<loc>[^:\s][^:]*): (?P<msg>.*)$")


@dataclass(frozen=True)
class PrimeOptions:
    """What the launch would pass: ``image_tag`` (``--image-tag``), ``source_ref`` (``--ref``),
    and the seconds to wait."""

    image_tag: str | None = None
    source_ref: str | None = None
    timeout: float = DEFAULT_TIMEOUT


class PrimeUnavailable(Exception):
    """``prime train validate`` gave no verdict; ``finding`` (stage ``backend``) says why."""

    def __init__(self, why: str, rule: str) -> None:
        super().__init__(why)
        self.finding = Finding((), f"prime train validate gave no verdict: {why}. These findings are the "
                               "snapshot's (the schema shipped with model-factory-skill).", f"backend:prime_{rule}",
                               severity="warning", stage="backend", kind="backend")


def prime_command(path: Path, mode: Mode, options: PrimeOptions, executable: str) -> list[str]:
    """The command line: ``prime train validate PATH -o json [--sft] [--image-tag T] [--ref R]``."""
    command = [executable, "train", "validate", str(path), "-o", "json"]
    if mode == "sft":
        command.append("--sft")
    if options.image_tag:
        command += ["--image-tag", options.image_tag]
    if options.source_ref:
        command += ["--ref", options.source_ref]
    return command


def run_prime_validate(config: Mapping[str, Any], mode: Mode, *, path: Path, options: PrimeOptions,
                       env: Mapping[str, str]) -> Verdict:
    """Run ``prime train validate`` on ``path`` and read its JSON (see the module docstring);
    ``config`` is the tomllib reading of the file (for key paths). Raises :class:`PrimeUnavailable`."""
    executable = shutil.which("prime", path=env.get("PATH", os.defpath))
    if executable is None:
        raise PrimeUnavailable("the prime CLI is not on PATH (install it: uv tool install prime)", "not_found")
    command = prime_command(path, mode, options, executable)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=options.timeout, check=False,
                              env={**env, "PRIME_DISABLE_VERSION_CHECK": "1"}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise PrimeUnavailable(f"no answer within {options.timeout:g} s", "timeout") from None
    except OSError as exc:
        raise PrimeUnavailable(f"it cannot be started ({exc.strerror or exc})", "start") from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        tail = " / ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:400]
        raise PrimeUnavailable(f"it exited with status {done.returncode} and printed no JSON ({tail})",
                               "output") from None
    if not isinstance(answer, dict):
        raise PrimeUnavailable("it printed JSON that is neither an artifact nor an error", "output")
    if "error" not in answer:
        commit = str(answer.get("schema_commit") or "unknown")
        return Verdict("real", mode, [], schema_commit=commit, schema_source="prime train validate (the "
                       "platform's runtime for this launch)", interpreter=" ".join(command[:3]))
    error = str(answer["error"])
    findings = _verdict_findings(error, config)
    if findings is None:
        raise PrimeUnavailable(_first_lines(error), _reason(error))
    return Verdict("real", mode, findings, schema_commit="unknown",
                   schema_source="prime train validate (the platform's runtime for this launch)",
                   interpreter=" ".join(command[:3]))


def _verdict_findings(error: str, config: Mapping[str, Any]) -> list[Finding] | None:
    """The findings of an error that is a verdict on the config, or None when it is not."""
    if error.startswith(_FAILED):
        out = []
        for line in error[len(_FAILED):].strip().splitlines():
            match = _LINE.match(line.strip())
            if match is None:
                continue
            loc = tuple(int(p) if p.isdigit() else p for p in match["loc"].split("."))
            out.append(Finding(key_path(loc, dict(config), None, union_tags()), match["msg"], "prime:validate",
                               source="prime 0.18.0 prime train validate"))
        return out or [Finding((), error, "prime:validate", source="prime 0.18.0 prime train validate")]
    for text, rule in _HOSTED_MESSAGES.items():
        if text in error:
            loc = dict(HOSTED_ORDER).get(rule, ("k8s",))
            return [Finding(loc, error, rule, stage="hosted", kind="hosted", source=RULE_BY_ID[rule].source)]
    return None


def _reason(error: str) -> str:
    if error.startswith("Could not build local schema environment") or "requires uv on PATH" in error:
        return "no_environment"
    if error.startswith("Request failed") or "API" in error or "401" in error or "403" in error:
        return "platform"
    return "error"


def _first_lines(error: str) -> str:
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    text = " / ".join(lines[:4])
    return text if len(text) <= 500 else text[:497] + "..."
