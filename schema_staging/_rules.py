"""Structural rules: prime-rl's model validators that JSON Schema cannot express, as pure
functions over the config table.

Each rule mirrors one validator of the schema at the snapshot's commit and is registered
under that validator's name (``module.Class.function``, the name the export records in
``x-validators``), so the file and function it mirrors are in its registration:
``prime_rl.configs.trainer.ModelConfig.validate_cp`` is ``prime_rl/configs/trainer.py``,
``ModelConfig.validate_cp``. :func:`run` calls them the way pydantic does: depth first in
field order, a model's validators in the order pydantic runs them, only on a model whose
fields (and sub-models) all validated, stopping at a model's first failure. Validators that
fill in values other validators read (``auto_setup_*``) are mirrored too, with those effects.

Every validator of the shipped schema is in exactly one of :data:`RULES`,
:data:`NOT_RAISING` (sets values no later check reads) or :data:`NOT_MIRRORED` (with the
reason); ``tests/test_schema_rules.py`` checks that against the snapshot, so a new validator
in a re-export cannot go unnoticed.

A rule receives a :class:`Node` (the model's table with defaults filled in) and raises
:class:`Invalid` with prime-rl's message. Tables stand in for models: a sub-model that is
unset is ``None``, a set one is a (possibly empty) table, so "is configured" is
``node[...] is not None`` (a model instance is always truthy in Python, an empty dict is not).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlparse

from schema_staging._findings import Finding
from schema_staging._schema_index import SchemaIndex


class Invalid(Exception):
    """A validator refused its model. ``kind``: ``value_error`` (``raise ValueError``) or
    ``assertion_error`` (an ``assert``), as pydantic reports them; ``loc``: where pydantic puts
    it when that is not the model (a model built inside a validator failing its own check)."""

    def __init__(self, message: str, kind: str = "value_error", loc: tuple[str | int, ...] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.loc = loc


@dataclass
class Outcome:
    """Findings of the rules (in walk order) and the warnings validators emitted."""

    findings: list[Finding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Node:
    """One model table seen by a rule: ``node["a.b"]`` reads (None when absent),
    ``node.set("a.b", v)`` writes, ``node.fields_set("a")`` is what the user set there."""

    __slots__ = ("data", "_fields_set", "facts", "warnings")

    def __init__(self, data: dict[str, Any], fields_set: dict[int, frozenset[str]], facts: dict[str, Any],
                 warnings: list[str]) -> None:
        self.data = data
        self._fields_set = fields_set
        self.facts = facts
        self.warnings = warnings

    def __getitem__(self, path: str) -> Any:
        value: Any = self.data
        for part in path.split("."):
            if not isinstance(value, dict):
                return None
            value = value.get(part)
        return value

    def set(self, path: str, value: Any) -> None:
        *parents, last = path.split(".")
        target = self[".".join(parents)] if parents else self.data
        if isinstance(target, dict):
            target[last] = value

    def fields_set(self, path: str = "") -> frozenset[str]:
        target = self[path] if path else self.data
        return self._fields_set.get(id(target), frozenset()) if isinstance(target, dict) else frozenset()

    def warn(self, message: str) -> None:
        self.warnings.append(message)


Rule = Callable[[Node], None]
#: validator name -> rule.
RULES: dict[str, Rule] = {}


def mirrors(*validators: str) -> Callable[[Rule], Rule]:
    """Register ``fn`` as the rule of each named prime-rl validator."""

    def register(fn: Rule) -> Rule:
        for name in validators:
            RULES[name] = fn
        return fn

    return register


def source_of(validator: str) -> str:
    """``prime_rl.configs.trainer.ModelConfig.validate_cp`` ->
    ``prime_rl/configs/trainer.py ModelConfig.validate_cp``."""
    parts = validator.split(".")
    split = next((i for i, p in enumerate(parts) if p[:1].isupper()), len(parts) - 1)
    return f"{'/'.join(parts[:split])}.py {'.'.join(parts[split:])}"


# --------------------------------------------------------------------------------------
# The walk
# --------------------------------------------------------------------------------------


def run(resolved: dict[str, Any], fields_set: dict[int, frozenset[str]], index: SchemaIndex,
        facts: dict[str, Any], error_locs: Sequence[tuple[str | int, ...]]) -> Outcome:
    """Run the rules over ``resolved`` (defaults filled, from
    :func:`schema_staging._prepass.fill_defaults`). A model with a schema error inside it
    (``error_locs``) is not checked, nor are the models containing it, as in pydantic."""
    outcome = Outcome()
    walker = _Walker(index, fields_set, facts, outcome, [tuple(loc) for loc in error_locs])
    walker.value(resolved, index.root, ())
    return outcome


@dataclass
class _Walker:
    index: SchemaIndex
    fields_set: dict[int, frozenset[str]]
    facts: dict[str, Any]
    outcome: Outcome
    error_locs: list[tuple[str | int, ...]]

    def value(self, value: Any, node: dict[str, Any] | None, loc: tuple[str | int, ...]) -> bool:
        """Check ``value`` and what it contains; False when something in it failed."""
        if node is None:
            return True
        chosen = self.index.select(node, value)
        if chosen is None:
            return True
        if isinstance(value, list) and isinstance(chosen.get("items"), dict):
            results = [self.value(v, chosen["items"], (*loc, i)) for i, v in enumerate(value)]
            return all(results)
        if not isinstance(value, dict):
            return True
        if "x-model" not in chosen:
            extra = chosen.get("additionalProperties")
            if isinstance(extra, dict):
                return all([self.value(v, extra, (*loc, k)) for k, v in value.items()])
            return True
        results = [self.value(value[name], prop, (*loc, name))
                   for name, prop in chosen.get("properties", {}).items() if name in value]
        if not all(results) or any(e[:len(loc)] == loc for e in self.error_locs):
            return False
        view = Node(value, self.fields_set, self.facts, self.outcome.warnings)
        for validator in chosen.get("x-validators", ()):
            rule = RULES.get(validator)
            if rule is None:
                continue
            try:
                rule(view)
            except Invalid as invalid:
                where = loc if invalid.loc is None else invalid.loc
                self.outcome.findings.append(Finding(where, invalid.message, validator, kind=invalid.kind,
                                                     source=source_of(validator)))
                return False
        return True


# --------------------------------------------------------------------------------------
# prime_rl/configs/shared.py
# --------------------------------------------------------------------------------------


@mirrors("prime_rl.configs.shared.ResumeConfig.validate_step_xor_dir")
def _resume(m: Node) -> None:
    if m["step"] is not None and m["dir"] is not None:
        raise Invalid("resume.step and resume.dir are mutually exclusive — the step is taken from the directory name")
    if m["dir"] is not None and not re.fullmatch(r"step_\d+", PurePosixPath(str(m["dir"])).name):
        raise Invalid(f"resume.dir must point at a checkpoint step directory (`.../step_<N>`), got '{m['dir']}'")


# --------------------------------------------------------------------------------------
# prime_rl/configs/trainer.py
# --------------------------------------------------------------------------------------

_CUSTOM_OR_AUTO = ("custom", "auto")


@mirrors("prime_rl.configs.trainer.ActivationCheckpointConfig.validate_selective_targets")
def _selective_targets(m: Node) -> None:
    targets = list(dict.fromkeys(m["targets"] or []))
    m.set("targets", targets)
    if m["mode"] == "selective" and not targets:
        raise Invalid("Selective activation checkpointing requires at least one target.")


@mirrors("prime_rl.configs.trainer.ModelConfig.trust_remote_code_only_with_hf")
def _trust_remote_code(m: Node) -> None:
    if m["trust_remote_code"] and m["impl"] not in ("hf", "auto"):
        raise Invalid("Trust remote code is only supported with the HF implementation or auto mode.")


@mirrors("prime_rl.configs.trainer.ModelConfig.vlm_only_with_custom_impl")
def _vlm_custom(m: Node) -> None:
    if m["vlm"] is not None and m["impl"] != "custom":
        raise Invalid("VLM training requires model.impl='custom'")


@mirrors("prime_rl.configs.trainer.ModelConfig.vlm_cp_requires_ulysses")
def _vlm_cp(m: Node) -> None:
    if m["vlm"] is not None and m["cp"] > 1 and m["cp_style"] != "ulysses":
        raise Invalid("VLM models require cp_style='ulysses' for context parallelism")


@mirrors("prime_rl.configs.trainer.ModelConfig.validate_cp")
def _cp(m: Node) -> None:
    if m["cp"] > 1 and m["attn"] not in ("flash_attention_2", "flash_attention_3", "flash_attention_4", "auto"):
        raise Invalid("CP is only supported with flash attention 2, 3, or 4")
    if m["cp"] > 1 and m["impl"] not in _CUSTOM_OR_AUTO:
        raise Invalid("Context parallelism requires model.impl='custom' or 'auto' "
                      "(resolved to a custom PrimeRL implementation)")


@mirrors("prime_rl.configs.trainer.ModelConfig.ac_offloading_requires_ac")
def _ac_offloading(m: Node) -> None:
    if m["ac_offloading"] is not None and m["ac"] is None:
        m.set("ac", {"mode": "full", "freq": 1, "targets": ["norm"]})


@mirrors("prime_rl.configs.trainer.ModelConfig.selective_ac_only_with_custom_impl")
def _selective_ac(m: Node) -> None:
    if m["ac"] is not None and m["ac.mode"] == "selective" and m["impl"] not in _CUSTOM_OR_AUTO:
        raise Invalid("Selective activation checkpointing requires model.impl='custom' or 'auto'")


@mirrors("prime_rl.configs.trainer.ModelConfig.cpu_offload_mutual_exclusion")
def _cpu_offload(m: Node) -> None:
    full = m["full_offload"] is not None
    if m["fsdp_cpu_offload"] and (m["optim_cpu_offload"] or full):
        raise Invalid("Cannot combine fsdp_cpu_offload with optimizer CPU offloading.")
    if m["optim_cpu_offload"] and full:
        raise Invalid("Cannot enable both optim_cpu_offload and full_offload. "
                      "Set optim_cpu_offload=false when enabling full optimizer offload.")


@mirrors("prime_rl.configs.trainer.ModelConfig.flash_attention_4_only_with_custom_impl")
def _fa4(m: Node) -> None:
    if m["attn"] in ("flash_attention_4", "auto") and m["impl"] not in _CUSTOM_OR_AUTO:
        raise Invalid("Flash attention 4 is only supported with model.impl='custom' or 'auto'")


@mirrors("prime_rl.configs.trainer.ModelConfig.quantization_only_with_custom_impl")
def _quantization_impl(m: Node) -> None:
    if m["quantization"] is not None and m["impl"] not in _CUSTOM_OR_AUTO:
        raise Invalid(f"{m['quantization.type']} training is only supported with model.impl='custom' or 'auto'.")


@mirrors("prime_rl.configs.trainer.ModelConfig.validate_ep_comm_backend")
def _ep_comm_backend(m: Node) -> None:
    backend, ep = m["ep_comm_backend"], m["ep"]
    if backend != "torch" and isinstance(ep, int) and not isinstance(ep, bool) and ep <= 1:
        raise Invalid(f"model.ep_comm_backend='{backend}' requires model.ep > 1.")


@mirrors("prime_rl.configs.trainer.ModelConfig.mxfp8_only_with_torch_ep_backend")
def _mxfp8(m: Node) -> None:
    if m["quantization.type"] == "mxfp8" and m["ep_comm_backend"] != "torch":
        raise Invalid("MXFP8 quantization requires model.ep_comm_backend='torch'.")


# Trainer (RL) and SFT share these checks over their model/optimizer.


@mirrors("prime_rl.configs.trainer.TrainerConfig.deepep_disables_grad_clipping",
         "prime_rl.configs.sft.SFTConfig.deepep_disables_grad_clipping")
def _deepep_clipping(m: Node) -> None:
    if m["model.ep_comm_backend"] == "deepep" and m["optim.max_norm"] is not None:
        m.warn("Gradient clipping is not compatible with DeepEP. Automatically setting optim.max_norm to None "
               "(disabled).")
        m.set("optim.max_norm", None)


@mirrors("prime_rl.configs.trainer.TrainerConfig.full_optimizer_offload_requires_supported_optimizer",
         "prime_rl.configs.sft.SFTConfig.full_optimizer_offload_requires_supported_optimizer")
def _full_offload_optimizer(m: Node) -> None:
    if m["model.full_offload"] is not None and m["optim.type"] not in ("adamw", "sign_sgd"):
        raise Invalid("Full optimizer offload only supports AdamW and SignSGD")


@mirrors("prime_rl.configs.trainer.TrainerConfig.full_optimizer_offload_disables_grad_clipping",
         "prime_rl.configs.sft.SFTConfig.full_optimizer_offload_disables_grad_clipping")
def _full_offload_clipping(m: Node) -> None:
    if m["model.full_offload"] is not None and m["optim.max_norm"] is not None:
        m.warn("Gradient clipping prevents optimizer-in-backward overlap with CPU optimizer offload. "
               "Automatically setting optim.max_norm to None (disabled).")
        m.set("optim.max_norm", None)


@mirrors("prime_rl.configs.trainer.TrainerConfig.vlms_require_bfloat16")
def _vlm_bf16(m: Node) -> None:
    if m["model.vlm"] is not None and (m["model.optimization_dtype"] != "bfloat16"
                                       or m["model.reduce_dtype"] != "bfloat16"):
        raise Invalid("VLM models must use optimization_dtype='bfloat16' and reduce_dtype='bfloat16' to match "
                      "vLLM inference.")


@mirrors("prime_rl.configs.trainer.TrainerConfig.vlm_freeze_incompatible_with_lora",
         "prime_rl.configs.sft.SFTConfig.vlm_freeze_incompatible_with_lora")
def _vlm_freeze_lora(m: Node) -> None:
    if (m["model.vlm"] is not None and not m["model.vlm.freeze_vision_encoder"]
            and m["model.lora"] is not None):
        raise Invalid("freeze_vision_encoder=false is incompatible with LoRA. "
                      "LoRA freezes all non-adapter parameters including the vision encoder.")


@mirrors("prime_rl.configs.trainer.TrainerConfig.dont_do_massive_traces",
         "prime_rl.configs.sft.SFTConfig.dont_do_massive_traces")
def _traces(m: Node) -> None:
    if m["trace_path"] is not None:
        if m["max_steps"] is None:
            raise Invalid("Must specify max_steps when tracing")
        if m["max_steps"] >= 10:
            raise Invalid("Tracing more than 10 steps is not recommended as your trace will be massive. Remove "
                          "this line if you really want to trace more steps.")


@mirrors("prime_rl.configs.trainer.TrainerConfig.validate_scheduler_steps",
         "prime_rl.configs.sft.SFTConfig.validate_scheduler_steps")
def _scheduler(m: Node) -> None:
    """prime_rl/configs/trainer.py validate_scheduler."""
    kind, max_steps = m["scheduler.type"], m["max_steps"]
    warmup, decay = m["scheduler.warmup_steps"], m["scheduler.decay_steps"]
    if kind == "linear":
        if warmup == 0 and decay == 0:
            raise Invalid("Linear scheduler requires warmup_steps > 0 or decay_steps > 0 (use the constant "
                          "scheduler instead)")
        if decay > 0:
            if max_steps is None:
                raise Invalid("Must specify max_steps when using a linear scheduler with decay_steps > 0")
            if warmup + decay > max_steps:
                raise Invalid(f"warmup_steps ({warmup}) + decay_steps ({decay}) must not exceed max_steps "
                              f"({max_steps})")
    if kind == "cosine":
        if max_steps is None:
            raise Invalid("Must specify max_steps when using a cosine scheduler")
        if warmup >= max_steps:
            raise Invalid(f"warmup_steps ({warmup}) must be less than max_steps ({max_steps})")


@mirrors("prime_rl.configs.trainer.TrainerConfig.validate_opt_and_fsdp_offload",
         "prime_rl.configs.sft.SFTConfig.validate_opt_and_fsdp_offload")
def _muon_fsdp(m: Node) -> None:
    if m["optim.type"] == "muon" and m["model.fsdp_cpu_offload"]:
        raise Invalid("Muon optimizer does not support FSDP CPU offload")


@mirrors("prime_rl.configs.trainer.TrainerConfig.validate_lora_broadcast")
def _lora_broadcast(m: Node) -> None:
    if m["model.lora"] is not None and m["weight_broadcast.type"] in ("nccl", "nixl"):
        raise Invalid("In-memory weight broadcast does not support LoRA yet.")


@mirrors("prime_rl.configs.trainer.TrainerConfig.auto_setup_tokenizer",
         "prime_rl.configs.sft.SFTConfig.auto_setup_tokenizer",
         "prime_rl.configs.orchestrator.OrchestratorConfig.auto_setup_tokenizer")
def _tokenizer_defaults(m: Node) -> None:
    if m["tokenizer.name"] is None:
        m.set("tokenizer.name", m["model.name"])
    if m["tokenizer.trust_remote_code"] is None:
        m.set("tokenizer.trust_remote_code", m["model.trust_remote_code"])


@mirrors("prime_rl.configs.trainer.TrainerConfig.ep_only_with_custom_impl",
         "prime_rl.configs.sft.SFTConfig.ep_only_with_custom_impl")
def _ep_impl(m: Node) -> None:
    ep = m["model.ep"]
    if ep != 1 and ep != "auto" and m["model.impl"] not in _CUSTOM_OR_AUTO:
        raise Invalid("EP is only supported with the custom implementation or auto mode")


@mirrors("prime_rl.configs.trainer.TrainerConfig.router_replay_only_with_custom_impl")
def _router_replay_impl(m: Node) -> None:
    if m["enable_router_replay"] and m["model.impl"] not in _CUSTOM_OR_AUTO:
        raise Invalid("Router replay is only supported with the custom implementation or auto mode")


# --------------------------------------------------------------------------------------
# prime_rl/configs/algorithm.py
# --------------------------------------------------------------------------------------

#: ``action_loss_type`` of each algorithm (the class variable of its config).
_ACTION_LOSS = {"grpo": "rl", "echo": "rl", "max_rl": "rl", "rae": "rl", "hierarchical_grpo": "rl",
                "opd": "ref_kl", "opsd": "ref_kl", "sft": "ce"}


@mirrors("prime_rl.configs.algorithm.BaseAlgoConfig.validate_sampling_source")
def _algo_source(m: Node) -> None:
    loss = _ACTION_LOSS.get(m["type"], "rl")
    if loss in ("rl", "ref_kl") and m["sampling.source"] != "policy":
        raise Invalid(f"algorithm '{m['type']}' trains with the {loss} loss type but sampling.source is a frozen "
                      "model — the importance ratio and trust region need the live policy's own sampling "
                      "logprobs. Use the 'sft' algorithm to distill frozen-model tokens.")


@mirrors("prime_rl.configs.algorithm.SFTAlgoConfig.require_frozen_source")
def _sft_algo_source(m: Node) -> None:
    if m["sampling.source"] == "policy":
        raise Invalid(f"algorithm '{m['type']}' needs a teacher to sample rollouts from — CE on the policy's own "
                      "tokens is not a distillation target. Set sampling.source to an inline hosted model "
                      "(name + base_url).")


@mirrors("prime_rl.configs.algorithm.FrozenModelConfig.require_explicit_endpoint")
def _frozen_endpoint(m: Node) -> None:
    if "base_url" not in m.fields_set():
        raise Invalid("a frozen model reference needs base_url — frozen models are externally hosted; prime-rl "
                      "only ever hosts the trainable policy.")


@mirrors("prime_rl.configs.algorithm.EchoRolesConfig.require_a_role")
def _echo_roles(m: Node) -> None:
    if all(m[role] is None for role in ("system", "user", "assistant", "tool")):
        raise Invalid("echo needs at least one role enabled (system, user, assistant, or tool)")


# --------------------------------------------------------------------------------------
# prime_rl/configs/orchestrator.py
# --------------------------------------------------------------------------------------


def _env_id(source: dict[str, Any]) -> str:
    """verifiers EnvConfig.env_id: the taskset id, prefixed by the env id when both are set."""
    env = source.get("env") if isinstance(source.get("env"), dict) else {}
    taskset = env.get("taskset") if isinstance(env.get("taskset"), dict) else {}
    env_id, taskset_id = env.get("id") or "", taskset.get("id") or ""
    if taskset_id and env_id:
        return f"{env_id}+{taskset_id}"
    return str(taskset_id or env_id)


def _resolved_name(source: dict[str, Any]) -> str:
    return source.get("name") or _env_id(source)


@mirrors("prime_rl.configs.orchestrator.EnvConfig.validate_env")
def _source_env(m: Node) -> None:
    if not _env_id(m.data):
        raise Invalid('no env configured — set env = { taskset = { id = "<id>" } }')
    if _resolved_name(m.data) == "agg":
        raise Invalid('Environment name "agg" is reserved for cross-env metric aggregation. Use a different name '
                      "or id.")


@mirrors("prime_rl.configs.orchestrator.DifficultyPoolSamplerConfig.validate_pools")
def _pools(m: Node) -> None:
    pools = m["pools"] or {}
    if not pools:
        raise Invalid("DifficultyPoolSampler requires at least one pool")
    thresholds = [p.get("threshold") for p in pools.values()]
    if len(set(thresholds)) != len(thresholds):
        raise Invalid("Difficulty pool thresholds must be unique")
    if not any(p.get("weight", 0) > 0 for p in pools.values()):
        raise Invalid("At least one difficulty pool must have a positive weight")


@mirrors("prime_rl.configs.orchestrator.AdvRangeGateConfig.validate_range")
def _gate_range(m: Node) -> None:
    if m["reject_min"] > m["reject_max"]:
        raise Invalid("reject_min must be less than or equal to reject_max")


@mirrors("prime_rl.configs.orchestrator.TrainConfig.validate_unique_env_names")
def _train_names(m: Node) -> None:
    names = [_resolved_name(s) for s in m["source"] or []]
    repeated = {n for n in names if names.count(n) > 1}
    if repeated:
        raise Invalid(f"Duplicate training environment names: {repeated}. Each env must have a unique name.")


@mirrors("prime_rl.configs.orchestrator.EvalConfig.validate_non_empty_sources")
def _eval_sources(m: Node) -> None:
    if not m["source"]:
        raise Invalid("EvalConfig must define at least one source. Either drop the [orchestrator.eval] block "
                      "entirely (to disable eval) or add a [[orchestrator.eval.source]] block.")


@mirrors("prime_rl.configs.orchestrator.EvalConfig.validate_unique_env_names")
def _eval_names(m: Node) -> None:
    names = [_resolved_name(s) for s in m["source"] or []]
    repeated = {n for n in names if names.count(n) > 1}
    if repeated:
        raise Invalid(f"Duplicate evaluation environment names: {repeated}. Each env must have a unique name.")


@mirrors("prime_rl.configs.orchestrator.ConcurrencyConfig.validate_bounds")
def _concurrency(m: Node) -> None:
    top = m["max_inflight"]
    if top is not None:
        if m["initial_inflight"] is not None and m["initial_inflight"] > top:
            raise Invalid("concurrency.initial_inflight must not exceed concurrency.max_inflight")
        if m["min_inflight"] > top:
            raise Invalid("concurrency.min_inflight must not exceed concurrency.max_inflight")


@mirrors("prime_rl.configs.orchestrator.OrchestratorConfig.inherit_env_algorithms")
def _inherit_algorithms(m: Node) -> None:
    for source in m["train.source"] or []:
        if source.get("algo") is None:
            source["algo"] = _copy(m["algo"])


@mirrors("prime_rl.configs.orchestrator.OrchestratorConfig.validate_env_algorithms")
def _env_algorithms(m: Node) -> None:
    for source in m["train.source"] or []:
        if (source.get("algo") or {}).get("type") == "hierarchical_grpo":
            # HierarchicalGRPOAlgoConfig.validate_env imports the proposer-solver package, which
            # prime-rl-configs does not install.
            raise Invalid("algorithm 'hierarchical_grpo' requires a proposer-solver env, but the proposer-solver "
                          "package is not installed (`uv sync --all-packages`).")


@mirrors("prime_rl.configs.orchestrator.OrchestratorConfig.validate_renderer_auto_resolves")
def _renderer_auto(m: Node) -> None:
    if m["renderer.name"] != "auto":
        return
    model_id = m["tokenizer.name"] or m["model.name"]
    if model_id in m.facts["model_renderer_map"]:
        return
    raise Invalid(f"orchestrator.renderer.name='auto' but {model_id!r} is not in renderers.base.MODEL_RENDERER_MAP, "
                  "so it would silently fall back to DefaultRenderer. Pick one: (a) [orchestrator.renderer] "
                  "name='default' — for fine-tunes / vendored mirrors with custom chat templates; (b) "
                  "[orchestrator.renderer] name=<model-specific renderer> — if the model is template-identical "
                  "to a mapped family.")


@mirrors("prime_rl.configs.orchestrator.OrchestratorConfig.resolve_batching")
def _batching(m: Node) -> None:
    rollout, token = m["batch_size"] is not None, m["token_batch_size"] is not None
    if rollout and token:
        raise Invalid("Set exactly one of batch_size or token_batch_size")
    if not rollout and not token:
        m.set("batch_size", 128)
    group = m["group_size"]
    if m["batch_size"] is not None and m["batch_size"] % group != 0:
        raise Invalid("Batch size must be divisible by the number of samples per problem")
    for name in ("max_inflight", "initial_inflight"):
        value = m[f"concurrency.{name}"]
        if value is not None and value < group:
            raise Invalid(f"concurrency.{name} must be at least the number of rollouts per example")


# --------------------------------------------------------------------------------------
# prime_rl/configs/inference.py
# --------------------------------------------------------------------------------------


@mirrors("prime_rl.configs.inference.VllmConfig.auto_setup_max_lora_rank")
def _max_lora_rank(m: Node) -> None:
    rank = m["max_lora_rank"]
    if rank is None:
        return
    valid = [r for r in m.facts["valid_vllm_lora_ranks"] if r >= rank]
    if not valid:
        raise Invalid(f"max_lora_rank={rank} exceeds vLLM maximum of {m.facts['valid_vllm_lora_ranks'][-1]}")
    m.set("max_lora_rank", valid[0])


@mirrors("prime_rl.configs.inference.VllmConfig.auto_setup_api_server_count")
def _api_server_count(m: Node) -> None:
    extra = {k: v for k, v in m.data.items() if k not in _VLLM_DECLARED}
    if extra.get("headless", False):
        m.set("api_server_count", 0)
        return
    if "api_server_count" not in m.fields_set():
        least = m["data_parallel_size_local"] or m["data_parallel_size"]
        if m["api_server_count"] < least:
            m.set("api_server_count", least)
    if m["enable_lora"]:
        m.set("api_server_count", 1)


_VLLM_DECLARED = frozenset({
    "model", "dtype", "max_model_len", "enforce_eager", "trust_remote_code", "chat_template", "tool_call_parser",
    "reasoning_parser", "rope_scaling", "tensor_parallel_size", "data_parallel_size", "data_parallel_size_local",
    "data_parallel_rpc_port", "api_server_count", "seed", "gpu_memory_utilization", "enable_prefix_caching",
    "quantization", "enable_lora", "max_loras", "max_cpu_loras", "max_lora_rank", "lora_target_modules",
    "enable_expert_parallel", "all2all_backend", "enable_eplb", "enable_dbo", "enable_return_routed_experts"})


@mirrors("prime_rl.configs.inference.BaseKVCacheOffloadConfig.valid_tiers")
def _kv_tiers(m: Node) -> None:
    if m["cpu"] is None:
        raise Invalid("inference.kv_cache_offload requires a cpu tier (disk-only offload is not supported).")


@mirrors("prime_rl.configs.inference.LlmdRouterConfig.validate_scorers")
def _scorers(m: Node) -> None:
    names = set(m["scorers"] or {}) | set(m["prefill_scorer_overrides"] or {}) | set(m["decode_scorer_overrides"] or {})
    unknown = names - set(m.facts["known_llmd_scorers"])
    if unknown:
        raise Invalid(f"Unknown llm-d scorer(s): {sorted(unknown)}. Known scorers: "
                      f"{sorted(m.facts['known_llmd_scorers'])}.")


@mirrors("prime_rl.configs.inference.InferenceConfig.validate_multi_node_requires_slurm")
def _inference_slurm(m: Node) -> None:
    if m["deployment.type"] in ("multi_node", "disaggregated") and m["slurm"] is None:
        raise Invalid("Must use SLURM for multi-node / disaggregated deployment.")


@mirrors("prime_rl.configs.inference.InferenceConfig.validate_llmd_no_routed_experts")
def _inference_llmd_experts(m: Node) -> None:
    if m["router"] is not None and m["router.type"] == "llm-d" and m["vllm.enable_return_routed_experts"]:
        raise Invalid("The llm-d router backend does not support routed-expert return (enable_return_routed_experts)"
                      ": it breaks P/D and is unverified for multi-node. Use router type 'vllm-router' for "
                      "routed-expert runs.")


@mirrors("prime_rl.configs.inference.InferenceConfig.validate_router_deployment")
def _router_deployment(m: Node) -> None:
    if m["router"] is not None and m["router.type"] == "llm-d" and m["deployment.type"] == "single_node":
        raise Invalid("The llm-d router backend requires a multi-node or disaggregated SLURM deployment.")
    if m["router"] is None and m["deployment.type"] in ("multi_node", "disaggregated"):
        raise Invalid("Multi-node / disaggregated deployments require a router fronting the per-rank engines.")


@mirrors("prime_rl.configs.inference.InferenceConfig.auto_setup_kv_cache_offload")
def _kv_prefix_caching(m: Node) -> None:
    if m["kv_cache_offload"] is not None:
        if m["vllm.enable_prefix_caching"] is False:
            raise Invalid("KV cache offloading requires inference.vllm.enable_prefix_caching to be true.")
        if "enable_prefix_caching" not in m.fields_set("vllm"):
            m.set("vllm.enable_prefix_caching", True)


@mirrors("prime_rl.configs.inference.InferenceConfig.auto_setup_disaggregated")
def _disaggregated_defaults(m: Node) -> None:
    if m["deployment.type"] != "disaggregated":
        return
    vllm_set = m.fields_set("vllm")
    if "enable_expert_parallel" not in vllm_set:
        m.set("vllm.enable_expert_parallel", True)
    if "enable_eplb" not in vllm_set:
        m.set("vllm.enable_eplb", False)
    tp = m["vllm.tensor_parallel_size"]
    per_node = m["deployment.gpus_per_node"] // tp if tp else 0
    if m["vllm.data_parallel_size_local"] is None:
        m.set("vllm.data_parallel_size_local", per_node)
    if m["vllm.data_parallel_size"] == 1:
        m.set("vllm.data_parallel_size", per_node)
    if m["vllm.api_server_count"] == 1:
        m.set("vllm.api_server_count", per_node)


# --------------------------------------------------------------------------------------
# prime_rl/configs/rl.py (and prime_rl/utils/validation.py)
# --------------------------------------------------------------------------------------


@mirrors("prime_rl.configs.rl.SharedWandbConfig.validate_not_offline")
def _wandb_offline(m: Node) -> None:
    if m["offline"]:
        raise Invalid("W&B shared mode is always on for the rl entrypoint and requires server connectivity; "
                      "monitors.wandb.offline = true is not supported. Use offline mode via the sub-config wandb "
                      "blocks (trainer.monitors.wandb.offline, orchestrator.monitors.wandb.offline) if you really "
                      "need it per-process.")


@mirrors("prime_rl.configs.rl.SingleNodeDeploymentConfig.validate_gpu_count")
def _rl_gpu_count(m: Node) -> None:
    train, infer, per_node = m["num_train_gpus"], m["num_infer_gpus"], m["gpus_per_node"]
    if train + infer > per_node:
        raise Invalid(f"Total GPU count ({train + infer} = {train} train + {infer} infer) exceeds gpus_per_node "
                      f"({per_node}).")


def _inference_nodes(inference: dict[str, Any] | None) -> int:
    """Inference nodes a deployment of ``inference`` needs (RLConfig.auto_setup_infer_nodes)."""
    if inference is None:
        return 0
    deployment = inference.get("deployment") or {}
    if deployment.get("type") == "multi_node":
        return deployment.get("num_nodes", 2)
    if deployment.get("type") == "disaggregated":
        return _disaggregated_nodes(deployment)
    return 1


def _disaggregated_nodes(d: dict[str, Any]) -> int:
    return (d.get("prefill_nodes_per_replica", 1) * d.get("num_prefill_replicas", 1)
            + d.get("decode_nodes_per_replica", 1) * d.get("num_decode_replicas", 1))


@mirrors("prime_rl.configs.rl.RLConfig.auto_setup_infer_nodes")
def _infer_nodes(m: Node) -> None:
    if m["deployment.type"] != "multi_node":
        return
    inferred = _inference_nodes(m["inference"])
    if m["deployment.num_infer_nodes"] is None:
        m.set("deployment.num_infer_nodes", inferred)
    elif m["inference"] is not None and m["inference.deployment.type"] == "multi_node" \
            and m["deployment.num_infer_nodes"] != inferred:
        raise Invalid(f"deployment.num_infer_nodes ({m['deployment.num_infer_nodes']}) must equal "
                      f"inference.deployment.num_nodes ({inferred}) for multi-node inference.")


@mirrors("prime_rl.configs.rl.RLConfig.validate_deployment")
def _rl_deployment(m: Node) -> None:
    if m["deployment.type"] != "multi_node":
        return
    if m["slurm"] is None:
        raise Invalid("Must use SLURM for multi-node deployment.")
    nodes = m["deployment.num_infer_nodes"] or 0
    if nodes > 0 and m["inference"] is None:
        raise Invalid("Must configure inference when using multi-node deployment with inference nodes.")
    if nodes == 0 and m["inference"] is not None:
        raise Invalid("Cannot configure inference with num_infer_nodes = 0. Either set num_infer_nodes > 0 or "
                      "remove the inference config.")
    if nodes == 0 and m["trainer.data.fake"] is None:
        raise Invalid("Must use fake data (trainer.data.fake) when num_infer_nodes = 0, since no orchestrator or "
                      "inference server will be running.")


@mirrors("prime_rl.configs.rl.RLConfig.validate_enough_devices_for_nccl")
def _nccl_devices(m: Node) -> None:
    if m["deployment.type"] == "single_node" and m["trainer.weight_broadcast.type"] == "nccl" \
            and m["deployment.num_train_gpus"] + m["deployment.num_infer_gpus"] < 2:
        raise Invalid("NCCL weight broadcast requires at least 2 GPUs to build the broadcast process group.")


@mirrors("prime_rl.configs.rl.RLConfig.validate_quantize_in_weight_transfer")
def _quantized_transfer(m: Node) -> None:
    if m["weight_broadcast.type"] != "nccl" or not m["weight_broadcast.quantize_in_weight_transfer"]:
        return
    if m["inference"] is None:
        raise Invalid("weight_broadcast.quantize_in_weight_transfer requires an inference config.")
    if m["trainer.model.impl"] != "custom":
        raise Invalid("weight_broadcast.quantize_in_weight_transfer requires trainer.model.impl = 'custom'.")


@mirrors("prime_rl.configs.rl.RLConfig.auto_setup_run_dir")
def _run_dir(m: Node) -> None:
    name = m["run.name"]
    run_dir = None if name is None else PurePosixPath(str(m["output_dir"])) / str(m["run.dir"] or name)
    for sub, cls in (("trainer", "TrainerConfig"), ("orchestrator", "OrchestratorConfig")):
        if "output_dir" in m.fields_set(sub) and (run_dir is None
                                                  or PurePosixPath(str(m[f"{sub}.output_dir"])) != run_dir):
            shown = run_dir if run_dir is not None else f"{m['output_dir']}/<generated run name>"
            raise Invalid(f"{cls}.output_dir ({m[f'{sub}.output_dir']}) conflicts with the run directory ({shown}). "
                          "Under the rl entrypoint, sub-config output directories are derived from output_dir / "
                          "run.name — set those instead.")


@mirrors("prime_rl.configs.rl.RLConfig.auto_setup_resume")
def _resume_copies(m: Node) -> None:
    if m["resume"] is not None:
        m.set("trainer.resume", _copy(m["resume"]))
        m.set("orchestrator.resume", _copy(m["resume"]))


@mirrors("prime_rl.configs.rl.RLConfig.validate_shared_configs")
def _shared_configs(m: Node) -> None:
    """prime_rl/utils/validation.py validate_shared_model_name, _tokenizer, _max_steps,
    _seq_len, _ckpt_config, _wandb_config, in that order."""
    t, o, i = "trainer", "orchestrator", "inference"
    if m[i] is not None:
        if m[f"{i}.vllm.model"] != m[f"{o}.model.name"]:
            raise Invalid(f"Inference model name ({m[f'{i}.vllm.model']}) and orchestrator model name "
                          f"({m[f'{o}.model.name']}) are not the same. The orchestrator queries the inference "
                          "server and must use the same model name.")
    elif not str(m[f"{t}.model.name"]).startswith("Jackmin108/") and m[f"{t}.model.name"] != m[f"{o}.model.name"]:
        raise Invalid(f"Trainer model name ({m[f'{t}.model.name']}) and orchestrator model name "
                      f"({m[f'{o}.model.name']}) are not the same. Please specify the same model name for both.")
    template = m[f"{t}.tokenizer.chat_template"]
    if template != m[f"{o}.tokenizer.chat_template"]:
        raise Invalid("Trainer chat_template and orchestrator chat_template do not match. Use the shared "
                      "[tokenizer] config to set chat_template for both.")
    if m[i] is not None and template != m[f"{i}.vllm.chat_template"]:
        raise Invalid("Inference chat_template does not match the shared tokenizer chat_template. Use the shared "
                      "[tokenizer] config to set chat_template for all components.")
    if m[f"{t}.max_steps"] != m[f"{o}.max_steps"]:
        raise Invalid(f"Trainer max steps ({m[f'{t}.max_steps']}) and orchestrator max steps "
                      f"({m[f'{o}.max_steps']}) are not the same. Please specify the same max steps for both.")
    if m[f"{t}.model.seq_len"] < m[f"{o}.seq_len"]:
        raise Invalid(f"Trainer model seq_len ({m[f'{t}.model.seq_len']}) must be >= orchestrator seq_len "
                      f"({m[f'{o}.seq_len']}). The trainer needs to be able to handle sequences at least as long "
                      "as those produced by the orchestrator.")
    t_ckpt, o_ckpt = m[f"{t}.ckpt"], m[f"{o}.ckpt"]
    if t_ckpt is not None and o_ckpt is None:
        raise Invalid("Trainer checkpoint config is specified, but orchestrator checkpoint config is not. Please "
                      "setup checkpointing on both for checkpointing to work properly.")
    if o_ckpt is not None and t_ckpt is None:
        raise Invalid("Orchestrator checkpoint config is specified, but trainer checkpoint config is not. Please "
                      "setup checkpointing on both for checkpointing to work properly.")
    if t_ckpt is not None and o_ckpt is not None and t_ckpt.get("interval") != o_ckpt.get("interval"):
        raise Invalid(f"Trainer checkpoint interval ({t_ckpt.get('interval')}) and orchestrator checkpoint "
                      f"interval ({o_ckpt.get('interval')}) are not the same. Please specify the same checkpoint "
                      "interval for both.")
    if m[f"{t}.resume"] != m[f"{o}.resume"]:
        raise Invalid("Trainer resume and orchestrator resume are not the same. Please specify the same resume "
                      "config for both.")
    t_wandb, o_wandb = m[f"{t}.monitors.wandb"], m[f"{o}.monitors.wandb"]
    if t_wandb is not None and o_wandb is None:
        raise Invalid("Trainer W&B config is specified, but orchestrator W&B config is not. Please specify "
                      "[orchestrator.monitors.wandb] to log orchestrator metrics as well, or use [monitors.wandb] "
                      "to configure both at once.")
    if o_wandb is not None and t_wandb is None:
        raise Invalid("Orchestrator W&B config is specified, but trainer W&B config is not. Please specify "
                      "[trainer.monitors.wandb] to log trainer metrics as well, or use [monitors.wandb] to "
                      "configure both at once.")
    if t_wandb is not None and o_wandb is not None and t_wandb.get("project") != o_wandb.get("project"):
        raise Invalid(f"Trainer W&B project ({t_wandb.get('project')}) and orchestrator W&B project "
                      f"({o_wandb.get('project')}) are not the same. Please specify the same W&B project for both.")


@mirrors("prime_rl.configs.rl.RLConfig.auto_setup_weight_broadcast")
def _weight_broadcast(m: Node) -> None:
    lora = m["trainer.model.lora"] is not None
    if m["weight_broadcast"] is None:
        default = {"type": "filesystem"} if lora or m["inference"] is None else \
            {"host": "localhost", "port": 29501, "timeout": 1200, "type": "nccl", "quantize_in_weight_transfer": False}
        m.set("weight_broadcast", default)
    shared = m["weight_broadcast"]
    kind = shared["type"]
    if kind != "filesystem" and lora:
        raise Invalid("LoRA training is not yet supported with in-memory weight broadcast. "
                      "Set weight_broadcast.type = 'filesystem'.")
    if kind in ("nccl", "nixl"):
        world = (m["inference.vllm.data_parallel_size"] * m["inference.vllm.tensor_parallel_size"]
                 if m["inference"] is not None else 1)
        if world < 1:  # the orchestrator's broadcast config (inference_world_size >= 1) fails as it is built
            raise Invalid("Input should be greater than or equal to 1", kind="greater_than_equal",
                          loc=("inference_world_size",))
        common = {"type": kind, "host": shared.get("host", "localhost"), "port": shared.get("port"),
                  "timeout": shared.get("timeout", 1200), "inference_world_size": world}
        extra = ({"quantize_in_weight_transfer": shared.get("quantize_in_weight_transfer", False)} if kind == "nccl"
                 else {"session_id": shared.get("session_id", "default")})
        m.set("trainer.weight_broadcast", {**common, **extra})
        m.set("orchestrator.weight_broadcast", {**common, **extra})
    else:
        m.set("trainer.weight_broadcast", {"type": "filesystem"})
        m.set("orchestrator.weight_broadcast", {"type": "filesystem"})
    if m["inference"] is not None:
        m.set("inference.weight_broadcast", {"type": kind})


@mirrors("prime_rl.configs.rl.RLConfig.auto_setup_rollout_transport")
def _rollout_transport(m: Node) -> None:
    trainer, orchestrator = m["trainer.rollout_transport.type"], m["orchestrator.rollout_transport.type"]
    if trainer != orchestrator:
        raise Invalid(f"trainer.rollout_transport.type ({trainer!r}) != orchestrator.rollout_transport.type "
                      f"({orchestrator!r}); set the shared [rollout_transport] block or make both sub-configs the "
                      "same type.")
    if m["rollout_transport"] is None:
        m.set("rollout_transport", _copy(m["trainer.rollout_transport"]))


@mirrors("prime_rl.configs.rl.RLConfig.validate_eplb_requires_quantized_weight_transfer")
def _eplb(m: Node) -> None:
    if m["inference"] is None or not m["inference.vllm.enable_eplb"]:
        return
    if m["trainer.weight_broadcast.type"] != "nccl" or not m["trainer.weight_broadcast.quantize_in_weight_transfer"]:
        raise Invalid("inference.vllm.enable_eplb requires weight_broadcast.type = 'nccl' and "
                      "weight_broadcast.quantize_in_weight_transfer = true.")


@mirrors("prime_rl.configs.rl.RLConfig.auto_setup_lora")
def _lora(m: Node) -> None:
    trainer = m["trainer.model.lora"]
    if trainer is None:
        return
    if m["orchestrator.model.lora"] is None:
        m.set("orchestrator.model.lora", {"name": None, "rank": None, "alpha": None})
    orchestrator = m["orchestrator.model.lora"]
    if orchestrator.get("rank") is not None and orchestrator["rank"] != trainer.get("rank"):
        raise Invalid(f"orchestrator.model.lora.rank ({orchestrator['rank']}) conflicts with trainer.model.lora.rank "
                      f"({trainer.get('rank')}). Remove orchestrator.model.lora.rank to inherit from trainer, or "
                      "update trainer.model.lora.rank to match.")
    if orchestrator.get("alpha") is not None and orchestrator["alpha"] != trainer.get("alpha"):
        raise Invalid(f"orchestrator.model.lora.alpha ({orchestrator['alpha']}) conflicts with "
                      f"trainer.model.lora.alpha ({trainer.get('alpha')}). Remove orchestrator.model.lora.alpha to "
                      "inherit from trainer, or update trainer.model.lora.alpha to match.")
    orchestrator.setdefault("rank", None)
    if orchestrator.get("rank") is None:
        orchestrator["rank"] = trainer.get("rank")
    if orchestrator.get("alpha") is None:
        orchestrator["alpha"] = trainer.get("alpha")
    if m["inference"] is not None:
        m.set("inference.vllm.enable_lora", True)
        m.set("inference.vllm.max_lora_rank", trainer.get("rank"))
    else:
        m.warn("LoRA is enabled, but inference is not configured. When manually starting the inference server, "
               "make sure to set --enable_lora and --max-lora-rank.")


@mirrors("prime_rl.configs.rl.RLConfig.auto_setup_router_replay")
def _router_replay(m: Node) -> None:
    if not m["trainer.enable_router_replay"]:
        return
    if m["inference"] is not None:
        if m["inference.vllm.enable_return_routed_experts"] is False:
            m.warn("Router replay is enabled, but inference.vllm.enable_return_routed_experts is False. "
                   "Setting to True.")
        m.set("inference.vllm.enable_return_routed_experts", True)
    else:
        m.warn("Router replay is enabled, but inference is not configured. When manually starting the inference "
               "server, make sure to pass `--enable-return-routed-experts` to the vLLM server.")


@mirrors("prime_rl.configs.rl.RLConfig.validate_llmd_no_routed_experts")
def _rl_llmd_experts(m: Node) -> None:
    if m["inference"] is not None and m["inference.vllm.enable_return_routed_experts"] \
            and m["inference.router"] is not None and m["inference.router.type"] == "llm-d":
        raise Invalid("The llm-d router backend does not support routed-expert return "
                      "(inference.vllm.enable_return_routed_experts / trainer.enable_router_replay): it breaks P/D "
                      "and is unverified for multi-node. Use router type 'vllm-router' for router-replay runs.")


@mirrors("prime_rl.configs.rl.RLConfig.validate_multi_node_requires_router")
def _rl_router(m: Node) -> None:
    if m["deployment.type"] == "multi_node" and m["inference"] is not None and m["inference.router"] is None:
        raise Invalid("Multi-node deployments require inference.router to front the per-rank engines.")


@mirrors("prime_rl.configs.rl.RLConfig.validate_router_replay_without_kv_offload")
def _replay_kv(m: Node) -> None:
    if m["trainer.enable_router_replay"] and m["inference"] is not None \
            and m["inference.kv_cache_offload"] is not None:
        raise Invalid("Router replay with inference.kv_cache_offload is not supported. External KV cache hits do "
                      "not carry routed-expert decisions.")


@mirrors("prime_rl.configs.rl.RLConfig.validate_mooncake_offload_requires_slurm")
def _mooncake(m: Node) -> None:
    if m["slurm"] is None and m["inference"] is not None and m["inference.kv_cache_offload"] is not None \
            and m["inference.kv_cache_offload.type"] == "mooncake":
        raise Invalid("Mooncake KV offload requires SLURM — the per-node store is launched by the sbatch template. "
                      "Use inference.kv_cache_offload.type='native' for local runs.")


@mirrors("prime_rl.configs.rl.RLConfig.auto_setup_deployment")
def _rl_auto_deployment(m: Node) -> None:
    cp = m["trainer.model.cp"]
    m.set("orchestrator.pad_to_multiple_of", cp)
    vllm = m["inference.vllm"] if m["inference"] is not None else None
    if m["deployment.type"] == "single_node":
        if m["deployment.num_train_gpus"] > 1 and cp:
            m.set("orchestrator.num_train_workers", m["deployment.num_train_gpus"] // cp)
        if vllm is not None:
            gpus, tp = m["deployment.num_infer_gpus"], vllm["tensor_parallel_size"]
            if gpus != vllm["data_parallel_size"] * tp:
                if not tp or gpus % tp != 0:
                    raise Invalid("Number of inference GPUs must be divisible by the tensor parallel size",
                                  kind="assertion_error")
                vllm["data_parallel_size"] = gpus // tp
            if vllm["api_server_count"] < vllm["data_parallel_size"] and not vllm["enable_lora"]:
                vllm["api_server_count"] = vllm["data_parallel_size"]
        return
    per_node = m["deployment.gpus_per_node"]
    train_nodes, group = m["deployment.num_train_nodes"], m["deployment.nodes_per_fsdp_group"]
    if group is not None and group and train_nodes % group != 0:
        raise Invalid(f"deployment.num_train_nodes ({train_nodes}) must be divisible by "
                      f"deployment.nodes_per_fsdp_group ({group})")
    if vllm is None or m["inference.deployment.type"] == "disaggregated":
        return
    tp = vllm["tensor_parallel_size"]
    infer_gpus = (m["deployment.num_infer_nodes"] or 0) * per_node
    if vllm["enable_expert_parallel"]:
        if not tp or per_node % tp != 0:
            raise Invalid("deployment.gpus_per_node must be divisible by inference.vllm.tensor_parallel_size when "
                          "inference.vllm.enable_expert_parallel is enabled in multi-node deployment.")
        local = per_node // tp
        if vllm["data_parallel_size"] * tp != infer_gpus:
            raise Invalid("For multi-node expert parallel inference, inference.vllm.data_parallel_size * "
                          "inference.vllm.tensor_parallel_size must match total inference GPUs "
                          f"({infer_gpus}), got {vllm['data_parallel_size'] * tp}.")
        if vllm["data_parallel_size_local"] is None:
            vllm["data_parallel_size_local"] = local
        elif vllm["data_parallel_size_local"] != local:
            raise Invalid("inference.vllm.data_parallel_size_local must equal deployment.gpus_per_node / "
                          f"inference.vllm.tensor_parallel_size ({local}) when inference.vllm.enable_expert_parallel "
                          "is enabled in multi-node deployment.")


@mirrors("prime_rl.configs.rl.RLConfig.auto_setup_disaggregated_inference")
def _rl_disaggregated(m: Node) -> None:
    if m["inference"] is None or m["inference.deployment.type"] != "disaggregated":
        return
    if m["deployment.type"] != "multi_node":
        return
    expected = _disaggregated_nodes(m["inference.deployment"])
    if (m["deployment.num_infer_nodes"] or 0) != expected:
        raise Invalid(f"deployment.num_infer_nodes ({m['deployment.num_infer_nodes']}) must equal the derived "
                      f"disaggregated inference nodes per replica ({expected}).")


# --------------------------------------------------------------------------------------
# prime_rl/configs/sft.py
# --------------------------------------------------------------------------------------


@mirrors("prime_rl.configs.sft.BaseDataConfig.validate_batch_size")
def _sft_batch(m: Node) -> None:
    batch, micro = m["batch_size"], m["micro_batch_size"]
    if batch % micro != 0:
        raise Invalid("Batch size must be divisible by micro batch size")
    if batch < micro:
        raise Invalid("Batch size must be greater than or equal to micro batch size")


@mirrors("prime_rl.configs.sft.SFTDataConfig.validate_subsets_and_splits")
def _subsets(m: Node) -> None:
    subsets, splits, probabilities = m["subsets"], m["splits"], m["probabilities"]
    if subsets is not None and splits is not None and len(subsets) != len(splits):
        raise Invalid("Number of subsets must be equal to number of splits. Please specify which split to load for "
                      "each subset.")
    if subsets is not None and probabilities is not None and len(probabilities) != len(subsets):
        raise Invalid("Number of probabilities must be equal to number of subsets. Please specify a probability for "
                      "each subset.")
    if splits is not None and probabilities is not None and len(probabilities) != len(splits):
        raise Invalid("Number of probabilities must be equal to number of splits. Please specify a probability for "
                      "each split.")


@mirrors("prime_rl.configs.sft.SingleNodeDeploymentConfig.validate_gpu_count")
def _sft_gpu_count(m: Node) -> None:
    if m["num_train_gpus"] > m["gpus_per_node"]:
        raise Invalid(f"num_train_gpus ({m['num_train_gpus']}) exceeds gpus_per_node ({m['gpus_per_node']}).")


@mirrors("prime_rl.configs.sft.SFTConfig.validate_deployment")
def _sft_deployment(m: Node) -> None:
    if m["deployment.type"] == "multi_node" and m["slurm"] is None:
        raise Invalid("Must use SLURM for multi-node deployment.")


@mirrors("prime_rl.configs.sft.SFTConfig.auto_setup_online_eval")
def _sft_online_eval(m: Node) -> None:
    if m["eval"] is None:
        if m["inference"] is not None:
            raise Invalid("[inference] is only used for online evals — add an [eval] block or remove it.")
        return
    lora = m["model.lora"] is not None
    if lora:
        if m["inference"] is not None:
            m.set("inference.vllm.enable_lora", True)
            m.set("inference.vllm.max_lora_rank", m["model.lora.rank"])
        else:
            m.warn("LoRA is enabled, but inference is not configured. When manually starting the inference server, "
                   "make sure to set --enable_lora and --max-lora-rank.")
    if m["weight_broadcast"] is None:
        m.set("weight_broadcast", {"type": "filesystem"} if lora or m["inference"] is None else
              {"type": "nccl", "host": "localhost", "port": 29501, "timeout": 1200, "inference_world_size": 1,
               "quantize_in_weight_transfer": False})
    kind = m["weight_broadcast.type"]
    if kind != "filesystem":
        if kind == "nixl":
            raise Invalid("NIXL weight broadcast is not supported for SFT online evals.")
        if lora:
            raise Invalid("LoRA training is not yet supported with in-memory weight broadcast. "
                          "Set weight_broadcast.type = 'filesystem'.")
        if m["eval.retrigger_on_resume"]:
            raise Invalid("eval.retrigger_on_resume requires weight_broadcast.type = 'filesystem'.")
    if m["deployment.type"] == "multi_node":
        if m["inference"] is None:
            raise Invalid("Multi-node online evals require an [inference] block - the launcher submits a dedicated "
                          "SLURM job running the inference pool and the evals process.")
        if m["deployment.num_infer_nodes"] < 1:
            raise Invalid("Online evals on a multi-node deployment require deployment.num_infer_nodes >= 1.")
        if m["inference.router"] is None:
            raise Invalid("Multi-node online evals require an inference router - the eval job starts one router in "
                          "front of the per-rank engines. Remove inference.router = 'None'.")
        if m["inference.vllm.model"] != m["model.name"]:
            raise Invalid(f"inference.vllm.model ({m['inference.vllm.model']}) does not match model.name "
                          f"({m['model.name']}). Remove inference.vllm.model to inherit it.")
        tp = m["inference.vllm.tensor_parallel_size"]
        if not tp or m["deployment.gpus_per_node"] % tp != 0:
            raise Invalid(f"deployment.gpus_per_node ({m['deployment.gpus_per_node']}) must be divisible by "
                          f"inference.vllm.tensor_parallel_size ({tp}).")
        return
    if m["inference"] is None:
        m.warn("Online evals are configured without an [inference] block - the launcher will not start an inference "
               "server; evals connect to eval.client.base_url.")
        return
    train, infer = m["deployment.num_train_gpus"], m["deployment.num_infer_gpus"]
    per_node = m["deployment.gpus_per_node"]
    if train + infer > per_node:
        raise Invalid(f"Total GPU count ({train + infer} = {train} train + {infer} infer) exceeds gpus_per_node "
                      f"({per_node}).")
    if m["inference.vllm.model"] != m["model.name"]:
        raise Invalid(f"inference.vllm.model ({m['inference.vllm.model']}) does not match model.name "
                      f"({m['model.name']}). Remove inference.vllm.model to inherit it.")
    vllm = m["inference.vllm"]
    tp = vllm["tensor_parallel_size"]
    if infer != vllm["data_parallel_size"] * tp:
        if not tp or infer % tp != 0:
            raise Invalid(f"deployment.num_infer_gpus ({infer}) must be divisible by "
                          f"inference.vllm.tensor_parallel_size ({tp}).")
        vllm["data_parallel_size"] = infer // tp
    port = m["inference.server.port"]
    if "base_url" in m.fields_set("eval.client") and urlparse(str(m["eval.client.base_url"])).port != port:
        raise Invalid(f"eval.client.base_url port ({urlparse(str(m['eval.client.base_url'])).port}) does not match "
                      f"inference.server.port ({port}).")


@mirrors("prime_rl.configs.sft.SFTConfig.validate_typed_renderer")
def _sft_renderer(m: Node) -> None:
    if m["data.type"] == "fake" and m["val"] is None:
        return
    model_id = m["tokenizer.name"] or m["model.name"]
    name = m["renderer.name"]
    if name == "auto":
        if model_id in m.facts["model_renderer_map"]:
            return
        reason = f"no typed renderer is registered for {model_id!r}"
    elif name == "default":
        reason = "renderer.name='default' selects DefaultRenderer"
    else:
        return
    raise Invalid(f"SFT requires a typed renderer with sampled-token and content attribution, but {reason}. Implement "
                  "and register the renderer in the renderers package, or explicitly select an existing typed "
                  "renderer only when its template is verified to match.")


@mirrors("prime_rl.configs.sft.SFTConfig.validate_cp_seq_len")
def _sft_cp_seq_len(m: Node) -> None:
    cp = m["model.cp"]
    if cp > 1:
        if m["data.seq_len"] % cp != 0:
            raise Invalid("Sequence length must be divisible by CP degree")
        if m["val"] is not None and m["val.data.seq_len"] % cp != 0:
            raise Invalid("Validation sequence length must be divisible by CP degree")


@mirrors("prime_rl.configs.sft.SFTConfig.validate_cp_micro_batch_size")
def _sft_cp_micro(m: Node) -> None:
    if m["model.cp"] > 1:
        if m["data.micro_batch_size"] != 1:
            raise Invalid("Micro batch size must be 1 when CP is enabled")
        if m["val"] is not None and m["val.data.micro_batch_size"] != 1:
            raise Invalid("Validation micro batch size must be 1 when CP is enabled")


@mirrors("prime_rl.configs.sft.SFTConfig.validate_vlm_constraints")
def _sft_vlm(m: Node) -> None:
    if m["model.vlm"] is None:
        return
    if m["model.optimization_dtype"] != "bfloat16" or m["model.reduce_dtype"] != "bfloat16":
        raise Invalid("VLM models must use optimization_dtype='bfloat16' and reduce_dtype='bfloat16' to match "
                      "vLLM inference.")
    if m["data.micro_batch_size"] != 1:
        raise Invalid("VLM SFT requires data.micro_batch_size = 1.")
    if m["val"] is not None and m["val.data.micro_batch_size"] != 1:
        raise Invalid("VLM SFT requires val.data.micro_batch_size = 1.")


@mirrors("prime_rl.configs.sft.SFTConfig.auto_setup_deployment")
def _sft_auto_deployment(m: Node) -> None:
    if m["deployment.type"] != "multi_node":
        return
    nodes, group = m["deployment.num_train_nodes"], m["deployment.nodes_per_fsdp_group"]
    if group is not None and group and nodes % group != 0:
        raise Invalid(f"deployment.num_train_nodes ({nodes}) must be divisible by deployment.nodes_per_fsdp_group "
                      f"({group})")


# --------------------------------------------------------------------------------------
# renderers/configs.py (the renderers package prime-rl pins)
# --------------------------------------------------------------------------------------

#: class -> (template kwarg, thinking_retention it implies when true, when false), from each
#: class's ``_check_thinking_retention`` (``_reject_thinking_retention_conflict`` arguments).
_RETENTION = {
    "Qwen36RendererConfig": ("preserve_thinking", "all", "tool_cycle"),
    "Qwen38RendererConfig": ("preserve_thinking", "all", "tool_cycle"),
    "Gemma4RendererConfig": ("preserve_thinking", "all", "tool_cycle"),
    "GLM5RendererConfig": ("clear_thinking", "tool_cycle", "all"),
    "GLM51RendererConfig": ("clear_thinking", "tool_cycle", "all"),
    "GLM53RendererConfig": ("clear_thinking", "tool_cycle", "all"),
    "GptOssRendererConfig": ("auto_drop_analysis", "tool_cycle", "all"),
    "Nemotron3RendererConfig": ("truncate_history_thinking", "tool_cycle", "all"),
    "Nemotron3UltraRendererConfig": ("truncate_history_thinking", "tool_cycle", "all"),
    "Nemotron35RendererConfig": ("truncate_history_thinking", "tool_cycle", "all"),
    "DeepSeekV4RendererConfig": ("drop_thinking", "tool_cycle", "all"),
}
#: renderer ``name`` -> config class, for the table above.
_RENDERER_CLASS = {"qwen3.6": "Qwen36RendererConfig", "qwen3.8": "Qwen38RendererConfig",
                   "gemma4": "Gemma4RendererConfig",
                   "glm-5": "GLM5RendererConfig", "glm-5.1": "GLM51RendererConfig", "glm-5.3": "GLM53RendererConfig",
                   "gpt-oss": "GptOssRendererConfig", "nemotron-3": "Nemotron3RendererConfig",
                   "nemotron-3-ultra": "Nemotron3UltraRendererConfig", "nemotron-3.5": "Nemotron35RendererConfig",
                   "deepseek-v4": "DeepSeekV4RendererConfig"}


@mirrors(*(f"renderers.configs.{cls}._check_thinking_retention" for cls in _RETENTION))
def _thinking_retention(m: Node) -> None:
    """renderers/configs.py _reject_thinking_retention_conflict, with each class's arguments."""
    kwarg, true_implies, false_implies = _RETENTION[_RENDERER_CLASS[m["name"]]]
    requested = m["thinking_retention"]
    if kwarg in m.fields_set() and requested is not None:
        implied = false_implies if m[kwarg] is False else true_implies
        if requested != implied:
            raise Invalid(f"{kwarg}={m[kwarg]!r} implies thinking_retention={implied!r}, which conflicts with "
                          f"explicit thinking_retention={requested!r}.")


