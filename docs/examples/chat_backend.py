"""An asyncio chat backend that serves a person's chat with the Model Factory tools, in-process.

The model runs elsewhere (Anthropic's Messages API or OpenAI's Chat Completions); this backend keeps each
chat's messages, hands the model the tool definitions (``anthropic_tools()`` / ``openai_tools()``: about
12,000 characters for every tool), and runs each tool call the model makes with ``aanthropic_tool_result``
/ ``aopenai_tool_message``: the same guardrails as every other surface (a launch needs the person's
approval of the exact plan, secrets by name, output budgets, the audit trail), off the event loop, and
cancellable (a person who closes the chat cancels the turn: reads stop, a launch in progress completes
and is recorded exactly once).

The person approves a launch outside the model: ``mf_dispatch_run`` answers ``confirmation_required`` with
the ``model-factory approve PLAN_ID`` command in ``fix``; the person runs it in their own terminal and
pastes the code into the chat, and the model calls ``mf_dispatch_run`` again with it. A backend with a UI
of its own can instead pass ``Context(approver=...)``: a callback that shows ``request.summary`` to the
person and returns True only on their click (docs/mcp.md, "Use from Python").

Plug in a real model with one of the adapters at the end (the ``anthropic`` / ``openai`` packages are not
dependencies of this project); tests/test_chat_backend.py drives both chats with scripted models against
the local emulator.

    chat = AnthropicChat(anthropic_model(AsyncAnthropic(), "claude-sonnet-4-5"))
    print(await chat.send("Run the reverse-text example as a smoke test under my personal account"))
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from skill.registry import aanthropic_tool_result, anthropic_tools, aopenai_tool_message, openai_tools
from tools.core import Context

#: Model turns one message of the person may take at most (each turn may call several tools).
MAX_TURNS = 24
SYSTEM = ("You help a person train models on Prime Intellect's Model Factory with the mf_* tools. Show plans and "
          "costs verbatim; only the person approves a launch; pass secrets by name only.")

#: ``await model(system, messages, tools) -> the model's reply`` (a dict in the provider's own shape).
Model = Callable[[str, list[dict[str, Any]], list[dict[str, Any]]], Awaitable[dict[str, Any]]]


class AnthropicChat:
    """One person's chat, Anthropic Messages API shape (content blocks; ``tool_use`` -> ``tool_result``)."""

    def __init__(self, model: Model, ctx: Context | None = None) -> None:
        self.model, self.ctx, self.messages = model, ctx, []
        self.tools = anthropic_tools()

    async def send(self, text: str) -> str:
        """Add the person's message, run the model and its tool calls until it answers in text; that text."""
        self.messages.append({"role": "user", "content": text})
        for _ in range(MAX_TURNS):
            reply = await self.model(SYSTEM, self.messages, self.tools)
            content = reply["content"]
            self.messages.append({"role": "assistant", "content": content})
            uses = [block for block in content if block["type"] == "tool_use"]
            if not uses:
                return "".join(block.get("text", "") for block in content if block["type"] == "text")
            # one at a time, in the model's order: a plan must exist before its dispatch
            results = [await aanthropic_tool_result(use, self.ctx) for use in uses]
            self.messages.append({"role": "user", "content": results})
        return "(stopped: too many tool calls for one message)"


class OpenAIChat:
    """One person's chat, OpenAI Chat Completions shape (``tool_calls`` -> ``role: tool`` messages)."""

    def __init__(self, model: Model, ctx: Context | None = None) -> None:
        self.model, self.ctx = model, ctx
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        self.tools = openai_tools()

    async def send(self, text: str) -> str:
        self.messages.append({"role": "user", "content": text})
        for _ in range(MAX_TURNS):
            message = await self.model(SYSTEM, self.messages, self.tools)
            self.messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                return message.get("content") or ""
            for tool_call in calls:
                self.messages.append(await aopenai_tool_message(tool_call, self.ctx))
        return "(stopped: too many tool calls for one message)"


def anthropic_model(client: Any, model: str, max_tokens: int = 4096) -> Model:
    """An adapter over ``anthropic.AsyncAnthropic()``."""
    async def call(system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        reply = await client.messages.create(model=model, max_tokens=max_tokens, system=system, tools=tools,
                                             messages=messages)
        return reply.model_dump()
    return call


def openai_model(client: Any, model: str) -> Model:
    """An adapter over ``openai.AsyncOpenAI()`` (Chat Completions, strict tool schemas)."""
    async def call(system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        reply = await client.chat.completions.create(model=model, messages=messages, tools=tools)
        return json.loads(reply.choices[0].message.model_dump_json(exclude_none=True))
    return call
