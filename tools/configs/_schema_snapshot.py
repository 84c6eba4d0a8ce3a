"""The snapshot back-end's schema pass: one config table in, pydantic's verdict out.

:class:`SnapshotSchema` is the snapshot's equivalent of ``RLConfig.model_validate`` /
``SFTConfig.model_validate``: :mod:`tools.configs._schema_prepass` reshapes the table as pydantic's
before-validators and lax mode would, ``jsonschema`` (Draft 2020-12) checks it against the
shipped schema, :mod:`tools.configs._rules` runs the model validators JSON Schema cannot
express on the table with defaults filled in, and the findings are put in pydantic's order
(declared fields in definition order, extra keys last). The hosted pipeline around it
(set-aside blocks, hosted rejections) is :mod:`tools.configs._schema_pipeline`, shared with the real
back-end.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from tools.configs import _schema_export
from tools.configs._rules import Outcome, run_validators
from tools.configs._schema_export import SNAPSHOT_DIR, load_snapshot
from tools.configs._schema_findings import Finding, Mode, PassResult
from tools.configs._schema_index import SchemaIndex, json_type
from tools.configs._schema_plugins import env_findings, unknown_ids
from tools.configs._schema_prepass import Prepass, Rejected, fill_defaults


class SnapshotSchema:
    """The shipped schema of one mode, with its validator built once."""

    def __init__(self, schema: dict[str, Any], facts: dict[str, Any], plugins: dict[str, Any] | None = None,
                 commit: str = "") -> None:
        self.schema = schema
        self.commit = commit
        self.index = SchemaIndex(schema)
        self.facts = facts
        self.plugins = plugins or {}
        self.validator = Draft202012Validator(schema)

    def validate(self, data: dict[str, Any], rules: bool = True) -> PassResult:
        """Validate one config table (already hosted-normalized). ``rules=False`` leaves out
        the validator mirrors, to measure what JSON Schema alone says.
        Never raises for bad input."""
        prepass = Prepass(self.index)
        try:
            prepared = prepass.prepare(data)
        except Rejected as rejected:
            return PassResult(errors=[rejected.finding])
        if not isinstance(prepared, dict):
            return PassResult(errors=[Finding((), "the config must be a table", "schema:type", kind="model_type")])
        findings = []
        for error in self.validator.iter_errors(prepared):
            findings.extend(self._convert(error, prepared))
        findings = _dedupe(findings) + prepass.errors
        try:
            findings += env_findings(prepared, self.index, self.plugins, [f.loc for f in findings])
        except Rejected as rejected:
            return PassResult(errors=[rejected.finding])
        resolved, fields_set = fill_defaults(prepared, self.index)
        outcome = Outcome()
        if rules:
            outcome = run_validators(resolved, fields_set, self.index, self.facts, [f.loc for f in findings])
        findings += outcome.findings
        findings.sort(key=lambda f: self.index.order_key(f.loc, prepared))
        remarks = unknown_ids(prepared, self.index, self.plugins, self.commit or "its schema commit")
        return PassResult(errors=findings, resolved=None if findings else resolved, warnings=outcome.warnings,
                          remarks=remarks)

    # ----------------------------------------------------------------------------------

    def _convert(self, error: ValidationError, data: Any) -> list[Finding]:
        loc = tuple(error.absolute_path)
        keyword = error.validator
        # Errors of a validator run always carry their schema node and keyword value (Unset only before).
        schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
        expected: Any = error.validator_value
        if keyword == "anyOf":
            return self._any_of(error, data)
        if keyword == "additionalProperties" and isinstance(error.instance, dict):
            declared = schema.get("properties", {})
            patterns = schema.get("patternProperties", {})
            extras = [k for k in error.instance if k not in declared and not any(re.search(p, k) for p in patterns)]
            where = f"[{_dotted(loc)}]" if loc else "the top level"
            return [Finding((*loc, k), f"unknown key {k!r} in {where}: extra keys are not permitted",
                            "schema:additionalProperties", kind="extra_forbidden") for k in extras]
        if keyword == "required" and isinstance(error.instance, dict):
            tag = schema.get("x-discriminator")
            missing = [k for k in expected if k not in error.instance]
            if tag is not None and tag in missing:
                return [Finding(loc, f"{tag!r} is not set, so the kind of [{_dotted(loc)}] is unknown",
                                "schema:discriminator", kind="union_tag_not_found")]
            return [Finding((*loc, k), f"{k!r} is required", "schema:required", kind="missing") for k in missing]
        if keyword in ("enum", "const") and loc:
            parent = self.node_at(loc[:-1], data)
            if parent is not None and self.index.deref(parent).get("x-discriminator") == loc[-1]:
                allowed = ", ".join(repr(v) for v in expected) if keyword == "enum" else ""
                return [Finding(loc[:-1], f"{loc[-1]} = {error.instance!r} is not one of {allowed}",
                                "schema:discriminator", kind="union_tag_invalid")]
        if keyword == "not" and error.schema_path and "propertyNames" in error.schema_path:
            names = sorted(k for k in error.instance) if isinstance(error.instance, dict) else [error.instance]
            return [Finding(loc, f"env_vars cannot set launcher-managed vars {names!r}: the launcher sets them",
                            "prime_rl.configs.shared.reject_protected_env_vars",
                            source="prime_rl/configs/shared.py reject_protected_env_vars")]
        return [Finding(loc, _message(error), f"schema:{keyword}", kind=f"schema_{keyword}")]

    def _any_of(self, error: ValidationError, data: Any) -> list[Finding]:
        """A union failed: when only one member takes this kind of value (``X | None`` given a
        table), report that member's own errors, as pydantic does; else one finding."""
        members: Any = error.validator_value
        kind = json_type(error.instance)
        fitting = [i for i, m in enumerate(members) if self.index.fits(self.index.deref(m), error.instance, kind)]
        if not fitting and kind != "null":  # ``X | None`` given neither: report X's own error
            fitting = [i for i, m in enumerate(members) if self.index.deref(m).get("type") != "null"]
        if len(fitting) == 1:
            sub = [e for e in error.context or () if e.relative_schema_path and e.relative_schema_path[0] == fitting[0]]
            if sub:
                out: list[Finding] = []
                for e in sub:
                    out.extend(self._convert(e, data))
                return out
        return [Finding(tuple(error.absolute_path), _message(error), "schema:anyOf", kind="schema_anyOf")]

    def node_at(self, loc: Sequence[str | int], data: Any) -> dict[str, Any] | None:
        """The schema node of the value at ``loc`` in ``data``: ``$ref`` followed and an
        optional (``X | None``) resolved to ``X`` for a table, a tagged union left whole."""
        node: dict[str, Any] = self.schema
        value = data
        for seg in loc:
            child = self.index.child(node, value, seg)
            if child is None:
                return None
            node, value = child, _child_value(value, seg)
        node = self.index.deref(node)
        for member in node.get("anyOf", ()):
            member = self.index.deref(member)
            if self.index.fits(member, value):
                return member
        return node


