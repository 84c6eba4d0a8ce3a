"""How much an agent reads on the smoke-run path: the skill text it is told to read, plus the MCP
result text of every tool call in the smoke sequence (the tool catalogue is not counted).

The request: "run the reverse-text RL example on Model Factory as a quick smoke test under my
personal account, forward my W&B key, watch it until it finishes, then download its traces and
tell me how it went". :data:`DOCS_READ` lists the documents SKILL.md sends an agent to on that
path; :func:`smoke` is the tool sequence SKILL.md's workflow gives for it. It is replayed through
the MCP server (the SDK's in-memory client) against the local emulator, whose clock moves with
each wait (no wall time): a person approves the plan at the terminal (``model-factory approve``,
here its function) when the dispatch asks for it, as SKILL.md tells the agent to ask.

    uv run python benchmarks/agent_reading.py          # a table, one row per call
    uv run python benchmarks/agent_reading.py --json   # {skill_chars, tool_output_chars, total_chars, ...}

Goal: ``total_chars`` <= :data:`BUDGET_CHARS` (tests/test_agent_reading.py keeps it).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

REQUEST = ("run the reverse-text RL example on Model Factory as a quick smoke test under my personal account, "
           "forward my W&B key, watch it until it finishes, then download its traces and tell me how it went")
#: What SKILL.md tells an agent to read on this path (paths relative to the repository): itself only.
DOCS_READ = ("SKILL.md",)
BUDGET_CHARS = 35_000
FAKE_WANDB = "wandb_v1_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE00"


class SimulatedTime:
    """The tools' clock and sleep: a wait returns at once and moves the emulator's clock by as much."""

    def __init__(self, emulator: Any) -> None:
        self.now, self.emulator = 0.0, emulator

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
        self.emulator.state.advance(max(0.0, seconds))


@dataclass
class Reading:
    """What the agent read: each call's tool, arguments and result text, in order."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def skill_chars(self) -> int:
        return sum(len((ROOT / doc).read_text(encoding="utf-8")) for doc in DOCS_READ)

    def tool_output_chars(self) -> int:
        return sum(c["chars"] for c in self.calls)

    def figures(self) -> dict[str, Any]:
        skill, tools = self.skill_chars(), self.tool_output_chars()
        return {"skill_chars": skill, "tool_output_chars": tools, "total_chars": skill + tools,
                "budget_chars": BUDGET_CHARS, "docs_read": list(DOCS_READ), "tool_calls": len(self.calls),
                "calls": [{"tool": c["tool"], "chars": c["chars"]} for c in self.calls]}


class Agent:
    """Calls tools through an MCP client and keeps the text it was given back."""

    def __init__(self, client: Any, reading: Reading) -> None:
        self.client, self.reading = client, reading

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        text = "".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        self.reading.calls.append({"tool": tool, "arguments": arguments, "chars": len(text), "text": text})
        return dict(result.structured_content or {})


async def smoke(agent: Agent, approve: Any) -> dict[str, Any]:
    """The smoke path as SKILL.md's workflow lays it out; returns the final report's result.

    ``approve(plan_id) -> code`` is the person at their terminal (never the agent)."""
    await agent.call("mf_preflight")
    prepared = await agent.call("mf_prepare_config", example="basic/reverse-text/rl", dest="reverse-text-smoke.toml",
                                num_train_gpus=1, num_infer_gpus=1)
    plan = await agent.call("mf_plan_run", config_path=prepared["path"], team="personal", secrets=["WANDB_API_KEY"])
    asked = await agent.call("mf_dispatch_run", plan_id=plan["plan_id"])
    assert asked.get("code") == "confirmation_required", asked
    run = await agent.call("mf_dispatch_run", plan_id=plan["plan_id"], confirmation=approve(plan["plan_id"]))
    run_id, checked = run["run_id"], False
    while True:
        waited = await agent.call("mf_wait_for_run", run_id=run_id)
        if waited["terminal"]:
            break
        named = any(c["tool"] == "mf_check_progress" for c in waited.get("next_calls") or [])
        if named or (not checked and (waited.get("latest_step") or 0) >= 1):
            # when the wait names it (a failing pod, a long start-up, no new step), and once it trains
            await agent.call("mf_check_progress", run_id=run_id)
            checked = checked or (waited.get("latest_step") or 0) >= 1
    dest = "reverse-text-smoke-traces"
    await agent.call("mf_download_traces", run_id=run_id, dest=dest)
    return await agent.call("mf_run_report", run_id=run_id, traces_dir=dest)


def replay() -> tuple[Reading, dict[str, Any]]:
    """Run :func:`smoke` on a fresh emulator through the in-memory MCP client; (reading, report)."""
    import anyio
    from mcp import Client

    from skill.emulator import EmulatorServer
    from skill.mcp_server import build_server
    from tools.core import Context
    from tools.launch import approve_plan

    reading = Reading()
    with EmulatorServer(speed=0) as emulator, tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for sub in ("home", "state", "project"):
            (root / sub).mkdir()
        env = {"PRIME_API_KEY": emulator.api_key, "PRIME_API_BASE_URL": emulator.base_url,
               "PRIME_TRACES_URL": emulator.base_url, "PRIME_FRONTEND_URL": emulator.base_url,
               "HOME": str(root / "home"), "MODEL_FACTORY_STATE_DIR": str(root / "state"), "WANDB_API_KEY": FAKE_WANDB}
        time = SimulatedTime(emulator)

        def context() -> Context:
            return Context(env=env, home=root / "home", state_dir=root / "state", cwd=root / "project",
                           clock=time.clock, sleep=time.sleep)

        def approve(plan_id: str) -> str:
            person = context()
            try:
                return approve_plan(plan_id, "terminal", person)
            finally:
                person.close()

        async def main() -> dict[str, Any]:
            async with Client(build_server(context)) as client:
                return await smoke(Agent(client, reading), approve)

        report = anyio.run(main)
    return reading, report


def main(argv: list[str] | None = None, replayed: tuple[Reading, dict[str, Any]] | None = None) -> int:
    """Print the figures of :func:`replay` (``replayed``: a replay already made, printed instead of a new one)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    reading, report = replayed or replay()
    figures = reading.figures()
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    print(f"request: {REQUEST}")
    print(f"{'read':28} {'chars':>7}")
    for doc in DOCS_READ:
        print(f"{doc:28} {len((ROOT / doc).read_text(encoding='utf-8')):>7}")
    for c in reading.calls:
        print(f"{c['tool']:28} {c['chars']:>7}")
    print(f"{'skill text':28} {figures['skill_chars']:>7}")
    print(f"{'tool output':28} {figures['tool_output_chars']:>7}")
    print(f"{'total (budget ' + format(BUDGET_CHARS, ',') + ')':28} {figures['total_chars']:>7}")
    print(f"run {report.get('run_id')}: {report.get('status')}, traces complete: {report.get('traces_complete')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