@mirrors("renderers.configs.Hy3RendererConfig._check_thinking_retention")
def _hy3_retention(m: Node) -> None:
    preserved, requested = m["preserved_thinking"], m["thinking_retention"]
    if preserved is not None and requested is not None:
        implied = "all" if preserved else "tool_cycle"
        if requested != implied:
            raise Invalid(f"preserved_thinking={preserved!r} implies thinking_retention={implied!r}, which conflicts "
                          f"with explicit thinking_retention={requested!r}.")


@mirrors("renderers.configs.DefaultRendererConfig._reject_legacy_preserve_flags")
def _legacy_preserve(m: Node) -> None:
    legacy = {"preserve_all_thinking", "preserve_thinking_between_tool_calls"} & set(m.data)
    if legacy:
        raise Invalid(f"{sorted(legacy)} were replaced by thinking_retention. DefaultRenderer falls back to "
                      "apply_chat_template and can't selectively re-emit reasoning_content — use thinking_retention "
                      "on a model-specific renderer.")


@mirrors("renderers.configs.InklingRendererConfig._check_reasoning_effort")
def _inkling_effort(m: Node) -> None:
    effort = m["reasoning_effort"]
    if isinstance(effort, str):
        if effort.strip() not in m.facts["inkling_effort_map"]:
            raise Invalid(f"reasoning_effort={effort!r} is not a known label. Use one of "
                          f"{sorted(m.facts['inkling_effort_map'])} or a float in [0.0, 0.99].")
    elif not 0.0 <= float(effort) <= 0.99:
        raise Invalid(f"reasoning_effort={effort!r} must be in [0.0, 0.99].")


