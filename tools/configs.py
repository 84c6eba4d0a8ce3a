"""prime-rl config tools: list the bundled examples, prepare a task TOML, validate a TOML.

All three are local (no network). Facts come from reference/prime-rl.md (the prime-rl
schema at 559b447: §3 RL, §4 SFT, §9.2/9.3 validation results, §10 hosted handling) and
reference/prime-api.md §3.2 (what ``prime train`` 0.18.0 checks before sending anything).

Validation here is *structural*: the rules of :data:`RULES`, checked on the parsed TOML.
The real prime-rl schema (``RLConfig``/``SFTConfig`` in a Python 3.12 venv pinned to the
platform's schema commit) is not run; ``prime train validate CONFIG`` does that.

Error codes: ``config_not_found``, ``invalid_toml`` (with line and column), ``dest_exists``,
``bad_arguments``, ``write_failed``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import tomlkit
from pydantic import BaseModel, ConfigDict, Field

from tools.core import OUTPUT_BUDGET_CHARS, Context, fit_largest, tool
from tools.errors import FieldProblem, fail
from tools.guardrails.secrets import (
    FORWARDABLE,
    EnvFileError,
    parse_env_file,
    refuse_secret_values,
    scan_for_secrets,
    toml_env_files,
)

#: The bundled prime-rl examples (verbatim, see examples/PROVENANCE.md).
EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"

Mode = Literal["rl", "sft"]
Severity = Literal["error", "warning"]

#: prime-rl defaults used when a field is absent (reference/prime-rl.md §3.5, §4).
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
DEFAULT_SEQ_LEN = 2048
DEFAULT_GPUS_PER_NODE = 8

SCHEMA_NOTE = (
    "Structural checks only: the real prime-rl schema (RLConfig/SFTConfig) was not run. For the "
    "full schema check run `prime train validate {path}` (needs uv and PRIME_API_KEY; it builds a "
    "prime-rl-configs venv pinned to the platform's schema commit). The platform validates again "
    "on submission."
)


# --------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------


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
    """One bundled example (tools/examples)."""

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


class Change(BaseModel):
    """One edit :func:`prepare_config` made to the copy."""

    path: str = Field(description="Dotted TOML location.")
    action: Literal["removed", "set", "added"] = Field(description="removed, set (existing key) or added (new key).")
    old: str | None = Field(default=None, description="Previous value as TOML text (null when added).")
    new: str | None = Field(default=None, description="New value as TOML text (null when removed).")


class PreparedConfig(BaseModel):
    """Result of :func:`prepare_config`."""

    path: str = Field(description="Absolute path of the new TOML.")
    source: str = Field(description="Example id or source path it was copied from (never modified).")
    mode: Mode = Field(description="rl or sft.")
    sha256: str = Field(description="sha256 (hex) of the written file.")
    size_bytes: int = Field(description="Size of the written file in bytes.")
    changes: list[Change] = Field(description="Edits made to the copy; comments and key order are kept.")
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
    max_steps: int | None = Field(default=None, ge=1, description="Step cap written as top-level max_steps.")
    name: str | None = Field(default=None, min_length=1, max_length=128,
                             description="Top-level name: the platform run name.")


# --------------------------------------------------------------------------------------
# Reading TOML
# --------------------------------------------------------------------------------------

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def read_config(path: Path) -> tuple[bytes, dict[str, Any]]:
    """The bytes of ``path`` and their parse (tomllib; TOML dates/times as ISO strings so the
    config can travel as JSON). Raises ToolFailure ``config_not_found`` / ``invalid_toml``."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise fail("config_not_found", f"{path} is a folder, not a config file.",
                   "Pass the path of a .toml file, or call mf_list_examples and mf_prepare_config to create "
                   "one.") from None
    except (FileNotFoundError, NotADirectoryError):
        raise fail("config_not_found", f"Config file not found: {path}",
                   "Check the path, or call mf_list_examples and mf_prepare_config to create one.") from None
    except OSError as exc:
        raise fail("config_not_found", f"Config file {path} cannot be read: {exc.strerror}",
                   "Check the file's permissions, then call again.") from None
    try:
        return raw, _jsonable(tomllib.loads(raw.decode("utf-8-sig")))  # a leading BOM is not an error
    except UnicodeDecodeError:
        raise fail("invalid_toml", f"Invalid TOML in {path}: not UTF-8 text.", "Save the file as UTF-8.") from None
    except tomllib.TOMLDecodeError as exc:
        where = _TOML_POSITION.search(str(exc))
        location = f"{path}:{where[1]}:{where[2]}" if where else str(path)
        raise fail("invalid_toml", f"Invalid TOML in {path}: {exc}",
                   "Fix the TOML syntax at the line and column given, then validate again.",
                   fields=[FieldProblem(path=location, problem=str(exc))]) from None


def load_toml(path: Path) -> dict[str, Any]:
    """Parse ``path`` (see :func:`read_config`)."""
    return read_config(path)[1]


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return value


def _get(data: Any, path: str) -> Any:
    """``data[a][b][c]`` for ``"a.b.c"``; None when absent. The string "None" is null (prime-rl)."""
    node = data
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return None if node == "None" else node


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _fmt(value: Any) -> str:
    """``value`` (plain or a tomlkit item) as TOML text."""
    value = value.unwrap() if hasattr(value, "unwrap") else value
    return tomlkit.item(value).as_string() if value is not None else "null"


# --------------------------------------------------------------------------------------
# The config under analysis
# --------------------------------------------------------------------------------------

PROTECTED_ENV_VARS = frozenset({
    "CUDA_VISIBLE_DEVICES", "PRL_RUN_ID", "PRL_RUN_NAME", "WANDB_RUN_ID", "WANDB_SHARED_MODE",
    "WANDB_SHARED_LABEL", "WANDB_SHARED_PRIMARY", "WANDB_SHARED_FINISHER",
})
CLI_OPTIONS = ("image_tag", "gpu_type", "volume", "volume_size", "source_ref")
#: Top-level TOML keys ``prime train`` reads itself and never ships (reference/prime-api.md §3.2
#: step 8; ``name`` is shipped).
CLI_ONLY_KEYS = frozenset({"env_file", "env_files", *CLI_OPTIONS, "type"})
#: ``[orchestrator]`` keys ``prime train`` drops (deprecated).
DEPRECATED_ORCHESTRATOR_KEYS = ("trajectory_strategy", "trajectoryStrategy", "buffer")
#: Tables hosted SFT rejects: it runs the trainer only (prime 0.18.0 ``train --sft`` help).
SFT_REJECTED_TABLES = ("eval", "inference", "weight_broadcast")
RL_TOP_LEVEL = frozenset({
    "trainer", "orchestrator", "inference", "run", "output_dir", "clean", "env_vars", "log", "ckpt", "resume",
    "monitors", "model", "tokenizer", "max_steps", "seq_len", "weight_broadcast", "rollout_transport",
    "deployment", "slurm", "dry_run",
})
SFT_TOP_LEVEL = frozenset({
    "model", "tokenizer", "renderer", "data", "val", "eval", "inference", "weight_broadcast", "optim", "scheduler",
    "ckpt", "resume", "log", "monitors", "run", "output_dir", "clean", "matmul_precision", "max_steps", "gc",
    "trace_path", "memory_profiler_path", "dist_timeout_seconds", "heartbeat", "deployment", "slurm", "dry_run",
    "env_vars",
})
OPTIMIZERS = frozenset({"sgd", "adamw", "muon", "sign_sgd"})
_FINE_TUNE = re.compile(r"[-_](?:sft|rl|dpo|grpo|ppo|ft|finetuned?|fine-tuned?|merged|lora)(?:[-_.]|$)", re.I)


