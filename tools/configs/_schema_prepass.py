"""What pydantic does to a config before (and around) type checking, for the snapshot back-end.

JSON Schema checks a value as it is; pydantic first reshapes it. :func:`prepare` applies, on
a copy and in pydantic's order (a model's before-validators, last defined first, then each
field's own before-validators, then the field's value, recursively):

- the model before-validators named in the schema's ``x-before`` annotations (see
  :data:`MODEL_BEFORE`): ``BaseConfig``'s three (``"None"`` strings to null, string values of
  dict fields to numbers/booleans, the default tag of a discriminated union), RLConfig's
  propagation of the shared top-level blocks (:mod:`tools.configs._schema_shared`), SFTConfig's
  deployment and inference-model normalization, VllmConfig's pass-through keys;
- the field before-validators of ``x-field-before`` (``full_offload = true`` -> a table);
- validation aliases (``x-aliases``: ``num_eval_gpus`` for ``num_infer_gpus``);
- pydantic's lax coercion of scalars (:func:`coerce`): ``"20"`` and ``128.0`` to an integer,
  ``"1e-5"`` to a number, ``"yes"``/``1`` to a boolean; strings are never made from numbers.

A before-validator that raises (the shared-block conflict check) stops everything, as in
pydantic: :func:`prepare` raises :class:`Rejected` with the finding.

:func:`fill_defaults` then gives the rules a fully populated copy (every default filled in,
along the chosen union members) and records which keys the user set (pydantic's
``model_fields_set``), which some validators read.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

from tools.configs._schema_findings import Finding
from tools.configs._schema_index import SchemaIndex, json_type
from tools.configs._schema_shared import propagate_shared_blocks

_INT = re.compile(r"[+-]?\d+(?:_\d+)*(?:\.0+)?")
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


class Rejected(Exception):
    """A before-validator refused the config, or would crash on it (pydantic lets a
    ``TypeError`` through: the whole validation fails); ``finding`` is the one error reported."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


class ModelRejected(Exception):
    """A model before-validator raised ``ValueError``: an error on that model only."""

    def __init__(self, message: str, source: str) -> None:
        super().__init__(message)
        self.message = message
        self.source = source


def plugin_table(value: Any, what: str) -> dict[str, Any]:
    """What verifiers does to read a plugin table (``dict(value)``, in
    ``resolve_env_config`` and ``narrow_plugin_field``): the table, or :class:`ModelRejected`
    (a string: ``ValueError``, an error on the model that holds it) or :class:`Rejected` (a
    bool or a number: ``TypeError``, which pydantic does not catch: the validation crashes)."""
    try:
        return dict(value)
    except ValueError:
        raise ModelRejected(f"{what} must be a table, not {type(value).__name__}",
                            "verifiers/v1/utils/loaders.py resolve_env_config / narrow_plugin_field") from None
    except TypeError as exc:
        raise Rejected(Finding((), f"{what} = {value!r} crashes the schema's validation (TypeError: {exc})",
                               "schema:exception", kind="exception")) from None


# --------------------------------------------------------------------------------------
# Model before-validators (by the name the export records in ``x-before``)
# --------------------------------------------------------------------------------------

BeforeFn = Callable[[dict[str, Any], dict[str, Any], "Prepass"], dict[str, Any]]


def _none_str_to_none(value: dict[str, Any], node: dict[str, Any], _: Prepass) -> dict[str, Any]:
    """pydantic_config BaseConfig._none_str_to_none: a field whose value is the string
    ``"None"`` is null (how TOML spells null)."""
    for key, field in value.items():
        if field == "None":
            value[key] = None
    return value


def _coerce_dict_str_values(value: dict[str, Any], node: dict[str, Any], prepass: Prepass) -> dict[str, Any]:
    """pydantic_config BaseConfig._coerce_dict_str_values: a dict-typed field (not
    ``dict[str, str]``) whose values are all strings gets them read as bool/int/float."""
    for name, prop in prepass.index.properties(node).items():
        target = prepass.index.deref(prop)
        members = [prepass.index.deref(m) for m in target.get("anyOf", ())]
        target = next((m for m in members if m.get("type") == "object"), target)
        if target.get("type") != "object" or "properties" in target or "x-model" in target:
            continue
        if target.get("additionalProperties") == {"type": "string"}:
            continue
        field = value.get(name)
        if isinstance(field, dict) and field and all(isinstance(v, str) for v in field.values()):
            value[name] = {k: _coerce_cli_string(v) for k, v in field.items()}
    return value


