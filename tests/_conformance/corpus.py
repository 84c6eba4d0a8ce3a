"""The conformance corpus: mutations of the ten bundled prime-rl examples, declared as data.

Each :class:`Case` names an example and a list of edits (:class:`Set`, :class:`Delete`,
:class:`Rename`, :class:`Move`) applied to its parsed TOML; :func:`build` makes the table.
Nothing here says what the verdict should be: the reference (prime 0.18.0's schema worker on
the fixture's prime-rl) decides. The cases cover, across all ten examples: unknown and
misplaced keys at every depth, wrong types, bounds, literals, every raising cross-field
validator of the schema, deprecated keys, hosted-only rules, SFT with online-eval blocks,
lax types pydantic accepts, and several errors at once (to check which one comes first).
Deterministic: same cases, same tables.
"""

from __future__ import annotations

import copy
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tools" / "configs" / "examples"

#: Short names of the ten examples.
BASES = {
    "rt": "basic/reverse-text/rl",
    "rt-sft": "basic/reverse-text/sft",
    "as": "basic/alphabet-sort/rl",
    "hs": "basic/hendrycks-sanity/rl",
    "ws": "basic/wiki-search/rl",
    "wd": "basic/wordle/rl",
    "wd-sft": "basic/wordle/sft",
    "q30": "advanced/qwen3-30b-a3b/math",
    "glm45": "advanced/glm-4.5-air/swe",
    "glm52": "advanced/glm-5.2/swe",
}


@dataclass(frozen=True)
class Set:
    """Set ``path`` (``a.b[0].c``) to ``value``, creating tables on the way."""

    path: str
    value: Any


@dataclass(frozen=True)
class Delete:
    """Remove ``path`` (no error when absent)."""

    path: str


@dataclass(frozen=True)
class Rename:
    """Rename the last key of ``path`` to ``new`` (same table, same value)."""

    path: str
    new: str


@dataclass(frozen=True)
class Move:
    """Move the value at ``src`` to ``dst``."""

    src: str
    dst: str


Op = Set | Delete | Rename | Move


@dataclass(frozen=True)
class Case:
    """One corpus config: ``base`` (a key of :data:`BASES`) with ``ops`` applied."""

    id: str
    base: str
    ops: tuple[Op, ...] = ()
    about: str = ""


_SEG = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _parts(path: str) -> list[str | int]:
    return [int(i) if i else k for k, i in _SEG.findall(path)]


def _parent(table: Any, parts: list[str | int], create: bool) -> Any:
    node = table
    for part in parts[:-1]:
        if isinstance(part, int):
            node = node[part]
        else:
            if part not in node and create:
                node[part] = {}
            node = node[part]
    return node


def _apply(table: dict[str, Any], op: Op) -> None:
    if isinstance(op, Set):
        parts = _parts(op.path)
        parent = _parent(table, parts, True)
        if isinstance(parent, list) and parts[-1] == len(parent):
            parent.append(copy.deepcopy(op.value))
        else:
            parent[parts[-1]] = copy.deepcopy(op.value)
    elif isinstance(op, Delete):
        parts = _parts(op.path)
        try:
            parent = _parent(table, parts, False)
        except (KeyError, IndexError, TypeError):
            return
        if isinstance(parent, dict):
            parent.pop(parts[-1], None)
    elif isinstance(op, Rename):
        parts = _parts(op.path)
        parent = _parent(table, parts, False)
        parent[op.new] = parent.pop(parts[-1])
    elif isinstance(op, Move):
        src = _parts(op.src)
        value = _parent(table, src, False).pop(src[-1])
        dst = _parts(op.dst)
        _parent(table, dst, True)[dst[-1]] = value


def load_example(base: str) -> dict[str, Any]:
    """The parsed TOML of an example (a key of :data:`BASES`)."""
    return tomllib.loads((EXAMPLES / f"{BASES[base]}.toml").read_text())


def build(case: Case) -> dict[str, Any]:
    """The table of ``case``: its example with the edits applied."""
    table = load_example(case.base)
    for op in case.ops:
        _apply(table, op)
    return table


def _c(id: str, base: str, *ops: Op, about: str = "") -> Case:
    return Case(id, base, tuple(ops), about)


_SRC = "orchestrator.train.source[0]"
_VLM = {"vision_encoder_attr": "model.visual", "language_model_attr": "model.language_model"}