@dataclass
class _Config:
    """A parsed TOML plus what the rules need to read it."""

    data: dict[str, Any]
    mode: Mode
    path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    known_values: list[str] = field(default_factory=list)

    def get(self, path: str) -> Any:
        return _get(self.data, path)

    def int(self, path: str) -> int | None:
        return _as_int(self.get(path))

    def has(self, path: str) -> bool:
        head, _, leaf = path.rpartition(".")
        parent = self.get(head) if head else self.data
        return isinstance(parent, Mapping) and leaf in parent

    def table(self, path: str) -> Mapping[str, Any]:
        value = self.get(path)
        return value if isinstance(value, Mapping) else {}

    @property
    def rl(self) -> bool:
        return self.mode == "rl"

    @property
    def deployment_type(self) -> str:
        value = self.get("deployment.type")
        return value if isinstance(value, str) else "single_node"

    @property
    def single_node(self) -> bool:
        return self.deployment_type == "single_node"

    @property
    def gpus_per_node(self) -> int:
        return self.int("deployment.gpus_per_node") or DEFAULT_GPUS_PER_NODE

    def gpus(self, key: str) -> int:
        """deployment.num_train_gpus / num_infer_gpus with prime-rl's default of 1 (SFT also
        reads the alias num_eval_gpus)."""
        value = self.int(f"deployment.{key}")
        if value is None and not self.rl and key == "num_infer_gpus":
            value = self.int("deployment.num_eval_gpus")
        return 1 if value is None else value

    @property
    def has_inference(self) -> bool:
        return isinstance(self.data.get("inference"), Mapping)

    @property
    def fake_data(self) -> bool:
        return self.get("trainer.data.fake") is not None

    def sources(self, path: str) -> list[tuple[str, Mapping[str, Any]]]:
        """``(location, table)`` of each ``[[path]]`` entry."""
        value = self.get(path)
        if not isinstance(value, list):
            return []
        return [(f"{path}[{i}]", item) for i, item in enumerate(value) if isinstance(item, Mapping)]

    def taskset_ids(self, path: str) -> list[str]:
        ids = [_get(src, "env.taskset.id") for _, src in self.sources(path)]
        return list(dict.fromkeys(i for i in ids if isinstance(i, str)))

    @cached_property
    def env_file_vars(self) -> tuple[list[str], list[tuple[str, str]]]:
        """(variable names the TOML's env_file / env_files set, [(toml key, problem)])."""
        names: list[str] = []
        problems: list[tuple[str, str]] = []
        for key in ("env_file", "env_files"):
            value = self.data.get(key)
            if value is not None and not (isinstance(value, str)
                                          or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
                problems.append((key, f"{key} must be a path or a list of paths (relative to the TOML's folder)."))
        for env_path in toml_env_files(self.data, self.path):
            try:
                parsed = parse_env_file(env_path, self.env)
            except EnvFileError as exc:
                problems.append(("env_files", str(exc)))
                continue
            names.extend(n for n in parsed.values if n not in names)
        return names, problems


Finding = tuple[str, str]


@dataclass(frozen=True)
class Rule:
    """One check: ``id``, ``severity``, the modes it applies to, where the rule comes from,
    and ``check(config) -> [(path, message)]``."""

    id: str
    severity: Severity
    modes: tuple[Mode, ...]
    source: str
    summary: str
    check: Callable[[_Config], Iterable[Finding]]


# --------------------------------------------------------------------------------------
# Rule checks (one small function each; the table RULES below lists them)
# --------------------------------------------------------------------------------------


def _retired_lora_shape(c: _Config) -> Iterator[Finding]:
    if isinstance(c.data.get("model"), str):
        yield "model", ('Top-level `model = "..."` is the retired shared-LoRA format; `prime train` refuses it. '
                        'Use a [model] table: [model] name = "...".')
    if isinstance(c.data.get("env"), list):
        yield "env", ("Top-level [[env]] is the retired shared-LoRA format; `prime train` refuses it. Use "
                      "[[orchestrator.train.source]] with env.taskset.id (start from mf_list_examples).")


def _cli_option_type(c: _Config) -> Iterator[Finding]:
    for key in CLI_OPTIONS:
        value = c.data.get(key)
        if value is not None and not isinstance(value, str):
            form = 'a string like "500Gi" or "2Ti"' if key == "volume_size" else "a string"
            yield key, f"{key} must be {form}, got {type(value).__name__} (prime train exits on it)."
    if c.data.get("volume_size") is not None and not c.data.get("volume"):
        yield "volume_size", "volume_size is only used to create a volume: set volume too, or remove volume_size."


_SOURCE_REF = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._/-]{0,199}\Z")


def source_ref_problem(ref: str) -> str | None:
    """Why ``ref`` cannot be a prime-rl source ref (prime CLI 0.18.0 ``_source_ref_error``), or None."""
    if (not _SOURCE_REF.match(ref) or ".." in ref or "//" in ref or "/." in ref or ref.endswith(("/", "."))
            or any(part.endswith(".lock") for part in ref.split("/"))):
        return f"{ref!r} is not a valid git ref (branches, tags and commit shas only)."
    if ref.startswith(("refs/", "pull/")):
        return f"{ref!r}: pull-request and refs/ names are not accepted; use a branch, tag or commit sha."
    return None


def _source_ref(c: _Config) -> Iterator[Finding]:
    ref = c.data.get("source_ref")
    if isinstance(ref, str) and (problem := source_ref_problem(ref)):
        yield "source_ref", problem


def _env_file(c: _Config) -> Iterator[Finding]:
    yield from c.env_file_vars[1]


def _unsupported_secret(c: _Config) -> Iterator[Finding]:
    other = [n for n in c.env_file_vars[0] if n not in FORWARDABLE]
    if other:
        yield "env_files", (f"Only {' and '.join(sorted(FORWARDABLE))} can be forwarded to a hosted run; the env "
                            f"file(s) also set: {', '.join(other)}. `prime train` exits on this: remove those lines "
                            "or use another env file.")


def _cli_type_key(c: _Config) -> Iterator[Finding]:
    if "type" in c.data:
        yield "type", "Top-level `type` is no longer used (prime train strips it with a warning): remove it."


