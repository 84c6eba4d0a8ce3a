"""Schema lint: every tool of the registry against the rules of each target host.

One lint test per target over the whole registry (OpenAI strict function calling,
Anthropic ``input_schema``, MCP ``tools/list`` with JSON Schema 2020-12), and tests that
each linter really catches the mistakes it is there for.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field

from skill import registry

# -- OpenAI strict mode ---------------------------------------------------------------------

#: Keywords OpenAI accepts in strict schemas (structured outputs "supported schemas").
OPENAI_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "$ref", "$defs",
    "description", "items", "pattern", "format", "multipleOf", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minItems", "maxItems",
})
JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
OPENAI_MAX_DEPTH = 10
OPENAI_MAX_PROPERTIES = 5000


def openai_strict_problems(schema: dict[str, Any]) -> list[str]:
    """Violations of OpenAI strict-mode rules in a function's ``parameters`` schema."""
    problems: list[str] = []
    counts = {"properties": 0}
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("$: the root must be a plain object schema (type: object, no anyOf)")

    def walk(node: Any, where: str, depth: int) -> None:
        if not isinstance(node, dict):
            problems.append(f"{where}: a schema must be an object")
            return
        if depth > OPENAI_MAX_DEPTH:
            problems.append(f"{where}: nested deeper than {OPENAI_MAX_DEPTH} levels")
        for key in sorted(set(node) - OPENAI_KEYWORDS):
            problems.append(f"{where}: unsupported keyword {key!r}")
        if "$ref" in node and len(node) > 1:
            problems.append(f"{where}: $ref cannot have sibling keywords {sorted(set(node) - {'$ref'})}")
        kinds = node.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []
        for kind in kinds:
            if kind not in JSON_TYPES:
                problems.append(f"{where}: unknown type {kind!r}")
        if not kinds and not {"anyOf", "$ref", "enum", "const"} & set(node):
            problems.append(f"{where}: no type (free-form value)")
        if "object" in kinds or "properties" in node:
            props = node.get("properties")
            if not isinstance(props, dict):
                problems.append(f"{where}: object without properties (free-form dict)")
                props = {}
            if node.get("additionalProperties") is not False:
                problems.append(f"{where}: additionalProperties must be false")
            if set(node.get("required", [])) != set(props) or len(node.get("required", [])) != len(props):
                missing = sorted(set(props) - set(node.get("required", [])))
                problems.append(f"{where}: every property must be required (missing: {missing})")
            counts["properties"] += len(props)
            for name, sub in props.items():
                walk(sub, f"{where}.{name}", depth + 1)
        if "array" in kinds:
            if "items" not in node:
                problems.append(f"{where}: array without items")
            else:
                walk(node["items"], f"{where}[]", depth + 1)
        for i, sub in enumerate(node.get("anyOf", [])):
            walk(sub, f"{where}|{i}", depth)
        for name, sub in node.get("$defs", {}).items():
            walk(sub, f"$defs.{name}", 1)

    walk(schema, "$", 0)
    if counts["properties"] > OPENAI_MAX_PROPERTIES:
        problems.append(f"$: more than {OPENAI_MAX_PROPERTIES} properties in total")
    return problems


def openai_tool_problems(tool: dict[str, Any]) -> list[str]:
    function = tool.get("function", {})
    name = function.get("name", "")
    problems = [f"{name}: {p}" for p in openai_strict_problems(function.get("parameters", {}))]
    if tool.get("type") != "function" or function.get("strict") is not True:
        problems.append(f"{name}: must be a strict function tool")
    if not OPENAI_NAME.match(name):
        problems.append(f"{name}: name must match {OPENAI_NAME.pattern}")
    if not function.get("description"):
        problems.append(f"{name}: no description")
    return problems


# -- Anthropic ------------------------------------------------------------------------------