CASES: tuple[Case, ...] = (
    # --- the examples as they are -------------------------------------------------------
    *(_c(f"example/{b}", b, about="unchanged example") for b in BASES),
    # --- unknown keys, at every depth ----------------------------------------------------
    _c("unknown/top/max_step", "rt", Set("max_step", 20)),
    _c("unknown/top/seqlen", "as", Set("seqlen", 2048)),
    _c("unknown/orchestrator.batchsize", "ws", Rename("orchestrator.batch_size", "batchsize")),
    _c("unknown/orchestrator.lr", "rt", Set("orchestrator.lr", 3e-6)),
    _c("unknown/ckpt.intervall", "glm45", Rename("ckpt.interval", "intervall")),
    _c("unknown/data.shufle", "wd-sft", Set("data.shufle", False)),
    _c("unknown/trainer.model.lora.ranks", "as", Rename("trainer.model.lora.rank", "ranks")),
    _c("unknown/trainer.optim.learning_rate", "rt", Rename("trainer.optim.lr", "learning_rate")),
    _c("unknown/orchestrator.train.sampling.temp", "wd", Set("orchestrator.train.sampling.temp", 0.7)),
    _c("unknown/deployment.num_gpus", "ws", Set("deployment.num_gpus", 8)),
    _c("unknown/monitors.wandb.projct", "rt", Rename("monitors.wandb.project", "projct")),
    _c("unknown/orchestrator.concurrency.max_inflights", "q30", Set("orchestrator.concurrency.max_inflights", 2048)),
    _c("unknown/trainer.model.ac.frequency", "glm45", Set("trainer.model.ac.frequency", 2)),
    _c("unknown/source.ratioo", "rt", Set(f"{_SRC}.ratioo", 2.0)),
    _c("unknown/source.env.taskset.idd", "wd", Set(f"{_SRC}.env.taskset.idd", "x")),
    _c("unknown/orchestrator.eval.intervall", "hs", Rename("orchestrator.eval.interval", "intervall")),
    _c("unknown/sft/optim.lrr", "wd-sft", Rename("optim.lr", "lrr")),
    _c("unknown/sft/model.nam", "rt-sft", Rename("model.name", "nam")),
    _c("unknown/sft/eval.sampling.top", "rt-sft", Set("eval.sampling.top", 5)),
    _c("unknown/slurm.partitio", "q30", Set("slurm.partitio", "gpu")),
    _c("unknown/inference.server.prot", "ws", Set("inference.server.prot", 8001)),
    _c("unknown/weight_broadcast.timeout_s", "glm52", Set("weight_broadcast.timeout_s", 10)),
    _c("unknown/trainer.model.lora.alpha_", "ws", Set("trainer.model.lora.alpha_", 16)),
    _c("unknown/orchestrator.algo.length_penalty.turns", "glm45", Set("orchestrator.algo.length_penalty.turns", 0.1)),
    _c("unknown/renderer.extra_allowed_on_default", "hs", Set("orchestrator.renderer.enable_thinking", False),
       about="DefaultRendererConfig allows extra keys"),
    _c("unknown/vllm.passthrough_allowed", "hs", Set("inference.vllm.max_num_seqs", 256),
       about="vLLM arguments pass through"),
    _c("unknown/renderer.typed_forbids", "rt", Set("orchestrator.renderer.enable_thinkin", False)),
    # --- misplaced keys (valid somewhere else) -------------------------------------------
    _c("misplaced/batch_size.in_trainer", "rt", Move("orchestrator.batch_size", "trainer.batch_size")),
    _c("misplaced/lr.in_orchestrator", "as", Move("trainer.optim.lr", "orchestrator.lr")),
    _c("misplaced/sft/lr.in_data", "wd-sft", Move("optim.lr", "data.lr")),
    _c("misplaced/group_size.top", "rt", Move("orchestrator.group_size", "group_size")),
    _c("misplaced/max_off_policy_steps.trainer", "q30", Move("orchestrator.max_off_policy_steps",
                                                             "trainer.max_off_policy_steps")),
    _c("misplaced/sft/micro_batch_size.top", "rt-sft", Set("micro_batch_size", 1)),
    _c("misplaced/seq_len.in_deployment", "wd", Move("seq_len", "deployment.seq_len")),
    _c("misplaced/tp.in_inference", "glm45",
       Move("inference.vllm.tensor_parallel_size", "inference.tensor_parallel_size")),
    _c("misplaced/lora.in_orchestrator_top", "ws", Move("trainer.model.lora", "orchestrator.lora")),
    _c("misplaced/sft/trainer_table", "wd-sft", Move("optim", "trainer.optim"),
       about="an SFT file with [trainer] is sniffed as RL"),
    _c("misplaced/eval.top_in_rl", "hs", Move("orchestrator.eval", "eval")),
    # --- wrong types ---------------------------------------------------------------------
    _c("type/trainer.optim.lr.string", "rt", Set("trainer.optim.lr", "fast")),
    _c("type/sft/max_steps.word", "wd-sft", Set("max_steps", "twenty")),
    _c("type/group_size.float", "as", Set("orchestrator.group_size", 16.5)),
    _c("type/num_train_gpus.word", "ws", Set("deployment.num_train_gpus", "two")),
    _c("type/lora.target_modules.string", "ws", Set("trainer.model.lora.target_modules", "q_proj")),
    _c("type/ckpt.bool", "rt", Set("ckpt", True)),
    _c("type/model.string_top", "rt", Set("model", "Qwen/Qwen3-0.6B")),
    _c("type/max_completion_tokens.list", "rt", Set("orchestrator.train.sampling.max_completion_tokens", [128])),
    _c("type/vllm.enforce_eager.word", "wd", Set("inference.vllm.enforce_eager", "maybe")),
    _c("type/trainer.model.compile.false", "glm45", Set("trainer.model.compile", False)),
    _c("type/eval.interval.word", "hs", Set("orchestrator.eval.interval", "50x")),
    _c("type/wandb.tags.string", "wd", Set("monitors.wandb.tags", "rl")),
    _c("type/sft/data.name.int", "wd-sft", Set("data.name", 5)),
    _c("type/env_vars.int_value", "glm45", Set("env_vars.TRITON_CACHE_DIR", 5)),
    _c("type/source.list_to_table", "rt", Set("orchestrator.train.source", {"name": "reverse-text"})),
    _c("type/sft/eval.source.name.int", "rt-sft", Set("eval.source[0].name", 5),
       about="sources of SFT online eval are set aside"),
    _c("type/inference.table_to_string", "wd", Set("inference", "default")),
    # --- bounds --------------------------------------------------------------------------
    _c("bound/lora.rank.0", "as", Set("trainer.model.lora.rank", 0)),
    _c("bound/temperature.3", "rt", Set("orchestrator.train.sampling.temperature", 3.0)),
    _c("bound/group_size.0", "wd", Set("orchestrator.group_size", 0)),
    _c("bound/batch_size.0", "wd", Set("orchestrator.batch_size", 0)),
    _c("bound/lr.negative", "ws", Set("trainer.optim.lr", -1e-5)),
    _c("bound/sft/data.batch_size.0", "wd-sft", Set("data.batch_size", 0)),
    _c("bound/lora.dropout.1.5", "ws", Set("trainer.model.lora.dropout", 1.5)),
    _c("bound/max_off_policy_steps.-1", "q30", Set("orchestrator.max_off_policy_steps", -1)),
    _c("bound/ckpt.keep_last.0", "glm45", Set("ckpt.keep_last", 0)),
    _c("bound/eval.interval.0", "hs", Set("orchestrator.eval.interval", 0)),
    _c("bound/initial_inflight.0", "q30", Set("orchestrator.concurrency.initial_inflight", 0)),
    _c("bound/metrics_server.port", "rt", Set("trainer.metrics_server.port", 70000)),
    _c("bound/source.ratio.0", "rt", Set(f"{_SRC}.ratio", 0)),
    _c("bound/length_penalty.negative", "glm45", Set("orchestrator.algo.length_penalty.num_turns_weight", -1.0)),
    _c("bound/sft/eval.group_size.0", "rt-sft", Set("eval.group_size", 0)),
    _c("bound/resume.step.0", "glm45", Set("resume.step", 0)),
    # --- literals ------------------------------------------------------------------------
    _c("literal/weight_broadcast.gloo", "q30", Set("weight_broadcast.type", "gloo")),
    _c("literal/model.impl.torch", "rt", Set("trainer.model.impl", "torch")),
    _c("literal/optim.adam", "ws", Set("trainer.optim.type", "adam")),
    _c("literal/attn.sdpa", "q30", Set("trainer.model.attn", "sdpa")),
    _c("literal/deployment.multi-node", "q30", Set("deployment.type", "multi-node")),
    _c("literal/renderer.qwen9", "wd", Set("orchestrator.renderer.name", "qwen9")),
    _c("literal/cp_style.zigzag", "glm45", Set("trainer.model.cp_style", "zigzag")),
    _c("literal/sft/data.type.hf", "rt-sft", Set("data.type", "hf")),
    _c("literal/scheduler.step", "rt", Set("trainer.scheduler.type", "step")),
    _c("literal/vllm.dtype.fp8", "wd", Set("inference.vllm.dtype", "fp8")),
    _c("literal/algo.ppo", "glm45", Set("orchestrator.algo.type", "ppo")),
    _c("literal/sft/weight_broadcast.gloo", "rt-sft", Set("weight_broadcast", {"type": "gloo"})),
    _c("literal/weight_broadcast.no_type", "rt", Set("weight_broadcast", {"port": 29600}),
       about="a shared weight_broadcast without type (its default is None: no tag injected)"),
    _c("literal/router.no_type", "wd", Set("inference.router", {"policy": "round_robin"}),
       about="router's default comes from a factory: no tag injected"),
    # --- cross-field validators ----------------------------------------------------------
    _c("cross/max_inflight.below_group", "as", Set("orchestrator.concurrency.max_inflight", 8)),
    _c("cross/initial_over_max_inflight", "q30", Set("orchestrator.concurrency.max_inflight", 512)),
    _c("cross/min_over_max_inflight", "wd", Set("orchestrator.concurrency", {"min_inflight": 64, "max_inflight": 32})),
    _c("cross/batch_not_divisible", "rt", Set("orchestrator.batch_size", 100)),
    _c("cross/batch_and_token_batch", "wd", Set("orchestrator.token_batch_size", 65536)),
    _c("cross/group_default_batch", "rt", Delete("orchestrator.batch_size"), Set("orchestrator.group_size", 3)),
    _c("cross/cp.needs_custom_impl", "rt", Set("trainer.model.cp", 2), Set("trainer.model.impl", "hf"),
       Set("trainer.model.attn", "flash_attention_2")),
    _c("cross/fa4.auto_attn_with_hf", "rt", Set("trainer.model.impl", "hf")),
    _c("cross/sft/cp.micro_batch", "wd-sft", Set("model.cp", 2), Set("data.micro_batch_size", 2)),
    _c("cross/sft/cp.seq_len", "wd-sft", Set("model.cp", 3)),
    _c("cross/scheduler.cosine.no_max_steps", "hs", Delete("max_steps"), Set("trainer.scheduler", {"type": "cosine"})),
    _c("cross/scheduler.linear.too_long", "rt", Set("trainer.scheduler", {"type": "linear", "warmup_steps": 10,
                                                                           "decay_steps": 15})),
    _c("cross/scheduler.linear.zero", "ws", Set("trainer.scheduler", {"type": "linear", "warmup_steps": 0,
                                                                      "decay_steps": 0})),
    _c("cross/sft/scheduler.cosine.warmup", "wd-sft", Set("scheduler", {"type": "cosine", "warmup_steps": 20})),
    _c("cross/vlm.needs_bf16", "rt", Set("trainer.model.vlm", _VLM), Set("trainer.model.impl", "custom")),
    _c("cross/vlm.needs_custom", "wd", Set("model.vlm", _VLM)),
    _c("cross/vlm.bf16_ok", "rt", Set("model.vlm", _VLM), Set("trainer.model.impl", "custom"),
       Set("trainer.model.optimization_dtype", "bfloat16"), Set("trainer.model.reduce_dtype", "bfloat16")),
    _c("cross/trainer.output_dir", "rt", Set("trainer.output_dir", "/tmp/outputs")),
    _c("cross/output_dir.matching_run_dir", "rt", Set("run.name", "rt"), Set("trainer.output_dir", "outputs/rt")),
    _c("cross/seq_len.trainer_below_orchestrator", "hs", Set("trainer.model.seq_len", 4096)),
    _c("cross/shared.max_steps.conflict", "ws", Set("trainer.max_steps", 100)),
    _c("cross/shared.max_steps.same_value", "ws", Set("trainer.max_steps", 200)),
    _c("cross/shared.max_steps.string_vs_int", "ws", Set("trainer.max_steps", "200")),
    _c("cross/model_name.inference_mismatch", "wd", Delete("model"),
       Set("trainer.model.name", "PrimeIntellect/Qwen3-1.7B-Wordle-SFT"),
       Set("orchestrator.model.name", "PrimeIntellect/Qwen3-1.7B-Wordle-SFT"),
       Set("inference.vllm.model", "Qwen/Qwen3-1.7B")),
    _c("cross/model_name.trainer_orchestrator", "rt", Delete("model"), Delete("inference"),
       Set("trainer.data.fake", {}), Set("trainer.model.name", "Qwen/Qwen3-0.6B"),
       Set("orchestrator.model.name", "Qwen/Qwen3-1.7B")),
    _c("cross/ckpt.trainer_only", "rt", Delete("ckpt"), Set("trainer.ckpt", {})),
    _c("cross/ckpt.intervals_differ", "rt", Delete("ckpt"), Set("trainer.ckpt.interval", 5),
       Set("orchestrator.ckpt.interval", 10)),
    _c("cross/wandb.trainer_only", "rt", Delete("monitors"), Set("trainer.monitors.wandb.project", "x")),
    _c("cross/wandb.projects_differ", "rt", Delete("monitors"), Set("trainer.monitors.wandb.project", "a"),
       Set("orchestrator.monitors.wandb.project", "b")),
    _c("cross/lora.with_nccl", "as", Set("weight_broadcast.type", "nccl")),
    _c("cross/trainer.lora.with_nccl", "ws", Set("trainer.weight_broadcast.type", "nccl")),
    _c("cross/nccl.one_gpu", "rt", Set("trainer.weight_broadcast.type", "nccl"), Set("deployment.num_infer_gpus", 0)),
    _c("cross/gpus.over_node", "ws", Set("deployment.num_train_gpus", 4)),
    _c("cross/infer_gpus.tp", "wd", Set("inference.vllm.tensor_parallel_size", 4)),
    _c("cross/quantized_transfer.impl", "rt", Set("weight_broadcast", {"type": "nccl",
                                                                       "quantize_in_weight_transfer": True})),
    _c("cross/eplb.needs_quantized", "q30", Set("inference.vllm.enable_eplb", True)),
    _c("cross/router.llmd.routed_experts", "glm45", Set("inference.router", {"type": "llm-d"})),
    _c("cross/router.none.multi_node", "q30", Set("inference.router", "None")),
    _c("cross/router.llmd.single_node", "rt", Set("inference.router", {"type": "llm-d"})),
    _c("cross/router.llmd.unknown_scorer", "q30", Set("inference.router", {"type": "llm-d",
                                                                           "scorers": {"magic-scorer": 1.0}})),
    _c("cross/infer_nodes.mismatch", "q30", Set("inference.deployment", {"type": "multi_node", "num_nodes": 3})),
    _c("cross/infer_nodes.zero_with_inference", "q30", Set("deployment.num_infer_nodes", 0)),
    _c("cross/infer_nodes.zero_fake", "q30", Set("deployment.num_infer_nodes", 0), Delete("inference"),
       Set("trainer.data.fake", {})),
    _c("cross/fsdp_group.not_dividing", "q30", Set("deployment.nodes_per_fsdp_group", 3)),
    _c("cross/expert_parallel.dp_tp", "q30", Set("inference.vllm.enable_expert_parallel", True)),
    _c("cross/kv_offload.no_cpu", "rt", Set("inference.kv_cache_offload", {"type": "native"})),
    _c("cross/kv_offload.ok", "rt", Set("inference.kv_cache_offload", {"type": "native", "cpu": {"num_bytes": 1000}})),
    _c("cross/kv_offload.prefix_caching_off", "rt", Set("inference.kv_cache_offload", {"type": "native",
                                                                                       "cpu": {"num_bytes": 1000}}),
       Set("inference.vllm.enable_prefix_caching", False)),
    _c("cross/kv_offload.mooncake_no_slurm", "rt", Set("inference.kv_cache_offload", {"type": "mooncake",
                                                                                      "cpu": {"num_bytes": 1000}})),
    _c("cross/kv_offload.router_replay", "glm45", Set("inference.kv_cache_offload", {"type": "native",
                                                                                     "cpu": {"num_bytes": 10}})),
    _c("cross/lora.rank_conflict", "ws", Set("orchestrator.model.lora.rank", 16)),
    _c("cross/lora.rank_1024", "as", Set("trainer.model.lora.rank", 1024)),
    _c("cross/vllm.max_lora_rank_1024", "rt", Set("inference.vllm.max_lora_rank", 1024)),
    _c("cross/resume.step_and_dir", "rt", Set("resume", {"step": 5, "dir": "outputs/old/checkpoints/step_5"})),
    _c("cross/resume.dir_not_step", "rt", Set("resume", {"dir": "outputs/old/checkpoints/latest"})),
    _c("cross/env_vars.protected", "ws", Set("env_vars.CUDA_VISIBLE_DEVICES", "0")),
    _c("cross/trainer.env_vars.protected", "rt", Set("trainer.env_vars.WANDB_RUN_ID", "abc")),
    _c("cross/wandb.offline_shared", "rt", Set("monitors.wandb.offline", True)),
    _c("cross/full_offload.muon", "glm45", Set("trainer.optim.type", "muon")),
    _c("cross/full_offload.with_optim_offload", "glm45", Set("trainer.model.optim_cpu_offload", True)),
    _c("cross/fsdp_offload.default_optim_offload", "rt", Set("trainer.model.fsdp_cpu_offload", True)),
    _c("cross/deepep.ep1", "q30", Set("trainer.model.ep_comm_backend", "deepep"), Set("trainer.model.ep", 1)),
    _c("cross/sft/trace.too_many_steps", "wd-sft", Set("trace_path", "/tmp/trace")),
    _c("cross/trust_remote_code.custom", "glm45", Set("trainer.model.trust_remote_code", True)),
    _c("cross/quantization.hf", "rt", Set("trainer.model.quantization", {"type": "fp8"}),
       Set("trainer.model.impl", "hf"), Set("trainer.model.attn", "flash_attention_2")),
    _c("cross/selective_ac.hf", "q30", Set("trainer.model.ac.mode", "selective"), Set("trainer.model.impl", "hf"),
       Set("trainer.model.attn", "flash_attention_3"), Set("trainer.model.ep", 1)),
    _c("cross/renderer.auto_unmapped", "rt", Delete("orchestrator.renderer")),
    _c("cross/sft/renderer.unmapped_model", "wd-sft", Set("model.name", "Qwen/Qwen2.5-7B-Instruct")),
    _c("cross/sft/renderer.default", "rt-sft", Set("renderer", {"name": "default"})),
    _c("cross/sft/subsets_splits", "wd-sft", Set("data.subsets", ["a", "b"]), Set("data.splits", ["train"])),
    _c("cross/sft/micro_over_batch", "wd-sft", Set("data.micro_batch_size", 128)),
    _c("cross/algo.sft_policy_source", "rt", Set("orchestrator.algo", {"type": "sft"})),
    _c("cross/algo.opd_no_teacher", "rt", Set("orchestrator.algo", {"type": "opd"})),
    _c("cross/algo.frozen_without_base_url", "rt", Set("orchestrator.algo.sampling.source", {"name": "teacher"})),
    _c("cross/algo.grpo_frozen_source", "rt", Set("orchestrator.algo.sampling.source",
                                                  {"name": "teacher", "base_url": "http://localhost:9000/v1"})),
    _c("cross/algo.echo_no_roles", "wd", Set("orchestrator.algo", {"type": "echo", "roles": {}})),
    _c("cross/algo.hierarchical_grpo", "wd", Set("orchestrator.algo", {"type": "hierarchical_grpo",
                                                                      "episode_agents": ["solver"]})),
    _c("cross/source.duplicate_names", "as", Set("orchestrator.train.source[1]", {
        "name": "alphabet-sort", "env": {"taskset": {"id": "alphabet-sort"}}})),
    _c("cross/source.no_env", "rt", Delete(f"{_SRC}.env")),
    _c("cross/source.name_agg", "rt", Set(f"{_SRC}.name", "agg")),
    _c("cross/eval.no_sources", "hs", Delete("orchestrator.eval.source")),
    _c("cross/eval.no_sources.checked", "rt", Set("orchestrator.eval", {"interval": 10}),
       about="the fixture has reverse-text, so the run-start check runs"),
    _c("cross/eval.duplicate_names.checked", "rt", Set("orchestrator.eval.source", [
        {"name": "rt", "env": {"taskset": {"id": "reverse-text"}}},
        {"name": "rt", "env": {"taskset": {"id": "reverse-text"}}}])),
    _c("cross/eval.duplicate_names", "hs", Set("orchestrator.eval.source[1]", {"name": "aime2024",
                                                                               "env": {"taskset": {"id": "aime24"}}})),
    _c("cross/gate.range_inverted", "ws", Set(f"{_SRC}.curriculum.gates.zero_advantage.reject_min", 1.0)),
    _c("cross/sampler.no_pools", "ws", Set(f"{_SRC}.curriculum.sampler", {"type": "difficulty_pool", "pools": {}})),
    _c("cross/chat_template.trainer_only", "rt", Set("trainer.tokenizer.chat_template", "{{ messages }}")),
    _c("cross/rollout_transport.mismatch", "rt", Set("trainer.rollout_transport", {"type": "filesystem"})),
    _c("cross/rollout_transport.shared_no_type", "rt", Set("rollout_transport", {"port": 5600})),
    _c("cross/thinking_retention.conflict", "glm45", Set("orchestrator.renderer", {"name": "glm-5",
                                                                                  "clear_thinking": False,
                                                                                  "thinking_retention": "tool_cycle"})),
    _c("cross/ep.hf_impl", "q30", Set("trainer.model.impl", "hf"), Set("trainer.model.attn", "flash_attention_3")),
    _c("cross/sft/inference_without_eval", "rt-sft", Delete("eval")),
    _c("cross/sft/nixl_online_eval", "rt-sft", Set("weight_broadcast", {"type": "nixl"})),
    _c("cross/sft/eval.port_mismatch", "rt-sft", Set("eval.client.base_url", "http://localhost:9999/v1")),
    # --- deprecated keys -----------------------------------------------------------------
    _c("deprecated/orchestrator.buffer", "rt", Set("orchestrator.buffer", {"online_difficulty_filtering": True})),
    _c("deprecated/orchestrator.trajectory_strategy", "wd", Set("orchestrator.trajectory_strategy", "interleaved")),
    _c("deprecated/eval_base_model.false", "hs", Set("orchestrator.eval.eval_base_model", False)),
    _c("deprecated/eval_base_model.with_skip_first_step", "hs", Set("orchestrator.eval.eval_base_model", True),
       Set("orchestrator.eval.skip_first_step", True)),
    _c("deprecated/eval_base_model.string", "hs", Set("orchestrator.eval.eval_base_model", "no")),
    _c("deprecated/buffer.top_level", "rt", Set("buffer", {"online_difficulty_filtering": True})),
    _c("deprecated/eval.top_level_rl", "rt", Set("eval", {"interval": 10})),
    _c("deprecated/trajectory_strategy.top_level", "wd", Set("trajectory_strategy", "interleaved")),
    _c("deprecated/sft/eval_base_model", "rt-sft", Set("eval.eval_base_model", False)),
    # --- hosted-only rules and CLI keys ---------------------------------------------------
    _c("hosted/clean", "rt", Set("clean", True)),
    _c("hosted/k8s", "ws", Set("k8s", {"namespace": "research"})),
    _c("hosted/k8s.empty", "ws", Set("k8s", {})),
    _c("hosted/disaggregated.q30", "q30", Set("inference.deployment", {"type": "disaggregated"})),
    _c("hosted/no_inference", "rt", Delete("inference")),
    _c("hosted/no_inference.fake_data", "rt", Delete("inference"), Set("trainer.data.fake", {})),
    _c("hosted/num_infer_gpus.0", "ws", Set("deployment.num_infer_gpus", 0)),
    _c("hosted/cli_keys", "rt", Set("image_tag", "v0.5.0"), Set("gpu_type", "H200_141GB"), Set("volume", "research"),
       Set("source_ref", "main"), Set("name", "my-run")),
    _c("hosted/type_key", "wd", Set("type", "full_finetune")),
    _c("hosted/sft/clean_allowed", "wd-sft", Set("clean", True), about="the hosted rejections are RL-only"),
    _c("hosted/sft/k8s", "wd-sft", Set("k8s", {"namespace": "x"})),
    _c("hosted/multi_node.explicit_slurm", "q30", Set("slurm", {"job_name": "x", "partition": "gpu"})),
    _c("hosted/sft/multi_node", "wd-sft", Set("deployment", {"type": "multi_node", "num_train_nodes": 2})),
    # --- SFT with online-eval blocks -------------------------------------------------------
    _c("sft-eval/interval.0", "rt-sft", Set("eval.interval", 0)),
    _c("sft-eval/unknown_key", "rt-sft", Set("eval.foo", 1)),
    _c("sft-eval/inference.tp.word", "rt-sft", Set("inference.vllm.tensor_parallel_size", "x")),
    _c("sft-eval/inference.unknown_key", "rt-sft", Set("inference.servr", {"port": 8000})),
    _c("sft-eval/eval.no_sources", "rt-sft", Delete("eval.source")),
    _c("sft-eval/wordle_with_eval", "wd-sft", Set("eval", {"interval": 10, "source": [
        {"name": "wordle", "env": {"taskset": {"id": "wordle"}}}]}), Set("inference", {})),
    _c("sft-eval/forced_rl_shape", "rt-sft", Set("orchestrator", {}), about="[orchestrator] makes prime sniff RL"),
    # --- lax types pydantic accepts --------------------------------------------------------
    _c("lax/max_steps.string", "rt", Set("max_steps", "20")),
    _c("lax/batch_size.float", "rt", Set("orchestrator.batch_size", 128.0)),
    _c("lax/lr.string", "rt", Set("trainer.optim.lr", "3e-6")),
    _c("lax/group_size.string", "as", Set("orchestrator.group_size", "16")),
    _c("lax/offline.string", "wd", Set("monitors.wandb.offline", "false")),
    _c("lax/sft/shuffle.yes", "wd-sft", Set("data.shuffle", "yes")),
    _c("lax/sft/batch_size.float", "wd-sft", Set("data.batch_size", 64.0)),
    _c("lax/num_train_gpus.bool", "rt", Set("deployment", {"num_train_gpus": True, "num_infer_gpus": True})),
    _c("lax/max_steps.fraction", "rt", Set("max_steps", 20.5)),
    _c("lax/max_steps.string_float", "rt", Set("max_steps", "20.0")),
    _c("lax/max_steps.exponent", "rt", Set("max_steps", "2e1")),
    _c("lax/enforce_eager.spaced_yes", "wd", Set("inference.vllm.enforce_eager", " yes")),
    _c("lax/ckpt.None_string", "rt", Set("ckpt", "None")),
    _c("lax/compile.None_string", "glm45", Set("trainer.model.compile", "None")),
    _c("lax/full_offload.false", "glm45", Set("trainer.model.full_offload", False)),
    _c("lax/sft/num_eval_gpus_alias", "rt-sft", Rename("deployment.num_infer_gpus", "num_eval_gpus")),
    _c("lax/sft/num_eval_gpus_and_infer", "rt-sft", Set("deployment.num_eval_gpus", 1)),
    _c("lax/vllm.kebab_number", "wd", Set("inference.vllm.max-model-len", "4096")),
    _c("lax/vllm.kebab_bad_number", "wd", Set("inference.vllm.max-model-len", "long")),
    _c("lax/extra_body.strings", "rt", Set("orchestrator.train.sampling.extra_body", {"top_k": "5"})),
    _c("lax/scorers.strings", "q30", Set("inference.router", {"type": "llm-d", "scorers": {"queue-scorer": "2"}})),
    _c("lax/ep.string_number", "q30", Set("trainer.model.ep", "8")),
    _c("lax/ep.word", "q30", Set("trainer.model.ep", "eight")),
    # --- several errors at once (which comes first) ----------------------------------------
    _c("order/extra_then_type", "rt", Set("orchestrator.zz", 1), Set("orchestrator.batch_size", "x")),
    _c("order/trainer_before_orchestrator", "rt", Set("orchestrator.group_size", 0), Set("trainer.model.lora.rank", 0)),
    _c("order/top_extra_vs_nested", "rt", Set("aaa", 1), Set("trainer.optim.lr", "x")),
    _c("order/validator_vs_field", "rt", Set("trainer.model.cp", 2), Set("trainer.model.impl", "hf"),
       Set("trainer.model.attn", "flash_attention_2"), Set("orchestrator.batch_size", 0)),
    _c("order/two_validators", "rt", Set("orchestrator.batch_size", 100), Set("trainer.model.fsdp_cpu_offload", True)),
    _c("order/sft/two_fields", "wd-sft", Set("data.seq_len", "long"), Set("optim.lr", "high")),
    _c("order/hosted_after_schema", "rt", Set("clean", True), Set("orchestrator.batch_size", 0)),
    _c("order/deferred_after_hosted", "hs", Set("clean", True), Set("orchestrator.eval.interval", 0)),
    # --- validation that tells the truth: what each rejection compares ---------------------
    _c("truth/cross.batch_48_group_5", "rt", Set("orchestrator.batch_size", 48), Set("orchestrator.group_size", 5),
       about="names orchestrator.batch_size 48 and orchestrator.group_size 5"),
    _c("truth/cross.seq_len_between_tables", "rt", Delete("seq_len"), Set("orchestrator.seq_len", 8192),
       Set("trainer.model.seq_len", 4096), about="RLConfig's own validator: both key paths named"),
    _c("truth/cross.scheduler_shared_max_steps", "rt", Set("trainer.scheduler", {
        "type": "linear", "warmup_steps": 10, "decay_steps": 15}), about="trainer.max_steps filled from max_steps"),
    _c("truth/sft/cross.micro_batch_not_dividing", "wd-sft", Set("data.micro_batch_size", 3)),
    _c("truth/cross.attn_default_with_hf", "wd", Set("trainer.model.impl", "hf"),
       about="the default attention named as the default"),
    # --- a taskset the interpreter lacks: only its own settings go unchecked ----------------
    _c("truth/taskset_missing.train_name_agg", "hs", Set(f"{_SRC}.name", "agg")),
    _c("truth/taskset_missing.eval_beside_known_train", "rt", Set("orchestrator.eval", {"interval": 10, "source": [
        {"name": "reverse-text", "env": {"taskset": {"id": "aime24"}}},
        {"name": "reverse-text", "env": {"taskset": {"id": "reverse-text"}}}]}),
       about="duplicate eval names, one of them a taskset the fixture lacks"),
    _c("truth/taskset_missing.unchanged_q30", "q30", about="a taskset the fixture lacks, nothing else wrong"),
    # --- ids the schema commit knows nothing of: a warning, never an error --------------------
    _c("truth/unknown_id.taskset_typo", "rt", Set(f"{_SRC}.env.taskset.id", "revers-text")),
    _c("truth/unknown_id.harness_typo", "wd", Set(f"{_SRC}.env.agent", {"harness": {"id": "bsh"}})),
    _c("truth/unknown_id.hub_id_known", "rt", Set(f"{_SRC}.env.taskset.id", "PrimeIntellect/reverse-text@0.1.2")),
    # --- SFT online-eval blocks, as the platform validates them on submission ----------------
    _c("truth/sft-eval/port_mismatch", "rt-sft", Set("inference.server.port", 8011)),
    _c("truth/sft-eval/source_env_unknown_key", "rt-sft", Set("eval.source[0].env.taskset.colour", "red")),
    _c("truth/sft-eval/eval_gpus_over_node", "rt-sft", Set("deployment.num_train_gpus", 8)),
    _c("truth/sft-eval/vllm_model_mismatch", "rt-sft", Set("inference.vllm.model", "Qwen/Qwen3-1.7B")),
)


