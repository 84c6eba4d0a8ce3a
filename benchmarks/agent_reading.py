"""How much an agent reads on the smoke-run path: the tool catalogue (every tool's definition, as the model
gets it on every turn), the skill text it is told to read, and the MCP result text of every tool call in the
smoke sequence.

The request: "run the reverse-text RL example on Model Factory as a quick smoke test under my
personal account, forward my W&B key, watch it until it finishes, then download its traces and
tell me how it went". The documents read are SKILL.md and each reference its "When to read a reference"
table sends an agent to on that path (:data:`OCCASIONS`: forwarding the W&B key, the
``confirmation_required`` code, and any other code a result gives); :func:`smoke` is the tool sequence
SKILL.md's workflow gives for it. It is replayed through
the MCP server (the SDK's in-memory client) against the local emulator, whose clock moves with
each wait (no wall time): a person approves the plan at the terminal (``model-factory approve``,
here its function) when the dispatch asks for it, as SKILL.md tells the agent to ask.

    uv run python benchmarks/agent_reading.py          # a table, one row per document and call
    uv run python benchmarks/agent_reading.py --json   # {catalogue_chars, skill_chars, total_chars, ...}

Goals: ``catalogue_chars`` <= :data:`CATALOGUE_BUDGET_CHARS` (the Anthropic form, compact JSON:
:func:`skill.registry.catalogue_chars`) and ``total_chars`` <= :data:`BUDGET_CHARS`
(tests/test_agent_reading.py and tests/test_registry.py keep them). ``tools_list_chars`` is the MCP
``tools/list`` answer as the server sends it.
"""

from __future__ import annotations

import argparse
import json
import re
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
SKILL_MD = "SKILL.md"
#: What the smoke path meets that SKILL.md's reference table could send an agent to read for, as the words
#: a table row would name it by (regular expressions); the codes the results give are added to these.
OCCASIONS = {"forwarding the W&B key": r"\bW&B\b|WANDB_API_KEY|\bsecrets?\b",
             "an error code": r"\bany (error )?code\b|\berror codes\b"}
BUDGET_CHARS = 45_000
CATALOGUE_BUDGET_CHARS = 15_000
_ROW = re.compile(r"^\| \[[^\]]+\]\((references/[^)#]+)[^)]*\) \| (.*) \|$")


def reference_rows() -> list[tuple[str, str]]:
    """(reference path, when to read it) of each row of SKILL.md's "When to read a reference" table."""
    text = (ROOT / SKILL_MD).read_text(encoding="utf-8")
    table = text.split("## When to read a reference", 1)[1].split("\n## ", 1)[0]
    return [(m[1], m[2]) for m in map(_ROW.match, table.splitlines()) if m]


def docs_read(codes: set[str]) -> list[str]:
    """SKILL.md, then each reference whose row names an occasion of the path or a code in ``codes`` (the
    ToolError codes the path's results gave)."""
    patterns = [*OCCASIONS.values(), *(rf"`{re.escape(code)}`" for code in sorted(codes))]
    sent = [path for path, when in reference_rows() if any(re.search(p, when) for p in patterns)]
    return [SKILL_MD, *dict.fromkeys(sent)]
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
    """What the agent read: each call's tool, arguments and result text, in order, and the MCP listing."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    tools_list_chars: int = 0

    def codes(self) -> set[str]:
        """The ToolError codes the results gave."""
        return {c["code"] for c in self.calls if c.get("code")}

    def documents(self) -> list[str]:
        return docs_read(self.codes())

    def skill_chars(self) -> int:
        return sum(len((ROOT / doc).read_text(encoding="utf-8")) for doc in self.documents())

    def tool_output_chars(self) -> int:
        return sum(c["chars"] for c in self.calls)

    def figures(self) -> dict[str, Any]:
        from skill.registry import catalogue_chars

        catalogue, skill, tools = catalogue_chars(), self.skill_chars(), self.tool_output_chars()
        return {"catalogue_chars": catalogue, "skill_chars": skill, "tool_output_chars": tools,
                "total_chars": catalogue + skill + tools, "budget_chars": BUDGET_CHARS,
                "catalogue_budget_chars": CATALOGUE_BUDGET_CHARS, "tools_list_chars": self.tools_list_chars,
                "docs_read": self.documents(), "references_sent": len(self.documents()) - 1,
                "tool_calls": len(self.calls), "calls": [{"tool": c["tool"], "chars": c["chars"]} for c in self.calls]}


class Agent:
    """Calls tools through an MCP client and keeps the text it was given back."""

    def __init__(self, client: Any, reading: Reading) -> None:
        self.client, self.reading = client, reading

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, arguments)
        text = "".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        structured = dict(result.structured_content or {})
        self.reading.calls.append({"tool": tool, "arguments": arguments, "chars": len(text), "text": text,
                                   "code": structured.get("code") if result.is_error else None})
        return structured


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
                listing = await client.list_tools()
                reading.tools_list_chars = len(json.dumps(listing.model_dump(mode="json", by_alias=True,
                                                                             exclude_none=True), separators=(",", ":")))
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
    print(f"{'tool catalogue':28} {figures['catalogue_chars']:>7}")
    for doc in figures["docs_read"]:
        print(f"{doc:28} {len((ROOT / doc).read_text(encoding='utf-8')):>7}")
    for c in reading.calls:
        print(f"{c['tool']:28} {c['chars']:>7}")
    print(f"{'catalogue (budget ' + format(CATALOGUE_BUDGET_CHARS, ',') + ')':28} {figures['catalogue_chars']:>7}")
    print(f"{'skill text':28} {figures['skill_chars']:>7}")
    print(f"{'tool output':28} {figures['tool_output_chars']:>7}")
    print(f"{'total (budget ' + format(BUDGET_CHARS, ',') + ')':28} {figures['total_chars']:>7}")
    print(f"{'MCP tools/list answer':28} {figures['tools_list_chars']:>7}")
    print(f"run {report.get('run_id')}: {report.get('status')}, traces complete: {report.get('traces_complete')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
