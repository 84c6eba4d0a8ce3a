"""Analysis shared by the three config tools (and by planning): run :data:`RULES` on a parsed
TOML, gather the facts into a :class:`ValidationReport`, fit it to the output budget.

Validation here is *structural*: the rules of :data:`~tools.configs._rules.RULES`, checked on
the parsed TOML. The real prime-rl schema (``RLConfig``/``SFTConfig`` in a Python 3.12 venv
pinned to the platform's schema commit) is not run; ``prime train validate CONFIG`` does that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.configs._facts import (
    Config,
    Mode,
    gpu_count,
    max_steps_of,
    model_name_of,
    sniff_mode,
    wandb_project_of,
)
from tools.configs._rules import RULES
from tools.configs._toml import load_toml
from tools.core import OUTPUT_BUDGET_CHARS, Context, fit_largest
from tools.guardrails.secrets import FORWARDABLE, secret_scrubber, toml_env_files

SCHEMA_NOTE = (
    "Structural checks only: the real prime-rl schema (RLConfig/SFTConfig) was not run. For the "
    "full schema check run `prime train validate {path}` (needs the prime CLI, uv and PRIME_API_KEY; it builds a "
    "prime-rl-configs venv pinned to the platform's schema commit). The platform validates again "
    "on submission."
)


class Issue(BaseModel):
    """One problem found in a config. Never contains a secret value."""

    path: str = Field(description="Dotted location in the TOML ('' = the whole file), e.g. deployment.num_infer_gpus.")
    message: str = Field(description="What is wrong and how to fix it.")
    rule: str = Field(description="Id of the rule that fired (see tools.configs.RULES).")


class ValidationReport(BaseModel):
    """Result of :func:`validate_config`: verdict, issues, and facts later steps use.

    Facts come from the TOML with prime-rl's defaults filled in (reference/prime-rl.md §3.5):
    ``model_name`` (``model.name``, else ``trainer.model.name``, else the default
    Qwen/Qwen3-0.6B), ``max_steps`` (shared, else sub-config), ``gpu_count`` (see
    ``gpu_count_detail``), ``env_ids`` (``orchestrator.train.source[].env.taskset.id``).
    """

    config_path: str = Field(description="Absolute path of the validated file.")
    valid: bool = Field(description="True when no error was found (warnings allowed).")
    mode: Mode = Field(description="rl or sft: how `prime train` would dispatch the file.")
    mode_reason: str = Field(description="Why this mode (the prime CLI's sniff, or the forced mode).")
    errors: list[Issue] = Field(description="Problems that would stop the run (CLI, schema or hosted rejection).")
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
    schema_check: Literal["structural"] = Field(description="Level of checking done: always 'structural' here.")
    schema_note: str = Field(description="What was not checked and how to run the full prime-rl schema check.")
    truncated: bool = Field(default=False, description="true when issues were left out to fit the output budget.")
    omitted: str | None = Field(default=None, description="How many errors/warnings were left out, when truncated.")
    narrow_hint: str | None = Field(default=None, description="How to see the rest, when truncated.")


def analyze(
    data: dict[str, Any],
    path: Path,
    *,
    mode: Mode | None = None,
    env: Mapping[str, str] | None = None,
    known_values: Iterable[str] = (),
) -> ValidationReport:
    """Run :data:`RULES` on a parsed TOML and gather the facts. Pure: reads only env files."""
    chosen, reason = sniff_mode(data, mode)
    c = Config(data=data, mode=chosen, path=path, env=env or {}, known_values=list(known_values))
    errors: list[Issue] = []
    warnings: list[Issue] = []
    for rule in RULES:
        if chosen not in rule.modes:
            continue
        for where, message in rule.check(c):
            (errors if rule.severity == "error" else warnings).append(Issue(path=where, message=message, rule=rule.id))
    notes: list[str] = []
    if c.deployment_type == "multi_node" and "slurm" not in data:
        notes.append("multi_node without [slurm]: the hosted validator injects slurm = {} (the platform places nodes).")
    model, model_source = model_name_of(c)
    count, count_detail = gpu_count(c)
    report = ValidationReport(
        config_path=str(path), valid=not errors, mode=chosen, mode_reason=reason, errors=errors, warnings=warnings,
        notes=notes, model_name=model, model_name_source=model_source, max_steps=max_steps_of(c),
        deployment_type=c.deployment_type, gpu_count=count, gpu_count_detail=count_detail,
        env_ids=c.taskset_ids("orchestrator.train.source") if c.rl else [],
        eval_env_ids=c.taskset_ids("orchestrator.eval.source" if c.rl else "eval.source"),
        wandb_project=wandb_project_of(c), secret_names=[n for n in c.env_file_vars[0] if n in FORWARDABLE],
        schema_check="structural", schema_note=SCHEMA_NOTE.format(path=path),
    )
    if any(issue.rule == "secret_value" for issue in errors):  # a fact may repeat a flagged value: hide it there too
        report = secret_scrubber(data, known_values=c.known_values, check_key_names=True).scrub_model(report)
    return report


def fit_budget(report: ValidationReport, budget: int = OUTPUT_BUDGET_CHARS) -> ValidationReport:
    """Drop warnings, then errors, from the end until the JSON fits ``budget`` characters
    (``valid`` still reflects every error)."""
    errors, warnings = report.errors, report.warnings
    issues = len(errors) + len(warnings)

    def build(k: int) -> ValidationReport:
        if k == issues:
            return report
        kept_e, kept_w = errors[:k], warnings[:max(0, k - len(errors))]
        return report.model_copy(update={
            "errors": kept_e, "warnings": kept_w, "truncated": True,
            "omitted": (f"{len(errors) - len(kept_e)} of {len(errors)} errors and "
                        f"{len(warnings) - len(kept_w)} of {len(warnings)} warnings."),
            "narrow_hint": "Fix the errors shown and validate again; the remaining issues will then be listed."})

    return fit_largest(build, issues, budget)


def validate_file(path: Path, ctx: Context, mode: Mode | None = None) -> ValidationReport:
    """Parse and :func:`analyze` ``path`` with the context's environment and known secrets."""
    data = load_toml(path)
    for env_path in toml_env_files(data, path):
        ctx.scrubber.add_env_file(env_path, ctx.env)
    return fit_budget(analyze(data, path, mode=mode, env=ctx.env, known_values=ctx.scrubber.known_values()))
