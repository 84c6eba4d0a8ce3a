"""prime-rl config tools: list the bundled examples, prepare a task TOML, validate a TOML.

Local: no network, except ``validate_config(schema="prime")``, which runs ``prime train
validate`` (it asks the platform for the runtime and builds a schema venv from GitHub). Facts
come from the prime-rl schema at the platform's schema commit (559b447: the shipped snapshot, or
prime-rl itself), ``prime`` 0.18.0 (what ``prime train`` checks and how its schema worker runs
the schema: docs/validation.md), reference/prime-rl.md and reference/prime-api.md §3.2.

The tools and their input/result models are here; the work is in private modules:
``_toml`` (reading TOML, and the other reader ``prime`` uses), ``_facts`` (the config under
analysis, mode, model, steps, GPUs), ``_rules`` (every rule in :data:`RULES`; the validator
mirrors are in ``_mirror_*``), ``_analysis`` (rules + a schema back-end -> :class:`ValidateConfigResult`,
shared with planning), ``_positions`` and ``_advice`` (line/column and fixes of each issue),
``_schema_*`` (the back-ends: ``real`` prime-rl in a subprocess, the shipped ``snapshot``,
``prime train validate``; the hosted pipeline they share; the verdict cache), ``_edits``
(prepare's tomlkit edits and the no-overwrite write), ``_examples`` (the bundled examples).
``_schema_worker.py`` and ``_schema_export_worker.py`` are scripts run by a prime-rl
interpreter, never imported here; ``schema_snapshot/`` holds the shipped JSON Schemas.

Error codes: ``config_not_found``, ``invalid_toml`` (with line and column), ``dest_exists``,
``bad_arguments``, ``write_failed``.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Literal

import tomlkit
from pydantic import BaseModel, ConfigDict, Field

from tools.configs._analysis import Issue, ValidateConfigResult, analyze, validate_file, validate_read
from tools.configs._edits import Change, edit, folders_to_create, make_folders, remove_folders, write_new_file
from tools.configs._examples import EXAMPLES_DIR, example_descriptions, example_paths, resolve_config
from tools.configs._facts import (
    CLI_ONLY_KEYS,
    CLI_OPTIONS,
    SFT_ONLINE_EVAL_KEYS,
    Mode,
    checkpoint_of,
    sniff_mode,
)
from tools.configs._positions import key_positions
from tools.configs._rules import IN_SCHEMA, NOT_MIRRORED, NOT_RAISING, RULES, source_ref_problem
from tools.configs._schema_backends import check as check_schema
from tools.configs._schema_backends import check_real as check_real_schema
from tools.configs._schema_backends import check_snapshot as check_snapshot_schema
from tools.configs._schema_cache import VerdictCache
from tools.configs._schema_export import SNAPSHOT_DIR as SCHEMA_SNAPSHOT_DIR
from tools.configs._schema_export import export_raw as export_schema_raw
from tools.configs._schema_export import finalize as finalize_schema_export
from tools.configs._schema_export import load_snapshot as load_schema_snapshot
from tools.configs._schema_export import schemas as subschemas
from tools.configs._schema_findings import Finding, Verdict, dotted, key_path
from tools.configs._schema_pipeline import cli_config, hosted_config
from tools.configs._schema_prepass import FIELD_BEFORE, MODEL_BEFORE, MODEL_BEFORE_NOT_MIRRORED
from tools.configs._schema_prime import DEFAULT_TIMEOUT as PRIME_TIMEOUT_SECONDS
from tools.configs._schema_prime import PrimeOptions
from tools.configs._schema_real import Interpreter, checkout_problem, find_interpreters
from tools.configs._schema_real import close_workers as close_schema_workers
from tools.configs._schema_real import worker_for as schema_worker
from tools.configs._schema_snapshot import snapshot_metadata, snapshot_schema, union_tags
from tools.configs._toml import MAX_CONFIG_BYTES, load_toml, parse_document, read_bounded, read_config
from tools.core import MAX_STEPS, Context, tool
from tools.errors import ToolFailure, call
from tools.guardrails.secret_detection import refuse_secret_values, toml_env_files
from tools.units import Bytes

__all__ = [
    "CLI_ONLY_KEYS",
    "CLI_OPTIONS",
    "Change",
    "EXAMPLES_DIR",
    "ExampleInfo",
    "FIELD_BEFORE",
    "Finding",
    "IN_SCHEMA",
    "Interpreter",
    "Issue",
    "ListExamplesInput",
    "ListExamplesResult",
    "MAX_CONFIG_BYTES",
    "MODEL_BEFORE",
    "MODEL_BEFORE_NOT_MIRRORED",
    "Mode",
    "NOT_MIRRORED",
    "NOT_RAISING",
    "PrepareConfigInput",
    "PrepareConfigResult",
    "PrimeOptions",
    "RULES",
    "SCHEMA_SNAPSHOT_DIR",
    "SFT_ONLINE_EVAL_KEYS",
    "SchemaChoice",
    "ValidateConfigInput",
    "ValidateConfigResult",
    "Verdict",
    "VerdictCache",
    "check_real_schema",
    "check_schema",
    "check_snapshot_schema",
    "checkout_problem",
    "checkpoint_of",
    "cli_config",
    "close_schema_workers",
    "dotted",
    "example_paths",
    "export_schema_raw",
    "finalize_schema_export",
    "find_interpreters",
    "hosted_config",
    "key_path",
    "key_positions",
    "list_examples",
    "load_schema_snapshot",
    "prepare_config",
    "read_bounded",
    "read_config",
    "resolve_config",
    "schema_worker",
    "snapshot_metadata",
    "snapshot_schema",
    "source_ref_problem",
    "subschemas",
    "union_tags",
    "validate_config",
    "validate_read",
    "write_new_file",
]


SchemaChoice = Literal["auto", "real", "snapshot", "prime"]
#: Seconds the real back-end may take to start (import prime-rl) and to validate, by default.
REAL_TIMEOUT_SECONDS = 60.0

with warnings.catch_warnings():
    # The field is called schema, as the command-line option --schema; it shadows pydantic v1's
    # deprecated BaseModel.schema() classmethod, which nothing here calls.
    warnings.filterwarnings("ignore", message='Field name "schema"', category=UserWarning)

    class ValidateConfigInput(BaseModel):
        """Input of :func:`validate_config`."""

        model_config = ConfigDict(extra="forbid")

        config_path: str = Field(description=(
            "Path of the prime-rl TOML (relative paths are from the working directory), or a bundled example id "
            "such as basic/reverse-text/rl."))
        mode: Mode | None = Field(
            default=None,
            description="Force rl or sft (like `prime train --sft`); null = decide like the prime CLI.",
        )
        # The tool's argument name; it shadows pydantic's deprecated BaseModel.schema() on purpose.
        schema: SchemaChoice = Field(default="auto", description=(  # type: ignore[assignment]
            "Which schema checks the config: auto (the real prime-rl schema when an interpreter with prime-rl is "
            "found: prime_rl_dir, PRIME_RL_DIR, the working folder's prime-rl checkout, the prime CLI's cached "
            "schema venvs, MODEL_FACTORY_SCHEMA_PYTHON; else the snapshot shipped with this package), real (falls "
            "back to the snapshot, saying why), snapshot (fast, nothing installed), prime (runs `prime train "
            "validate` with the launch's --sft/--image-tag/--ref; needs PRIME_API_KEY, uv and GitHub; falls back "
            "to the snapshot, saying why)."))
        prime_rl_dir: str | None = Field(default=None, description=(
            "A prime-rl checkout (git clone + uv sync) whose schema to use: run there as `uv run --no-sync python`, "
            "its git HEAD reported as the schema commit. Null: PRIME_RL_DIR, or the working folder's checkout."))
        image_tag: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", description=(
            "With schema prime only: the --image-tag of the intended launch (default: the TOML's image_tag)."))
        source_ref: str | None = Field(default=None, max_length=200, description=(
            "With schema prime only: the --ref of the intended launch, a prime-rl branch, tag or commit (default: "
            "the TOML's source_ref)."))
        timeout_seconds: float | None = Field(default=None, gt=0, le=900, description=(
            "Seconds the schema check may take: for real, the interpreter's start (importing prime-rl takes "
            "about 6 s) and each validation (default 60); for prime, the whole `prime train validate` (default "
            "600: its first run builds a venv). When it runs out, the snapshot decides and a warning says so."))


class ExampleInfo(BaseModel):
    """One bundled example (tools/configs/examples)."""

    id: str = Field(description="Example id for mf_prepare_config, e.g. basic/reverse-text/rl.")
    path: str | None = Field(default=None, description="Absolute path of the TOML (with detail).")
    mode: Mode = Field(description="rl or sft.")
    model_name: str | None = Field(description="Model trained.")
    max_steps: int | None = Field(description="Step cap in the example (null = none).")
    deployment_type: str = Field(description="single_node or multi_node.")
    gpu_count: int | None = Field(description="GPUs the example occupies as written (null = unknown).")
    hosted_ok: bool = Field(description="True when the schema snapshot and the hosted rules find nothing that "
                                          "stops a hosted run.")
    hosted_reason: str = Field(description="Why it fits or not (first error, or size/cost remarks).")
    description: str | None = Field(default=None, description=(
        "One-line description from examples/PROVENANCE.md (with detail)."))


class ListExamplesResult(BaseModel):
    """Result of :func:`list_examples`."""

    examples: list[ExampleInfo] = Field(description="The examples, sorted by id.")
    count: int = Field(description="Number of examples returned.")


class ListExamplesInput(BaseModel):
    """Input of :func:`list_examples`."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode | None = Field(default=None, description="Only rl or only sft examples; null = all.")
    detail: bool = Field(default=False, description="Also each example's path and description (longer output).")