ANTHROPIC_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def anthropic_tool_problems(tool: dict[str, Any]) -> list[str]:
    """Violations of the Messages API ``tools`` rules for one client tool."""
    name = tool.get("name", "")
    problems = []
    if set(tool) - {"name", "description", "input_schema", "cache_control", "strict"}:
        problems.append(f"{name}: unknown tool keys {sorted(set(tool) - {'name', 'description', 'input_schema'})}")
    if not ANTHROPIC_NAME.match(name):
        problems.append(f"{name}: name must match {ANTHROPIC_NAME.pattern}")
    if not tool.get("description"):
        problems.append(f"{name}: no description")
    schema = tool.get("input_schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return [*problems, f"{name}: input_schema must have type: object at the root"]
    for keyword in ("anyOf", "oneOf", "allOf"):
        if keyword in schema:
            problems.append(f"{name}: input_schema does not support {keyword} at the top level")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        problems.append(f"{name}: not a valid JSON Schema: {exc.message}")
    return problems


# -- MCP ------------------------------------------------------------------------------------

MCP_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
MCP_ANNOTATIONS = {"title": str, "readOnlyHint": bool, "destructiveHint": bool, "idempotentHint": bool,
                   "openWorldHint": bool}


def mcp_tool_problems(tool: dict[str, Any]) -> list[str]:
    """Violations of the MCP ``Tool`` definition (2025-06-18 / 2025-11-25) for one tool."""
    import mcp_types

    name = tool.get("name", "")
    problems = []
    if not MCP_NAME.match(name):
        problems.append(f"{name}: name must match {MCP_NAME.pattern}")
    if not tool.get("description"):
        problems.append(f"{name}: no description")
    for key in ("inputSchema", "outputSchema"):
        if key == "outputSchema" and key not in tool:  # optional in MCP; ours are left out (registry.mcp_tools)
            continue
        schema = tool.get(key)
        if not isinstance(schema, dict) or schema.get("type") != "object":
            problems.append(f"{name}: {key} must have type: object at the root")
            continue
        if schema.get("$schema", "https://json-schema.org/draft/2020-12/schema") != \
                "https://json-schema.org/draft/2020-12/schema":
            problems.append(f"{name}: {key} declares a dialect other than 2020-12")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            problems.append(f"{name}: {key} is not valid JSON Schema 2020-12: {exc.message}")
    annotations = tool.get("annotations", {})
    for key, value in annotations.items():
        if key not in MCP_ANNOTATIONS or not isinstance(value, MCP_ANNOTATIONS[key]):
            problems.append(f"{name}: bad annotation {key}={value!r}")
    if annotations.get("readOnlyHint") and annotations.get("destructiveHint"):
        problems.append(f"{name}: a read-only tool cannot be destructive")
    try:
        mcp_types.Tool.model_validate(tool)
    except Exception as exc:  # noqa: BLE001 - reported as a lint problem
        problems.append(f"{name}: the SDK's Tool model refuses it: {exc}")
    return problems


# -- the registry against each target ---------------------------------------------------------


def _report(problems: list[str]) -> str:
    return "\n".join(problems)


def test_openai_strict_rules_hold_for_every_tool() -> None:
    tools = registry.openai_tools()
    assert len(tools) == len(registry.TOOLS)
    problems = [p for tool in tools for p in openai_tool_problems(tool)]
    assert not problems, _report(problems)
    responses = registry.openai_tools(api="responses")
    assert [t["name"] for t in responses] == [t["function"]["name"] for t in tools]
    assert all(t["type"] == "function" and t["strict"] is True for t in responses)


def test_anthropic_input_schema_rules_hold_for_every_tool() -> None:
    tools = registry.anthropic_tools()
    assert len(tools) == len(registry.TOOLS)
    problems = [p for tool in tools for p in anthropic_tool_problems(tool)]
    assert not problems, _report(problems)


def test_mcp_rules_hold_for_every_tool() -> None:
    import mcp_types
    from mcp_types import methods
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    tools = registry.mcp_tools()
    names = [t["name"] for t in tools]
    assert len(set(names)) == len(names) == len(registry.TOOLS)
    problems = [p for tool in tools for p in mcp_tool_problems(tool)]
    assert not problems, _report(problems)
    for version in HANDSHAKE_PROTOCOL_VERSIONS:  # the SDK's own per-version wire check
        wire = methods.serialize_server_result("tools/list", version, {"tools": tools})
        assert len(wire["tools"]) == len(tools)
    mcp_types.ListToolsResult(tools=[mcp_types.Tool.model_validate(t) for t in tools])


def test_every_tool_has_a_documented_input_and_output() -> None:
    """Every input property and output field carries a description (units, defaults)."""
    missing = []
    for spec in registry.TOOLS:
        for name, prop in registry.input_schema(spec.name)["properties"].items():
            if not prop.get("description"):
                missing.append(f"{spec.name} input {name}")
        for name, info in spec.output_model.model_fields.items():
            if not info.description:
                missing.append(f"{spec.name} output {name}")
        assert spec.function.__name__ == spec.target.rsplit(":", 1)[1], spec.name
    assert not missing, "\n".join(missing)


def test_every_tool_takes_its_input_and_returns_its_own_result_model() -> None:
    """``mf_list_examples`` takes ``ListExamplesInput`` and returns ``ListExamplesResult``: one result
    model per tool (mf_resume_run's is a ResumeRunResult, not mf_dispatch_run's model)."""
    wrong = []
    for spec in registry.TOOLS:
        stem = "".join(word.capitalize() for word in spec.name.removeprefix("mf_").split("_"))
        if (spec.input_model.__name__, spec.output_model.__name__) != (f"{stem}Input", f"{stem}Result"):
            wrong.append(f"{spec.name}: {spec.input_model.__name__} -> {spec.output_model.__name__}")
    assert not wrong, "\n".join(wrong)
    assert len({spec.output_model for spec in registry.TOOLS}) == len(registry.TOOLS)


# -- the linters catch what they are for --------------------------------------------------------


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


@pytest.mark.parametrize(("schema", "expected"), [
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
     "additionalProperties must be false"),
    ({**_obj(a={"type": "string"}), "required": []}, "every property must be required"),
    (_obj(meta={"type": "object"}), "free-form dict"),
    (_obj(meta={"type": "object", "properties": {}, "additionalProperties": True, "required": []}),
     "additionalProperties must be false"),
    (_obj(n={"type": "integer", "default": 3}), "unsupported keyword 'default'"),
    (_obj(s={"type": "string", "minLength": 1}), "unsupported keyword 'minLength'"),
    (_obj(x={}), "free-form value"),
    (_obj(tags={"type": "array"}), "array without items"),
    (_obj(sub={"$ref": "#/$defs/S", "description": "d"}), "$ref cannot have sibling"),
    ({"anyOf": [_obj(a={"type": "string"})], "type": "object"}, "root must be a plain object"),
    (_obj(a={"oneOf": [{"type": "string"}, {"type": "integer"}]}), "unsupported keyword 'oneOf'"),
])
def test_openai_lint_catches(schema: dict[str, Any], expected: str) -> None:
    assert any(expected in p for p in openai_strict_problems(schema)), openai_strict_problems(schema)


