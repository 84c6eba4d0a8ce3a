"""prime-rl config tools: list the bundled examples, prepare a task TOML, validate a TOML.

All three are local (no network). Facts come from reference/prime-rl.md (the prime-rl
schema at 559b447: §3 RL, §4 SFT, §9.2/9.3 validation results, §10 hosted handling) and
reference/prime-api.md §3.2 (what ``prime train`` 0.18.0 checks before sending anything).

The tools and their input/result models are here; the work is in private modules:
``_toml`` (reading TOML), ``_facts`` (the config under analysis, mode, model, steps, GPUs),
``_rules`` (one check per rule and the :data:`RULES` table), ``_analysis`` (rules + facts ->
:class:`ValidationReport`, shared with planning), ``_edits`` (prepare's tomlkit edits and the
no-overwrite write), ``_examples`` (the bundled examples in ``examples/``).

Error codes: ``config_not_found``, ``invalid_toml`` (with line and column), ``dest_exists``,
``bad_arguments``, ``write_failed``.
"""

from __future__ import annotations

import hashlib

import tomlkit
from pydantic import BaseModel, ConfigDict, Field

from tools.configs._analysis import Issue, ValidationReport, analyze, validate_file
from tools.configs._edits import Change, dest_exists, edit, write_new_file
from tools.configs._examples import EXAMPLES_DIR, example_descriptions, example_paths, resolve_example
from tools.configs._facts import (
    CLI_ONLY_KEYS,
    CLI_OPTIONS,
    DEPRECATED_ORCHESTRATOR_KEYS,
    Mode,
    sniff_mode,
)
from tools.configs._rules import RULES, source_ref_problem
from tools.configs._toml import MAX_CONFIG_BYTES, load_toml, parse_document, read_bounded, read_config
from tools.core import MAX_STEPS, Context, tool
from tools.errors import FieldProblem, fail
from tools.guardrails.secrets import refuse_secret_values, toml_env_files

__all__ = [
    "CLI_ONLY_KEYS",
    "CLI_OPTIONS",
    "Change",
    "DEPRECATED_ORCHESTRATOR_KEYS",
    "EXAMPLES_DIR",
    "ExampleInfo",
    "ExampleList",
    "Issue",
    "ListExamplesInput",
    "MAX_CONFIG_BYTES",
    "Mode",
    "PrepareConfigInput",
    "PreparedConfig",
    "RULES",
    "ValidateConfigInput",
    "ValidationReport",
    "analyze",
    "example_paths",
    "list_examples",
    "prepare_config",
    "read_bounded",
    "read_config",
    "source_ref_problem",
    "validate_config",
    "write_new_file",
]


class ValidateConfigInput(BaseModel):
    """Input of :func:`validate_config`."""

    model_config = ConfigDict(extra="forbid")

    config_path: str = Field(description=(
        "Path of the prime-rl TOML (relative paths are from the working directory), or a bundled example id such as "
        "basic/reverse-text/rl."))
    mode: Mode | None = Field(
        default=None,
        description="Force rl or sft (like `prime train --sft`); null = decide like the prime CLI.",
    )


class ExampleInfo(BaseModel):
    """One bundled example (tools/configs/examples)."""

    id: str = Field(description="Example id for mf_prepare_config, e.g. basic/reverse-text/rl.")
    path: str = Field(description="Absolute path of the TOML.")
    mode: Mode = Field(description="rl or sft.")
    model_name: str | None = Field(description="Model trained.")
    max_steps: int | None = Field(description="Step cap in the example (null = none).")
    deployment_type: str = Field(description="single_node or multi_node.")
    gpu_count: int | None = Field(description="GPUs the example occupies as written (null = unknown).")
    hosted_ok: bool = Field(description="True when the structural checks find nothing that stops a hosted run.")
    hosted_reason: str = Field(description="Why it fits or not (first error, or size/cost remarks).")
    description: str | None = Field(description="One-line description from examples/PROVENANCE.md.")