class PrepareConfigResult(BaseModel):
    """Result of :func:`prepare_config`."""

    path: str = Field(description="Absolute path of the new TOML.")
    source: str = Field(description="Example id or source path it was copied from (never modified).")
    mode: Mode = Field(description="rl or sft.")
    sha256: str = Field(description="sha256 (hex) of the written file.")
    size_bytes: Bytes = Field(description="Size of the written file in bytes.")
    changes: list[Change] = Field(description="Edits made to the copy; comments and key order are kept.")
    created_folders: list[str] | None = Field(default=None, description=(
        "Folders created for dest, outermost first, as mkdir -p would; null when its folder existed."))
    valid: bool | None = Field(description="validation.valid: true when the written file passes validation, null "
                                           "when no schema judged it; the CLI exits 1 unless true, as validate-config.")
    validation: ValidateConfigResult = Field(description="mf_validate_config's report of the written file.")


class PrepareConfigInput(BaseModel):
    """Input of :func:`prepare_config`. Unset values keep the example's."""

    model_config = ConfigDict(extra="forbid")

    example: str = Field(description="Example id from mf_list_examples (e.g. basic/reverse-text/rl), or a path "
                                      "to an existing TOML.")
    dest: str = Field(description="Path of the new .toml file; must not exist yet (missing folders are created).")
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
def validate_config(inp: ValidateConfigInput, ctx: Context) -> ValidateConfigResult:
    """Validate a prime-rl TOML for Model Factory.

    Parses with tomllib (and warns where the ``toml`` package ``prime train`` uses reads it
    differently), picks RL or SFT exactly as ``prime train`` does, runs the ``file`` rules of
    :data:`RULES` (the prime CLI's own checks, secret values named by location only, advice),
    and checks the schema with the chosen back-end (``schema``: real prime-rl in a subprocess,
    the shipped snapshot, or ``prime train validate``; see ``_schema_backends``) through the
    hosted pipeline of ``prime train validate`` 0.18.0. Reports which back-end decided
    (``schema_check``, ``schema_commit``, ``schema_source``, ``schema_seconds``), every issue with
    its key path, line, column, rule and fix, and facts (model, max_steps, GPUs, env ids, W&B
    project). Verdicts are cached in the state folder (``<state>/validation-cache``).

    ``config_path`` may also be a bundled example id (``basic/reverse-text/rl``, see
    mf_list_examples) when no file has that path (:func:`resolve_config`, as every config argument).

    Errors: ``config_not_found``, ``bad_arguments`` (a folder, FIFO or device), ``invalid_toml`` (line and
    column in ``fields``).
    """
    path, _ = resolve_config(inp.config_path, ctx)
    prime = None
    if inp.schema == "prime":
        prime = PrimeOptions(image_tag=inp.image_tag, source_ref=inp.source_ref,
                             timeout=inp.timeout_seconds or PRIME_TIMEOUT_SECONDS)
    prime_rl_dir = ctx.resolve_path(inp.prime_rl_dir) if inp.prime_rl_dir else None
    return validate_file(path, ctx, inp.mode, schema=inp.schema, prime_rl_dir=prime_rl_dir, prime=prime,
                         timeout=inp.timeout_seconds or REAL_TIMEOUT_SECONDS)


