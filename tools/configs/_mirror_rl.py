"""Mirrors of the validators in prime-rl's ``prime_rl/configs/rl.py`` (with
``prime_rl/utils/validation.py``, which ``RLConfig.validate_shared_configs`` calls).

Each function is registered under the validator it mirrors (see ``_mirror_base``).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from tools.configs._mirror_base import Invalid, Node, copy_value, mirrors

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
        m.set("trainer.resume", copy_value(m["resume"]))
        m.set("orchestrator.resume", copy_value(m["resume"]))


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
        m.set("rollout_transport", copy_value(m["trainer.rollout_transport"]))


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