def _coerce_cli_string(text: str) -> bool | int | float | str:
    """pydantic_config's ``_coerce_str_value``: true/false, an exact integer, a float
    (not nan/inf, not zero-padded integers such as ``007``), else the string."""
    if text.lower() == "true":
        return True
    if text.lower() == "false":
        return False
    try:
        if str(int(text)) == text:
            return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    if math.isnan(number) or text in ("inf", "-inf", "+inf"):
        return text
    if text[:1].isdigit() and text != str(number) and not any(c in text for c in "eE."):
        return text
    return number


def _default_discriminator_types(value: dict[str, Any], node: dict[str, Any], prepass: Prepass) -> dict[str, Any]:
    """pydantic_config BaseConfig._default_discriminator_types: a table given for a field whose
    default is a model with a ``type`` gets that type when it names none."""
    for name, prop in prepass.index.properties(node).items():
        tag = prop.get("x-default-type")
        field = value.get(name)
        if tag is not None and isinstance(field, dict) and "type" not in field:
            field["type"] = tag  # in place, as pydantic does: a table shared by propagation sees it too
    return value


def _sft_normalize_deployment(value: dict[str, Any], node: dict[str, Any], _: Prepass) -> dict[str, Any]:
    """prime_rl/configs/sft.py SFTConfig.normalize_deployment: a multi_node deployment drops
    ``num_train_gpus``/``num_infer_gpus``."""
    deployment = value.get("deployment")
    if isinstance(deployment, dict) and deployment.get("type") == "multi_node":
        deployment.pop("num_train_gpus", None)
        deployment.pop("num_infer_gpus", None)
    return value


def _sft_propagate_model_to_inference(value: dict[str, Any], node: dict[str, Any], _: Prepass) -> dict[str, Any]:
    """prime_rl/configs/sft.py SFTConfig.propagate_model_to_inference: ``inference.vllm.model``
    defaults to ``model.name``."""
    inference, model = value.get("inference"), value.get("model")
    name = model.get("name") if isinstance(model, dict) else None
    if isinstance(inference, dict) and name:
        vllm = inference.setdefault("vllm", {})
        if isinstance(vllm, dict):
            vllm.setdefault("model", name)
    return value


def _vllm_extra_values(value: dict[str, Any], node: dict[str, Any], prepass: Prepass) -> dict[str, Any]:
    """prime_rl/configs/inference.py VllmConfig.parse_extra_values: keys that are not declared
    fields are vLLM pass-through arguments: ``-`` becomes ``_`` and a string value is read as
    JSON when it parses (so ``max-model-len = "abc"`` lands on the typed ``max_model_len``)."""
    declared = prepass.index.properties(node)
    for key in [k for k in value if k not in declared]:
        field = value.pop(key)
        if isinstance(field, str):
            try:
                field = json.loads(field)
            except ValueError:
                pass
        value[key.replace("-", "_")] = field
    return value


def _shared_blocks(value: dict[str, Any], node: dict[str, Any], _: Prepass) -> dict[str, Any]:
    """prime_rl/configs/rl.py RLConfig.auto_setup_shared_configs (see :mod:`tools.configs._schema_shared`)."""
    problem = propagate_shared_blocks(value)
    if problem is not None:
        raise Rejected(Finding((), problem, "prime_rl.configs.rl.RLConfig.auto_setup_shared_configs",
                               source="prime_rl/utils/validation.py propagate_shared_fields"))
    return value


def _resolve_env(value: dict[str, Any], node: dict[str, Any], _: Prepass) -> dict[str, Any]:
    """prime_rl/configs/orchestrator.py EnvConfig._resolve_env (verifiers resolve_env_field): the
    env is read as a table before anything else; what it then narrows to is the taskset's
    (:mod:`tools.configs._schema_plugins`)."""
    env = value.get("env")
    if env is not None and not isinstance(env, dict):
        value["env"] = plugin_table(env, "env")
    return value