class ExampleList(BaseModel):
    """Result of :func:`list_examples`."""

    examples: list[ExampleInfo] = Field(description="The examples, sorted by id.")
    count: int = Field(description="Number of examples returned.")


class ListExamplesInput(BaseModel):
    """Input of :func:`list_examples`."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode | None = Field(default=None, description="Only rl or only sft examples; null = all.")


class PreparedConfig(BaseModel):
    """Result of :func:`prepare_config`."""

    path: str = Field(description="Absolute path of the new TOML.")
    source: str = Field(description="Example id or source path it was copied from (never modified).")
    mode: Mode = Field(description="rl or sft.")
    sha256: str = Field(description="sha256 (hex) of the written file.")
    size_bytes: int = Field(description="Size of the written file in bytes.")
    changes: list[Change] = Field(description="Edits made to the copy; comments and key order are kept.")
    valid: bool = Field(description="True when the written file passes validation (validation.valid); the CLI exits "
                                    "1 otherwise, as validate-config does.")
    validation: ValidationReport = Field(description="mf_validate_config's report of the written file.")


class PrepareConfigInput(BaseModel):
    """Input of :func:`prepare_config`. Unset values keep the example's."""

    model_config = ConfigDict(extra="forbid")

    example: str = Field(description="Example id from mf_list_examples (e.g. basic/reverse-text/rl), or a path "
                                      "to an existing TOML.")
    dest: str = Field(description="Path of the new .toml file; must not exist yet.")
    gpu_type: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_]{1,64}$",
                                 description="Top-level gpu_type for the run, e.g. H200_141GB (see mf_list_gpus).")
    num_train_gpus: int | None = Field(default=None, ge=1, le=64,
                                       description="deployment.num_train_gpus (single_node examples only).")
    num_infer_gpus: int | None = Field(default=None, ge=0, le=64,
                                       description="deployment.num_infer_gpus (single_node only; RL needs >= 1).")
    max_steps: int | None = Field(default=None, ge=1, le=MAX_STEPS,
                                  description="Step cap written as top-level max_steps.")
    name: str | None = Field(default=None, min_length=1, max_length=128,
                             description="Top-level name: the platform run name.")


@tool
def validate_config(inp: ValidateConfigInput, ctx: Context) -> ValidationReport:
    """Validate a prime-rl TOML for Model Factory (local, no network).

    Parses with tomllib, picks RL or SFT exactly as ``prime train`` does, runs the rules of
    :data:`RULES` (prime CLI local checks, hosted rejections, structural schema rules, secret
    values named by location only) and reports facts (model, max_steps, GPUs, env ids, W&B
    project). ``schema_check`` is ``structural``: run ``prime train validate`` for the real schema.

    ``config_path`` may also be a bundled example id (``basic/reverse-text/rl``, see
    mf_list_examples) when no file has that path.

    Errors: ``config_not_found``, ``invalid_toml`` (line and column in ``fields``).
    """
    path = ctx.resolve_path(inp.config_path)
    if not path.exists():
        path = example_paths().get(inp.config_path.strip().removeprefix("examples/").removesuffix(".toml"), path)
    return validate_file(path, ctx, inp.mode)


