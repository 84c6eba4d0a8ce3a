"""Export the prime-rl config schemas, annotated, from an interpreter that has ``prime_rl.configs``.

Run by :mod:`tools.configs._schema_export` as ``PYTHON -I -B _schema_export_worker.py`` (or
through ``uv run --no-sync python`` in a prime-rl checkout), never imported by this package. It
imports nothing from this project: it runs in a foreign interpreter (Python 3.12, pydantic 2,
prime-rl-configs). It prints one JSON object on stdout::

    {"rl": <RLConfig JSON Schema>, "sft": <SFTConfig JSON Schema>,
     "facts": {name: value}, "versions": {distribution: version}}

The schemas are pydantic's own ``model_json_schema()`` (validation mode) plus annotations
that only the live classes know (pydantic cannot put them in JSON Schema), read by
:mod:`tools.configs._schema_export` and by the snapshot back-end:

- on every model: ``x-model`` (``module.Class``), ``x-extra`` (``forbid``/``allow``/``ignore``),
  ``x-before`` and ``x-validators`` (model validators, ``module.Class.function``, in the order
  pydantic runs them: before-validators last-defined first, after-validators in definition order);
- on fields: ``x-field-before`` / ``x-field-after`` (``BeforeValidator``/``AfterValidator``
  functions), ``x-aliases`` (``AliasChoices`` other than the property name), ``x-default-type``
  (the tag ``BaseConfig._default_discriminator_types`` injects: the field default is a model
  with a ``type``), ``x-default-factory`` (the value of a ``default_factory``, which pydantic
  leaves out of the schema).

``facts``: constants of the schema's code that cross-field validators read (renderer map keys,
vLLM LoRA ranks, llm-d scorers, Inkling effort labels), and ``plugins``: the keys of the
environment tables of the tasksets installed in this interpreter (verifiers narrows an
environment source's ``env`` to its taskset's classes when the run starts): per taskset, the
keys of ``env``, ``env.taskset``, ``env.taskset.task`` and each role (with the role's default
harness id and runtime type); the keys of every built-in harness and runtime type.
"""

from __future__ import annotations

import importlib
import json
import sys
import warnings
from importlib import metadata
from typing import Any

#: (fact name, module, attribute): code constants the validator mirrors need.
FACTS = (
    ("model_renderer_map", "renderers.base", "MODEL_RENDERER_MAP"),
    ("valid_vllm_lora_ranks", "prime_rl.configs.inference", "VALID_VLLM_LORA_RANKS"),
    ("known_llmd_scorers", "prime_rl.configs.inference", "KNOWN_SCORERS"),
    ("protected_env_vars", "prime_rl.configs.shared", "PROTECTED_ENV_VARS"),
    ("inkling_effort_map", "renderers.configs", "INKLING_EFFORT_MAP"),
)
DISTRIBUTIONS = ("prime-rl-configs", "pydantic", "pydantic-core", "prime-pydantic-config", "renderers",
                 "verifiers")