@tool
def list_examples(inp: ListExamplesInput, ctx: Context) -> ListExamplesResult:
    """List the bundled prime-rl examples (``tools/configs/examples``, verbatim from prime-rl 559b447).

    Each entry: ``id`` (for mf_prepare_config), path, mode, model, max_steps, deployment
    type, GPU count as written, and whether a hosted run would accept it (``hosted_ok``
    with ``hosted_reason``: the first error, e.g. disaggregated inference, or
    the size of multi-node examples), as the shipped schema snapshot says (fast and the same
    everywhere; mf_validate_config can ask the real schema). Local only; no errors beyond
    unreadable files.
    """
    notes = example_descriptions()
    out: list[ExampleInfo] = []
    for ident, path in example_paths().items():
        report = analyze(load_toml(path), path, schema="snapshot")
        if inp.mode and report.mode != inp.mode:
            continue
        if report.errors:
            first = report.errors[0]
            reason = f"hosted runs reject it: {first.message}"[:160]
        elif report.valid is None:
            reason = "not judged by a schema: the snapshot could not check it (see mf_validate_config)."
        elif report.deployment_type == "multi_node":
            reason = "multi-node: large and expensive, not a smoke test."
        else:
            reason = "fits: one node."
        out.append(ExampleInfo(
            id=ident, path=str(path) if inp.detail else None, mode=report.mode, model_name=report.model_name,
            max_steps=report.max_steps, deployment_type=report.deployment_type, gpu_count=report.gpu_count,
            hosted_ok=report.valid is True, hosted_reason=reason, description=notes.get(ident) if inp.detail else None))
    return ListExamplesResult(examples=out, count=len(out))