@tool
def list_examples(inp: ListExamplesInput, ctx: Context) -> ExampleList:
    """List the bundled prime-rl examples (``tools/configs/examples``, verbatim from prime-rl 559b447).

    Each entry: ``id`` (for mf_prepare_config), path, mode, model, max_steps, deployment
    type, GPU count as written, and whether a hosted run would accept it (``hosted_ok``
    with ``hosted_reason``: the first structural error, e.g. disaggregated inference, or
    the size of multi-node examples). Local only; no errors beyond unreadable files.
    """
    notes = example_descriptions()
    out: list[ExampleInfo] = []
    for ident, path in example_paths().items():
        report = analyze(load_toml(path), path)
        if inp.mode and report.mode != inp.mode:
            continue
        if report.errors:
            first = report.errors[0]
            reason = f"hosted runs reject it: {first.message}"
        elif report.deployment_type == "multi_node":
            reason = (f"multi-node: {report.gpu_count} GPUs as written; a large, expensive run, not a smoke test. "
                      "Prefer a basic/ example to start.")
        else:
            reason = f"fits a hosted run: {report.gpu_count} GPU(s) on one node."
        out.append(ExampleInfo(
            id=ident, path=str(path), mode=report.mode, model_name=report.model_name, max_steps=report.max_steps,
            deployment_type=report.deployment_type, gpu_count=report.gpu_count, hosted_ok=report.valid,
            hosted_reason=reason, description=notes.get(ident)))
    return ExampleList(examples=out, count=len(out))


@tool
def prepare_config(inp: PrepareConfigInput, ctx: Context) -> PreparedConfig:
    """Copy a bundled example (or an existing TOML) to ``dest`` ready for a hosted run.

    Edits, with tomlkit so comments, key order and value types stay as they were: removes
    ``[slurm]``, ``output_dir``, ``run.dir``, ``clean``, ``dry_run`` and ``[k8s]`` (SFT also
    ``[eval]``, ``[inference]``, ``[weight_broadcast]`` and the inference GPU count: hosted SFT
    is trainer-only); sets
    ``deployment.num_train_gpus`` / ``num_infer_gpus`` (single_node only), top-level
    ``gpu_type``, ``max_steps`` (and any trainer/orchestrator ``max_steps``, which would
    otherwise conflict) and ``name`` when given. The source is only read. ``dest`` is written
    atomically and never overwritten. Returns the path, sha256, the changes and the
    validation report of the written file.

    Errors: ``config_not_found`` (unknown example), ``invalid_toml``, ``dest_exists``,
    ``bad_arguments`` (dest not .toml, its folder missing (never created), GPU counts on a multi_node
    example), ``write_failed``,
    ``secret_in_input`` (the source holds a secret-looking value; nothing is written).
    """
    source, label = resolve_example(inp.example, ctx)
    dest = ctx.resolve_path(inp.dest)
    if dest.suffix != ".toml":
        raise fail("bad_arguments", "dest must be the path of a .toml file (its name does not end in .toml; value "
                   "not shown).",
                   "Pass a dest ending in .toml.", fields=[FieldProblem(path="dest", problem="must end in .toml")])
    if dest.exists():
        raise dest_exists(dest)
    if not dest.parent.is_dir():  # never create folders: a typo in the path would scatter files
        raise fail("bad_arguments", f"The folder {dest.parent} does not exist; folders are never created here "
                   "(a mistyped path would scatter files).",
                   "Create the folder first (or pick an existing one), then call mf_prepare_config again.",
                   fields=[FieldProblem(path="dest", problem="its folder does not exist")])
    raw, data = read_config(source)
    for env_path in toml_env_files(data, source):
        ctx.scrubber.add_env_file(env_path, ctx.env)
    # Never copy a secret into a new file: refuse the source as mf_plan_run would (locations only).
    refuse_secret_values(data, root=source.name, known_values=ctx.scrubber.known_values(), check_key_names=True)
    mode, _ = sniff_mode(data)
    doc = parse_document(raw.decode("utf-8-sig"), source)
    changes = edit(doc, mode, gpu_type=inp.gpu_type, num_train_gpus=inp.num_train_gpus,
                   num_infer_gpus=inp.num_infer_gpus, max_steps=inp.max_steps, name=inp.name)
    text = tomlkit.dumps(doc).encode("utf-8")
    write_new_file(dest, text)
    report = validate_file(dest, ctx)
    return PreparedConfig(
        path=str(dest), source=label, mode=mode, sha256=hashlib.sha256(text).hexdigest(), size_bytes=len(text),
        changes=changes, valid=report.valid, validation=report)