def cases() -> Iterator[Case]:
    """Every case, in a fixed order."""
    yield from CASES


# --------------------------------------------------------------------------------------
# Random mutations (seeded): configs the declared cases did not think of
# --------------------------------------------------------------------------------------


def fuzz(count: int, seed: int = 0) -> list[Case]:
    """``count`` random mutations of the examples, the same ones for the same ``seed``.

    Each applies one to three edits picked at random: a typo in an existing key, a deleted
    key, a value of another type (a number as a string, a float for an integer, a word for a
    number, a list for a scalar, a bool as a string), a boundary value (0, -1, a large
    number), a key moved into another table, or a declared field of the table set to another
    value its type or literal allows (read from the shipped schema, so validators get exercised).
    """
    import random

    from tools.configs import snapshot_schema

    rng = random.Random(seed)
    out = []
    for n in range(count):
        base = rng.choice(sorted(BASES))
        table = load_example(base)
        mode = "sft" if base.endswith("sft") else "rl"
        index = snapshot_schema(mode).index
        ops: list[Op] = []
        for _ in range(rng.choice((1, 1, 2, 3))):
            op = _random_op(rng, table, index)
            if op is not None:
                try:
                    _apply(table, op)
                except (KeyError, IndexError, TypeError, AttributeError):
                    continue
                ops.append(op)
        if ops:
            out.append(Case(f"fuzz/{n:03d}/{base}", base, tuple(ops), "random"))
    return out


