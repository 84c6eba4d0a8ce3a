"""What a cross-field rejection compares: the key paths a prime-rl model validator read, with
the values they have in the file (or the default, or the shared key that filled them).

A model validator's error (``value_error``/``assertion_error``) sits on the model's table (or the
whole file, for ``RLConfig``/``SFTConfig``), and prime-rl's message names the settings in prose
("Batch size must be divisible by the number of samples per problem"). :func:`compared` finds
the keys: those the message names (``concurrency.max_inflight``, ``model.impl='custom'``,
``['trainer.max_steps']``), resolved from the finding's table outwards and, for a bare name,
where the shipped schema declares it once; plus, for messages that name a setting in prose,
the keys of :data:`PROSE` (read from the validators in prime-rl 559b447's
``prime_rl/configs/*.py``), with a sentence that puts the numbers side by side
("orchestrator.batch_size 100 is not a multiple of orchestrator.group_size 16"). Both back-ends
give prime-rl's own messages (the snapshot's mirrors copy them), so one table serves both.
Values under an ``env_vars`` or ``env`` table are never shown, only that they are set.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tools.configs._facts import Mode
from tools.configs._schema_findings import Finding, dotted
from tools.configs._schema_shared import SHARED_SOURCE
from tools.configs._schema_snapshot import snapshot_schema

Loc = tuple[str | int, ...]
_UNSET = object()


@dataclass(frozen=True)
class Compared:
    """One key a validator compared: ``path`` (dotted), ``value`` (``_UNSET``-free: None when not
    set and without default), ``origin`` ("" = written in the file, "default", "from <shared key>")."""

    path: str
    value: Any
    origin: str

    def shown(self) -> str:
        where = f" ({self.origin})" if self.origin else ""
        return f"{self.path} = {_shown(self.path, self.value)}{where}"


@dataclass(frozen=True)
class _Prose:
    pattern: re.Pattern[str]
    keys: tuple[str, ...]
    explain: Callable[[list[Compared]], str | None] | None = None


def _multiple(a: list[Compared]) -> str | None:
    x, y = a[0], a[1]
    if isinstance(x.value, int) and isinstance(y.value, int) and y.value:
        return f"{x.path} {x.value} is not a multiple of {y.path} {y.value}"
    return None


def _below(a: list[Compared]) -> str | None:
    x, y = a[0], a[1]
    if isinstance(x.value, (int, float)) and isinstance(y.value, (int, float)):
        return f"{x.path} {x.value} is below {y.path} {y.value}"
    return None


def _differ(a: list[Compared]) -> str | None:
    x, y = a[0], a[1]
    return f"{x.path} {_shown(x.path, x.value)} differs from {y.path} {_shown(y.path, y.value)}"


def _p(pattern: str, *keys: str, explain: Callable[[list[Compared]], str | None] | None = None) -> _Prose:
    return _Prose(re.compile(pattern), keys, explain)


#: prime-rl messages that name settings in prose -> the keys the validator reads (relative to the
#: table the error sits on, resolved outwards like the names in a message).
PROSE: tuple[_Prose, ...] = (
    _p(r"^Batch size must be divisible by the number of samples per problem", "batch_size", "group_size",
       explain=_multiple),
    _p(r"^concurrency\.(?:max|initial)_inflight must be at least the number of rollouts per example", "group_size"),
    _p(r"^Batch size must be divisible by micro batch size", "batch_size", "micro_batch_size", explain=_multiple),
    _p(r"^Micro batch size must be 1 when CP is enabled", "data.micro_batch_size", "model.cp"),
    _p(r"^Sequence length must be divisible by CP degree", "data.seq_len", "model.cp", explain=_multiple),
    _p(r"^Trainer model seq_len", "orchestrator.seq_len", "trainer.model.seq_len"),
    _p(r"^Inference model name", "inference.vllm.model", "orchestrator.model.name", explain=_differ),
    _p(r"^Trainer model name", "trainer.model.name", "orchestrator.model.name", explain=_differ),
    _p(r"^Trainer checkpoint interval", "trainer.ckpt.interval", "orchestrator.ckpt.interval", explain=_differ),
    _p(r"^Trainer checkpoint config is specified", "trainer.ckpt", "orchestrator.ckpt"),
    _p(r"^Trainer chat_template and orchestrator chat_template", "trainer.tokenizer.chat_template",
       "orchestrator.tokenizer.chat_template"),
    _p(r"^Number of inference GPUs must be divisible by the tensor parallel size", "deployment.num_infer_gpus",
       "inference.vllm.tensor_parallel_size", explain=_multiple),
    _p(r"^Total GPU count", "num_train_gpus", "num_infer_gpus", "gpus_per_node"),
    _p(r"^NCCL weight broadcast requires at least 2 GPUs", "deployment.num_train_gpus", "deployment.num_infer_gpus"),
    _p(r"^(?:Context parallelism|CP is only supported)", "cp", "impl", "attn"),
    _p(r"^Flash attention 4", "attn", "impl"),
    _p(r"^VLM training requires", "vlm", "impl"),
    _p(r"^VLM models require cp_style", "vlm", "cp"),
    _p(r"^VLM models must use", "model.vlm", "model.optimization_dtype", "model.reduce_dtype"),
    _p(r"^Must specify max_steps when using a (?:cosine|linear)", "scheduler.type", "max_steps"),
    _p(r"^Linear scheduler requires", "scheduler.warmup_steps", "scheduler.decay_steps"),
    _p(r"^warmup_steps \(\d+\) \+ decay_steps", "scheduler.warmup_steps", "scheduler.decay_steps", "max_steps"),
    _p(r"^warmup_steps \(\d+\) must be less than max_steps", "scheduler.warmup_steps", "max_steps"),
    _p(r"^Cannot combine fsdp_cpu_offload", "optim_cpu_offload"),
    _p(r"^In-memory weight broadcast does not support LoRA", "weight_broadcast.type", "model.lora"),
    _p(r"^EP is only supported", "model.ep", "model.impl"),
    _p(r"^Router replay is only supported", "model.impl"),
    _p(r"^Trust remote code is only supported", "trust_remote_code", "impl"),
    _p(r"training is only supported with model\.impl", "quantization.type"),
    _p(r"^Full optimizer offload only supports", "optim.type", "model.full_offload"),
    _p(r"^Muon optimizer does not support FSDP CPU offload", "optim.type", "model.fsdp_cpu_offload"),
    _p(r"^Cannot configure inference with num_infer_nodes", "inference"),
    _p(r"^Trainer W&B project", "trainer.monitors.wandb.project", "orchestrator.monitors.wandb.project",
       explain=_differ),
    _p(r"^The llm-d router backend requires", "router.type", "deployment.type"),
    _p(r"^Number of subsets must be equal to number of splits", "subsets", "splits"),
    _p(r"^reject_min must be less than or equal to reject_max", "reject_min", "reject_max"),
    _p(r"^TrainerConfig\.output_dir", "trainer.output_dir"),
    _p(r"^OrchestratorConfig\.output_dir", "orchestrator.output_dir"),
    _p(r"^Multi-node deployments require inference\.router", "deployment.type"),
)

#: A key-like name in a message: dotted identifiers, at least one ``_`` or ``.`` in it.
_NAME = re.compile(r"(?<![\w.-])([a-z][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)(?![\w(-])")
_MAX_KEYS = 5


def compared(f: Finding, raw: Mapping[str, Any], mode: Mode) -> tuple[list[Compared], str | None]:
    """The keys the validator behind ``f`` compared, with their values, and a sentence with the
    numbers when one is known; ``([], None)`` for other findings or when nothing resolves."""
    if f.kind not in ("value_error", "assertion_error") or f.stage == "backend":
        return [], None
    text = f.message
    names: list[str] = [m[1] for m in _NAME.finditer(text) if "_" in m[1] or "." in m[1]]
    prose = next((p for p in PROSE if p.pattern.search(text)), None)
    if prose is not None:
        names = [*prose.keys, *names] if prose.explain is not None else [*names, *prose.keys]
    found: list[Compared] = []
    seen: set[str] = set()
    for name in names:
        loc = _resolve(name, f.loc, raw, mode)
        if loc is None:
            continue
        path = dotted(loc)
        if path in seen:
            continue
        seen.add(path)
        value, origin = _effective(loc, raw, mode)
        found.append(Compared(path, value, origin))
        if len(found) == _MAX_KEYS:
            break
    sentence = prose.explain(found) if prose is not None and prose.explain is not None and len(found) >= 2 else None
    return found, sentence


def annotate(f: Finding, raw: Mapping[str, Any], mode: Mode, message: str, fix: str | None) -> tuple[str, str | None]:
    """``message`` with the compared keys and their values added, and a fix naming those keys,
    when :func:`compared` finds them; else both unchanged."""
    keys, sentence = compared(f, raw, mode)
    if not keys:
        return message, fix
    detail = sentence or ", ".join(k.shown() for k in keys)
    if sentence and any(k.origin for k in keys):
        detail += "; " + ", ".join(k.shown() for k in keys if k.origin)
    paths = [k.path for k in keys]
    names = paths[0] if len(paths) == 1 else ", ".join(paths[:-1]) + f" or {paths[-1]}"
    return (f"{message.rstrip()} [{detail}]",
            f"Change {names} (the settings this prime-rl check compares), then validate again.")


def _resolve(name: str, loc: Loc, raw: Mapping[str, Any], mode: Mode) -> Loc | None:
    """The key path ``name`` means at the table ``loc``: the first of ``loc + name``, then each
    enclosing table + name, that is written in the file or declared by the schema; else the one
    place the schema declares a bare name."""
    parts = tuple(name.split("."))
    for cut in range(len(loc), -1, -1):
        candidate = (*loc[:cut], *parts)
        if _get(raw, candidate) is not _UNSET or _declared(candidate, raw, mode):
            return candidate
    if len(parts) == 1:
        places = [h for h in homes(mode).get(parts[0], ()) if "[]" not in h]
        if len(places) == 1:
            return (*(places[0].split(".") if places[0] else ()), parts[0])
    return None


def _effective(loc: Loc, raw: Mapping[str, Any], mode: Mode) -> tuple[Any, str]:
    value = _get(raw, loc)
    if value is not _UNSET:
        return value, ""
    shared = SHARED_SOURCE.get(dotted(loc))
    if shared is not None and (filled := _get(raw, tuple(shared.split(".")))) is not _UNSET:
        return filled, f"from {shared}"
    default = _default(loc, raw, mode)
    if default is not _UNSET and default is not None:
        return default, "default"
    return None, ""


def _get(data: Any, loc: Loc) -> Any:
    node = data
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            node = node[part]
        else:
            return _UNSET
    return node


def _property(loc: Loc, raw: Mapping[str, Any], mode: Mode) -> dict[str, Any] | None:
    """The schema's property for ``loc`` as written (``$ref`` not followed: a default may sit beside it)."""
    if not loc or not isinstance(loc[-1], str):
        return None
    schema = snapshot_schema(mode)
    try:
        node = schema.node_at(loc[:-1], dict(raw))
    except (KeyError, TypeError, IndexError):
        return None
    prop = schema.index.properties(node).get(loc[-1]) if node is not None else None
    return prop if isinstance(prop, dict) else None


