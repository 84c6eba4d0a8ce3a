"""The config under analysis (:class:`Config`) and the facts read from it: the mode as the prime
CLI decides it, model, step cap, GPU count, W&B project.

Sources: reference/prime-rl.md §3.2 (shared fields), §3.5 (defaults), §4 (SFT), §10 (hosted
handling); reference/prime-api.md §3.2 (what ``prime train`` reads itself and never ships).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from tools.configs._toml import as_int, value_at
from tools.guardrails.secret_detection import EnvFileError, parse_env_file, toml_env_files

Mode = Literal["rl", "sft"]

#: prime-rl defaults used when a field is absent (reference/prime-rl.md §3.5, §4).
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
DEFAULT_GPUS_PER_NODE = 8

CLI_OPTIONS = ("image_tag", "gpu_type", "volume", "volume_size", "source_ref")
#: Top-level TOML keys ``prime train`` reads itself and never ships (prime 0.18.0
#: ``prime_cli/commands/rl.py`` ``_CLI_ONLY_KEYS``; ``name`` is shipped).
CLI_ONLY_KEYS = ("env_file", "env_files", *CLI_OPTIONS, "type")
#: SFT blocks the hosted worker sets aside: hosted SFT runs the trainer only (prime 0.18.0
#: ``prime_cli/utils/training_compiler.py`` ``SFT_ONLINE_EVAL_KEYS``).
SFT_ONLINE_EVAL_KEYS = ("eval", "inference", "weight_broadcast")


@dataclass
class Config:
    """A parsed TOML plus what the rules need to read it (``text``: the file as read, for the
    check of the other TOML reader)."""

    data: dict[str, Any]
    mode: Mode
    path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    known_values: list[str] = field(default_factory=list)
    text: str | None = None

    def get(self, path: str) -> Any:
        return value_at(self.data, path)

    def int(self, path: str) -> int | None:
        return as_int(self.get(path))

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
    def gpus_per_node(self) -> builtins.int:
        return self.int("deployment.gpus_per_node") or DEFAULT_GPUS_PER_NODE

    def gpus(self, key: str) -> builtins.int:
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
        ids = [value_at(src, "env.taskset.id") for _, src in self.sources(path)]
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


def sniff_mode(data: Mapping[str, Any], forced: Mode | None = None) -> tuple[Mode, str]:
    """The prime CLI's mode choice (``_is_sft``): SFT when forced, or when the TOML has
    ``data`` and neither ``trainer`` nor ``orchestrator``; else RL."""
    looks_sft = "data" in data and "trainer" not in data and "orchestrator" not in data
    if forced == "sft":
        return "sft", "SFT: forced by the mode argument (like `prime train --sft` of the prime CLI)."
    if forced == "rl":
        note = " Note: `prime train` would dispatch this file as SFT (it has [data] and no [trainer]/[orchestrator])."
        return "rl", "RL: forced by the mode argument." + (note if looks_sft else "")
    if looks_sft:
        return "sft", "SFT: the file has [data] and neither [trainer] nor [orchestrator] (the prime CLI's sniff)."
    return "rl", "RL: the prime CLI's sniff (SFT only when [data] is present without [trainer]/[orchestrator])."


def model_name_of(c: Config) -> tuple[str | None, str]:
    for path in ("model.name", "trainer.model.name") if c.rl else ("model.name",):
        value = c.get(path)
        if value is not None:
            return (value if isinstance(value, str) else None), path
    if isinstance(c.data.get("model"), str):
        return None, "model (retired string form)"
    return DEFAULT_MODEL, "prime-rl default"


def max_steps_of(c: Config) -> int | None:
    paths = ("max_steps", "trainer.max_steps", "orchestrator.max_steps") if c.rl else ("max_steps",)
    return next((v for v in (c.int(p) for p in paths) if v is not None), None)


def _infer_nodes(c: Config) -> tuple[int | None, str]:
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


def gpu_count(c: Config) -> tuple[int | None, str]:
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


def wandb_project_of(c: Config) -> str | None:
    for path in ("monitors.wandb", "trainer.monitors.wandb", "orchestrator.monitors.wandb"):
        table = c.get(path)
        if isinstance(table, Mapping):
            project = table.get("project", "prime-rl")
            return project if isinstance(project, str) else None
    return None


def checkpoint_of(data: Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str | None]:
    """The checkpoint table a run saves weights with, and its key: the shared ``ckpt`` (RL and SFT),
    else ``trainer.ckpt`` (RL); ``(None, None)`` when neither is a table (absent, or ``"None"``:
    disabled). A bare ``[ckpt]`` saves at the end of the run; ``interval`` every that many steps.
    Source: reference/prime-rl.md §3.1 (``ckpt``), §3.2 (shared ``ckpt`` filled into trainer and
    orchestrator), §4 (SFT's ``ckpt``)."""
    for key in ("ckpt", "trainer.ckpt"):
        table = value_at(data, key)
        if isinstance(table, Mapping):
            return table, key
    return None, None