def _deprecated_orchestrator_key(c: _Config) -> Iterator[Finding]:
    for key in DEPRECATED_ORCHESTRATOR_KEYS:
        if c.has(f"orchestrator.{key}"):
            yield f"orchestrator.{key}", f"orchestrator.{key} is deprecated; prime train drops it. Remove it."
    if c.has("orchestrator.eval.eval_base_model"):
        yield "orchestrator.eval.eval_base_model", (
            "eval_base_model was renamed skip_first_step with the meaning inverted; prime train translates it. "
            "Use orchestrator.eval.skip_first_step.")


def _mode_shape(c: _Config) -> Iterator[Finding]:
    if c.rl:
        for key in ("trainer", "orchestrator"):
            if not isinstance(c.data.get(key), Mapping):
                yield key, f"RL configs need a [{key}] table (it may be empty); the schema reports 'Field required'."
        if "data" in c.data:
            yield "data", "RLConfig has no [data] table (that is SFT): remove it, or validate/launch as SFT."
    else:
        for key in ("trainer", "orchestrator"):
            if key in c.data:
                yield key, f"SFTConfig has no [{key}] table (that is RL): remove it, or validate/launch as RL."


def _k8s(c: _Config) -> Iterator[Finding]:
    if "k8s" in c.data:
        yield "k8s", ("[k8s] is not supported for hosted runs: Platform manages deployment settings. "
                      "Remove the [k8s] table.")


def _clean(c: _Config) -> Iterator[Finding]:
    if c.data.get("clean") is True:
        yield "clean", "clean = true is unsupported for hosted runs: start a new run instead (remove clean)."


def _disaggregated(c: _Config) -> Iterator[Finding]:
    if c.get("inference.deployment.type") == "disaggregated":
        yield "inference.deployment.type", ('inference.deployment type = "disaggregated" is unsupported for '
                                            "hosted runs. Use single_node or multi_node inference.")


def _rl_needs_inference(c: _Config) -> Iterator[Finding]:
    if c.single_node:
        if (not c.has_inference or c.gpus("num_infer_gpus") == 0) and not c.fake_data:
            yield "deployment.num_infer_gpus", (
                "Hosted RL runs need inference GPUs: set deployment.num_infer_gpus and an [inference] table, or "
                "use fake trainer data (trainer.data.fake) for a trainer-only run.")
        return
    nodes = c.int("deployment.num_infer_nodes")
    if nodes is None:
        return
    if nodes > 0 and not c.has_inference:
        yield "inference", "Must configure inference when using multi-node deployment with inference nodes."
    if nodes == 0 and c.has_inference:
        yield "deployment.num_infer_nodes", ("Cannot configure inference with num_infer_nodes = 0. Either set "
                                             "num_infer_nodes > 0 or remove the inference config.")
    if nodes == 0 and not c.fake_data:
        yield "deployment.num_infer_nodes", "Must use fake data (trainer.data.fake) when num_infer_nodes = 0."


#: Integer fields: path -> minimum. Checked when present (absent = prime-rl default).
INT_FIELDS: dict[str, int] = {
    "max_steps": 1, "seq_len": 1, "deployment.gpus_per_node": 1, "deployment.num_train_gpus": 0,
    "deployment.num_infer_gpus": 0, "deployment.num_train_nodes": 1, "deployment.num_infer_nodes": 0,
    "deployment.num_infer_replicas": 1, "deployment.nodes_per_fsdp_group": 1,
    "inference.vllm.tensor_parallel_size": 1, "inference.vllm.data_parallel_size": 1,
    "trainer.max_steps": 1, "trainer.model.seq_len": 1, "orchestrator.max_steps": 1, "orchestrator.seq_len": 1,
    "orchestrator.batch_size": 1, "orchestrator.token_batch_size": 1, "orchestrator.group_size": 1,
    "data.batch_size": 1, "data.micro_batch_size": 1, "data.seq_len": 1,
}
#: String / boolean fields checked when present.
TYPED_FIELDS: dict[str, type] = {"name": str, "clean": bool, "dry_run": bool, "deployment.type": str}


def _field_type(c: _Config) -> Iterator[Finding]:
    for path, minimum in INT_FIELDS.items():
        value = c.get(path)
        if value is None:
            continue
        if _as_int(value) is None:
            yield path, f"{path} must be an integer, got {type(value).__name__}."
        elif value < minimum:
            yield path, f"{path} must be >= {minimum}, got {value}."
    for path, kind in TYPED_FIELDS.items():
        value = c.get(path)
        if value is not None and not isinstance(value, kind):
            yield path, f"{path} must be a {kind.__name__}, got {type(value).__name__}."
    model = c.data.get("model")
    if isinstance(model, Mapping) and model.get("name") is not None and not isinstance(model.get("name"), str):
        yield "model.name", "model.name must be a string (a Hugging Face id)."


def _deployment_type(c: _Config) -> Iterator[Finding]:
    kind = c.get("deployment.type")
    if kind is not None and kind not in ("single_node", "multi_node"):
        yield "deployment.type", f"deployment.type must be single_node or multi_node, got {kind!r}."
    kind = c.get("inference.deployment.type")
    if c.rl and kind is not None and kind not in ("single_node", "multi_node", "disaggregated"):
        yield "inference.deployment.type", f"inference.deployment.type must be single_node or multi_node, got {kind!r}."


def _gpus_per_node(c: _Config) -> Iterator[Finding]:
    if not c.single_node:
        return
    train, infer, per_node = c.gpus("num_train_gpus"), c.gpus("num_infer_gpus"), c.gpus_per_node
    if c.rl or (c.has_inference and "eval" in c.data):
        if train + infer > per_node:
            yield "deployment", (f"Total GPU count ({train + infer} = {train} train + {infer} infer) exceeds "
                                 f"gpus_per_node ({per_node}). Lower the counts or use a multi_node deployment.")
    elif train > per_node:
        yield "deployment.num_train_gpus", f"num_train_gpus ({train}) exceeds gpus_per_node ({per_node})."


def _infer_gpus_tp(c: _Config) -> Iterator[Finding]:
    tp = c.int("inference.vllm.tensor_parallel_size") or 1
    if c.single_node and c.has_inference and c.gpus("num_infer_gpus") % tp:
        yield "deployment.num_infer_gpus", (f"Number of inference GPUs ({c.gpus('num_infer_gpus')}) must be "
                                            f"divisible by the tensor parallel size ({tp}).")


def _multi_node_layout(c: _Config) -> Iterator[Finding]:
    if c.deployment_type != "multi_node":
        return
    train_nodes = c.int("deployment.num_train_nodes")
    if train_nodes is None and c.rl:
        yield "deployment.num_train_nodes", "multi_node deployments need deployment.num_train_nodes."
    group = c.int("deployment.nodes_per_fsdp_group")
    if train_nodes and group and train_nodes % group:
        yield "deployment.nodes_per_fsdp_group", (f"deployment.num_train_nodes ({train_nodes}) must be divisible by "
                                                  f"deployment.nodes_per_fsdp_group ({group}).")
    infer_nodes, inf_nodes = c.int("deployment.num_infer_nodes"), c.int("inference.deployment.num_nodes")
    if (c.get("inference.deployment.type") == "multi_node" and infer_nodes is not None and inf_nodes is not None
            and infer_nodes != inf_nodes):
        yield "deployment.num_infer_nodes", (f"deployment.num_infer_nodes ({infer_nodes}) must equal "
                                             f"inference.deployment.num_nodes ({inf_nodes}) for multi-node inference.")