def _declared(loc: Loc, raw: Mapping[str, Any], mode: Mode) -> bool:
    return _property(loc, raw, mode) is not None


def _default(loc: Loc, raw: Mapping[str, Any], mode: Mode) -> Any:
    prop = _property(loc, raw, mode)
    if prop is None:
        return _UNSET
    if "default" in prop:
        return prop["default"]
    target = snapshot_schema(mode).index.deref(prop)
    return target.get("default", _UNSET)


@functools.lru_cache(maxsize=2)
def homes(mode: Mode) -> dict[str, list[str]]:
    """Every declared key -> the places (templates) where the schema declares it, shortest first."""
    schema = snapshot_schema(mode)
    index = schema.index
    found: dict[str, set[str]] = {}

    def walk(node: dict[str, Any], path: str, refs: tuple[str, ...]) -> None:
        ref = node.get("$ref")
        if isinstance(ref, str):
            if ref in refs or len(refs) > 12:
                return
            refs = (*refs, ref)
        node = index.deref(node)
        for member in node.get("anyOf", ()):
            walk(member, path, refs)
        for branch in node.get("allOf", ()):
            if isinstance(branch.get("then"), dict):
                walk(branch["then"], path, refs)
        items = node.get("items")
        if isinstance(items, dict):
            walk(items, f"{path}[]", refs)
        for name, prop in node.get("properties", {}).items():
            if name == node.get("x-discriminator"):
                continue
            found.setdefault(name, set()).add(path)
            walk(prop, f"{path}.{name}" if path else name, refs)

    walk(schema.schema, "", ())
    return {name: sorted(places, key=lambda p: (p.count("."), len(p), p)) for name, places in found.items()}


def _shown(path: str, value: Any) -> str:
    if any(part in ("env_vars", "env") for part in path.split(".")):
        return "(set)" if value is not None else "unset"
    if value is None:
        return "unset"
    if isinstance(value, dict):
        return "a table" if value else "an empty table"
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:57] + "...")
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return str(value).lower() if isinstance(value, bool) else str(value)
