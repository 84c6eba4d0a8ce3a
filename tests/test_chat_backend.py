"""The async host API (skill.registry.acall_tool, aanthropic_tool_result, aopenai_tool_message) and the
chat backend example of docs/examples/chat_backend.py, driven by scripted models (the model is the one
part that runs elsewhere) against the emulator over real HTTP: the tools' real results come back in each
provider's message format, the launch gate holds, and a cancelled call stops (a read) or completes and is
recorded (a change)."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path
from typing import Any

import anyio

from skill import registry
from skill.emulator import EmulatorServer
from tools.core import Context

ROOT = Path(__file__).resolve().parent.parent


def example() -> Any:
    spec = importlib.util.spec_from_file_location("chat_backend", ROOT / "docs" / "examples" / "chat_backend.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def results_of(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """tool_use id -> its tool_result block, from an Anthropic-shaped chat."""
    return {block["tool_use_id"]: block for m in messages if m["role"] == "user" and isinstance(m["content"], list)
            for block in m["content"] if block.get("type") == "tool_result"}


def test_an_anthropic_chat_runs_the_models_tool_calls_and_the_launch_still_needs_a_person(
        frozen_ctx: Context, emulator: EmulatorServer, tmp_path: Path) -> None:
    chat_backend = example()
    dest = str(tmp_path / "smoke.toml")
    seen: list[list[dict[str, Any]]] = []

    async def model(system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(tools)
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if turn == 0:
            return {"content": [{"type": "text", "text": "Checking."},
                                {"type": "tool_use", "id": "t1", "name": "mf_list_gpus", "input": {"team": "personal"}},
                                {"type": "tool_use", "id": "t2", "name": "mf_prepare_config",
                                 "input": {"example": "basic/reverse-text/rl", "dest": dest, "num_train_gpus": 1,
                                           "num_infer_gpus": 1}}]}
        if turn == 1:
            return {"content": [{"type": "tool_use", "id": "t3", "name": "mf_plan_run",
                                 "input": {"config_path": dest, "team": "personal"}}]}
        if turn == 2:
            plan = json.loads(results_of(messages)["t3"]["content"])
            return {"content": [{"type": "tool_use", "id": "t4", "name": "mf_dispatch_run",
                                 "input": {"plan_id": plan["plan_id"]}}]}
        gate = json.loads(results_of(messages)["t4"]["content"])
        return {"content": [{"type": "text", "text": f"Please approve: {gate['fix']}"}]}

    before = len(emulator.state.runs)
    chat = chat_backend.AnthropicChat(model, frozen_ctx)
    answer = anyio.run(chat.send, "run the reverse-text example as a smoke test under my personal account")
    results = results_of(chat.messages)
    gpus = json.loads(results["t1"]["content"])
    assert results["t1"]["is_error"] is False and gpus["gpus"] and all("gpu_type" in g for g in gpus["gpus"])
    assert json.loads(results["t2"]["content"])["valid"] is True
    gate = json.loads(results["t4"]["content"])
    assert results["t4"]["is_error"] is True and gate["code"] == "confirmation_required"
    assert answer.startswith("Please approve: ") and "model-factory approve plan_" in answer
    assert len(emulator.state.runs) == before  # only a person's approval launches
    assert seen[0] == registry.anthropic_tools()
    assert registry.catalogue_chars() == len(json.dumps(seen[0], separators=(",", ":"), ensure_ascii=False))
    surfaces = {a.surface for a in frozen_ctx.store().audit() if a.tool in ("mf_list_gpus", "mf_dispatch_run")}
    assert surfaces == {"anthropic"}


def test_an_openai_chat_gets_role_tool_messages_and_bad_arguments_as_content(frozen_ctx: Context) -> None:
    chat_backend = example()

    async def model(system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        if messages[-1]["role"] == "user":
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "mf_list_examples", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "mf_wait_for_run",
                                                             "arguments": '{"run_id": "r", "timeout_seconds": 600}'}}]}
        replies = [m for m in messages if m["role"] == "tool"]
        return {"role": "assistant", "content": f"{len(replies)} results"}

    chat = chat_backend.OpenAIChat(model, frozen_ctx)
    assert anyio.run(chat.send, "which examples are there?") == "2 results"
    listed, refused = [m for m in chat.messages if m["role"] == "tool"]
    assert listed["tool_call_id"] == "c1" and json.loads(listed["content"])["examples"]
    problem = json.loads(refused["content"])
    assert refused["tool_call_id"] == "c2" and problem["code"] == "bad_arguments" and "55" in problem["message"]
    assert chat.tools == registry.openai_tools()


def test_a_cancelled_wait_stops_at_its_next_pause_and_records_nothing(frozen_ctx: Context, launch) -> None:
    run_id = launch()  # QUEUED: the emulator's clock is stopped, so the wait would last its whole 55 s
    polled = threading.Event()
    polls: list[str] = []
    frozen_ctx.progress = lambda done, total, message: (polls.append(message), polled.set())
    outcome: dict[str, Any] = {}

    async def main() -> None:
        async with anyio.create_task_group() as group:
            async def wait() -> None:
                try:
                    outcome["result"] = await registry.acall_tool("mf_wait_for_run", {"run_id": run_id,
                                                                                     "timeout_seconds": 55}, frozen_ctx)
                except anyio.get_cancelled_exc_class():
                    outcome["cancelled"] = True
                    raise

            group.start_soon(wait)
            await anyio.to_thread.run_sync(polled.wait, 30)
            group.cancel_scope.cancel()

    anyio.run(main)
    assert outcome == {"cancelled": True}
    after = len(polls)
    assert 1 <= after <= 2 and frozen_ctx.sleep is time.sleep  # stopped at the pause; the context as it was
    assert not [a for a in frozen_ctx.store().audit() if a.tool == "mf_wait_for_run"]


def test_a_cancelled_download_runs_to_its_end_and_is_recorded(frozen_ctx: Context, launch, tmp_path: Path) -> None:
    run_id = launch(after=3600)  # COMPLETED, its traces uploaded
    started = threading.Event()
    frozen_ctx.progress = lambda done, total, message: started.set()
    dest = tmp_path / "traces"

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(registry.acall_tool, "mf_download_traces", {"run_id": run_id, "dest": str(dest)},
                             frozen_ctx)
            await anyio.to_thread.run_sync(started.wait, 30)
            group.cancel_scope.cancel()  # returns at once; the download goes on in its thread

    anyio.run(main)
    for _ in range(600):  # wait (bounded) for the background download's audit record
        if [a for a in frozen_ctx.store().audit() if a.tool == "mf_download_traces"]:
            break
        time.sleep(0.05)
    (record,) = [a for a in frozen_ctx.store().audit() if a.tool == "mf_download_traces"]
    assert record.outcome == "ok" and record.run_id == run_id
    manifest = (dest / "manifest.jsonl").read_text().splitlines()
    assert manifest and all(json.loads(line) for line in manifest)