def _batch_size(c: _Config) -> Iterator[Finding]:
    batch, tokens = c.int("orchestrator.batch_size"), c.int("orchestrator.token_batch_size")
    if batch is not None and tokens is not None:
        yield "orchestrator", "Set exactly one of batch_size or token_batch_size."
    group = c.int("orchestrator.group_size") or 1
    if batch is not None and batch % group:
        yield "orchestrator.batch_size", (f"Batch size ({batch}) must be divisible by the number of samples per "
                                          f"problem (group_size {group}).")


def _sft_batch(c: _Config) -> Iterator[Finding]:
    batch, micro = c.int("data.batch_size") or 128, c.int("data.micro_batch_size") or 1
    if batch % micro:
        yield "data.batch_size", f"Batch size ({batch}) must be divisible by micro batch size ({micro})."


def _sft_trainer_only(c: _Config) -> Iterator[Finding]:
    for key in SFT_REJECTED_TABLES:
        if key in c.data:
            yield key, (f"[{key}]: hosted SFT runs the trainer only; the platform rejects [eval], [inference] and "
                        "[weight_broadcast] (prime 0.18.0 `train --sft` help). Remove the block for a hosted run.")


#: Where hosted SFT finds datasets: the run's volume, mounted read-only at /volume.
_VOLUME_DATASET = re.compile(r"\A(/volume/|datasets/)")


def _sft_dataset(c: _Config) -> Iterator[Finding]:
    if c.get("data.type") == "fake":
        return
    name = c.get("data.name") or "PrimeIntellect/Reverse-Text-SFT"
    if isinstance(name, str) and not _VOLUME_DATASET.match(name):
        yield "data.name", (f"data.name {name!r} is not a path on a volume. Hosted SFT reads datasets from the run's "
                            "volume (mounted read-only at /volume: data.name = \"/volume/datasets/<name>\" or "
                            "\"datasets/<name>\"); without a volume only fake data works (prime 0.18.0 `train --sft` "
                            "help). Put the dataset on a volume and plan with volume=<name>.")


def _renderer(c: _Config) -> Iterator[Finding]:
    renderer = c.get("orchestrator.renderer.name") or "auto"
    model = _model_name(c)[0]
    if renderer == "auto" and model and _FINE_TUNE.search(model.rsplit("/", 1)[-1]):
        yield "orchestrator.renderer.name", (
            f"orchestrator.renderer.name='auto' but {model!r} looks like a fine-tune, which is not in "
            "renderers' MODEL_RENDERER_MAP (prime-rl refuses auto then). Set [orchestrator.renderer] "
            'name = "prime-qwen3" (PrimeIntellect Qwen3 fine-tunes) or "default".')


#: Keys of older prime-rl / hosted formats that today's schema rejects (extra_forbidden).
RETIRED_KEYS: dict[str, str] = {
    "orchestrator.rollouts_per_example": "the old hosted key; use orchestrator.group_size",
    "orchestrator.max_inflight_rollouts": "use orchestrator.concurrency.max_inflight",
    "orchestrator.oversampling_factor": "removed from prime-rl",
    "orchestrator.max_tokens": "use orchestrator.train.sampling.max_completion_tokens",
    "orchestrator.sampling": "moved to orchestrator.train.sampling (max_tokens is now max_completion_tokens)",
    "orchestrator.train.sampling.max_tokens": "renamed orchestrator.train.sampling.max_completion_tokens",
    "orchestrator.train.env": "[[orchestrator.train.env]] is the retired hosted shape; use "
                              "[[orchestrator.train.source]] with env.taskset.id",
    "orchestrator.eval.env": "use [[orchestrator.eval.source]] with env.taskset.id",
}