def _paths(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or not re.fullmatch(r"[A-Za-z0-9_-]+", k):
                continue
            path = f"{prefix}.{k}" if prefix else k
            yield path, v
            yield from _paths(v, path)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            path = f"{prefix}[{i}]"
            yield path, v
            yield from _paths(v, path)


def _other_type(rng: Any, value: Any) -> Any:
    if isinstance(value, bool):
        return rng.choice(["yes", "true", 2, "maybe", "None"])
    if isinstance(value, int):
        return rng.choice([str(value), float(value), value + 0.5, "many", [value], True, f" {value} "])
    if isinstance(value, float):
        return rng.choice([str(value), "fast", [value], int(value) if value.is_integer() else "1e-5"])
    if isinstance(value, str):
        return rng.choice([7, [value], True, value.upper(), "None", ""])
    if isinstance(value, list):
        return rng.choice([value[0] if value else "x", {}, "a,b"])
    if isinstance(value, dict):
        return rng.choice([True, "None", [], "table"])
    return "x"


def _random_op(rng: Any, table: dict[str, Any], index: Any) -> Op | None:
    paths = list(_paths(table))
    if not paths:
        return None
    path, value = rng.choice(paths)
    kind = rng.choice(["typo", "delete", "type", "type", "bound", "move", "field", "field", "field"])
    last = _parts(path)[-1]
    if kind == "typo" and isinstance(last, str):
        i = rng.randrange(len(last))
        typo = rng.choice([last[:i] + last[i + 1:], last + "s", last.replace("_", ""),
                           last[:i] + last[i] * 2 + last[i + 1:]])
        return Rename(path, typo) if typo and typo != last else None
    if kind == "delete" and isinstance(last, str):
        return Delete(path)
    if kind == "type" and not isinstance(value, (dict, list)) or kind == "type" and rng.random() < 0.2:
        return Set(path, _other_type(rng, value))
    if kind == "bound" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return Set(path, rng.choice([0, -1, 10 ** 9, 0.0, -0.5, 3.0]))
    if kind == "move" and isinstance(last, str):
        tables = [p for p, v in paths if isinstance(v, dict) and not p.startswith(path)]
        return Move(path, f"{rng.choice(tables)}.{last}") if tables else None
    if kind == "field":
        return _random_field(rng, table, paths, index)
    return None


def _random_field(rng: Any, table: dict[str, Any], paths: list[tuple[str, Any]], index: Any) -> Op | None:
    """Set a declared field of a random table of the config (per the shipped schema)."""
    tables = [("", table)] + [(p, v) for p, v in paths if isinstance(v, dict)]
    where, value = rng.choice(tables)
    node = index.root
    current: Any = table
    for part in _parts(where) if where else ():
        node = index.child(node, current, part)
        current = current[part]
        if node is None:
            return None
    chosen = index.select(node, current)
    props = (chosen or {}).get("properties") or {}
    if not props:
        return None
    name = rng.choice(sorted(props))
    target = index.deref(props[name])
    members = [index.deref(m) for m in target.get("anyOf", [target])]
    member = rng.choice(members)
    candidates: list[Any] = []
    if "enum" in member:
        candidates += list(member["enum"])
    if "const" in member:
        candidates.append(member["const"])
    kind = member.get("type")
    if "x-discriminator" in member:
        tag = member["x-discriminator"]
        candidates += [{tag: t} for t in member["properties"][tag]["enum"]]
    if kind == "integer":
        candidates += [0, 1, 2, 3, 8, 16, 100, -1]
    if kind == "number":
        candidates += [0.0, 0.5, 1.0, 2.5, -1.0]
    if kind == "boolean":
        candidates += [True, False]
    if kind == "string":
        candidates += ["x", "Qwen/Qwen3-0.6B", "/tmp/out"]
    if kind == "null":
        candidates.append("None")
    if kind == "object" and "x-model" in member:
        candidates.append({})
    if kind == "array":
        candidates += [[], ["x"]]
    if not candidates:
        return None
    return Set(f"{where}.{name}" if where else name, rng.choice(candidates))
