"""The registry: argument checking, the single ``call_tool`` entry point, exports and the
chat-assistant helpers, against real tools and the emulator over HTTP."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from _helpers import mf
from pydantic import BaseModel, ConfigDict, Field

from skill import registry
from tools.core import Context, tool
from tools.errors import ToolError


@pytest.fixture
def ctx(mf_env: dict[str, str], tmp_path: Path) -> Context:
    context = Context(env=mf_env, home=Path(mf_env["HOME"]), state_dir=Path(mf_env["MODEL_FACTORY_STATE_DIR"]),
                      cwd=tmp_path)
    yield context
    context.close()


@pytest.fixture
def run_id(launch) -> str:
    return launch(after=300)


def problems(result: Any) -> dict[str, str]:
    assert isinstance(result, ToolError) and result.code == "bad_arguments", result
    return {f.path: f.problem for f in result.fields}


# -- argument checking ------------------------------------------------------------------------


def test_arguments_as_json_string_or_mapping_give_the_same_model() -> None:
    from_text = registry.check_arguments("mf_get_logs", '{"run_id": "r1", "tail_lines": 50}')
    from_dict = registry.check_arguments("get_logs", {"run_id": "r1", "tail_lines": 50})
    assert from_text == from_dict
    assert from_text.tail_lines == 50 and from_text.run_id == "r1"


def test_null_and_omitted_mean_the_default() -> None:
    omitted = registry.check_arguments("mf_get_logs", {"run_id": "r1"})
    nulled = registry.check_arguments("mf_get_logs", {"run_id": "r1", "tail_lines": None, "level": None})
    default = registry.get("mf_get_logs").input_model.model_fields["tail_lines"].default
    assert omitted == nulled and omitted.tail_lines == default


def test_each_bad_field_is_listed_with_what_was_expected_and_the_kind_of_value_never_the_value() -> None:
    found = problems(registry.check_arguments(
        "mf_get_logs", {"run_id": 7, "tail_lines": "lots", "level": "LOUD", "colour": "red"}))
    assert found["run_id"].startswith("expected a string") and found["run_id"].endswith("got an integer")
    assert "expected an integer" in found["tail_lines"] and found["tail_lines"].endswith("got a string")
    assert "one of" in found["level"] and '"ERROR"' in found["level"]
    assert not any(value in text for value in ("7", "lots", "LOUD") for text in found.values())
    assert "unknown argument" in found["colour"] and "tail_lines" in found["colour"]
    missing = problems(registry.check_arguments("mf_get_logs", {}))
    assert missing == {"run_id": "required: missing or null; expected a string"}


def test_model_rules_beyond_the_schema_are_checked_too() -> None:
    bound = problems(registry.check_arguments("mf_get_logs", {"run_id": "r1", "tail_lines": 0}))
    assert "greater than or equal to 1" in bound["tail_lines"]
    cross = registry.check_arguments("mf_wait_for_run", {"run_id": "r1", "until": "step"})
    assert isinstance(cross, ToolError) and "step" in cross.message


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", "3", b'"text"'])
def test_arguments_that_are_not_a_json_object(arguments: Any) -> None:
    result = registry.check_arguments("mf_get_run", arguments)
    assert isinstance(result, ToolError) and result.code == "bad_arguments"
    assert result.fields[0].path == "" and ("JSON" in result.fields[0].problem)


def test_list_arguments_are_accepted() -> None:
    parsed = registry.check_arguments("mf_plan_run", {"config_path": "a.toml", "secrets": ["WANDB_API_KEY"]})
    assert not isinstance(parsed, ToolError), parsed
    assert parsed.secrets == ["WANDB_API_KEY"]


# -- call_tool ------------------------------------------------------------------------------------


def test_call_tool_runs_a_real_tool_over_http(run_id: str, ctx: Context) -> None:
    result = registry.call_tool("get_run", json.dumps({"run_id": run_id}), ctx)
    assert not registry.is_error(result), result
    assert result.run_id == run_id  # type: ignore[attr-defined]


def test_unknown_tool() -> None:
    result = registry.call_tool("mf_make_coffee", {})
    assert isinstance(result, ToolError) and result.code == "unknown_tool" and "tools/list" in result.fix


class _BoomInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    word: str = Field(description="Anything.")


class _BoomResult(BaseModel):
    word: str = Field(description="Never returned.")


@tool
def boom(inp: _BoomInput, ctx: Context) -> _BoomResult:
    """A tool with a bug: it raises, and the message contains the API key."""
    raise RuntimeError(f"exploded while holding {ctx.env['PRIME_API_KEY']}")


def test_a_buggy_tool_gives_a_scrubbed_internal_error_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, mf_env: dict[str, str], tmp_path: Path) -> None:
    spec = registry.ToolSpec(name="mf_boom", target=f"{__name__}:boom", description="Raises.")
    monkeypatch.setitem(registry._BY_NAME, spec.name, spec)
    key = "fake-key-canary-0123456789abcdef"
    ctx = Context(env={**mf_env, "PRIME_API_KEY": key}, home=tmp_path, state_dir=tmp_path)
    result = registry.call_tool("mf_boom", {"word": "x"}, ctx)
    assert isinstance(result, ToolError) and result.code == "internal_error"
    assert "RuntimeError" in result.message and key not in result.model_dump_json()
    assert "Traceback" not in result.message


# -- exports and helpers --------------------------------------------------------------------------


def test_exports_have_one_entry_per_tool_in_each_format() -> None:
    names = [s.name for s in registry.TOOLS]
    assert [t["function"]["name"] for t in registry.openai_tools()] == names
    assert [t["name"] for t in registry.openai_tools("responses")] == names
    assert [t["name"] for t in registry.anthropic_tools()] == names
    assert [t["name"] for t in registry.mcp_tools()] == names
    with pytest.raises(ValueError):
        registry.openai_tools("completions")
    spec = registry.openai_tools()[0]["function"]
    spec["parameters"]["properties"].clear()  # callers get copies
    assert registry.openai_tools()[0]["function"]["parameters"]["properties"]


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "mcp"])
def test_cli_export_prints_the_registry_specs(fmt: str) -> None:
    done = mf("tools", "export", "--format", fmt)
    assert done.returncode == 0, done.stderr
    expected = {"openai": registry.openai_tools, "anthropic": registry.anthropic_tools, "mcp": registry.mcp_tools}
    assert json.loads(done.stdout) == expected[fmt]()


def test_chat_assistant_helpers_run_tool_calls(run_id: str, ctx: Context) -> None:
    message = registry.openai_tool_message(
        {"id": "call_1", "type": "function",
         "function": {"name": "mf_get_run", "arguments": json.dumps({"run_id": run_id})}},
        ctx)
    assert message["role"] == "tool" and message["tool_call_id"] == "call_1"
    assert json.loads(message["content"])["run_id"] == run_id
    item = registry.openai_function_call_output(
        {"type": "function_call", "call_id": "c2", "name": "mf_get_run", "arguments": '{"run_id": 5}'}, ctx)
    assert item["type"] == "function_call_output" and json.loads(item["output"])["code"] == "bad_arguments"
    block = registry.anthropic_tool_result({"type": "tool_use", "id": "tu_1", "name": "mf_get_run",
                                            "input": {"run_id": run_id}}, ctx)
    assert block == {"type": "tool_result", "tool_use_id": "tu_1", "content": block["content"], "is_error": False}
    assert json.loads(block["content"])["run_id"] == run_id
    missing = registry.anthropic_tool_result({"id": "tu_2", "name": "mf_get_run", "input": {"run_id": "c" + "0" * 24}},
                                             ctx)
    assert missing["is_error"] is True and json.loads(missing["content"])["code"] == "not_found"


def test_annotations_tell_the_truth() -> None:
    for spec in registry.TOOLS:
        hints = spec.annotations()
        assert not (hints["readOnlyHint"] and hints["destructiveHint"]), spec.name
        if spec.name.startswith(("mf_get_", "mf_list_", "mf_check_", "mf_summarize_", "mf_wait_")):
            assert hints["readOnlyHint"] and hints["idempotentHint"], spec.name
    for name in ("mf_plan_run", "mf_dispatch_run", "mf_stop_run", "mf_prepare_config", "mf_download_traces",
                 "mf_plot_metrics"):
        assert registry.get(name).annotations()["readOnlyHint"] is False, name
    assert registry.get("mf_dispatch_run").idempotent is False
    assert registry.get("mf_stop_run").destructive is True
    assert registry.get("mf_plot_metrics").destructive is True  # it may replace a PNG at dest
    assert registry.get("mf_prepare_config").destructive is False  # it never overwrites
    local = {s.name for s in registry.TOOLS if not s.open_world}
    assert {"mf_list_examples", "mf_validate_config", "mf_prepare_config", "mf_list_launches"} <= local


def test_numbers_and_booleans_sent_as_strings_are_read_as_such():
    """Some MCP clients (MCP Inspector 0.15) send nullable numbers and booleans as strings."""
    parsed = registry.check_arguments("mf_get_logs", {"run_id": "r", "tail_lines": "3", "regex": "false",
                                                      "since_seconds": "120"})
    assert (parsed.tail_lines, parsed.regex, parsed.since_seconds) == (3, False, 120)
    wrong = registry.check_arguments("mf_get_logs", {"run_id": "r", "tail_lines": "three"})
    assert getattr(wrong, "code", None) == "bad_arguments" and [f.path for f in wrong.fields] == ["tail_lines"]
    text = registry.check_arguments("mf_get_run", {"run_id": "123"})
    assert text.run_id == "123"  # a string field keeps its string


def test_a_list_sent_as_a_json_string_is_read_as_a_list():
    parsed = registry.check_arguments("mf_get_metrics", {"run_id": "r", "names": '["loss", "entropy"]'})
    assert parsed.names == ["loss", "entropy"]
    wrong = registry.check_arguments("mf_get_metrics", {"run_id": "r", "names": "loss"})
    assert getattr(wrong, "code", None) == "bad_arguments"


# -- what the catalogue costs an agent --------------------------------------------------------

#: What every tool's definition may cost in the Anthropic form today: 15,000 is the budget for all tools
#: together, and this leaves room for the tools still to come (each a 1-3 sentence description).
CATALOGUE_HEADROOM_CHARS = 13_500


def test_all_tool_definitions_fit_the_catalogue_budget_with_headroom() -> None:
    sent = json.dumps(registry.anthropic_tools(), separators=(",", ":"), ensure_ascii=False)
    assert registry.catalogue_chars() == len(sent) <= CATALOGUE_HEADROOM_CHARS < 15_000, len(sent)
    widest = max(registry.anthropic_tools(), key=lambda t: len(json.dumps(t)))
    assert len(json.dumps(widest, separators=(",", ":"))) < 1_000, widest["name"]


def test_each_description_says_what_the_tool_does_when_to_call_it_and_what_follows() -> None:
    for spec in registry.TOOLS:
        sentences = [s for s in spec.description.replace("e.g. ", "e.g._").split(". ") if s]
        when = [s for s in sentences if s.startswith("Use ")]
        then = [s for s in sentences if s.startswith("Then ")]
        assert len(sentences) >= 3 and when and then, spec.name
        assert sentences.index(when[0]) > 0 and sentences.index(then[0]) > sentences.index(when[0]), spec.name
        assert len(spec.description) <= 220, (spec.name, len(spec.description))
        named = set(re.findall(r"\bmf_[a-z_]+[a-z]", spec.description)) - {spec.name}
        assert all(name in registry._BY_NAME for name in named), (spec.name, named)


def test_the_model_sees_only_what_it_needs_and_calls_are_still_checked_in_full() -> None:
    for spec in registry.TOOLS:
        lean, strict = registry.model_schema(spec.name), registry.input_schema(spec.name)
        assert list(lean["properties"]) == list(strict["properties"]), spec.name
        required = [f for f, info in spec.input_model.model_fields.items() if info.is_required()]
        assert sorted(lean.get("required", [])) == sorted(required), spec.name
        assert "null" not in json.dumps(lean) and "additionalProperties" not in json.dumps(lean), spec.name
    plan = registry.model_schema("mf_plan_run")["properties"]
    assert plan["team"]["description"] == "'personal' or a team id" and plan["run_kind"]["enum"] == ["smoke", "full"]
    # bounds the lean form leaves out are still enforced, and the error says the accepted range
    result = registry.check_arguments("mf_wait_for_run", {"run_id": "r", "timeout_seconds": 600})
    assert isinstance(result, ToolError) and "55" in result.fields[0].problem
    result = registry.check_arguments("mf_plan_run", {"config_path": "x.toml", "invented": 1})
    assert isinstance(result, ToolError) and result.fields[0].path == "invented"
