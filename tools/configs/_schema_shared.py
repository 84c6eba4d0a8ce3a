"""RLConfig's shared top-level blocks, propagated into trainer/orchestrator/inference.

Mirrors ``prime_rl/utils/validation.py::propagate_shared_fields`` (run by
``RLConfig.auto_setup_shared_configs``, a before-validator, on the raw TOML table): each
shared value fills the same field of the sub-configs where the sub-config does not set it
(the sub-config table must exist; missing intermediate tables are created), and a sub-config
value that *differs* from the shared one is a conflict (equal values are fine). Values are
compared as written, before any type conversion (``20`` and ``"20"`` differ). Then
``trainer.tokenizer.chat_template`` fills ``inference.vllm.chat_template``, and an empty shared
``[ckpt]`` / ``[monitors.wandb]`` / ``[monitors.file]`` / ``[monitors.prime]`` table (or the
string ``"None"``) is given to the sub-configs the same way.
"""

from __future__ import annotations

from typing import Any

_T, _O, _I = "trainer", "orchestrator", "inference"

#: (shared key path, sub-config key paths it fills), in prime-rl's order.
PROPAGATION: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("model.name", ("trainer.model.name", "inference.vllm.model", "orchestrator.model.name")),
    ("model.vlm", ("trainer.model.vlm", "orchestrator.model.vlm")),
    ("log.level", ("trainer.log.level", "orchestrator.log.level", "inference.log.level")),
    ("log.json_logging", ("trainer.log.json_logging", "orchestrator.log.json_logging", "inference.log.json_logging")),
    ("ckpt.output_dir", ("trainer.ckpt.output_dir",)),
    ("ckpt.interval", ("trainer.ckpt.interval", "orchestrator.ckpt.interval")),
    ("ckpt.keep_last", ("trainer.ckpt.keep_last", "orchestrator.ckpt.keep_last")),
    ("ckpt.keep_interval", ("trainer.ckpt.keep_interval", "orchestrator.ckpt.keep_interval")),
    *((f"monitors.wandb.{leaf}", (f"trainer.monitors.wandb.{leaf}", f"orchestrator.monitors.wandb.{leaf}"))
      for leaf in ("project", "entity", "name", "group", "tags", "offline")),
    ("monitors.file.path", ("trainer.monitors.file.path", "orchestrator.monitors.file.path")),
    ("monitors.prime.name", ("orchestrator.monitors.prime.name",)),
    ("tokenizer.name", ("trainer.tokenizer.name", "orchestrator.tokenizer.name")),
    ("tokenizer.trust_remote_code", ("trainer.tokenizer.trust_remote_code",
                                     "orchestrator.tokenizer.trust_remote_code")),
    ("tokenizer.chat_template", ("trainer.tokenizer.chat_template", "orchestrator.tokenizer.chat_template",
                                 "inference.vllm.chat_template")),
    ("rollout_transport", ("trainer.rollout_transport", "orchestrator.rollout_transport")),
    ("max_steps", ("trainer.max_steps", "orchestrator.max_steps")),
    ("seq_len", ("trainer.model.seq_len", "orchestrator.seq_len")),
    ("slurm", ("inference.slurm",)),
)

#: Sub-config key path -> the shared key path that fills it (for pointing at the line a value came from).
SHARED_SOURCE: dict[str, str] = {target: shared for shared, targets in PROPAGATION for target in targets}

#: Shared tables whose mere presence enables the section on these sub-configs.
PRESENCE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ckpt", (_T, _O)),
    ("monitors.wandb", (_T, _O)),
    ("monitors.file", (_T, _O)),
    ("monitors.prime", (_O,)),
)


def _get(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _fill(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    if not isinstance(data.get(parts[0]), dict):
        return
    node: Any = data
    for part in parts[:-1]:
        if not isinstance(node, dict):
            return
        node = node.setdefault(part, {})
    if isinstance(node, dict) and parts[-1] not in node:
        node[parts[-1]] = value


def propagate_shared_blocks(data: dict[str, Any]) -> str | None:
    """Propagate the shared blocks into ``data`` in place; the conflict message (prime-rl's
    wording) when a sub-config sets a different value, else None."""
    conflicts: list[tuple[str, str]] = []
    for shared, targets in PROPAGATION:
        value = _get(data, shared)
        if value is None:
            continue
        conflicts += [(shared, t) for t in targets if _get(data, t) is not None and _get(data, t) != value]
        for target in targets:
            _fill(data, target, value)
    template = _get(data, "trainer.tokenizer.chat_template")
    if template is not None:
        _fill(data, "inference.vllm.chat_template", template)
    for key, targets in PRESENCE:
        value = _get(data, key)
        if isinstance(value, dict) or value == "None":
            for target in targets:
                _fill(data, f"{target}.{key}", {} if isinstance(value, dict) else "None")
    if not conflicts:
        return None
    lines = ["Shared config conflicts with matching sub-config field(s). Pick one place to set each value — "
             "duplicating it is ambiguous and the sub-config would silently shadow any later shared-level "
             "override (e.g. on the CLI):"]
    lines += [f"  - [{shared!r}] is set, but [{sub!r}] is also set" for shared, sub in conflicts]
    return "\n".join(lines)