#: Model before-validators the snapshot mirrors, by the name the export records.
MODEL_BEFORE: dict[str, BeforeFn] = {
    "prime_rl.configs.orchestrator.EnvConfig._resolve_env": _resolve_env,
    "pydantic_config.cli.BaseConfig._none_str_to_none": _none_str_to_none,
    "pydantic_config.cli.BaseConfig._coerce_dict_str_values": _coerce_dict_str_values,
    "pydantic_config.cli.BaseConfig._default_discriminator_types": _default_discriminator_types,
    "prime_rl.configs.rl.RLConfig.auto_setup_shared_configs": _shared_blocks,
    "prime_rl.configs.sft.SFTConfig.normalize_deployment": _sft_normalize_deployment,
    "prime_rl.configs.sft.SFTConfig.propagate_model_to_inference": _sft_propagate_model_to_inference,
    "prime_rl.configs.inference.VllmConfig.parse_extra_values": _vllm_extra_values,
}

#: Model before-validators left alone, with the reason. (The verifiers validators inside an
#: environment source's ``env`` are not in the snapshot at all: the export loosens ``env``.)
MODEL_BEFORE_NOT_MIRRORED: dict[str, str] = {}


def _full_offload(value: Any) -> Any:
    """prime_rl/configs/trainer.py _normalize_optimizer_in_backward_offload: true -> {}, false -> null."""
    if value is True:
        return {}
    if value is False:
        return None
    return value


#: Field before-validators (``x-field-before``) the snapshot mirrors.
FIELD_BEFORE: dict[str, Callable[[Any], Any]] = {
    "prime_rl.configs.trainer._normalize_optimizer_in_backward_offload": _full_offload,
}


# --------------------------------------------------------------------------------------
# Lax coercion (pydantic's lax mode for Python input: the TOML reading)
# --------------------------------------------------------------------------------------