def _qualname(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _jsonable(value: Any) -> Any:
    from pydantic import BaseModel, TypeAdapter

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return TypeAdapter(Any).dump_python(value, mode="json")


def _model_annotations(cls: Any) -> dict[str, Any]:
    decorators = cls.__pydantic_decorators__.model_validators
    before: list[str] = []
    after: list[str] = []
    for dec in decorators.values():
        func = getattr(dec.func, "__func__", dec.func)
        (before if dec.info.mode == "before" else after).append(_qualname(func))
    extra = cls.model_config.get("extra") or "ignore"
    return {"x-model": _qualname(cls), "x-extra": extra, "x-before": before[::-1], "x-validators": after}


def _field_annotations(cls: Any, name: str, field: Any) -> dict[str, Any]:
    from pydantic import AfterValidator, AliasChoices, BaseModel, BeforeValidator

    notes: dict[str, Any] = {}
    metadata_items = list(field.metadata)
    # Annotated[...] aliases keep their validators on the annotation when it is a union.
    annotation = field.annotation
    for item in getattr(annotation, "__metadata__", ()):
        metadata_items.append(item)
    for item in metadata_items:
        if isinstance(item, BeforeValidator):
            notes.setdefault("x-field-before", []).append(_qualname(item.func))
        elif isinstance(item, AfterValidator):
            notes.setdefault("x-field-after", []).append(_qualname(item.func))
    if isinstance(field.validation_alias, AliasChoices):
        names = [c for c in field.validation_alias.choices if isinstance(c, str)]
        notes["x-aliases"] = [c for c in names if c != name]
    default = field.default
    if isinstance(default, BaseModel) and hasattr(default, "type"):
        notes["x-default-type"] = default.type
    if field.default_factory is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            notes["x-default-factory"] = _jsonable(field.default_factory())
    return notes


def _is_taskset_package(dist: Any) -> bool:
    """A distribution that looks like a verifiers taskset: it ships ``<package>/taskset.py``."""
    return any(str(f).count("/") == 1 and str(f).endswith("/taskset.py") for f in dist.files or ())


def _plugins() -> dict[str, Any]:
    """Keys of the environment tables of the installed tasksets (by distribution name)."""
    import typing

    from verifiers.v1.configs.agent import AgentConfig
    from verifiers.v1.utils import loaders

    tasksets: dict[str, Any] = {}
    names = sorted({d.metadata["Name"] for d in metadata.distributions() if _is_taskset_package(d)})
    for name in ["", *names]:  # "": an env that names no taskset
        try:
            env_cls = loaders.env_config_type(name, "")
            # no taskset id: EnvConfig keeps its declared TasksetConfig (nothing to narrow to)
            taskset_cls = loaders.taskset_config_type(name) if name else env_cls.model_fields["taskset"].annotation
        except Exception:
            continue
        task = taskset_cls.model_fields["task"].annotation if "task" in taskset_cls.model_fields else None
        roles = {}
        for field_name, field in env_cls.model_fields.items():
            if isinstance(field.default, AgentConfig):
                default = field.default.model_dump(exclude_none=True)
                roles[field_name] = {"keys": list(type(field.default).model_fields),
                                     "harness": (default.get("harness") or {}).get("id"),
                                     "runtime": (default.get("runtime") or {}).get("type")}
        tasksets[name] = {"env": list(env_cls.model_fields), "taskset": list(taskset_cls.model_fields),
                          "task": list(task.model_fields) if isinstance(task, type) and hasattr(task, "model_fields")
                          else None, "roles": roles}
    harnesses = {}
    for ident in loaders.builtin_harness_ids():
        try:
            harnesses[ident] = list(loaders.harness_config_type(ident).model_fields)
        except Exception:
            continue
    runtimes = {m.model_fields["type"].default: list(m.model_fields)
                for m in typing.get_args(AgentConfig.model_fields["runtime"].annotation)
                if hasattr(m, "model_fields") and "type" in m.model_fields}
    return {"tasksets": tasksets, "harnesses": harnesses, "runtimes": runtimes, "default_harness": "bash"}


def _schema(model: Any) -> dict[str, Any]:
    from pydantic.json_schema import GenerateJsonSchema

    classes: dict[str, Any] = {}

    class Annotating(GenerateJsonSchema):
        def model_schema(self, schema: Any) -> Any:
            out = super().model_schema(schema)
            cls = schema["cls"]
            classes[_qualname(cls)] = cls
            return out

    result = model.model_json_schema(schema_generator=Annotating)
    nodes = [result, *result.get("$defs", {}).values()]
    by_title: dict[str, list[Any]] = {}
    for cls in classes.values():
        by_title.setdefault(cls.__name__, []).append(cls)
    for node in nodes:
        cls = _class_of(node, result, classes, by_title)
        if cls is None:
            continue
        node.update(_model_annotations(cls))
        for name, prop in node.get("properties", {}).items():
            field = cls.model_fields.get(name) or next(
                (f for f in cls.model_fields.values() if _alias_names(f) and name in _alias_names(f)), None)
            if field is not None:
                prop.update(_field_annotations(cls, name, field))
    return result


def _alias_names(field: Any) -> list[str]:
    from pydantic import AliasChoices

    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [c for c in alias.choices if isinstance(c, str)]
    return [alias] if isinstance(alias, str) else []


def _class_of(node: dict[str, Any], root: dict[str, Any], classes: dict[str, Any],
              by_title: dict[str, list[Any]]) -> Any:
    """The pydantic class a schema node was generated from (matched by $defs key or title)."""
    if node is root:
        return next((c for c in classes.values() if c.__name__ == root.get("title")), None)
    key = next((k for k, v in root.get("$defs", {}).items() if v is node), None)
    if key is None:
        return None
    if "__" in key:  # pydantic's collision names: module__path__Class
        return classes.get(".".join(key.split("__")))
    candidates = by_title.get(key, [])
    # pydantic keeps one definition for same-named classes with identical schemas (the trainer's
    # and the orchestrator's FileSystemWeightBroadcastConfig): fine when they validate alike.
    shapes = {json.dumps(_model_annotations(c) | {"x-model": None}, sort_keys=True) for c in candidates}
    return candidates[0] if len(shapes) == 1 else None


def main() -> None:
    warnings.simplefilter("ignore")
    from prime_rl.configs.rl import RLConfig
    from prime_rl.configs.sft import SFTConfig

    facts = {}
    for name, module, attribute in FACTS:
        value = getattr(importlib.import_module(module), attribute)
        if isinstance(value, dict):
            value = sorted(value)
        elif isinstance(value, (set, frozenset)):
            value = sorted(value)
        facts[name] = list(value)
    versions: dict[str, str | None] = {}
    for dist in DISTRIBUTIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    versions["python"] = ".".join(map(str, sys.version_info[:2]))
    json.dump({"rl": _schema(RLConfig), "sft": _schema(SFTConfig), "facts": facts, "plugins": _plugins(),
               "versions": versions}, sys.stdout)


if __name__ == "__main__":
    main()
