"""The tool catalogue: one registry served as MCP tools, OpenAI/Anthropic tool specs and CLI.

Each :class:`ToolSpec` names a tool function (``tools.<phase>:<function>``), its
agent-facing name (``mf_`` prefix), a description saying when to use it and when not, and
truthful MCP annotations. Input and output JSON Schemas are generated from the function's
pydantic models and normalised once (:func:`input_schema`) so that the same schema passes
OpenAI strict mode, Anthropic ``input_schema`` and MCP (JSON Schema 2020-12):

- every object has ``additionalProperties: false`` and lists every property in ``required``;
- a property that has a default becomes nullable, its default is written into its
  description, and ``null`` (or omission) means "use the default";
- keywords outside the portable subset (``default``, ``title``, numeric and length bounds,
  ``format``...) are moved into the description; pydantic still enforces them;
- nested models are inlined (no ``$ref``/``$defs``): OpenAI strict mode refuses a ``$ref``
  with sibling keywords and several MCP hosts do not resolve references.

:func:`call_tool` is the single entry point every surface uses: arguments (a dict or a JSON
string) are checked with jsonschema, then by the pydantic model, and a malformed call
returns a :class:`~tools.errors.ToolError` listing each bad field path, never a traceback.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import re
import time
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from tools.errors import FieldProblem, ToolError

#: JSON Schema keywords kept in input schemas (the portable strict-mode subset).
PORTABLE_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "description", "items"}
)
_DESCRIBED_KEYWORDS = {
    "minimum": "minimum {}", "maximum": "maximum {}", "exclusiveMinimum": "greater than {}",
    "exclusiveMaximum": "less than {}", "minLength": "at least {} characters",
    "maxLength": "at most {} characters", "minItems": "at least {} items",
    "maxItems": "at most {} items", "pattern": "matching {}", "format": "format {}",
}


@dataclass(frozen=True)
class ToolSpec:
    """One tool of the catalogue.

    Attributes:
        name: agent-facing name, ``mf_`` + the function name.
        target: ``"tools.<phase>:<function>"`` (the phase module or package re-exports it);
            imported on first use.
        description: when to use it, when not, and what it costs or changes.
        read_only / destructive / idempotent / open_world: MCP tool annotations
            (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``).
        positional: input fields taken as positional CLI arguments.
        long_running: the tool reports progress (downloads, bounded waits).
        image_field: result field holding the path of a PNG the tool wrote; the MCP
            server returns that picture as an image content block.
        hints: terse descriptions of input fields as the model sees them (:func:`model_schema`), beside
            :data:`FIELD_HINTS`; the model's own field descriptions stay for the CLI and OpenAI strict form.
    """

    name: str
    target: str
    description: str
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = True
    open_world: bool = True
    positional: tuple[str, ...] = ()
    long_running: bool = False
    image_field: str | None = None
    hints: Mapping[str, str] = field(default_factory=dict)

    @property
    def command(self) -> str:
        """The CLI subcommand name (``get-run`` for ``mf_get_run``)."""
        return self.name.removeprefix("mf_").replace("_", "-")

    @functools.cached_property
    def function(self) -> Callable[..., Any]:
        """The tool function (imported lazily)."""
        module, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module), attr)

    @functools.cached_property
    def _hints(self) -> dict[str, Any]:
        fn = getattr(self.function, "__wrapped_tool__", self.function)
        return typing.get_type_hints(fn)

    @property
    def input_model(self) -> type[BaseModel]:
        """The pydantic model of the tool's single input argument."""
        (name,) = self._hints.keys() - {"return", "ctx"}
        return self._hints[name]

    @property
    def output_model(self) -> type[BaseModel]:
        """The pydantic model of the tool's result (``ToolError`` aside)."""
        return self._hints["return"]

    def annotations(self) -> dict[str, Any]:
        """MCP ``ToolAnnotations`` as a dict."""
        return {
            "title": self.command.replace("-", " ").capitalize(),
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


def _spec(name: str, phase: str, description: str, **kw: Any) -> ToolSpec:
    return ToolSpec(name=f"mf_{name}", target=f"tools.{phase}:{name}", description=description, **kw)


#: The whole catalogue, in workflow order. Each description says what the tool does, when to call it
#: ("Use ...") and what its result leads to ("Then ..."); details live in SKILL.md's references and in
#: each result's ``fix`` / ``next_step`` / ``next_calls`` (tests/test_registry.py holds them to that).
TOOLS: tuple[ToolSpec, ...] = (
    _spec("preflight", "preflight",
          "Check the API key, owner, API and optional tools. Use first in a session and after an "
          "unauthorized error. Then fix each failed required check by its fix."),
    _spec("list_examples", "configs",
          "List the bundled prime-rl example configs. Use to pick a starting point. Then mf_prepare_config.",
          open_world=False, positional=()),
    _spec("prepare_config", "configs",
          "Copy a bundled example (or a TOML) to a new TOML for hosted runs, validated; never overwrites. Use "
          "instead of writing a config. Then mf_plan_run.",
          read_only=False, idempotent=True, open_world=False, positional=("example", "dest"),
          hints={"example": "example id or TOML path"}),
    _spec("validate_config", "configs",
          "Check a prime-rl TOML for hosted runs: mode, rules, schema, secret values. Use after every edit. "
          "Then fix each error, or mf_plan_run.",
          open_world=False, positional=("config_path",)),
    _spec("list_models", "catalogue",
          "List trainable models and GPU prices. Use to check that a model is offered. Then mf_plan_run."),
    _spec("list_gpus", "catalogue",
          "List GPU types with price per GPU-hour. Use to choose gpu_type. Then mf_plan_run."),
    _spec("list_volumes", "catalogue",
          "List the owner's volumes, or a volume's files under path. Use before passing volume. Then mf_plan_run."),
    _spec("list_teams", "catalogue",
          "List the key's teams and the selected owner. Use on owner_ambiguous. Then ask who pays."),
    _spec("plan_run", "launch",
          "Plan a run, launching nothing: owner, GPUs, price, cost range, steps, secret names; gives plan_id. Use "
          "before every launch and after any change. Then show summary verbatim; mf_dispatch_run.",
          read_only=False, idempotent=False, open_world=True, positional=("config_path",),
          hints={"run_kind": "smoke: <= 20 steps", "acknowledge_unresolved": "only after unresolved_launch"}),
    _spec("dispatch_run", "launch",
          "Launch a plan exactly once; needs a person's approval of this plan. Use once they saw the plan. Then "
          "follow fix on confirmation_required; never retry, it reconciles.",
          read_only=False, destructive=False, idempotent=False, positional=("plan_id",)),
    _spec("stop_run", "launch",
          "Stop a run for good; needs the person's approval. Use only when asked. Then read outcome.",
          read_only=False, destructive=True, idempotent=True, positional=("run_id",)),
    _spec("pause_run", "launch",
          "Pause a RUNNING run (checkpoint; GPUs stop billing); needs approval. Use when asked. Then "
          "mf_resume_run later.",
          read_only=False, destructive=False, idempotent=True, positional=("run_id",)),
    _spec("resume_run", "launch",
          "Resume a PAUSED run as a new billed run, planned and approved like a launch. Use when asked. Then "
          "show the plan; never retry, call again with the same code.",
          read_only=False, destructive=False, idempotent=False, positional=("run_id",)),
    _spec("restart_run", "launch",
          "Restart a RUNNING run from its latest READY checkpoint; needs approval. Use when asked, for a stuck "
          "run. Then mf_wait_for_run.",
          read_only=False, destructive=True, idempotent=False, positional=("run_id",)),
    _spec("list_launches", "launch",
          "List recorded launches and control actions with outcomes. Use first in a new session and after an "
          "ambiguous launch. Then reconcile; never relaunch.",
          open_world=False),
    _spec("get_run", "monitor",
          "Read one run's facts: status, steps, owner, error, secret names. Use for details. Then "
          "mf_check_progress for health.",
          positional=("run_id",)),
    _spec("list_runs", "monitor",
          "List the owner's runs, newest first, paged. Use to find a run id. Then mf_get_run.",
          hints={"status": "e.g. RUNNING"}),
    _spec("check_progress", "monitor",
          "Judge whether a run progresses and learns: steps, errors, env servers, spend. Use when a wait names "
          "it, and every ~15 min. Then follow next_step.",
          positional=("run_id",)),
    _spec("get_spend", "monitor",
          "A run's cost so far beside the plan's estimate. Use when asked about money. Then report any warning.",
          positional=("run_id",)),
    _spec("get_logs", "monitor",
          "Read a bounded, filtered log tail of one component. Use after mf_summarize_logs. Then narrow by "
          "narrow_hint.", positional=("run_id",), hints={"env_name": "for env-server"}),
    _spec("summarize_logs", "monitor",
          "Digest every distinct error and main warning in a run's logs. Use first when a run fails. Then "
          "mf_get_logs.",
          positional=("run_id",)),
    _spec("export_logs", "monitor",
          "Save a run's logs to files under dest, resumable. Use before the pods go (run ended, before a stop). "
          "Then read them locally.",
          read_only=False, idempotent=True, positional=("run_id", "dest"), long_running=True),
    _spec("get_metrics", "monitor",
          "Read per-step metrics, downsampled. Use to judge learning. Then mf_plot_metrics for a picture.",
          positional=("run_id",)),
    _spec("plot_metrics", "monitor",
          "Plot metrics as a PNG. Use when a person wants curves. Then show the image.",
          read_only=False, destructive=True, idempotent=True, positional=("run_id",), image_field="path"),
    _spec("compare_runs", "monitor",
          "Compare 2-8 runs: learning, speed, cost, config diffs, a PNG. Use when asked which run did better. "
          "Then show it.",
          read_only=False, destructive=True, idempotent=True, positional=("run_ids",), image_field="plot_path"),
    _spec("list_checkpoints", "monitor",
          "List a run's checkpoints. Use to pick one. Then mf_download_checkpoint.",
          positional=("run_id",)),
    _spec("download_checkpoint", "monitor",
          "Download a checkpoint (latest READY) into dest, verified. Use once a run ended or paused. Then "
          "repeat to resume.",
          read_only=False, idempotent=True, positional=("run_id", "dest"), long_running=True),
    _spec("wait_for_run", "monitor",
          "Wait up to 55 s for a run to end, start or reach a step. Use to watch, never poll mf_get_run. Then "
          "call again while reached is false; call what next_step names.",
          positional=("run_id",), long_running=True, hints={"timeout_seconds": "at most 55"}),
    _spec("run_report", "report",
          "The end-of-run report as markdown: outcome, cost, learning, checkpoints, traces. Use last. Then "
          "show markdown as is.",
          read_only=False, idempotent=True, positional=("run_id",), hints={"traces_dir": "mf_download_traces dest"}),
    _spec("list_traces", "traces",
          "Page through a run's traces, episodes or eval runs. Use to look at a few. Then mf_download_traces.",
          positional=("run_id",)),
    _spec("download_traces", "traces",
          "Download all of a run's traces into dest with a manifest; resumable. Use when wanted on disk. Then "
          "mf_run_report(traces_dir).",
          read_only=False, idempotent=True, positional=("run_id", "dest"), long_running=True),
)

_BY_NAME = {spec.name: spec for spec in TOOLS}


def get(name: str) -> ToolSpec:
    """The spec called ``name`` (``mf_`` prefix optional). Raises ``KeyError``."""
    return _BY_NAME[name if name.startswith("mf_") else f"mf_{name}"]


# -- schemas ----------------------------------------------------------------------------


def _resolve(ref: str, defs: Mapping[str, Any]) -> dict[str, Any]:
    prefix = "#/$defs/"
    if not ref.startswith(prefix) or ref[len(prefix):] not in defs:
        raise ValueError(f"unresolvable $ref {ref!r} in a tool input schema")
    return defs[ref[len(prefix):]]


def _portable(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...] = ()) -> Any:
    """Rewrite one pydantic JSON Schema node into the portable strict subset.

    ``$ref``s are inlined (several hosts mishandle ``$ref``/``$defs`` in tool schemas, and
    OpenAI strict mode refuses a ``$ref`` with sibling keywords such as ``description``);
    a recursive model is refused.
    """
    if isinstance(node, list):
        return [_portable(item, defs, seen) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            raise ValueError(f"recursive input model ({ref}) cannot be a portable tool schema")
        target = _resolve(ref, defs)
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _portable(merged, defs, (*seen, ref))
    if node.get("type") == "object" and "properties" not in node and node.get("additionalProperties") is not False:
        raise ValueError("a free-form dict cannot be a portable tool argument; use a nested pydantic model")
    out: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in node.items():
        if key == "properties":
            out[key] = {k: _portable(v, defs, seen) for k, v in value.items()}
        elif key in PORTABLE_KEYWORDS:
            out[key] = _portable(value, defs, seen)
        elif key in _DESCRIBED_KEYWORDS:
            notes.append(_DESCRIBED_KEYWORDS[key].format(json.dumps(value)))
    if notes:
        out["description"] = (out.get("description", "") + f" ({'; '.join(notes)})").strip()
    if out.get("type") == "object" or "properties" in out:
        props = out.setdefault("properties", {})
        required = set(node.get("required", []))
        for pname, pschema in props.items():
            if pname not in required:
                props[pname] = _nullable(pschema, node["properties"][pname])
        out["type"] = "object"
        out["required"] = list(props)
        out["additionalProperties"] = False
    return out


def _nullable(schema: dict[str, Any], original: dict[str, Any]) -> dict[str, Any]:
    """Make an optional property nullable and say what null means."""
    schema = dict(schema)
    variants = schema.get("anyOf")
    if variants is None:
        desc = schema.pop("description", None)
        schema = {"anyOf": [schema, {"type": "null"}]}
        if desc:
            schema["description"] = desc
    elif not any(v.get("type") == "null" for v in variants):
        schema["anyOf"] = [*variants, {"type": "null"}]
    if original.get("default") is not None:
        default = json.dumps(original["default"])
        schema["description"] = (schema.get("description", "") + f" Default: {default}.").strip()
    return schema


def portable_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The portable strict-mode JSON Schema of an input ``model`` (see module docstring)."""
    raw = model.model_json_schema()
    schema = _portable(raw, raw.get("$defs", {}))
    schema.pop("description", None)
    schema.pop("title", None)
    return schema


@functools.cache
def input_schema(name: str) -> dict[str, Any]:
    """The portable input JSON Schema of tool ``name`` (see module docstring)."""
    return portable_schema(get(name).input_model)


#: Terse descriptions of the input fields shared by several tools, as the model sees them
#: (:func:`model_schema`); a field not named here nor in its spec's ``hints`` has a self-explaining name.
FIELD_HINTS: Mapping[str, str] = {
    "team": "'personal' or a team id",
    "confirmation": "the person's mfc_... code; never made up",
    "secrets": "env var NAMES: WANDB_API_KEY, HF_TOKEN",
    "cursor": "next_cursor of the last page",
    "names": "metric names or prefixes",
}


def _lean(node: Any, strict: bool = False) -> Any:
    """One portable schema node without descriptions; unless ``strict`` (OpenAI strict mode needs them), also
    without ``null`` variants, ``required`` and ``additionalProperties``."""
    if isinstance(node, list):
        return [_lean(item, strict) for item in node]
    if not isinstance(node, dict):
        return node
    if strict:
        return {k: ({p: _lean(s, strict) for p, s in v.items()} if k == "properties" else _lean(v, strict))
                for k, v in node.items() if k != "description"}
    variants = [v for v in node.get("anyOf", []) if v.get("type") != "null"]
    if len(variants) == 1:
        node = {**{k: v for k, v in node.items() if k != "anyOf"}, **variants[0]}
    elif variants:
        node = {**node, "anyOf": variants}
    out = {k: ({p: _lean(s) for p, s in v.items()} if k == "properties" else _lean(v))
           for k, v in node.items() if k not in ("description", "additionalProperties", "required")}
    return out


@functools.cache
def model_schema(name: str, strict: bool = False) -> dict[str, Any]:
    """The input schema of tool ``name`` as the model sees it in the Anthropic and MCP forms: the portable
    schema (:func:`input_schema`) with only the required fields in ``required``, no ``null`` variants (omit a
    field for its default), and a description only where :data:`FIELD_HINTS` or the spec's ``hints`` give
    one. Defaults, bounds and rules stay in the pydantic model: a call outside them gets ``bad_arguments``
    naming the field and the accepted range. Arguments are still checked against :func:`input_schema`.

    ``strict``: the OpenAI strict-mode form: the portable schema's structure as it is (every property
    required, optional ones nullable, ``additionalProperties: false``), descriptions as above."""
    spec = get(name)
    schema = _lean(input_schema(spec.name), strict)
    for prop, sub in schema["properties"].items():
        hint = spec.hints.get(prop) or FIELD_HINTS.get(prop)
        if hint:
            sub["description"] = hint
    required = [f for f, info in spec.input_model.model_fields.items() if info.is_required()]
    if required and not strict:
        schema["required"] = [f for f in schema["properties"] if f in required]
    return schema


def catalogue_chars() -> int:
    """Characters of every tool's definition as the model gets it (the Anthropic form: name, description,
    input schema), as compact JSON as an API client sends it: what an agent pays on every turn."""
    return len(json.dumps(anthropic_tools(), separators=(",", ":"), ensure_ascii=False))


@functools.cache
def output_schema(name: str) -> dict[str, Any]:
    """The output JSON Schema: the result model or a :class:`~tools.errors.ToolError`
    (serialization mode, root ``type: object``).

    The error branch is part of the schema because MCP clients built on the TypeScript SDK
    (the Inspector, and hosts built on it) validate ``structuredContent`` against the output
    schema even on ``isError`` results.
    """
    from pydantic import TypeAdapter

    union_type: Any = get(name).output_model | ToolError  # a union built at run time: no static type form
    union = TypeAdapter(union_type).json_schema(mode="serialization")
    return {"type": "object", **_without_titles(union)}


def _without_titles(node: Any) -> Any:
    """Drop pydantic's generated ``title`` keywords (they repeat the property names)."""
    if isinstance(node, list):
        return [_without_titles(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {key: ({k: _without_titles(v) for k, v in value.items()} if key in ("properties", "$defs")
                  else _without_titles(value))
            for key, value in node.items() if key != "title"}


# -- exports ----------------------------------------------------------------------------


def openai_tools(api: str = "chat") -> list[dict[str, Any]]:
    """Tool specs for OpenAI function calling, ``strict: true`` (parameters: :func:`model_schema` ``strict``:
    about 18,000 characters for every tool, against 35,000 with the full field descriptions).

    ``api="chat"`` (Chat Completions: ``{"type": "function", "function": {...}}``) or
    ``"responses"`` (Responses API: the function fields at the top level).
    """
    specs = [
        {"name": s.name, "description": s.description,
         "parameters": copy.deepcopy(model_schema(s.name, strict=True)), "strict": True}
        for s in TOOLS
    ]
    if api == "responses":
        return [{"type": "function", **spec} for spec in specs]
    if api != "chat":
        raise ValueError(f"api must be 'chat' or 'responses', not {api!r}")
    return [{"type": "function", "function": spec} for spec in specs]


def anthropic_tools() -> list[dict[str, Any]]:
    """Tool specs for the Anthropic Messages API (``name``, ``description``, ``input_schema``)."""
    return [
        {"name": s.name, "description": s.description, "input_schema": copy.deepcopy(model_schema(s.name))}
        for s in TOOLS
    ]


def mcp_tools() -> list[dict[str, Any]]:
    """Tool definitions as MCP ``tools/list`` items: name, title, description, inputSchema (the model's
    form, :func:`model_schema`) and annotations.

    No ``outputSchema``: MCP makes it optional, hosts hand the model the text block rather than the
    schema, and each tool's schema would repeat the whole :class:`~tools.errors.ToolError` shape
    (216,000 of the listing's 260,000 characters). ``structuredContent`` is still sent with every
    result; :func:`output_schema` gives its schema."""
    return [
        {"name": s.name, "title": s.annotations()["title"], "description": s.description,
         "inputSchema": copy.deepcopy(model_schema(s.name)), "annotations": s.annotations()}
        for s in TOOLS
    ]


def result_json(result: BaseModel) -> str:
    """The compact JSON of a tool result or ToolError, as every surface sends it."""
    return result.model_dump_json(by_alias=True)


def is_error(result: BaseModel) -> bool:
    """True when ``result`` is a :class:`~tools.errors.ToolError`."""
    return isinstance(result, ToolError)


def _field(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` for dicts, ``obj.key`` for SDK objects."""
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def openai_tool_message(tool_call: Any, ctx: Any = None) -> dict[str, Any]:
    """Run one OpenAI Chat Completions tool call and return the ``role: tool`` message.

    ``tool_call`` is a dict or SDK object with ``id`` and ``function.name`` /
    ``function.arguments`` (a JSON string). The content is the result JSON; a
    ToolError is returned as content too (its ``error: true`` tells the model).
    """
    function = _field(tool_call, "function")
    result = call_tool(_field(function, "name", ""), _field(function, "arguments"), ctx, surface="openai")
    return _openai_message(tool_call, result)


async def aopenai_tool_message(tool_call: Any, ctx: Any = None) -> dict[str, Any]:
    """:func:`openai_tool_message` for asyncio backends (through :func:`acall_tool`: cancellable)."""
    function = _field(tool_call, "function")
    result = await acall_tool(_field(function, "name", ""), _field(function, "arguments"), ctx, surface="openai")
    return _openai_message(tool_call, result)


def _openai_message(tool_call: Any, result: BaseModel) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": _field(tool_call, "id"), "content": result_json(result)}


def openai_function_call_output(item: Any, ctx: Any = None) -> dict[str, Any]:
    """Run one OpenAI Responses API ``function_call`` item (``call_id``, ``name``,
    ``arguments``) and return its ``function_call_output`` input item."""
    result = call_tool(_field(item, "name", ""), _field(item, "arguments"), ctx, surface="openai")
    return {"type": "function_call_output", "call_id": _field(item, "call_id"), "output": result_json(result)}


def anthropic_tool_result(tool_use: Any, ctx: Any = None) -> dict[str, Any]:
    """Run one Anthropic ``tool_use`` block (``id``, ``name``, ``input``) and return the
    ``tool_result`` content block (``is_error`` set for a ToolError)."""
    result = call_tool(_field(tool_use, "name", ""), _field(tool_use, "input"), ctx, surface="anthropic")
    return _anthropic_block(tool_use, result)


async def aanthropic_tool_result(tool_use: Any, ctx: Any = None) -> dict[str, Any]:
    """:func:`anthropic_tool_result` for asyncio backends (through :func:`acall_tool`: cancellable)."""
    result = await acall_tool(_field(tool_use, "name", ""), _field(tool_use, "input"), ctx, surface="anthropic")
    return _anthropic_block(tool_use, result)


def _anthropic_block(tool_use: Any, result: BaseModel) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": _field(tool_use, "id"),
            "content": result_json(result), "is_error": is_error(result)}


# -- calling ----------------------------------------------------------------------------


def arguments_fix(name: str) -> str:
    """The fix of a ``bad_arguments`` error from the input check of tool ``name`` (a surface may
    say it in its own words: the CLI points to the command's ``--help``)."""
    return f"Correct the listed fields and call {name} again (see its input schema)."


def _bad_arguments(problems: list[FieldProblem], name: str) -> ToolError:
    return ToolError(
        code="bad_arguments",
        message=f"{name}: invalid arguments: " + "; ".join(f"{p.path or '(input)'}: {p.problem}" for p in problems),
        fix=arguments_fix(name),
        fields=problems,
    )


def _expected(schema: Mapping[str, Any]) -> str:
    """A short phrase for what ``schema`` accepts (``an integer``, ``one of 'a', 'b'``)."""
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    if "anyOf" in schema:
        return " or ".join(_expected(v) for v in schema["anyOf"])
    kind = schema.get("type")
    words = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
             "null": "null (the default)", "array": "a list", "object": "an object"}
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"a list of {_expected(schema['items']).removeprefix('a ').removeprefix('an ')}s"
    return words.get(str(kind), "a valid value")


def _kind(value: Any) -> str:
    """What sort of value ``value`` is, in words (never the value itself: it may be a pasted secret)."""
    if isinstance(value, bool):
        return "true or false"
    words = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "an object"}
    return next((word for kind, word in words.items() if isinstance(value, kind)), "a value")


def _problem(error: Any) -> FieldProblem:
    """One jsonschema error as a field path + what was expected and what kind of value came; the
    value itself is never quoted back (an argument may hold a pasted secret)."""
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        allowed = ", ".join(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return FieldProblem(path=".".join(filter(None, [path, ",".join(extra)])),
                            problem=f"unknown argument; allowed: {allowed}")
    if error.validator in ("anyOf", "type", "enum", "const"):
        if error.instance is None:
            return FieldProblem(path=path, problem=f"required: missing or null; expected {_expected(error.schema)}")
        return FieldProblem(path=path, problem=f"expected {_expected(error.schema)}, got {_kind(error.instance)}")
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in (error.instance or {})]
        return FieldProblem(path=".".join(filter(None, [path, ",".join(missing)])), problem="required")
    return FieldProblem(path=path, problem=f"not accepted by the input schema ({error.validator})")


@functools.cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(input_schema(name))


def check_arguments(name: str, arguments: Mapping[str, Any] | str | None) -> BaseModel | ToolError:
    """Validate ``arguments`` for tool ``name``; return the input model or a ToolError.

    ``arguments`` is a mapping or a JSON object string; a string holding a lone surrogate is refused
    (its field named, never its value). Omitted optional properties are
    treated as ``null``; ``null`` means the default. A top-level number, boolean or list sent
    as its exact string form (``"3"``, ``"false"``, ``'["loss"]'``), as some MCP clients do for
    nullable fields, is read as such; anything else stays a string and fails the check. Checks
    run in two layers: jsonschema against the portable schema (types, enums, unknown names),
    then the pydantic model (bounds, patterns and cross-field rules moved into descriptions).
    """
    spec = get(name)
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            problem = FieldProblem(path="", problem=f"arguments are not valid JSON ({exc.msg})")
            return _bad_arguments([problem], spec.name)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        return _bad_arguments([FieldProblem(path="", problem="arguments must be a JSON object")], spec.name)
    arguments = dict(arguments)
    broken = _lone_surrogates(arguments)
    if broken:
        return _bad_arguments([FieldProblem(path=path, problem="not valid UTF-8 text (a file name in another "
                                            "encoding, or half of a cut emoji): rename the file to a UTF-8 name, or "
                                            "send the text as UTF-8")
                               for path in broken], spec.name)
    properties = input_schema(spec.name)["properties"]
    for prop, schema in properties.items():
        arguments.setdefault(prop, None)
        arguments[prop] = _from_string(arguments[prop], schema)
    errors = sorted(_validator(spec.name).iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        return _bad_arguments([_problem(e) for e in errors], spec.name)
    model = spec.input_model
    try:
        return model.model_validate(_drop_null_defaults(model, arguments))
    except ValidationError as exc:
        return _bad_arguments(
            [FieldProblem(path=".".join(str(p) for p in e["loc"]), problem=_with_range(model, e))
             for e in exc.errors()],
            spec.name,
        )


_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogates(value: Any, path: str = "") -> list[str]:
    """Paths of the strings in ``value`` holding a lone surrogate (JSON allows ``"\\udcff"``): no
    output holding one can be written as UTF-8, so they are refused on the way in."""
    if isinstance(value, str):
        return [path] if _SURROGATE.search(value) else []
    if isinstance(value, Mapping):
        return [p for key, item in value.items()
                for p in ([path or str(key)] if isinstance(key, str) and _SURROGATE.search(key) else [])
                + _lone_surrogates(item, ".".join(filter(None, [path, str(key)])))]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _lone_surrogates(item, f"{path}.{i}" if path else str(i))]
    return []


_RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"})


def _with_range(model: type[BaseModel], error: Mapping[str, Any]) -> str:
    """pydantic's message for one error, plus the field's whole accepted range when a bound or
    finiteness failed ("Input should be ...; accepted: 1 to 10,000,000"). Never the value."""
    info = model.model_fields.get(str(error["loc"][0])) if error["loc"] else None
    if error["type"] not in _RANGE_ERRORS or info is None or len(error["loc"]) != 1:
        return error["msg"]
    low = high = None
    for bound in info.metadata:
        for attr, is_low in (("ge", True), ("gt", True), ("le", False), ("lt", False)):
            value = getattr(bound, attr, None)
            if value is not None:
                text = f"{value:,}" if attr in ("ge", "le") else f"{'more' if is_low else 'less'} than {value:,}"
                low, high = (text, high) if is_low else (low, text)
    if low is None and high is None:
        return f"{error['msg']}; accepted: a finite number"
    kind = "a finite number" if _is_float(info.annotation) else "an integer"
    span = f"{low} to {high}" if low and high and not low.startswith("more") and not high.startswith("less") else \
        ", ".join(filter(None, [low and (low if low.startswith("more") else f"at least {low}"),
                                high and (high if high.startswith("less") else f"at most {high}")]))
    return f"{error['msg']}; accepted: {kind}, {span}"


def _is_float(annotation: Any) -> bool:
    return annotation is float or float in typing.get_args(annotation)


_INTEGER = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_NON_FINITE = re.compile(r"[-+]?(inf|infinity|nan)", re.I)


def _from_string(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` as the integer, number or boolean its schema expects when it is that value's
    exact string form; otherwise unchanged (jsonschema then reports the type error)."""
    if not isinstance(value, str):
        return value
    types = {v.get("type") for v in schema.get("anyOf", [schema])}
    text = value.strip()
    if "integer" in types and _INTEGER.fullmatch(text):
        return int(text)
    if "number" in types and (_NUMBER.fullmatch(text) or _NON_FINITE.fullmatch(text)):
        return float(text)  # inf / nan reach the model, whose bounds then say what is accepted
    if "boolean" in types and text in ("true", "false"):
        return text == "true"
    if "array" in types and text.startswith("["):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            return value
        return parsed if isinstance(parsed, list) else value
    return value


def _drop_null_defaults(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """Remove ``null`` for fields whose default applies (pydantic fills it in)."""
    out = {}
    for key, value in data.items():
        info = model.model_fields.get(key)
        if value is None and info is not None and not info.is_required():
            continue
        if info is not None:
            sub = _submodel(info.annotation)
            if sub is not None and isinstance(value, dict):
                value = _drop_null_defaults(sub, value)
            elif sub is not None and isinstance(value, list):
                value = [_drop_null_defaults(sub, v) if isinstance(v, dict) else v for v in value]
        out[key] = value
    return out


def _submodel(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
        nested = _submodel(candidate) if candidate is not annotation and typing.get_args(candidate) else None
        if nested is not None:
            return nested
    return None


def call_tool(name: str, arguments: Mapping[str, Any] | str | None = None, ctx: Any = None, *,
              surface: str = "python") -> BaseModel:
    """Run tool ``name`` with ``arguments``; return its result model or a ToolError.

    The single entry point of every surface (MCP server, CLI, chat-assistant helpers).
    ``ctx`` is a :class:`tools.core.Context` (default: one over the process
    environment). An unknown tool name or malformed arguments give a ToolError
    (``unknown_tool``, ``bad_arguments``); an unexpected exception gives
    ``internal_error`` with its type and message (scrubbed), never a traceback.

    Every call is recorded in the state store's audit trail (:func:`audit`): ``surface`` (``cli``,
    ``mcp``, ``demo``, ``openai``, ``anthropic``, ``python``), the tool, its arguments scrubbed, the
    outcome code, the run and plan, money approved or spent; ``model-factory history`` prints it.
    """
    from tools.core import Context

    own = ctx is None
    ctx = ctx or Context.from_environment()
    try:
        result = _call(name, arguments, ctx)
        audit(ctx, surface, name, arguments, result)
        return result
    finally:
        if own:
            ctx.close()


class Cancelled(BaseException):
    """Raised inside a tool run by :func:`acall_tool` at its next pause (``ctx.sleep``) once the awaiting
    task was cancelled: a ``BaseException`` so that no tool layer turns it into a result."""


async def acall_tool(name: str, arguments: Mapping[str, Any] | str | None = None, ctx: Any = None, *,
                     surface: str = "python") -> BaseModel:
    """:func:`call_tool` for asyncio (and any anyio) backends: the same argument checks, guardrails
    (approvals, exactly-once launches, secrets by name), output budgets and audit trail, run in a worker
    thread so that the event loop keeps serving other chats meanwhile. Returns the result model or a
    ToolError, never raises for a tool's failure.

    Cancellable: cancelling the awaiting task (``task.cancel()``, a cancel scope, a client that went
    away) raises the cancellation in it as usual. A read-only tool (reads, ``mf_wait_for_run``'s waits)
    stops at its next pause: no request is started after the cancellation (one already in flight ends
    within its timeout) and ``acall_tool`` returns once it has stopped; nothing is recorded for it. A tool
    that changes something (plan, launch, stop, pause, restart, resume, a download or an export) is not
    cut mid-way: the cancellation returns at once and the tool runs to its end in the background, its
    outcome recorded in the state store and the audit trail as for any call (a launch is never left
    half-sent; ``mf_list_launches`` shows it). ``ctx``: as for :func:`call_tool`; one you pass stays in use
    until the tool ends, and its ``sleep`` is wrapped meanwhile.
    """
    import threading

    import anyio
    import anyio.to_thread

    from tools.core import Context

    try:
        interruptible = get(name).read_only
    except KeyError:
        interruptible = True
    stop, done = threading.Event(), threading.Event()

    def run() -> BaseModel:
        own = ctx is None
        context = ctx or Context.from_environment()
        inner = context.sleep

        def sleep(seconds: float) -> None:
            if stop.is_set():
                raise Cancelled
            if inner is time.sleep:
                stop.wait(max(0.0, seconds))
            else:
                inner(seconds)
            if stop.is_set():
                raise Cancelled

        if interruptible:
            context.sleep = sleep
        try:
            return call_tool(name, arguments, context, surface=surface)
        finally:
            context.sleep = inner
            if own:
                context.close()
            done.set()

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        if interruptible:
            stop.set()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(done.wait)
        raise


def _call(name: str, arguments: Mapping[str, Any] | str | None, ctx: Any) -> BaseModel:
    try:
        spec = get(name)
    except KeyError:
        return _scrubbed(ToolError(code="unknown_tool", message=f"No tool named {name!r}.",
                                   fix="List the tools (MCP tools/list or `model-factory tools export`)."), ctx)
    try:
        parsed = check_arguments(spec.name, arguments)
        if isinstance(parsed, ToolError):  # it may quote the bad value: scrub it like a tool's own errors
            return _scrubbed(parsed, ctx)
        if spec.read_only and not spec.long_running:  # a read ends in time for a host's 60 s limit
            return _within_a_call(spec, parsed, ctx)
        return spec.function(parsed, ctx)
    except Exception as exc:  # noqa: BLE001 - surfaces must never show a traceback
        import logging

        logging.getLogger("model_factory").debug("%s failed", spec.name, exc_info=True)
        return _scrubbed(ToolError(
            code="internal_error",
            message=f"{spec.name} failed unexpectedly: {type(exc).__name__}: {exc}",
            fix="This is a bug in model-factory-skill; retry once, then report it with the message.",
        ), ctx)


def _within_a_call(spec: ToolSpec, parsed: BaseModel, ctx: Any) -> BaseModel:
    """Run a read tool whose platform requests end within the context's call bound
    (:meth:`tools.core.Context.within`: 50 s, or ``$MODEL_FACTORY_CALL_SECONDS``); a tool with a
    bound of its own (``long_running``: waits, downloads) is not run here."""
    from tools.core import Context
    from tools.errors import ToolFailure

    own = ctx is None
    ctx = ctx or Context.from_environment()
    try:
        with ctx.within():
            return spec.function(parsed, ctx)
    except ToolFailure as failure:
        return _scrubbed(failure.error, ctx)
    finally:
        if own:
            ctx.close()


def _scrubbed(error: ToolError, ctx: Any) -> ToolError:
    """``error`` with every secret value the context knows replaced (``ctx`` None: the process environment's)."""
    from tools.core import Context

    return (ctx or Context.from_environment()).scrubber.scrub_model(error)


def audit(ctx: Any, surface: str, name: str, arguments: Mapping[str, Any] | str | None, result: BaseModel) -> None:
    """Record one call in the audit trail of ``ctx``'s state store
    (:meth:`tools.guardrails.store.Store.add_audit`): the arguments scrubbed of every secret the
    context knows and of every secret-looking value, the outcome (``ok`` or the ToolError code), the
    run and plan (from the arguments, else the result), ``usd_approved`` (a launch or resume created
    now: its plan's high estimate) and ``usd_spent`` (the platform's usage figure a result reports).
    A store that cannot be written here records nothing (the call itself is not affected)."""
    from tools.errors import ToolFailure
    from tools.guardrails.records import AuditRecord, iso, utc_now
    from tools.guardrails.scrubbing import secret_scrubber

    try:
        args: Any = json.loads(arguments) if isinstance(arguments, str) else dict(arguments or {})
    except ValueError:
        args = {"unparsed": arguments}
    args = ctx.scrubber.scrub_obj(args)
    args = secret_scrubber(args).scrub_obj(args)
    given = args if isinstance(args, dict) else {}
    run_id = given.get("run_id") if isinstance(given.get("run_id"), str) else getattr(result, "run_id", None)
    plan_id = given.get("plan_id") if isinstance(given.get("plan_id"), str) else getattr(result, "plan_id", None)
    spend = getattr(result, "spend", None)
    spent = getattr(result, "platform_usd", None)
    if spent is None and spend is not None:
        spent = getattr(spend, "platform_usd", None)
    try:
        store = ctx.store()
        approved = None
        if getattr(result, "status", None) == "created" and isinstance(plan_id, str):
            record = store.plan(plan_id)
            approved = record.usd_high if record else None
        try:
            platform = ctx.settings.base_url
        except Exception:  # noqa: BLE001 - unreadable settings: the call is recorded without a platform
            platform = None
        store.add_audit(AuditRecord(
            at=iso(utc_now()), surface=surface, tool=name, arguments=json.dumps(args, default=str, ensure_ascii=False),
            outcome=result.code if isinstance(result, ToolError) else "ok",
            run_id=run_id if isinstance(run_id, str) else None, plan_id=plan_id if isinstance(plan_id, str) else None,
            usd_approved=approved, usd_spent=spent if isinstance(spent, (int, float)) else None,
            platform_url=platform))
    except ToolFailure:
        return