def test_anthropic_and_mcp_lints_catch() -> None:
    bad_root = {"name": "mf x", "description": "", "input_schema": {"anyOf": [{"type": "object"}]}}
    problems = anthropic_tool_problems(bad_root)
    assert any("name must match" in p for p in problems)
    assert any("no description" in p for p in problems)
    assert any("type: object at the root" in p for p in problems)
    invalid = {"name": "ok", "description": "d",
               "input_schema": {"type": "object", "properties": {"a": {"type": "text"}}}}
    assert any("not a valid JSON Schema" in p for p in anthropic_tool_problems(invalid))
    tool = {"name": "ok", "description": "d", "inputSchema": {"type": "object", "properties": {"a": {"type": 5}}},
            "outputSchema": {"type": "array"}, "annotations": {"readOnlyHint": True, "destructiveHint": True,
                                                                 "idempotentHint": "yes"}}
    problems = mcp_tool_problems(tool)
    assert any("inputSchema is not valid JSON Schema 2020-12" in p for p in problems)
    assert any("outputSchema must have type: object" in p for p in problems)
    assert any("read-only tool cannot be destructive" in p for p in problems)
    assert any("bad annotation idempotentHint" in p for p in problems)


# -- the normaliser on a model with every shape tools use -----------------------------------------


class _Window(BaseModel):
    """A step window."""

    model_config = ConfigDict(extra="forbid")
    first: int = Field(description="First step.", ge=0)
    last: int | None = Field(default=None, description="Last step; null means the latest.")


class _Sample(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run_id: str = Field(description="Run id.", min_length=5, pattern=r"^[a-z0-9]+$")
    component: str = Field(default="trainer", description="Component name.")
    level: str | None = Field(default=None, description="Minimum level.")
    tail_lines: int = Field(default=200, description="Lines to return.", ge=1, le=2000)
    names: list[str] = Field(default_factory=list, description="Metric names.")
    window: _Window = Field(description="Steps to read.")
    extra_window: _Window | None = Field(default=None, description="Optional second window.")
    windows: list[_Window] = Field(default_factory=list, description="More windows.")
    follow: bool = Field(default=False, description="Keep reading.")


def test_portable_schema_passes_every_target_and_keeps_meaning() -> None:
    schema = registry.portable_schema(_Sample)
    assert not openai_strict_problems(schema), openai_strict_problems(schema)
    assert not anthropic_tool_problems({"name": "t", "description": "d", "input_schema": schema})
    Draft202012Validator.check_schema(schema)
    props = schema["properties"]
    assert "$defs" not in schema and "$ref" not in str(schema)
    assert props["run_id"] == {"type": "string", "description": 'Run id. (at least 5 characters; matching '
                                                                '"^[a-z0-9]+$")'}
    assert props["tail_lines"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert "Default: 200." in props["tail_lines"]["description"]
    assert "minimum 1" in props["tail_lines"]["description"] and "maximum 2000" in props["tail_lines"]["description"]
    assert props["window"]["type"] == "object" and props["window"]["description"] == "Steps to read."
    assert props["window"]["required"] == ["first", "last"]
    assert props["extra_window"]["anyOf"][0]["properties"]["first"]["type"] == "integer"
    assert props["windows"]["anyOf"][0]["items"]["additionalProperties"] is False
    assert props["follow"]["description"] == "Keep reading. Default: false."


class _Loose(BaseModel):
    model_config = ConfigDict(extra="forbid")
    labels: dict[str, str] = Field(default_factory=dict, description="Free-form labels.")


def test_a_free_form_dict_argument_is_refused_loudly() -> None:
    with pytest.raises(ValueError, match="free-form dict"):
        registry.portable_schema(_Loose)