def _child_value(value: Any, seg: str | int) -> Any:
    """``value[seg]`` of a table or a list, else None."""
    if isinstance(value, dict):
        return value.get(seg)
    if isinstance(value, list) and isinstance(seg, int) and 0 <= seg < len(value):
        return value[seg]
    return None


def _dotted(loc: Sequence[str | int]) -> str:
    return Finding(tuple(loc), "", "").path


def _message(error: ValidationError) -> str:
    where = _dotted(tuple(error.absolute_path)) or "the config"
    keyword = error.validator
    value: Any = error.validator_value
    kind = json_type(error.instance)
    if keyword == "type":
        wanted = value if isinstance(value, str) else " or ".join(value)
        return f"{where} must be {_article(wanted)}, not {_article(kind)}"
    if keyword in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}[keyword]
        return f"{where} must be {op} {value}"
    if keyword in ("enum", "const"):
        allowed = value if keyword == "enum" else [value]
        return f"{where} must be one of {', '.join(repr(v) for v in allowed)}"
    if keyword == "minItems":
        return f"{where} needs at least {value} item(s)"
    if keyword == "anyOf":
        return f"{where} has a value of the wrong kind ({kind})"
    return f"{where}: {error.message}"


def _article(kind: str) -> str:
    names = {"object": "a table", "array": "a list", "string": "a string", "integer": "an integer",
             "number": "a number", "boolean": "a boolean", "null": "null (\"None\")"}
    return names.get(kind, kind)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[Any, ...]] = set()
    out = []
    for f in findings:
        key = (f.loc, f.rule, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


@functools.lru_cache(maxsize=2)
def snapshot_schema(mode: Mode) -> SnapshotSchema:
    """The shipped schema of ``mode``, loaded and compiled once per process."""
    shipped = _shipped()
    return SnapshotSchema(shipped[mode], shipped["metadata"]["facts"], shipped["metadata"].get("plugins"),
                          str(shipped["metadata"].get("schema_commit") or ""))


@functools.lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    return load_snapshot(SNAPSHOT_DIR)


@functools.lru_cache(maxsize=1)
def union_tags() -> frozenset[str]:
    """Every tag of a discriminated union in the shipped schemas (``single_node``, ``adamw``,
    ``nccl``...), for :func:`tools.configs._schema_findings.key_path`."""
    tags: set[str] = set()
    for mode in ("rl", "sft"):
        for node in _schema_export.schemas(_shipped()[mode]):
            tag = node.get("x-discriminator")
            if tag is not None:
                tags.update(v for v in node["properties"][tag]["enum"] if isinstance(v, str))
    return frozenset(tags)


def snapshot_metadata() -> dict[str, Any]:
    """``metadata.json`` of the shipped snapshot (schema commit, versions, facts)."""
    return _shipped()["metadata"]
