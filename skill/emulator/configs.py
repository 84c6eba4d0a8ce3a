"""Reading a create body's prime-rl config the way the platform does: run fields and rejections.

:func:`run_spec` turns ``config`` (the whole hosted TOML as JSON) into the fields a run
carries (``baseModel``, ``maxSteps``, ``gpuCount``, ...). :func:`config_problems` lists the
rejections the platform's validator makes on submission, as FastAPI-style 422 items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RunSpec:
    """What the simulator needs to know about a run, read from its config."""

    base_model: str | None
    loss: str  # "rl" or "sft"
    max_steps: int | None
    batch_size: int | None
    rollouts_per_example: int | None
    seq_len: int | None
    max_tokens: int | None
    learning_rate: float | None
    environments: list[dict[str, Any]]
    env_names: list[str]
    eval_env_names: list[str]
    eval_interval: int | None
    gpu_count: int
    ckpt_interval: int | None
    ckpt_at_end: bool
    wandb_project: str | None = None
    wandb_entity: str | None = None
    wandb_run_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _section(obj: dict[str, Any], key: str) -> dict[str, Any]:
    """``obj[key]`` when it is a table, else an empty one."""
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def model_name(config: dict[str, Any]) -> str | None:
    """``model.name``, else ``trainer.model.name``, else ``orchestrator.model.name``."""
    for path in (("model", "name"), ("trainer", "model", "name"), ("orchestrator", "model", "name")):
        value = _get(config, *path)
        if isinstance(value, str) and value:
            return value
    return None


def _sources(section: Any) -> list[dict[str, Any]]:
    sources = _get(section, "source")
    if isinstance(sources, dict):
        sources = [sources]
    return [s for s in sources or [] if isinstance(s, dict)]


def _env_id(source: dict[str, Any]) -> str | None:
    return _first(_get(source, "env", "taskset", "id"), _get(source, "env", "id"), source.get("name"))


def gpu_count(config: dict[str, Any]) -> int:
    """GPUs a ``[deployment]`` asks for.

    single_node (default): ``num_train_gpus + num_infer_gpus`` (defaults 1 + 1).
    multi_node: ``(num_train_nodes + num_infer_nodes * num_infer_replicas) * gpus_per_node``
    (defaults 1, 1, 1, 8).
    """
    deployment = _section(config, "deployment")
    if deployment.get("type") == "multi_node":
        per_node = _int(deployment.get("gpus_per_node")) or 8
        train = _int(deployment.get("num_train_nodes"))
        infer = _int(deployment.get("num_infer_nodes"))
        replicas = _int(deployment.get("num_infer_replicas"))
        train = 1 if train is None else train
        infer = 1 if infer is None else infer
        replicas = 1 if replicas is None else replicas
        return (train + infer * replicas) * per_node
    train = _int(deployment.get("num_train_gpus"))
    infer = _int(deployment.get("num_infer_gpus"))
    return (1 if train is None else train) + (1 if infer is None else infer)


def run_spec(config: dict[str, Any], *, sft: bool) -> RunSpec:
    """The run fields of a config (RL unless ``sft``)."""
    orchestrator = _section(config, "orchestrator")
    trainer = _section(config, "trainer")
    data = _section(config, "data")
    if sft:
        train_sources: list[dict[str, Any]] = []
        eval_section = config.get("eval")
    else:
        train_sources = _sources(orchestrator.get("train"))
        eval_section = orchestrator.get("eval")
    eval_sources = _sources(eval_section)
    environments = []
    env_names: list[str] = []
    for source in train_sources:
        env_id = _env_id(source)
        if env_id is None:
            continue
        environments.append({"id": env_id, "name": source.get("name") or env_id})
        if env_id not in env_names:
            env_names.append(env_id)
    eval_env_names = [e for e in (_env_id(s) for s in eval_sources) if e]
    ckpt = config.get("ckpt")
    wandb = _first(_get(config, "monitors", "wandb"), config.get("wandb")) or {}
    return RunSpec(
        base_model=model_name(config),
        loss="sft" if sft else "rl",
        max_steps=_int(_first(config.get("max_steps"), trainer.get("max_steps"), orchestrator.get("max_steps"))),
        batch_size=_int(data.get("batch_size") if sft else orchestrator.get("batch_size")),
        rollouts_per_example=None if sft else _int(orchestrator.get("group_size")),
        seq_len=_int(_first(config.get("seq_len"), orchestrator.get("seq_len"), data.get("seq_len"),
                            _get(trainer, "model", "seq_len"))),
        max_tokens=_int(_first(_get(orchestrator, "train", "sampling", "max_completion_tokens"),
                               _get(orchestrator, "sampling", "max_tokens"))),
        learning_rate=_first(_get(trainer, "optim", "lr"), _get(config, "optim", "lr")),
        environments=environments,
        env_names=env_names,
        eval_env_names=eval_env_names,
        eval_interval=_int(_get(eval_section, "interval")) if isinstance(eval_section, dict) else None,
        gpu_count=gpu_count(config),
        ckpt_interval=_int(ckpt.get("interval")) if isinstance(ckpt, dict) else None,
        ckpt_at_end=isinstance(ckpt, dict),
        wandb_project=wandb.get("project") if isinstance(wandb, dict) else None,
        wandb_entity=wandb.get("entity") if isinstance(wandb, dict) else None,
        wandb_run_name=wandb.get("name") if isinstance(wandb, dict) else None,
    )


def is_retired_lora(config: dict[str, Any]) -> bool:
    """The LoRA shape the CLI and platform refuse: top-level ``model = "..."`` or ``[[env]]``."""
    return isinstance(config.get("model"), str) or isinstance(config.get("env"), list)


def _problem(loc: list[str], msg: str, kind: str = "value_error") -> dict[str, Any]:
    return {"loc": ["body", "config", *loc], "msg": msg, "type": kind}


def config_problems(config: dict[str, Any], *, sft: bool) -> list[dict[str, Any]]:
    """422 items for what the hosted validator rejects (prime-api.md §4 worker rules)."""
    problems = []
    if model_name(config) is None:
        problems.append(_problem(["model", "name"], "Field required", "missing"))
    for key in ("max_steps", "seq_len"):
        value = config.get(key)
        if value is not None and (_int(value) is None or value < 1):
            problems.append(_problem([key], "Input should be a positive integer", "int_parsing"))
    lr = _get(config, "trainer", "optim", "lr")
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float))):
        problems.append(_problem(["trainer", "optim", "lr"], "Input should be a valid number", "float_parsing"))
    if "k8s" in config:
        problems.append(_problem(["k8s"], "[k8s] is set by the platform; remove it"))
    # The prime-rl config models forbid extra keys: an SFT config sent as RL (or the reverse)
    # fails on the other family's top-level sections.
    for key in ("orchestrator",) if sft else ("data",):
        if key in config:
            problems.append(_problem([key], "Extra inputs are not permitted", "extra_forbidden"))
    if sft:
        return problems
    if config.get("clean") is True:
        problems.append(_problem(["clean"], "clean = true is not supported on Hosted Training"))
    if _get(config, "inference", "deployment", "type") == "disaggregated":
        problems.append(_problem(["inference", "deployment", "type"],
                                 "disaggregated inference is not supported on Hosted Training"))
    deployment = _section(config, "deployment")
    if deployment.get("type", "single_node") == "single_node":
        no_inference = "inference" not in config or deployment.get("num_infer_gpus") == 0
        if no_inference and not _get(config, "trainer", "data", "fake"):
            problems.append(_problem(["inference"], "a single-node RL run needs [inference] (or trainer.data.fake)"))
    return problems
