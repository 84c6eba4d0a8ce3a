"""Navigation of a shipped schema alongside a config: which subschema applies to a value.

The snapshot back-end walks the config and its schema together three times (lax coercion and
before-validators, defaults for the rules, pydantic's error order), so the walking lives here
once. A :class:`SchemaIndex` wraps one shipped schema (``rl`` or ``sft``) and answers:

- :meth:`SchemaIndex.deref`: the target of ``$ref`` (with the referring node's own keywords
  such as ``default`` kept alongside);
- :meth:`SchemaIndex.select`: the member of a union that a value goes to, the way pydantic
  picks it: the tag of a discriminated union (``x-discriminator``), ``null`` for ``None``,
  otherwise the first member whose JSON type fits the value, then the first one that lax
  coercion can reach;
- :meth:`SchemaIndex.order_key`: the position of a key path in pydantic's error order
  (declared fields in definition order, then extra keys in input order, list items by index).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}


def json_type(value: Any) -> str:
    """The JSON Schema type name of a TOML/JSON value (``integer`` and ``number`` apart)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return _JSON_TYPES.get(type(value), "unknown")


class SchemaIndex:
    """One shipped schema (a dict as loaded from ``rl.schema.json``/``sft.schema.json``)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.root = schema
        self.defs: dict[str, Any] = schema.get("$defs", {})
        self._deref: dict[int, dict[str, Any]] = {}

    def deref(self, node: dict[str, Any]) -> dict[str, Any]:
        """``node`` with ``$ref`` followed (repeatedly). The referring node's other keywords
        (``default``, ``description``, ``x-`` annotations) are merged over the target's."""
        key = id(node)
        hit = self._deref.get(key)
        if hit is not None:
            return hit
        out = node
        seen = 0
        while isinstance(out.get("$ref"), str) and seen < 32:
            target = self.defs[out["$ref"].rsplit("/", 1)[-1]]
            extra = {k: v for k, v in out.items() if k != "$ref"}
            out = {**target, **extra} if extra else target
            seen += 1
        self._deref[key] = out
        return out

    def select(self, node: dict[str, Any], value: Any) -> dict[str, Any] | None:
        """The subschema ``value`` is validated against under ``node`` (unions resolved), or
        None when no member applies (an unknown tag, a type no member takes)."""
        node = self.deref(node)
        tag = node.get("x-discriminator")
        if tag is not None:
            if not isinstance(value, dict) or value.get(tag) is None:
                return None
            for rule in node.get("allOf", ()):
                if rule.get("if", {}).get("properties", {}).get(tag, {}).get("const") == value[tag]:
                    return self.deref(rule["then"])
            return None
        members = node.get("anyOf")
        if members is None:
            return node
        kind = json_type(value)
        resolved = [self.deref(m) for m in members]
        for member in resolved:
            if self.fits(member, value, kind):
                return self.select(member, value) if ("anyOf" in member or "x-discriminator" in member) else member
        for member in resolved:
            if kind != "null" and member.get("type") != "null" and "x-discriminator" not in member:
                if set(_types(member)) & {"integer", "number", "boolean"}:
                    return member
        return None

    def fits(self, member: dict[str, Any], value: Any, kind: str | None = None) -> bool:
        """Whether ``value``'s JSON type is one ``member`` takes (no bounds, no coercion)."""
        kind = kind or json_type(value)
        if "x-discriminator" in member:
            return kind == "object"
        if "anyOf" in member:
            return any(self.fits(self.deref(m), value, kind) for m in member["anyOf"])
        if "const" in member:
            return member["const"] == value and json_type(member["const"]) == kind
        if "enum" in member:
            return any(v == value and json_type(v) == kind for v in member["enum"])
        types = _types(member)
        if not types:
            return True
        return kind in types or (kind == "integer" and "number" in types)

    def properties(self, node: dict[str, Any]) -> dict[str, Any]:
        """Declared fields of a model node, in definition order (``{}`` for non-models)."""
        return self.deref(node).get("properties", {})

    def child(self, node: dict[str, Any] | None, value: Any, seg: str | int) -> dict[str, Any] | None:
        """The subschema of ``value[seg]`` under ``node`` (``value`` is the parent value)."""
        if node is None:
            return None
        chosen = self.select(node, value)
        if chosen is None:
            return None
        if isinstance(seg, int):
            items = chosen.get("items")
            return items if isinstance(items, dict) else None
        props = chosen.get("properties", {})
        if seg in props:
            return props[seg]
        extra = chosen.get("additionalProperties")
        return extra if isinstance(extra, dict) else None

    def models(self, data: Any) -> Iterator[tuple[tuple[str | int, ...], dict[str, Any], dict[str, Any]]]:
        """Every model table in ``data``: ``(key path, table, its schema node)``, depth first."""
        yield from self._models(data, self.root, ())

    def _models(self, value: Any, node: dict[str, Any] | None,
                loc: tuple[str | int, ...]) -> Iterator[tuple[tuple[str | int, ...], dict[str, Any], dict[str, Any]]]:
        chosen = self.select(node, value) if node is not None else None
        if chosen is None:
            return
        if isinstance(value, list) and isinstance(chosen.get("items"), dict):
            for i, item in enumerate(value):
                yield from self._models(item, chosen["items"], (*loc, i))
        elif isinstance(value, dict) and "x-model" in chosen:
            yield loc, value, chosen
            for name, prop in chosen.get("properties", {}).items():
                if name in value:
                    yield from self._models(value[name], prop, (*loc, name))
        elif isinstance(value, dict) and isinstance(chosen.get("additionalProperties"), dict):
            for key, item in value.items():
                yield from self._models(item, chosen["additionalProperties"], (*loc, key))

    def order_key(self, loc: Sequence[str | int], data: Any) -> tuple[tuple[int, int], ...]:
        """Sort key of the key path ``loc`` in pydantic's error order for ``data``.

        At each table: a declared field sorts by its definition index, an extra key after all
        declared fields by its position in the input; list items by index; table-valued fields
        (``dict[str, X]``) by input position."""
        key: list[tuple[int, int]] = []
        node: dict[str, Any] | None = self.root
        value = data
        for seg in loc:
            chosen = self.select(node, value) if node is not None else None
            if isinstance(seg, int):
                key.append((0, seg))
            else:
                props = chosen.get("properties", {}) if chosen else {}
                names = list(props)
                if seg in props:
                    key.append((0, names.index(seg)))
                else:
                    keys = list(value) if isinstance(value, dict) else []
                    key.append((1, keys.index(seg) if seg in keys else len(keys)))
            node = self.child(node, value, seg) if node is not None else None
            if isinstance(value, dict):
                value = value.get(seg)
            elif isinstance(value, list) and isinstance(seg, int) and 0 <= seg < len(value):
                value = value[seg]
            else:
                value = None
        return tuple(key)


def _types(member: dict[str, Any]) -> list[str]:
    t = member.get("type")
    if t is None:
        return []
    return [t] if isinstance(t, str) else list(t)