@tool
def prepare_config(inp: PrepareConfigInput, ctx: Context) -> PrepareConfigResult:
    """Copy a bundled example (or an existing TOML) to ``dest`` ready for a hosted run.

    Edits, with tomlkit so comments, key order and value types stay as they were: removes
    ``[slurm]``, ``output_dir``, ``run.dir``, ``clean``, ``dry_run`` and ``[k8s]`` (SFT also
    ``[eval]``, ``[inference]``, ``[weight_broadcast]`` and the inference GPU count: hosted SFT
    is trainer-only); sets
    ``deployment.num_train_gpus`` / ``num_infer_gpus`` (single_node only), top-level
    ``gpu_type``, ``max_steps`` (and any trainer/orchestrator ``max_steps``, which would
    otherwise conflict) and ``name`` when given. The source is only read. ``dest`` is written
    atomically and never overwritten; its missing folders are created as ``mkdir -p`` would
    (``created_folders``; removed again when the write fails). Returns the path, sha256, the changes
    and the validation report of the written file.

    Errors: ``config_not_found`` (unknown example), ``invalid_toml``, ``dest_exists``,
    ``bad_arguments`` (dest not .toml, a folder, FIFO or device, or under a file: each names the path
    and a call that works; GPU counts on a multi_node example, an example path that is a folder, FIFO
    or device), ``write_failed``, ``secret_in_input`` (the source holds a secret-looking value;
    nothing is written).
    """
    source, label = resolve_config(inp.example, ctx)
    dest = ctx.resolve_path(inp.dest)
    stem = source.stem if label == str(source) else label.replace("/", "-").removeprefix("basic-")
    missing = folders_to_create(dest, stem, ctx.cwd or Path.cwd(), lambda path: call(
        "mf_prepare_config", **{**inp.model_dump(exclude_none=True), "dest": str(path)}))
    raw, data = read_config(source, argument="example")
    for env_path in toml_env_files(data, source):
        ctx.scrubber.add_env_file(env_path, ctx.env)
    # Never copy a secret into a new file: refuse the source as mf_plan_run would (locations only).
    refuse_secret_values(data, root=source.name, known_values=ctx.scrubber.known_values(), check_key_names=True)
    mode, _ = sniff_mode(data)
    doc = parse_document(raw.decode("utf-8-sig"), source)
    changes = edit(doc, mode, gpu_type=inp.gpu_type, num_train_gpus=inp.num_train_gpus,
                   num_infer_gpus=inp.num_infer_gpus, max_steps=inp.max_steps, name=inp.name)
    text = tomlkit.dumps(doc).encode("utf-8")
    made = make_folders(missing)
    try:
        write_new_file(dest, text)
    except ToolFailure:
        remove_folders(made)  # nothing left behind
        raise
    report = validate_file(dest, ctx)
    return PrepareConfigResult(
        path=str(dest), source=label, mode=mode, sha256=hashlib.sha256(text).hexdigest(), size_bytes=len(text),
        changes=changes, created_folders=[str(f) for f in made] or None, valid=report.valid, validation=report)
