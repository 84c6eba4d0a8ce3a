"""The validation rules: one small check per rule, and :data:`RULES`, the table that lists them
with their severity, modes and source.

A check reads a :class:`~tools.configs._facts.Config` and yields ``(dotted path, message)``
findings; messages never contain a secret value. Add a rule here: a function, then a ``Rule``
row in :data:`RULES` (references/configs.md lists the rule ids; a test keeps them equal).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tools.configs._facts import (
    CLI_ONLY_KEYS,
    CLI_OPTIONS,
    DEFAULT_MODEL,
    DEFAULT_SEQ_LEN,
    DEPRECATED_ORCHESTRATOR_KEYS,
    FINE_TUNE_NAME,
    OPTIMIZERS,
    PROTECTED_ENV_VARS,
    RL_TOP_LEVEL,
    SFT_REJECTED_TABLES,
    SFT_TOP_LEVEL,
    Config,
    Mode,
    max_steps_of,
    model_name_of,
)
from tools.configs._toml import as_int, toml_text, value_at
from tools.guardrails.secrets import FORWARDABLE, env_file_git_warning, scan_for_secrets, toml_env_files

Severity = Literal["error", "warning"]

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
    check: Callable[[Config], Iterable[Finding]]


# --------------------------------------------------------------------------------------
# Rule checks (one small function each; the table RULES below lists them)
# --------------------------------------------------------------------------------------


def _retired_lora_shape(c: Config) -> Iterator[Finding]:
    if isinstance(c.data.get("model"), str):
        yield "model", ('Top-level `model = "..."` is the retired shared-LoRA format; `prime train` refuses it. '
                        'Use a [model] table: [model] name = "...".')
    if isinstance(c.data.get("env"), list):
        yield "env", ("Top-level [[env]] is the retired shared-LoRA format; `prime train` refuses it. Use "
                      "[[orchestrator.train.source]] with env.taskset.id (start from mf_list_examples).")


def _cli_option_type(c: Config) -> Iterator[Finding]:
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


def _source_ref(c: Config) -> Iterator[Finding]:
    ref = c.data.get("source_ref")
    if isinstance(ref, str) and (problem := source_ref_problem(ref)):
        yield "source_ref", problem


def _env_file(c: Config) -> Iterator[Finding]:
    yield from c.env_file_vars[1]


def _unsupported_secret(c: Config) -> Iterator[Finding]:
    other = [n for n in c.env_file_vars[0] if n not in FORWARDABLE]
    if other:
        yield "env_files", (f"Only {' and '.join(sorted(FORWARDABLE))} can be forwarded to a hosted run; the env "
                            f"file(s) also set: {', '.join(other)}. `prime train` exits on this: remove those lines "
                            "or use another env file.")


def _cli_type_key(c: Config) -> Iterator[Finding]:
    if "type" in c.data:
        yield "type", "Top-level `type` is no longer used (prime train strips it with a warning): remove it."


def _deprecated_orchestrator_key(c: Config) -> Iterator[Finding]:
    for key in DEPRECATED_ORCHESTRATOR_KEYS:
        if c.has(f"orchestrator.{key}"):
            yield f"orchestrator.{key}", f"orchestrator.{key} is deprecated; prime train drops it. Remove it."
    if c.has("orchestrator.eval.eval_base_model"):
        yield "orchestrator.eval.eval_base_model", (
            "eval_base_model was renamed skip_first_step with the meaning inverted; prime train translates it. "
            "Use orchestrator.eval.skip_first_step.")


def _mode_shape(c: Config) -> Iterator[Finding]:
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


def _k8s(c: Config) -> Iterator[Finding]:
    if "k8s" in c.data:
        yield "k8s", ("[k8s] is not supported for hosted runs: Platform manages deployment settings. "
                      "Remove the [k8s] table.")


def _clean(c: Config) -> Iterator[Finding]:
    if c.data.get("clean") is True:
        yield "clean", "clean = true is unsupported for hosted runs: start a new run instead (remove clean)."


def _disaggregated(c: Config) -> Iterator[Finding]:
    if c.get("inference.deployment.type") == "disaggregated":
        yield "inference.deployment.type", ('inference.deployment type = "disaggregated" is unsupported for '
                                            "hosted runs. Use single_node or multi_node inference.")


def _rl_needs_inference(c: Config) -> Iterator[Finding]:
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


def _field_type(c: Config) -> Iterator[Finding]:
    for path, minimum in INT_FIELDS.items():
        value = c.get(path)
        if value is None:
            continue
        if as_int(value) is None:
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


def _deployment_type(c: Config) -> Iterator[Finding]:
    kind = c.get("deployment.type")
    if kind is not None and kind not in ("single_node", "multi_node"):
        yield "deployment.type", f"deployment.type must be single_node or multi_node, got {kind!r}."
    kind = c.get("inference.deployment.type")
    if c.rl and kind is not None and kind not in ("single_node", "multi_node", "disaggregated"):
        yield "inference.deployment.type", f"inference.deployment.type must be single_node or multi_node, got {kind!r}."


def _gpus_per_node(c: Config) -> Iterator[Finding]:
    if not c.single_node:
        return
    train, infer, per_node = c.gpus("num_train_gpus"), c.gpus("num_infer_gpus"), c.gpus_per_node
    if c.rl or (c.has_inference and "eval" in c.data):
        if train + infer > per_node:
            yield "deployment", (f"Total GPU count ({train + infer} = {train} train + {infer} infer) exceeds "
                                 f"gpus_per_node ({per_node}). Lower the counts or use a multi_node deployment.")
    elif train > per_node:
        yield "deployment.num_train_gpus", f"num_train_gpus ({train}) exceeds gpus_per_node ({per_node})."


def _infer_gpus_tp(c: Config) -> Iterator[Finding]:
    tp = c.int("inference.vllm.tensor_parallel_size") or 1
    if c.single_node and c.has_inference and c.gpus("num_infer_gpus") % tp:
        yield "deployment.num_infer_gpus", (f"Number of inference GPUs ({c.gpus('num_infer_gpus')}) must be "
                                            f"divisible by the tensor parallel size ({tp}).")


def _multi_node_layout(c: Config) -> Iterator[Finding]:
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


def _batch_size(c: Config) -> Iterator[Finding]:
    batch, tokens = c.int("orchestrator.batch_size"), c.int("orchestrator.token_batch_size")
    if batch is not None and tokens is not None:
        yield "orchestrator", "Set exactly one of batch_size or token_batch_size."
    group = c.int("orchestrator.group_size") or 1
    if batch is not None and batch % group:
        yield "orchestrator.batch_size", (f"Batch size ({batch}) must be divisible by the number of samples per "
                                          f"problem (group_size {group}).")


def _sft_batch(c: Config) -> Iterator[Finding]:
    batch, micro = c.int("data.batch_size") or 128, c.int("data.micro_batch_size") or 1
    if batch % micro:
        yield "data.batch_size", f"Batch size ({batch}) must be divisible by micro batch size ({micro})."


def _sft_trainer_only(c: Config) -> Iterator[Finding]:
    for key in SFT_REJECTED_TABLES:
        if key in c.data:
            yield key, (f"[{key}]: hosted SFT runs the trainer only; the platform rejects [eval], [inference] and "
                        "[weight_broadcast] (prime 0.18.0 `train --sft` help). Remove the block for a hosted run.")


#: Where hosted SFT finds datasets: the run's volume, mounted read-only at /volume.
_VOLUME_DATASET = re.compile(r"\A(/volume/|datasets/)")


def _sft_dataset(c: Config) -> Iterator[Finding]:
    if c.get("data.type") == "fake":
        return
    name = c.get("data.name") or "PrimeIntellect/Reverse-Text-SFT"
    if isinstance(name, str) and not _VOLUME_DATASET.match(name):
        yield "data.name", (f"data.name {name!r} is not a path on a volume. Hosted SFT reads datasets from the run's "
                            "volume (mounted read-only at /volume: data.name = \"/volume/datasets/<name>\" or "
                            "\"datasets/<name>\"); without a volume only fake data works (prime 0.18.0 `train --sft` "
                            "help). Put the dataset on a volume and plan with volume=<name>.")


def _renderer(c: Config) -> Iterator[Finding]:
    renderer = c.get("orchestrator.renderer.name") or "auto"
    model = model_name_of(c)[0]
    if renderer == "auto" and model and FINE_TUNE_NAME.search(model.rsplit("/", 1)[-1]):
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


def _retired_key(c: Config) -> Iterator[Finding]:
    for path, hint in RETIRED_KEYS.items():
        if c.has(path):
            yield path, f"{path} is not a prime-rl field any more ({hint}); the schema rejects it."
    for path, table in _tables(c.data):
        if "toml_files" in table:
            where = f"{path}.toml_files" if path else "toml_files"
            yield where, ("toml_files was removed from prime-rl (2026-03-02): compose files on the command line "
                          "(`@ base.toml @ overlay.toml`) or merge them into one TOML.")


def _wandb_offline(c: Config) -> Iterator[Finding]:
    if c.get("monitors.wandb.offline") is True:
        yield "monitors.wandb.offline", ("W&B shared mode is always on for the rl entrypoint and requires server "
                                         "connectivity; monitors.wandb.offline = true is not supported. Remove it.")


def _protected_env_vars(c: Config) -> Iterator[Finding]:
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


def _shared_conflict(c: Config) -> Iterator[Finding]:
    for shared, targets in SHARED_FIELDS.items():
        value = c.get(shared)
        if value is None:
            continue
        for target in targets:
            other = c.get(target)
            if other is not None and other != value:
                yield target, (f"Shared config conflicts with a sub-config field: {shared} = {toml_text(value)} but "
                               f"{target} = {toml_text(other)}. Pick one place to set the value.")


def _inference_model(c: Config) -> Iterator[Finding]:
    if not c.has_inference:
        return
    shared = c.get("model.name")
    orch = c.get("orchestrator.model.name") or shared or DEFAULT_MODEL
    infer = c.get("inference.vllm.model") or shared or DEFAULT_MODEL
    if orch != infer:
        yield "inference.vllm.model", (f"Inference model name ({infer}) and orchestrator model name ({orch}) are "
                                       "not the same. Set [model] name once, or make them equal.")


def _seq_len_order(c: Config) -> Iterator[Finding]:
    shared = c.int("seq_len")
    trainer = c.int("trainer.model.seq_len") or shared or DEFAULT_SEQ_LEN
    orch = c.int("orchestrator.seq_len") or shared or DEFAULT_SEQ_LEN
    if trainer < orch:
        yield "trainer.model.seq_len", (f"Trainer model seq_len ({trainer}) must be >= orchestrator seq_len ({orch}). "
                                        "The trainer needs to handle sequences at least as long as those produced.")


def _subconfig_mismatch(c: Config) -> Iterator[Finding]:
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


def _resume(c: Config) -> Iterator[Finding]:
    if c.get("resume.step") is not None and c.get("resume.dir") is not None:
        yield "resume", "resume.step and resume.dir are mutually exclusive: set one."


def _sources_rule(c: Config) -> Iterator[Finding]:
    if isinstance(c.data.get("orchestrator"), Mapping) and "eval" in c.table("orchestrator"):
        if not c.sources("orchestrator.eval.source"):
            yield "orchestrator.eval", ("EvalConfig must define at least one source. Either drop the "
                                        "[orchestrator.eval] block or add a [[orchestrator.eval.source]] block.")
    for group in ("orchestrator.train.source", "orchestrator.eval.source"):
        seen: set[str] = set()
        for where, src in c.sources(group):
            name = src.get("name") or value_at(src, "env.taskset.id")
            if not isinstance(value_at(src, "env"), Mapping):
                yield f"{where}.env", 'no env configured — set env = { taskset = { id = "<id>" } }.'
            if name == "agg":
                yield f"{where}.name", 'Environment name "agg" is reserved; pick another name.'
            elif isinstance(name, str) and name in seen:
                yield f"{where}.name", f"Duplicate environment name {name!r}: each env must have a unique name."
            if isinstance(name, str):
                seen.add(name)


def _optimizer(c: Config) -> Iterator[Finding]:
    prefix = "trainer." if c.rl else ""
    kind = c.get(f"{prefix}optim.type")
    if kind is not None and kind not in OPTIMIZERS:
        yield f"{prefix}optim.type", (f"Input tag {kind!r} found using 'type' does not match any of the expected "
                                      f"tags: {', '.join(repr(o) for o in sorted(OPTIMIZERS))}.")
    model = f"{prefix}model"
    if c.get(f"{model}.full_offload") not in (None, False) and c.get(f"{model}.optim_cpu_offload") is not False:
        yield f"{model}.optim_cpu_offload", ("Cannot enable both optim_cpu_offload (default true) and full_offload: "
                                             f"set {model}.optim_cpu_offload = false.")


def _weight_broadcast(c: Config) -> Iterator[Finding]:
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


def _nccl_world_size(c: Config) -> Iterator[Finding]:
    auto_nccl = c.get("weight_broadcast.type") is None and not c.has("trainer.model.lora")
    if not (c.single_node and c.has_inference and (auto_nccl or c.get("weight_broadcast.type") == "nccl")):
        return
    tp = c.int("inference.vllm.tensor_parallel_size") or 1
    infer = c.gpus("num_infer_gpus")
    if infer > tp and c.get("inference.vllm.data_parallel_size") is None:
        yield "inference.vllm.data_parallel_size", (
            f"NCCL weight broadcast computes its inference world size before data_parallel_size is auto-filled: "
            f"set [inference.vllm] data_parallel_size = {infer // tp} explicitly (as the wordle example does).")


def _launcher_local(c: Config) -> Iterator[Finding]:
    for path in ("slurm", "output_dir", "run.dir", "dry_run", "trainer.output_dir", "orchestrator.output_dir"):
        if c.has(path):
            yield path, (f"{path} is for local/SLURM launches; the platform owns placement and storage. "
                         "mf_prepare_config drops it; remove it.")


def _full_offload_clipping(c: Config) -> Iterator[Finding]:
    model = "trainer.model" if c.rl else "model"
    if c.get(f"{model}.full_offload") not in (None, False):
        yield f"{model}.full_offload", "full_offload disables gradient clipping (optim.max_norm is ignored)."


def _no_max_steps(c: Config) -> Iterator[Finding]:
    if max_steps_of(c) is None:
        yield "max_steps", "No max_steps: the run has no step cap and bills until stopped. Set max_steps."


def _no_train_source(c: Config) -> Iterator[Finding]:
    if not c.sources("orchestrator.train.source"):
        yield "orchestrator.train.source", ("No [[orchestrator.train.source]]: the run has no training "
                                            "environment (prime-rl names it no-env). Add one.")


def _unknown_top_level(c: Config) -> Iterator[Finding]:
    # k8s, env, data, trainer, orchestrator have their own rules
    known = (RL_TOP_LEVEL if c.rl else SFT_TOP_LEVEL) | CLI_ONLY_KEYS | {"name", "k8s", "env", "data", "trainer",
                                                                        "orchestrator"}
    for key in c.data:
        if key not in known:
            yield key, (f"{key} is not a top-level key of prime-rl's {'RLConfig' if c.rl else 'SFTConfig'} "
                        "(snapshot 559b447); the schema may reject it (extra inputs are not permitted).")


def _secret_value(c: Config) -> Iterator[Finding]:
    for hit in scan_for_secrets(c.data, root="", known_values=c.known_values, check_key_names=True):
        yield hit.location, (f"Looks like {hit.kind} (value not shown). Remove it from the TOML: secrets travel "
                             "by name (WANDB_API_KEY / HF_TOKEN in the environment or an env file).")


def _env_file_in_git(c: Config) -> Iterator[Finding]:
    for env_path in toml_env_files(c.data, c.path):
        if warning := env_file_git_warning(env_path):
            yield "env_files", warning


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
    Rule("env_file_in_git", "warning", _BOTH, "DESIGN guardrail 2", "env files tracked by git or not ignored",
         _env_file_in_git),
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