def _tables(node: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    if isinstance(node, Mapping):
        yield path, node
        for key, value in node.items():
            yield from _tables(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _tables(value, f"{path}[{i}]")


def _retired_key(c: _Config) -> Iterator[Finding]:
    for path, hint in RETIRED_KEYS.items():
        if c.has(path):
            yield path, f"{path} is not a prime-rl field any more ({hint}); the schema rejects it."
    for path, table in _tables(c.data):
        if "toml_files" in table:
            where = f"{path}.toml_files" if path else "toml_files"
            yield where, ("toml_files was removed from prime-rl (2026-03-02): compose files on the command line "
                          "(`@ base.toml @ overlay.toml`) or merge them into one TOML.")


def _wandb_offline(c: _Config) -> Iterator[Finding]:
    if c.get("monitors.wandb.offline") is True:
        yield "monitors.wandb.offline", ("W&B shared mode is always on for the rl entrypoint and requires server "
                                         "connectivity; monitors.wandb.offline = true is not supported. Remove it.")


def _protected_env_vars(c: _Config) -> Iterator[Finding]:
    bad = sorted(k for k in c.table("env_vars") if k in PROTECTED_ENV_VARS)
    if bad:
        yield "env_vars", f"env_vars cannot set launcher-managed vars {bad} — set by the launcher, not overridable."


#: Shared top-level key -> sub-config keys it fills (reference/prime-rl.md §3.2). Setting both
#: with different values is an error.
SHARED_FIELDS: dict[str, tuple[str, ...]] = {
    "model.name": ("trainer.model.name", "orchestrator.model.name", "inference.vllm.model"),
    "max_steps": ("trainer.max_steps", "orchestrator.max_steps"),
    "seq_len": ("trainer.model.seq_len", "orchestrator.seq_len"),
    "ckpt.interval": ("trainer.ckpt.interval", "orchestrator.ckpt.interval"),
    "ckpt.keep_last": ("trainer.ckpt.keep_last", "orchestrator.ckpt.keep_last"),
    "ckpt.keep_interval": ("trainer.ckpt.keep_interval", "orchestrator.ckpt.keep_interval"),
    "ckpt.output_dir": ("trainer.ckpt.output_dir",),
    "monitors.wandb.project": ("trainer.monitors.wandb.project", "orchestrator.monitors.wandb.project"),
    "monitors.wandb.entity": ("trainer.monitors.wandb.entity", "orchestrator.monitors.wandb.entity"),
    "monitors.wandb.name": ("trainer.monitors.wandb.name", "orchestrator.monitors.wandb.name"),
    "tokenizer.name": ("trainer.tokenizer.name", "orchestrator.tokenizer.name"),
    "log.level": ("trainer.log.level", "orchestrator.log.level", "inference.log.level"),
}


def _shared_conflict(c: _Config) -> Iterator[Finding]:
    for shared, targets in SHARED_FIELDS.items():
        value = c.get(shared)
        if value is None:
            continue
        for target in targets:
            other = c.get(target)
            if other is not None and other != value:
                yield target, (f"Shared config conflicts with a sub-config field: {shared} = {_fmt(value)} but "
                               f"{target} = {_fmt(other)}. Pick one place to set the value.")


def _inference_model(c: _Config) -> Iterator[Finding]:
    if not c.has_inference:
        return
    shared = c.get("model.name")
    orch = c.get("orchestrator.model.name") or shared or DEFAULT_MODEL
    infer = c.get("inference.vllm.model") or shared or DEFAULT_MODEL
    if orch != infer:
        yield "inference.vllm.model", (f"Inference model name ({infer}) and orchestrator model name ({orch}) are "
                                       "not the same. Set [model] name once, or make them equal.")


def _seq_len_order(c: _Config) -> Iterator[Finding]:
    shared = c.int("seq_len")
    trainer = c.int("trainer.model.seq_len") or shared or DEFAULT_SEQ_LEN
    orch = c.int("orchestrator.seq_len") or shared or DEFAULT_SEQ_LEN
    if trainer < orch:
        yield "trainer.model.seq_len", (f"Trainer model seq_len ({trainer}) must be >= orchestrator seq_len ({orch}). "
                                        "The trainer needs to handle sequences at least as long as those produced.")


def _subconfig_mismatch(c: _Config) -> Iterator[Finding]:
    trainer, orch = c.int("trainer.max_steps"), c.int("orchestrator.max_steps")
    if c.get("max_steps") is None and trainer is not None and orch is not None and trainer != orch:
        yield "orchestrator.max_steps", (f"Trainer max steps ({trainer}) and orchestrator max steps ({orch}) are "
                                         "not the same. Set the shared max_steps instead.")
    if "ckpt" not in c.data:
        on_trainer, on_orch = c.has("trainer.ckpt"), c.has("orchestrator.ckpt")
        if on_trainer != on_orch:
            have, lack = ("trainer", "orchestrator") if on_trainer else ("orchestrator", "trainer")
            yield f"{have}.ckpt", (f"{have.capitalize()} checkpoint config is specified, but {lack} checkpoint "
                                   "config is not. Use the shared [ckpt] table instead.")


def _resume(c: _Config) -> Iterator[Finding]:
    if c.get("resume.step") is not None and c.get("resume.dir") is not None:
        yield "resume", "resume.step and resume.dir are mutually exclusive: set one."


def _sources_rule(c: _Config) -> Iterator[Finding]:
    if isinstance(c.data.get("orchestrator"), Mapping) and "eval" in c.table("orchestrator"):
        if not c.sources("orchestrator.eval.source"):
            yield "orchestrator.eval", ("EvalConfig must define at least one source. Either drop the "
                                        "[orchestrator.eval] block or add a [[orchestrator.eval.source]] block.")
    for group in ("orchestrator.train.source", "orchestrator.eval.source"):
        seen: set[str] = set()
        for where, src in c.sources(group):
            name = src.get("name") or _get(src, "env.taskset.id")
            if not isinstance(_get(src, "env"), Mapping):
                yield f"{where}.env", 'no env configured — set env = { taskset = { id = "<id>" } }.'
            if name == "agg":
                yield f"{where}.name", 'Environment name "agg" is reserved; pick another name.'
            elif isinstance(name, str) and name in seen:
                yield f"{where}.name", f"Duplicate environment name {name!r}: each env must have a unique name."
            if isinstance(name, str):
                seen.add(name)


def _optimizer(c: _Config) -> Iterator[Finding]:
    prefix = "trainer." if c.rl else ""
    kind = c.get(f"{prefix}optim.type")
    if kind is not None and kind not in OPTIMIZERS:
        yield f"{prefix}optim.type", (f"Input tag {kind!r} found using 'type' does not match any of the expected "
                                      f"tags: {', '.join(repr(o) for o in sorted(OPTIMIZERS))}.")
    model = f"{prefix}model"
    if c.get(f"{model}.full_offload") not in (None, False) and c.get(f"{model}.optim_cpu_offload") is not False:
        yield f"{model}.optim_cpu_offload", ("Cannot enable both optim_cpu_offload (default true) and full_offload: "
                                             f"set {model}.optim_cpu_offload = false.")


def _weight_broadcast(c: _Config) -> Iterator[Finding]:
    kind = c.get("weight_broadcast.type")
    if c.has("trainer.model.lora") and kind == "nccl":
        yield "weight_broadcast.type", ("LoRA training is not yet supported with in-memory weight broadcast. "
                                        "Set weight_broadcast.type = 'filesystem'.")
    if c.get("weight_broadcast.quantize_in_weight_transfer") is True:
        if kind != "nccl":
            yield "weight_broadcast.type", "weight_broadcast.quantize_in_weight_transfer requires type = 'nccl'."
        if not c.has_inference:
            yield "inference", "weight_broadcast.quantize_in_weight_transfer requires an [inference] table."
        if c.get("trainer.model.impl") != "custom":
            yield "trainer.model.impl", ("weight_broadcast.quantize_in_weight_transfer requires "
                                         "trainer.model.impl = 'custom'.")


def _nccl_world_size(c: _Config) -> Iterator[Finding]:
    auto_nccl = c.get("weight_broadcast.type") is None and not c.has("trainer.model.lora")
    if not (c.single_node and c.has_inference and (auto_nccl or c.get("weight_broadcast.type") == "nccl")):
        return
    tp = c.int("inference.vllm.tensor_parallel_size") or 1
    infer = c.gpus("num_infer_gpus")
    if infer > tp and c.get("inference.vllm.data_parallel_size") is None:
        yield "inference.vllm.data_parallel_size", (
            f"NCCL weight broadcast computes its inference world size before data_parallel_size is auto-filled: "
            f"set [inference.vllm] data_parallel_size = {infer // tp} explicitly (as the wordle example does).")


def _launcher_local(c: _Config) -> Iterator[Finding]:
    for path in ("slurm", "output_dir", "run.dir", "dry_run", "trainer.output_dir", "orchestrator.output_dir"):
        if c.has(path):
            yield path, (f"{path} is for local/SLURM launches; the platform owns placement and storage. "
                         "mf_prepare_config drops it; remove it.")


def _full_offload_clipping(c: _Config) -> Iterator[Finding]:
    model = "trainer.model" if c.rl else "model"
    if c.get(f"{model}.full_offload") not in (None, False):
        yield f"{model}.full_offload", "full_offload disables gradient clipping (optim.max_norm is ignored)."


def _no_max_steps(c: _Config) -> Iterator[Finding]:
    if _max_steps(c) is None:
        yield "max_steps", "No max_steps: the run has no step cap and bills until stopped. Set max_steps."


def _no_train_source(c: _Config) -> Iterator[Finding]:
    if not c.sources("orchestrator.train.source"):
        yield "orchestrator.train.source", ("No [[orchestrator.train.source]]: the run has no training "
                                            "environment (prime-rl names it no-env). Add one.")


def _unknown_top_level(c: _Config) -> Iterator[Finding]:
    # k8s, env, data, trainer, orchestrator have their own rules
    known = (RL_TOP_LEVEL if c.rl else SFT_TOP_LEVEL) | CLI_ONLY_KEYS | {"name", "k8s", "env", "data", "trainer",
                                                                        "orchestrator"}
    for key in c.data:
        if key not in known:
            yield key, (f"{key} is not a top-level key of prime-rl's {'RLConfig' if c.rl else 'SFTConfig'} "
                        "(snapshot 559b447); the schema may reject it (extra inputs are not permitted).")


def _secret_value(c: _Config) -> Iterator[Finding]:
    for hit in scan_for_secrets(c.data, root="", known_values=c.known_values, check_key_names=True):
        yield hit.location, (f"Looks like {hit.kind} (value not shown). Remove it from the TOML: secrets travel "
                             "by name (WANDB_API_KEY / HF_TOKEN in the environment or an env file).")


_CLI = "prime-api.md §3.2"
_HOSTED = "prime-rl.md §10 (hosted worker)"
_CLI_HELP = "prime 0.18.0 `prime train --sft` help"
_SCHEMA = "prime-rl.md §3.4/§4 (schema validators)"
_BOTH: tuple[Mode, ...] = ("rl", "sft")
_RL: tuple[Mode, ...] = ("rl",)
_SFT: tuple[Mode, ...] = ("sft",)

#: Every rule, in report order.
RULES: tuple[Rule, ...] = (
    Rule("retired_lora_shape", "error", _BOTH, _CLI, "top-level model string or [[env]]", _retired_lora_shape),
    Rule("cli_option_type", "error", _BOTH, _CLI, "image_tag/gpu_type/volume/volume_size/source_ref types",
         _cli_option_type),
    Rule("source_ref", "error", _BOTH, _CLI, "git ref form of source_ref", _source_ref),
    Rule("env_file", "error", _BOTH, _CLI, "env_file/env_files readable, ${VAR} set", _env_file),
    Rule("unsupported_secret", "error", _BOTH, _CLI, "env files may set only WANDB_API_KEY/HF_TOKEN",
         _unsupported_secret),
    Rule("secret_value", "error", _BOTH, "DESIGN guardrail 2", "secret-looking values in the TOML", _secret_value),
    Rule("mode_shape", "error", _BOTH, _SCHEMA, "RL needs [trainer]+[orchestrator]; SFT has neither", _mode_shape),
    Rule("k8s", "error", _BOTH, _HOSTED, "[k8s] rejected", _k8s),
    Rule("clean", "error", _RL, _HOSTED, "clean = true rejected", _clean),
    Rule("disaggregated_inference", "error", _RL, _HOSTED, "disaggregated inference rejected", _disaggregated),
    Rule("rl_needs_inference", "error", _RL, _HOSTED, "inference GPUs unless trainer.data.fake",
         _rl_needs_inference),
    Rule("field_type", "error", _BOTH, _SCHEMA, "integer/string/boolean fields", _field_type),
    Rule("deployment_type", "error", _BOTH, _SCHEMA, "known deployment types", _deployment_type),
    Rule("gpus_per_node", "error", _BOTH, _SCHEMA, "single_node train + infer <= gpus_per_node", _gpus_per_node),
    Rule("infer_gpus_tp", "error", _BOTH, _SCHEMA, "num_infer_gpus % tensor_parallel_size == 0", _infer_gpus_tp),
    Rule("multi_node_layout", "error", _BOTH, _SCHEMA, "multi_node node counts", _multi_node_layout),
    Rule("batch_size", "error", _RL, _SCHEMA, "one of batch_size/token_batch_size; batch % group_size", _batch_size),
    Rule("sft_batch", "error", _SFT, _SCHEMA, "data.batch_size % micro_batch_size", _sft_batch),
    Rule("sft_trainer_only", "error", _SFT, _CLI_HELP, "hosted SFT rejects [eval]/[inference]/[weight_broadcast]",
         _sft_trainer_only),
    Rule("renderer", "warning", _RL, _SCHEMA, "explicit renderer for fine-tuned model names (heuristic)",
         _renderer),
    Rule("retired_key", "error", _BOTH, _SCHEMA, "keys of older formats (rollouts_per_example, toml_files, ...)",
         _retired_key),
    Rule("wandb_offline", "error", _RL, _SCHEMA, "monitors.wandb.offline = true", _wandb_offline),
    Rule("protected_env_vars", "error", _RL, _SCHEMA, "launcher-managed env_vars", _protected_env_vars),
    Rule("shared_conflict", "error", _RL, _SCHEMA, "shared value vs differing sub-config value", _shared_conflict),
    Rule("inference_model", "error", _RL, _SCHEMA, "inference model == orchestrator model", _inference_model),
    Rule("seq_len_order", "error", _RL, _SCHEMA, "trainer seq_len >= orchestrator seq_len", _seq_len_order),
    Rule("subconfig_mismatch", "error", _RL, _SCHEMA, "trainer/orchestrator max_steps and ckpt agree",
         _subconfig_mismatch),
    Rule("resume", "error", _BOTH, _SCHEMA, "resume.step xor resume.dir", _resume),
    Rule("env_sources", "error", _RL, _SCHEMA, "eval sources present, env set, names unique", _sources_rule),
    Rule("optimizer", "error", _BOTH, _SCHEMA, "optimizer type; optim_cpu_offload vs full_offload", _optimizer),
    Rule("weight_broadcast", "error", _RL, _SCHEMA, "LoRA vs NCCL; quantized transfer needs", _weight_broadcast),
    Rule("sft_dataset", "warning", _SFT, _CLI_HELP, "hosted SFT datasets live on a volume", _sft_dataset),
    Rule("launcher_local", "warning", _BOTH, _HOSTED, "[slurm], output_dir, run.dir, dry_run (dropped)",
         _launcher_local),
    Rule("nccl_world_size", "warning", _RL, "prime-rl.md §3.3", "explicit dp with NCCL on several inference GPUs",
         _nccl_world_size),
    Rule("cli_type_key", "warning", _BOTH, _CLI, "top-level type is unused", _cli_type_key),
    Rule("deprecated_orchestrator_key", "warning", _RL, _CLI, "keys prime train drops or renames",
         _deprecated_orchestrator_key),
    Rule("full_offload_clipping", "warning", _BOTH, _SCHEMA, "full_offload disables clipping",
         _full_offload_clipping),
    Rule("no_max_steps", "warning", _BOTH, "DESIGN guardrail 4", "no step cap", _no_max_steps),
    Rule("no_train_source", "warning", _RL, _SCHEMA, "RL without a training environment", _no_train_source),
    Rule("unknown_top_level_key", "warning", _BOTH, _SCHEMA, "top-level keys outside the schema",
         _unknown_top_level),
)


# --------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------


def sniff_mode(data: Mapping[str, Any], forced: Mode | None = None) -> tuple[Mode, str]:
    """The prime CLI's mode choice (``_is_sft``): SFT when forced, or when the TOML has
    ``data`` and neither ``trainer`` nor ``orchestrator``; else RL."""
    looks_sft = "data" in data and "trainer" not in data and "orchestrator" not in data
    if forced == "sft":
        return "sft", "SFT: forced by mode='sft' (like `prime train --sft`)."
    if forced == "rl":
        note = " Note: `prime train` would dispatch this file as SFT (it has [data] and no [trainer]/[orchestrator])."
        return "rl", "RL: forced by mode='rl'." + (note if looks_sft else "")
    if looks_sft:
        return "sft", "SFT: the file has [data] and neither [trainer] nor [orchestrator] (the prime CLI's sniff)."
    return "rl", "RL: the prime CLI's sniff (SFT only when [data] is present without [trainer]/[orchestrator])."


def _model_name(c: _Config) -> tuple[str | None, str]:
    for path in ("model.name", "trainer.model.name") if c.rl else ("model.name",):
        value = c.get(path)
        if value is not None:
            return (value if isinstance(value, str) else None), path
    if isinstance(c.data.get("model"), str):
        return None, "model (retired string form)"
    return DEFAULT_MODEL, "prime-rl default"


def _max_steps(c: _Config) -> int | None:
    paths = ("max_steps", "trainer.max_steps", "orchestrator.max_steps") if c.rl else ("max_steps",)
    return next((v for v in (c.int(p) for p in paths) if v is not None), None)


def _infer_nodes(c: _Config) -> tuple[int | None, str]:
    """Inference nodes per replica of a multi_node RL deployment (prime-rl §3.3)."""
    explicit = c.int("deployment.num_infer_nodes")
    if explicit is not None:
        return explicit, "deployment.num_infer_nodes"
    if not c.has_inference:
        return 0, "no [inference]"
    kind = c.get("inference.deployment.type") or "single_node"
    if kind == "multi_node":
        nodes = c.int("inference.deployment.num_nodes")
        return nodes, "inference.deployment.num_nodes"
    if kind == "disaggregated":
        prefill = c.int("inference.deployment.prefill_nodes_per_replica")
        decode = c.int("inference.deployment.decode_nodes_per_replica")
        if prefill is None or decode is None:
            return None, "disaggregated inference without prefill/decode node counts"
        return prefill + decode, "prefill + decode nodes per replica (disaggregated; assumed)"
    return 1, "single_node inference = 1 node"


def gpu_count(c: _Config) -> tuple[int | None, str]:
    """GPUs a run occupies, and how that was computed (prime-rl §3.5 deployment fields).

    single_node: ``num_train_gpus + num_infer_gpus`` (defaults 1 + 1; inference GPUs only
    with an [inference] table; SFT alias ``num_eval_gpus``). multi_node: ``(num_train_nodes + num_infer_nodes *
    num_infer_replicas) * gpus_per_node`` (SFT: ``num_train_nodes`` default 2,
    ``num_infer_nodes`` default 0)."""
    kind = c.deployment_type
    if kind == "single_node":
        train, infer = c.gpus("num_train_gpus"), c.gpus("num_infer_gpus")
        if not c.has_inference:
            return train, f"{train} train GPU(s); no inference GPUs (no [inference] table)."
        return train + infer, f"{train} train + {infer} inference GPU(s) on one node (single_node)."
    if kind != "multi_node":
        return None, f"unknown deployment.type {kind!r}."
    per_node = c.gpus_per_node
    default_train = None if c.rl else 2
    train_nodes = c.int("deployment.num_train_nodes") or default_train
    if train_nodes is None:
        return None, "deployment.num_train_nodes is not set."
    if c.rl:
        infer_nodes, how = _infer_nodes(c)
        if infer_nodes is None:
            return None, f"inference nodes unknown ({how})."
        replicas = c.int("deployment.num_infer_replicas") or 1
    else:
        nodes = c.int("deployment.num_infer_nodes")
        infer_nodes = (c.int("deployment.num_eval_nodes") if nodes is None else nodes) or 0
        how, replicas = "deployment.num_infer_nodes", 1
    total = (train_nodes + infer_nodes * replicas) * per_node
    return total, (f"({train_nodes} train node(s) + {infer_nodes} inference node(s) [{how}] x {replicas} "
                   f"replica(s)) x {per_node} GPUs per node (multi_node).")


def _wandb_project(c: _Config) -> str | None:
    for path in ("monitors.wandb", "trainer.monitors.wandb", "orchestrator.monitors.wandb"):
        table = c.get(path)
        if isinstance(table, Mapping):
            project = table.get("project", "prime-rl")
            return project if isinstance(project, str) else None
    return None


# --------------------------------------------------------------------------------------
# Analysis (shared by the three tools)
# --------------------------------------------------------------------------------------


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
    c = _Config(data=data, mode=chosen, path=path, env=env or {}, known_values=list(known_values))
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
    model, model_source = _model_name(c)
    count, count_detail = gpu_count(c)
    return ValidationReport(
        config_path=str(path), valid=not errors, mode=chosen, mode_reason=reason, errors=errors, warnings=warnings,
        notes=notes, model_name=model, model_name_source=model_source, max_steps=_max_steps(c),
        deployment_type=c.deployment_type, gpu_count=count, gpu_count_detail=count_detail,
        env_ids=c.taskset_ids("orchestrator.train.source") if c.rl else [],
        eval_env_ids=c.taskset_ids("orchestrator.eval.source" if c.rl else "eval.source"),
        wandb_project=_wandb_project(c), secret_names=[n for n in c.env_file_vars[0] if n in FORWARDABLE],
        schema_check="structural", schema_note=SCHEMA_NOTE.format(path=path),
    )


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


# --------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------


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
        path = _example_paths().get(inp.config_path.strip().removeprefix("examples/").removesuffix(".toml"), path)
    return validate_file(path, ctx, inp.mode)


def _example_paths() -> dict[str, Path]:
    return {p.relative_to(EXAMPLES_DIR).with_suffix("").as_posix(): p for p in sorted(EXAMPLES_DIR.rglob("*.toml"))}


def _descriptions() -> dict[str, str]:
    """``id -> notes`` from the table of examples/PROVENANCE.md."""
    try:
        text = (EXAMPLES_DIR / "PROVENANCE.md").read_text(encoding="utf-8")
    except OSError:
        return {}
    rows = re.findall(r"^\|\s*`examples/([^`]+)\.toml`\s*\|\s*([^|]*)\|\s*([^|]*)\|", text, re.M)
    return {ident: f"{kind.strip()}: {notes.strip()}" for ident, kind, notes in rows}


@tool
def list_examples(inp: ListExamplesInput, ctx: Context) -> ExampleList:
    """List the bundled prime-rl examples (``tools/examples``, verbatim from prime-rl 559b447).

    Each entry: ``id`` (for mf_prepare_config), path, mode, model, max_steps, deployment
    type, GPU count as written, and whether a hosted run would accept it (``hosted_ok``
    with ``hosted_reason``: the first structural error, e.g. disaggregated inference, or
    the size of multi-node examples). Local only; no errors beyond unreadable files.
    """
    notes = _descriptions()
    out: list[ExampleInfo] = []
    for ident, path in _example_paths().items():
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


def _resolve_example(example: str, ctx: Context) -> tuple[Path, str]:
    ident = example.strip().removeprefix("examples/").removesuffix(".toml")
    bundled = _example_paths()
    if ident in bundled:
        return bundled[ident], ident
    path = ctx.resolve_path(example)
    if path.is_file():
        return path, str(path)
    raise fail("config_not_found", f"No bundled example {example!r} and no TOML file at {path}.",
               "Call mf_list_examples and pass one of its ids (e.g. basic/reverse-text/rl), or an existing path.")


def _set(container: Any, key: str, value: Any, where: str, changes: list[Change]) -> None:
    """Set ``container[key]`` keeping its position (a new top-level key goes after the last
    existing top-level key, not under a table's comment)."""
    old = container.get(key)
    if old is not None:
        if old == value:
            return
        container[key] = value
        changes.append(Change(path=where, action="set", old=_fmt(old), new=_fmt(value)))
        return
    if isinstance(container, tomlkit.TOMLDocument):
        container._insert_at(_top_level_slot(container), key, value)  # noqa: SLF001 - no public "insert at"
    else:
        container[key] = value
    changes.append(Change(path=where, action="added", new=_fmt(value)))


def _top_level_slot(doc: tomlkit.TOMLDocument) -> int:
    """Body index just after the last top-level ``key = value`` (before the first table);
    0 when there is none. Assigning ``doc[key]`` instead would land under the comment that
    introduces the first table, or after an out-of-order table."""
    slot = 0
    for index, (key, item) in enumerate(doc.body):
        if isinstance(item, (tomlkit.items.Table, tomlkit.items.AoT)):
            break
        if key is not None and not isinstance(item, (tomlkit.items.Whitespace, tomlkit.items.Comment)):
            slot = index + 1
    return slot


def _remove(container: Any, key: str, where: str, changes: list[Change]) -> None:
    if key in container:
        old = container[key]
        shown = "[table]" if isinstance(old, (tomlkit.items.Table, tomlkit.items.AoT)) else _fmt(old)
        del container[key]
        changes.append(Change(path=where, action="removed", old=shown))


def _edit(doc: tomlkit.TOMLDocument, inp: PrepareConfigInput, mode: Mode) -> list[Change]:
    """Apply the hosted-run edits of :func:`prepare_config` to ``doc`` in place."""
    changes: list[Change] = []
    for key in ("slurm", "output_dir", "clean", "dry_run", "k8s"):
        _remove(doc, key, key, changes)
    if mode == "sft":  # hosted SFT is trainer-only (rule sft_trainer_only)
        for key in SFT_REJECTED_TABLES:
            _remove(doc, key, key, changes)
        if hasattr(doc.get("deployment"), "keys"):
            for key in ("num_infer_gpus", "num_eval_gpus"):
                _remove(doc["deployment"], key, f"deployment.{key}", changes)
    run = doc.get("run")
    if run is not None and hasattr(run, "keys"):
        _remove(run, "dir", "run.dir", changes)
        if len(run) == 0:
            _remove(doc, "run", "run", changes)
    deployment = doc.get("deployment")
    if inp.num_train_gpus is not None or inp.num_infer_gpus is not None:
        kind = deployment.get("type", "single_node") if hasattr(deployment, "get") else "single_node"
        if kind != "single_node":
            raise fail("bad_arguments", f"This example is a {kind} deployment: its size is set in nodes, not with "
                       "num_train_gpus/num_infer_gpus.",
                       "Leave num_train_gpus/num_infer_gpus unset, or start from a single_node example "
                       "(mf_list_examples), then edit [deployment] by hand.",
                       fields=[FieldProblem(path="num_train_gpus", problem="single_node examples only")])
        if deployment is None:
            deployment = tomlkit.table()
            doc["deployment"] = deployment
            changes.append(Change(path="deployment", action="added", new="[table]"))
        for key in ("num_train_gpus", "num_infer_gpus"):
            value = getattr(inp, key)
            if value is not None:
                _set(deployment, key, value, f"deployment.{key}", changes)
    if inp.gpu_type is not None:
        _set(doc, "gpu_type", inp.gpu_type, "gpu_type", changes)
    if inp.max_steps is not None:
        _set(doc, "max_steps", inp.max_steps, "max_steps", changes)
        for sub in ("trainer", "orchestrator") if mode == "rl" else ():
            table = doc.get(sub)
            if hasattr(table, "get") and table.get("max_steps") is not None:
                _set(table, "max_steps", inp.max_steps, f"{sub}.max_steps", changes)
    if inp.name is not None:
        _set(doc, "name", inp.name, "name", changes)
    return changes


def write_new_file(dest: Path, data: bytes) -> None:
    """Write ``data`` to ``dest`` atomically, never replacing an existing file.

    Temp file in the same folder, fsync, then ``os.link`` (fails if ``dest`` exists, so a
    file created meanwhile is never overwritten); the temp file is always removed. Raises
    ToolFailure ``dest_exists`` / ``write_failed``; on any failure ``dest`` is untouched.
    """
    tmp: str | None = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        try:
            os.link(tmp, dest)
        except FileExistsError:
            raise _dest_exists(dest) from None
        except OSError:  # no hard links on this file system: check, then rename
            if dest.exists():
                raise _dest_exists(dest) from None
            os.replace(tmp, dest)
    except OSError as exc:
        raise fail("write_failed", f"Could not write {dest}: {exc.strerror or exc}.",
                   "Pick a dest in a writable folder and call mf_prepare_config again.") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _dest_exists(dest: Path) -> Exception:
    return fail("dest_exists", f"{dest} already exists; mf_prepare_config never overwrites a file.",
                "Pass a new dest path (e.g. add a suffix), or validate/edit the existing file with "
                "mf_validate_config instead.")


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
    ``bad_arguments`` (dest not .toml, GPU counts on a multi_node example), ``write_failed``,
    ``secret_in_input`` (the source holds a secret-looking value; nothing is written).
    """
    source, label = _resolve_example(inp.example, ctx)
    dest = ctx.resolve_path(inp.dest)
    if dest.suffix != ".toml":
        raise fail("bad_arguments", f"dest must be a .toml file, got {dest.name!r}.",
                   "Pass a dest ending in .toml.", fields=[FieldProblem(path="dest", problem="must end in .toml")])
    if dest.exists():
        raise _dest_exists(dest)
    data = load_toml(source)
    for env_path in toml_env_files(data, source):
        ctx.scrubber.add_env_file(env_path, ctx.env)
    # Never copy a secret into a new file: refuse the source as mf_plan_run would (locations only).
    refuse_secret_values(data, root=source.name, known_values=ctx.scrubber.known_values(), check_key_names=True)
    mode, _ = sniff_mode(data)
    doc = tomlkit.parse(source.read_text(encoding="utf-8"))
    changes = _edit(doc, inp, mode)
    text = tomlkit.dumps(doc).encode("utf-8")
    write_new_file(dest, text)
    return PreparedConfig(
        path=str(dest), source=label, mode=mode, sha256=hashlib.sha256(text).hexdigest(), size_bytes=len(text),
        changes=changes, validation=validate_file(dest, ctx))
