"""Mirrors of the validators in prime-rl's ``prime_rl/configs/shared.py``, ``trainer.py`` and
``algorithm.py``, and in the ``renderers`` package prime-rl pins (``renderers/configs.py``, 0.1.12).

Each function is registered under the validator it mirrors (see ``_mirror_base``).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from tools.configs._mirror_base import Invalid, Node, mirrors

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