# --------------------------------------------------------------------------------------
# Validators not mirrored
# --------------------------------------------------------------------------------------

#: Validators that only fill in values no other validator (nor the hosted rejections) reads.
NOT_RAISING: dict[str, str] = {
    "prime_rl.configs.shared.SlurmConfig.resolve_project_dir": "resolves slurm.project_dir to an absolute path",
    "prime_rl.configs.inference.VllmConfig.auto_resolve_parsers": "picks the tool-call/reasoning parser by model name",
    "prime_rl.configs.inference.InferenceConfig.auto_setup_backend_port": "backend_port = server.port + 100",
    "prime_rl.configs.inference.InferenceConfig.auto_setup_slurm_template": "picks the bundled sbatch template",
    "prime_rl.configs.orchestrator.TrainConfig.resolve_env_defaults": "sources inherit the group's sampling",
    "prime_rl.configs.orchestrator.EvalConfig.resolve_env_defaults": "sources inherit the group's eval settings",
    "prime_rl.configs.orchestrator.OrchestratorConfig.auto_setup_session_headers": "adds the X-Session-ID header",
    "prime_rl.configs.orchestrator.OrchestratorConfig.auto_setup_prime_monitor_name": "names the platform run",
    "prime_rl.configs.orchestrator.OrchestratorConfig.resolve_env_config": "vLLM sampling defaults per source",
    "prime_rl.configs.rl.RLConfig.auto_setup_run_identity": "W&B and platform run names",
    "prime_rl.configs.rl.RLConfig.auto_setup_inference_client": "the orchestrator's inference client URLs",
    "prime_rl.configs.rl.RLConfig.auto_setup_slurm_template": "picks the bundled sbatch template",
    "prime_rl.configs.sft.SFTConfig.auto_setup_run_identity": "run name and W&B run name",
    "prime_rl.configs.sft.SFTConfig.auto_setup_slurm_template": "picks the bundled sbatch template",
}

#: Validators the snapshot cannot mirror, with the reason.
NOT_MIRRORED: dict[str, str] = {
    "renderers.configs.CustomRendererConfig._validate_renderer_fields":
        "imports the custom renderer named by the config (user code)",
}

#: Field validators JSON Schema expresses (in the shipped schema itself).
IN_SCHEMA: dict[str, str] = {
    "prime_rl.configs.shared.reject_protected_env_vars": "propertyNames of every env_vars table",
}


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
