"""The base of the validator mirrors: what a mirror sees (:class:`Node`), how it refuses
(:class:`Invalid`), and the registry that names each mirror after the prime-rl validator it mirrors.

A mirror is a pure function over one model's table (defaults filled in) that does what one
prime-rl model validator does: it raises :class:`Invalid` with prime-rl's message, warns as
the validator warns, and fills in the values the validator fills in (``auto_setup_*``) that
later validators read. It is registered with :func:`mirrors` under the validator's name
(``module.Class.function``, the name the snapshot records in ``x-validators``), so the file
and function it mirrors are in its registration (:func:`source_of`). The mirrors themselves
are in ``_mirror_trainer``, ``_mirror_orchestrator``, ``_mirror_rl`` and ``_mirror_sft``;
``_rules`` lists them in :data:`~tools.configs._rules.RULES` and walks them the way pydantic
runs the validators.

Tables stand in for models: a sub-model that is unset is ``None``, a set one is a (possibly
empty) table, so "is configured" is ``node[...] is not None`` (a model instance is always
truthy in Python, an empty dict is not).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Invalid(Exception):
    """A validator refused its model. ``kind``: ``value_error`` (``raise ValueError``) or
    ``assertion_error`` (an ``assert``), as pydantic reports them; ``loc``: where pydantic puts
    it when that is not the model (a model built inside a validator failing its own check)."""

    def __init__(self, message: str, kind: str = "value_error", loc: tuple[str | int, ...] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.loc = loc



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


Mirror = Callable[[Node], None]
#: validator name -> its mirror (filled by the ``_mirror_*`` modules as they are imported).
MIRRORS: dict[str, Mirror] = {}


def mirrors(*validators: str) -> Callable[[Mirror], Mirror]:
    """Register ``fn`` as the mirror of each named prime-rl validator."""

    def register(fn: Mirror) -> Mirror:
        for name in validators:
            MIRRORS[name] = fn
        return fn

    return register


def source_of(validator: str) -> str:
    """``prime_rl.configs.trainer.ModelConfig.validate_cp`` ->
    ``prime_rl/configs/trainer.py ModelConfig.validate_cp``."""
    parts = validator.split(".")
    split = next((i for i, p in enumerate(parts) if p[:1].isupper()), len(parts) - 1)
    return f"{'/'.join(parts[:split])}.py {'.'.join(parts[split:])}"




def copy_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_value(v) for v in value]
    return value
