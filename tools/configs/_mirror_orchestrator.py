"""Mirrors of the validators in prime-rl's ``prime_rl/configs/orchestrator.py`` and
``prime_rl/configs/inference.py``.

Each function is registered under the validator it mirrors (see ``_mirror_base``).
"""

from __future__ import annotations

from typing import Any

from tools.configs._mirror_base import Invalid, Node, copy_value, mirrors

# --------------------------------------------------------------------------------------
# prime_rl/configs/orchestrator.py
# --------------------------------------------------------------------------------------


def _env_id(source: dict[str, Any]) -> str:
    """verifiers EnvConfig.env_id: the taskset id, prefixed by the env id when both are set."""
    env = source.get("env")
    env = env if isinstance(env, dict) else {}
    taskset = env.get("taskset")
    taskset = taskset if isinstance(taskset, dict) else {}
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
            source["algo"] = copy_value(m["algo"])


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
