"""Analysis shared by the config tools and by planning: a parsed TOML in, a
:class:`ValidateConfigResult` out.

:func:`analyze` runs the ``file`` rules of :data:`~tools.configs._rules.RULES` (what ``prime
train`` checks itself, the guardrails, advice), asks the chosen schema back-end for its verdict
(``_schema_backends``: real, snapshot, or ``prime train validate``), and turns every finding into
an :class:`Issue` a person can act on: the key path, its line and column in the file
(``_positions``), the message (with the key meant, for an unknown key), the rule and what it
mirrors, and a fix (``_advice``). No issue echoes a value that looks like a secret: every value
of the config that the secret detection of :mod:`tools.guardrails.secret_detection` flags is redacted
from the whole report (``secret_scrubber`` of :mod:`tools.guardrails.scrubbing`: messages,
fixes and facts), on top of the context's scrubber. The report is fitted to the output budget.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.configs._advice import advise
from tools.configs._facts import Config, Mode, gpu_count, max_steps_of, model_name_of, sniff_mode, wandb_project_of
from tools.configs._positions import key_positions, position_of
from tools.configs._rules import run_file_rules
from tools.configs._schema_backends import SchemaChoice, check
from tools.configs._schema_cache import VerdictCache
from tools.configs._schema_findings import Finding, Verdict
from tools.configs._schema_prime import PrimeOptions
from tools.configs._schema_shared import SHARED_SOURCE
from tools.configs._toml import parse_toml_text, read_bounded
from tools.core import OUTPUT_BUDGET_CHARS, Context, fit_largest
from tools.guardrails.scrubbing import secret_scrubber
from tools.guardrails.secret_detection import FORWARDABLE, toml_env_files
from tools.platform.settings import home_folder
from tools.units import Seconds

#: What each back-end leaves to the platform, for ``schema_note``.
_NOTES = {
    "real": "Checked by prime-rl's own RLConfig/SFTConfig{where}, the way prime train validate 0.18.0 runs them "
            "(hosted normalization, set-aside blocks, hosted rejections), then the full config with environment "
            "sources as the platform checks it when the run starts. The platform validates again on submission.",
    "snapshot": "Checked against the JSON Schema snapshot of prime-rl {commit} shipped with model-factory-skill, with "
                "its validators mirrored, the way prime train validate 0.18.0 runs them. Values inside an "
                "environment's env table are checked only for the tasksets the snapshot knows; the platform "
                "checks them when the run starts. For prime-rl's own classes, set the schema argument to real with a "
                "prime-rl checkout (prime_rl_dir, PRIME_RL_DIR) or MODEL_FACTORY_SCHEMA_PYTHON; schema prime runs "
                "prime train validate (needs the prime CLI).",
    "structural": "Not judged by a schema (valid is null): only this package's rules ran, as the schema snapshot "
                  "could not check this file (see the warnings). Run prime train validate {path} for the full "
                  "check (needs the prime CLI, uv and PRIME_API_KEY).",
}


class Issue(BaseModel):
    """One problem found in a config. Never contains a secret value."""

    path: str = Field(description="Dotted key path in the TOML ('' = the whole file), e.g. deployment.num_infer_gpus "
                                  "or orchestrator.train.source[0].name.")
    line: int | None = Field(default=None, description="1-based line of the key (or of its table when the key is "
                                                       "not written); null for the whole file.")
    column: int | None = Field(default=None, description="1-based column on that line.")
    message: str = Field(description="What is wrong.")
    rule: str = Field(description="Id of the rule that fired: a rule of tools.configs.RULES (a prime-rl validator "
                                  "name, a hosted or CLI rule), schema:<keyword> (the snapshot), pydantic:<type> "
                                  "(the real schema), prime:validate, or backend:<reason>.")
    source: str = Field(default="", description="What the rule mirrors: prime-rl / prime file and function, or why "
                                                "the rule exists (guardrail, advice).")
    fix: str | None = Field(default=None, description="What to change, starting with a verb.")


class ValidateConfigResult(BaseModel):
    """Result of :func:`validate_config`: verdict, issues, which schema decided, and facts later steps use.

    Facts come from the TOML with prime-rl's defaults filled in (reference/prime-rl.md §3.5):
    ``model_name`` (``model.name``, else ``trainer.model.name``, else the default
    Qwen/Qwen3-0.6B), ``max_steps`` (shared, else sub-config), ``gpu_count`` (see
    ``gpu_count_detail``), ``env_ids`` (``orchestrator.train.source[].env.taskset.id``).
    """

    config_path: str = Field(description="Absolute path of the validated file.")
    valid: bool | None = Field(description=(
        "true: no error found by a schema (warnings allowed); false: errors; null: not judged by a schema "
        "(schema_check structural: only this package's rules ran and found no error), never a pass."))
    mode: Mode = Field(description="rl or sft: how `prime train` would dispatch the file.")
    mode_reason: str = Field(description="Why this mode (the prime CLI's sniff, or the forced mode).")
    errors: list[Issue] = Field(description="Problems that would stop the run (CLI, schema or hosted rejection), "
                                            "the one the platform reports first, first.")
    warnings: list[Issue] = Field(description="Things to look at; they do not stop the run.")
    notes: list[str] = Field(description="Facts worth knowing that are not problems.")
    model_name: str | None = Field(description="Model trained (HF id), null if unreadable.")
    model_name_source: str = Field(description="TOML key the model name came from, or 'prime-rl default'.")
    max_steps: int | None = Field(description="Step cap; null = no cap (the run goes on until stopped).")
    deployment_type: str = Field(description="single_node or multi_node (deployment.type, default single_node).")
    gpu_count: int | None = Field(description="GPUs the run occupies; null when it cannot be computed.")
    gpu_count_detail: str = Field(description="How gpu_count was computed, or why it is unknown.")
    env_ids: list[str] = Field(description="Taskset ids of the training environments.")
    eval_env_ids: list[str] = Field(description="Taskset ids of the eval environments.")
    wandb_project: str | None = Field(
        description="W&B project (monitors.wandb.project, default prime-rl); null = no W&B.")
    secret_names: list[str] = Field(description="Secret NAMES found in the TOML's env_file/env_files (never values).")
    schema_check: Literal["real", "snapshot", "structural"] = Field(description=(
        "What checked the schema: real (prime-rl's own classes: a prime-rl interpreter, or prime train validate), "
        "snapshot (the JSON Schema shipped with this package), structural (only this package's rules)."))
    schema_commit: str | None = Field(description="prime-rl commit of the schema that decided (40 hex), 'unknown' "
                                                  "for an interpreter that does not record it, null for structural.")
    schema_source: str = Field(description="Where the schema and its commit came from (the shipped snapshot, a "
                                           "checkout's git HEAD, a venv's direct_url.json, prime train validate).")
    schema_interpreter: str | None = Field(default=None, description="The interpreter or command that ran the real "
                                                                     "schema.")
    fallback_from: Literal["real", "prime"] | None = Field(default=None, description=(
        "Set when the back-end asked for could not run and the snapshot decided instead (a warning says why)."))
    schema_seconds: Seconds = Field(description="Seconds the schema check took (for a cold real back-end, including "
                                              "the interpreter start and the prime-rl import).")
    schema_cached: bool = Field(default=False, description="The schema verdict was remembered from an earlier check "
                                                           "of the same config (memory or the state folder).")
    schema_note: str = Field(description="What the check covered and what is left to the platform.")
    truncated: bool = Field(default=False, description="true when issues were left out to fit the output budget.")
    omitted: int = Field(default=0, description="Errors and warnings left out (0 unless truncated).")
    narrow_hint: str | None = Field(default=None, description="How to see the rest, when truncated.")


def analyze(
    data: dict[str, Any],
    path: Path,
    *,
    mode: Mode | None = None,
    env: Mapping[str, str] | None = None,
    known_values: Iterable[str] = (),
    text: str | None = None,
    schema: SchemaChoice = "auto",
    prime_rl_dir: str | Path | None = None,
    prime: PrimeOptions | None = None,
    cwd: Path | None = None,
    home: Path | None = None,
    timeout: float = 60.0,
    cache: VerdictCache | None = None,
) -> ValidateConfigResult:
    """Validate a parsed TOML (``data``; ``text``: the file as read, for positions and the
    other TOML reader) with the ``schema`` back-end and gather the facts. Reads env files;
    may start a prime-rl interpreter or ``prime`` (see ``_schema_backends``)."""
    chosen, reason = sniff_mode(data, mode)
    known = list(known_values)
    c = Config(data=data, mode=chosen, path=path, env=env or {}, known_values=known, text=text)
    verdict = _verdict(data, chosen, schema=schema, prime_rl_dir=prime_rl_dir, env=env, cwd=cwd, home=home,
                       timeout=timeout, cache=cache, path=path, prime=prime)
    file_findings = run_file_rules(c)
    findings = [*_errors(file_findings), *_errors(verdict.findings), *_others(file_findings),
                *_others(verdict.findings)]
    positions = key_positions(text) if text is not None and findings else {}
    scrub = secret_scrubber(data, known_values=known, check_key_names=True)
    errors: list[Issue] = []
    warnings: list[Issue] = []
    notes: list[str] = []
    for finding in findings:
        if finding.severity == "note":
            notes.append(f"{finding.path or 'the file'}: {finding.message}")
            continue
        issue = _issue(finding, data, chosen, positions)
        (errors if finding.severity == "error" else warnings).append(issue)
    if c.deployment_type == "multi_node" and "slurm" not in data:
        notes.append("multi_node without [slurm]: the hosted validator injects slurm = {} (the platform places nodes).")
    model, model_source = model_name_of(c)
    count, count_detail = gpu_count(c)
    where = f" at {verdict.schema_commit[:12]} ({verdict.interpreter})" if verdict.interpreter else ""
    report = ValidateConfigResult(
        config_path=str(path), valid=_valid(errors, verdict), mode=chosen, mode_reason=reason, errors=errors,
        warnings=warnings, notes=notes, model_name=model, model_name_source=model_source, max_steps=max_steps_of(c),
        deployment_type=c.deployment_type, gpu_count=count, gpu_count_detail=count_detail,
        env_ids=c.taskset_ids("orchestrator.train.source") if c.rl else [],
        eval_env_ids=c.taskset_ids("orchestrator.eval.source" if c.rl else "eval.source"),
        wandb_project=wandb_project_of(c), secret_names=[n for n in c.env_file_vars[0] if n in FORWARDABLE],
        schema_check=verdict.backend,
        schema_commit=None if verdict.backend == "structural" else verdict.schema_commit,
        schema_source=verdict.schema_source, schema_interpreter=verdict.interpreter,
        fallback_from=verdict.fallback_from, schema_seconds=round(verdict.elapsed_seconds, 4),
        schema_cached=verdict.cached,
        schema_note=_NOTES[verdict.backend].format(where=where, commit=verdict.schema_commit[:12], path=path),
    )
    if len(scrub):  # a message or a fact may repeat a flagged value: hide it everywhere
        report = scrub.scrub_model(report)
    return report


def _valid(errors: list[Issue], verdict: Verdict) -> bool | None:
    """False with any error; else True only when a schema judged the file: a structural verdict
    (the snapshot itself failed) is ``None``, "not judged by a schema", which no caller can read as a pass."""
    if errors:
        return False
    return None if verdict.backend == "structural" else True


def _verdict(data: dict[str, Any], mode: Mode, **how: Any) -> Verdict:
    """The back-end's verdict; if the snapshot itself fails (a defect here, not in the config),
    our rules alone decide and a warning says so, so a config is never left unchecked by a crash."""
    try:
        return check(data, mode, **how)
    except Exception as exc:  # noqa: BLE001 - see the docstring; the defect is reported, not hidden
        return Verdict("structural", mode, [Finding((), f"the schema check failed ({type(exc).__name__}: {exc}); "
                                                     "only this package's rules ran", "backend:internal",
                                                     severity="warning", stage="backend", kind="backend")],
                       schema_source="none")


_NAMED_KEY = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)")


def _where(f: Finding, positions: dict[Any, tuple[int, int]]) -> tuple[int, int] | None:
    """The position of the finding's key; for a validator that refuses a whole table (pydantic
    puts it on the table, or on the file for RLConfig's own), the first key its message names
    that is written in that table (``deployment.nodes_per_fsdp_group``), else the table."""
    exact = positions.get(tuple(f.loc))
    if exact is not None:
        return exact
    shared = SHARED_SOURCE.get(".".join(str(p) for p in f.loc))
    if shared is not None and tuple(shared.split(".")) in positions:  # filled in from a shared key
        return positions[tuple(shared.split("."))]
    if f.kind not in ("value_error", "assertion_error"):
        return position_of(f.loc, positions)
    for match in _NAMED_KEY.finditer(f.message):
        parts = tuple(match[1].split("."))
        if len(parts) == 1 and "_" not in parts[0]:
            continue  # a plain word, not a key name
        for candidate in ((*f.loc, *parts), parts):
            hit = positions.get(candidate)
            if hit is not None:
                return hit
    return position_of(f.loc, positions)


def _issue(f: Finding, data: dict[str, Any], mode: Mode, positions: dict[Any, tuple[int, int]]) -> Issue:
    message, fix = advise(f, data, mode)
    where = _where(f, positions)
    return Issue(path=f.path, line=where[0] if where else None, column=where[1] if where else None,
                 message=message, rule=f.rule, source=f.source, fix=fix)


def _errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def _others(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity != "error"]


def fit_budget(report: ValidateConfigResult, budget: int = OUTPUT_BUDGET_CHARS) -> ValidateConfigResult:
    """Drop warnings, then errors, from the end until the JSON fits ``budget`` characters
    (``valid`` still reflects every error)."""
    errors, warnings = report.errors, report.warnings
    issues = len(errors) + len(warnings)

    def build(k: int) -> ValidateConfigResult:
        if k == issues:
            return report
        kept_e, kept_w = errors[:k], warnings[:max(0, k - len(errors))]
        return report.model_copy(update={
            "errors": kept_e, "warnings": kept_w, "truncated": True,
            "omitted": len(errors) - len(kept_e) + len(warnings) - len(kept_w),
            "narrow_hint": (f"{len(errors) - len(kept_e)} of {len(errors)} errors and {len(warnings) - len(kept_w)} "
                            f"of {len(warnings)} warnings are not shown: fix the errors shown and validate again; "
                            "the remaining issues will then be listed.")})

    return fit_largest(build, issues, budget)


def validate_read(path: Path, raw: bytes, ctx: Context, mode: Mode | None = None, *, schema: SchemaChoice = "auto",
                  prime_rl_dir: str | Path | None = None, prime: PrimeOptions | None = None,
                  timeout: float = 60.0) -> ValidateConfigResult:
    """:func:`analyze` the bytes ``raw`` read from ``path`` (so a caller that hashed them validates
    exactly those) with the context's environment, known secrets, working folder, home and state
    folder (the disk cache); not fitted to the output budget. Raises ToolFailure ``invalid_toml``."""
    text, data = parse_toml_text(raw, path)
    for env_path in toml_env_files(data, path):
        ctx.scrubber.add_env_file(env_path, ctx.env)
    return analyze(data, path, mode=mode, env=ctx.env, known_values=ctx.scrubber.known_values(), text=text,
                   schema=schema, prime_rl_dir=prime_rl_dir, prime=prime, cwd=ctx.cwd, timeout=timeout,
                   home=home_folder(ctx.env, ctx.home), cache=VerdictCache.in_state(ctx.state_path()))


def validate_file(path: Path, ctx: Context, mode: Mode | None = None, *, schema: SchemaChoice = "auto",
                  prime_rl_dir: str | Path | None = None, prime: PrimeOptions | None = None,
                  timeout: float = 60.0) -> ValidateConfigResult:
    """Read ``path`` (a regular file of at most 1 MiB) and :func:`validate_read` it, fitted to the
    output budget. Raises ToolFailure ``config_not_found`` / ``invalid_toml``."""
    return fit_budget(validate_read(path, read_bounded(path), ctx, mode, schema=schema, prime_rl_dir=prime_rl_dir,
                                    prime=prime, timeout=timeout))
