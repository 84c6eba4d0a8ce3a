"""Mirrors of the validators in prime-rl's ``prime_rl/configs/sft.py``.

Each function is registered under the validator it mirrors (see ``_mirror_base``).
"""

from __future__ import annotations

from urllib.parse import urlparse

from tools.configs._mirror_base import Invalid, Node, mirrors

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