def coerce(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` converted the way pydantic's lax mode converts it for ``schema``'s type, or
    ``value`` unchanged when pydantic would not convert it (the JSON Schema check then
    reports it). Integers: from a bool, a float with no fractional part, a string of digits
    (``_`` separators, a ``.0`` tail and surrounding spaces allowed; not ``2e1``). Numbers:
    from a bool or a numeric string. Booleans: from 0/1 and the strings
    true/false/yes/no/on/off/t/f/y/n/1/0 (any case, no surrounding spaces).
    """
    types = schema.get("type")
    types = [types] if isinstance(types, str) else list(types or ())
    if "integer" in types and not isinstance(value, int):
        converted = _to_int(value)
        if converted is not None:
            return converted
    if "integer" in types and isinstance(value, bool):
        return int(value)
    if "number" in types and not isinstance(value, (int, float)) or ("number" in types and isinstance(value, bool)):
        as_float = _to_float(value)
        if as_float is not None:
            return as_float
    if "boolean" in types and not isinstance(value, bool):
        converted = _to_bool(value)
        if converted is not None:
            return converted
    return value


def _to_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT.fullmatch(value.strip()):
        return int(value.strip().split(".")[0])
    return None


def _to_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _to_bool(value: Any) -> bool | None:
    if isinstance(value, str):
        text = value.lower()  # no stripping: pydantic refuses " yes"
        return True if text in _TRUE else False if text in _FALSE else None
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    return None


# --------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------


class Prepass:
    """Applies before-validators, aliases and lax coercion along one schema.

    ``errors``: what before-validators refused on one model (pydantic then checks nothing else
    inside that model, and the rest of the config goes on)."""

    def __init__(self, index: SchemaIndex) -> None:
        self.index = index
        self.unknown_validators: set[str] = set()
        self.errors: list[Finding] = []

    def prepare(self, data: dict[str, Any]) -> dict[str, Any]:
        """A reshaped copy of ``data`` (the user's config is never changed). Tables are
        changed in place within the copy, as pydantic changes its input: a table the shared
        blocks put in two places is one table, and both places see a tag added to it.

        Raises :class:`Rejected` when a before-validator refuses the whole config."""
        self.errors = []
        return self.value(copy_tree(data), self.index.root, ())

    def value(self, value: Any, node: dict[str, Any] | None, loc: tuple[str | int, ...]) -> Any:
        if node is None:
            return value
        chosen = self.index.select(node, value)
        if chosen is None:
            return value
        if "x-model" in chosen:
            return self.model(value, chosen, loc) if isinstance(value, dict) else value
        kind = json_type(value)
        if kind == "array" and isinstance(chosen.get("items"), dict):
            return [self.value(item, chosen["items"], (*loc, i)) for i, item in enumerate(value)]
        if kind == "object" and isinstance(chosen.get("additionalProperties"), dict):
            return {k: self.value(v, chosen["additionalProperties"], (*loc, k)) for k, v in value.items()}
        if kind in ("object", "array"):
            return value
        return coerce(value, chosen)

    def model(self, value: dict[str, Any], node: dict[str, Any], loc: tuple[str | int, ...]) -> dict[str, Any]:
        for name in node.get("x-before", ()):
            fn = MODEL_BEFORE.get(name)
            if fn is None:
                if name not in MODEL_BEFORE_NOT_MIRRORED:
                    self.unknown_validators.add(name)
                continue
            try:
                value = fn(value, node, self)
            except ModelRejected as rejected:
                self.errors.append(Finding(loc, rejected.message, name, kind="value_error",
                                           source=rejected.source))
                return value
        props = node.get("properties", {})
        for name, prop in props.items():
            for alias in prop.get("x-aliases", ()):
                if name not in value and alias in value:
                    value[name] = value.pop(alias)
        for name, prop in props.items():
            if name not in value:
                continue
            field = value[name]
            for fn_name in prop.get("x-field-before", ()):
                field_fn = FIELD_BEFORE.get(fn_name)
                if field_fn is None:
                    self.unknown_validators.add(fn_name)
                else:
                    field = field_fn(field)
            value[name] = self.value(field, prop, (*loc, name))
        return value


def fill_defaults(data: Any, index: SchemaIndex) -> tuple[Any, dict[int, frozenset[str]]]:
    """A copy of ``data`` (already prepared) with every default filled in, and
    ``{id(table): keys the user set}`` for each model table (pydantic's ``model_fields_set``)."""
    fields_set: dict[int, frozenset[str]] = {}
    out = _fill(copy_tree(data), index.root, index, fields_set, False)
    return out, fields_set


def copy_tree(value: Any) -> Any:
    """A deep copy of nested dicts/lists that shares nothing (unlike ``copy.deepcopy``, which
    keeps two references to one table as one table)."""
    if isinstance(value, dict):
        return {k: copy_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_tree(v) for v in value]
    return value


def _fill(value: Any, node: dict[str, Any] | None, index: SchemaIndex, fields_set: dict[int, frozenset[str]],
          defaulted: bool) -> Any:
    if node is None:
        return value
    chosen = index.select(node, value)
    if chosen is None:
        return value
    if "x-model" in chosen and isinstance(value, dict):
        # A model made from its default has no fields set (pydantic: ``Model()``).
        fields_set[id(value)] = frozenset() if defaulted else frozenset(value)
        for name, prop in chosen.get("properties", {}).items():
            filled = defaulted
            if name not in value:
                default = prop["default"] if "default" in prop else index.deref(prop).get("default", _MISSING)
                if default is _MISSING:
                    continue
                value[name] = copy_tree(default)
                filled = True
            value[name] = _fill(value[name], prop, index, fields_set, filled)
        return value
    if isinstance(value, list) and isinstance(chosen.get("items"), dict):
        return [_fill(v, chosen["items"], index, fields_set, defaulted) for v in value]
    if isinstance(value, dict) and isinstance(chosen.get("additionalProperties"), dict):
        return {k: _fill(v, chosen["additionalProperties"], index, fields_set, defaulted) for k, v in value.items()}
    return value


_MISSING = object()
