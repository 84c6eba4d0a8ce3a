"""``model-factory mcp``'s server driven through the official ``mcp`` SDK client.

Most tests connect the SDK's client to :func:`skill.mcp_server.build_server` in this process (the
SDK's in-memory transport: the same server, its calls' contexts built from an environment that points
at an :class:`EmulatorServer` on loopback, with injected time where a tool waits). The client connects
with ``mode="legacy"`` (the ``initialize`` handshake Claude Code, Claude Desktop, Cursor, Codex and the
Inspector use) unless a test says otherwise. One test starts the real console script over raw pipes:
stdout carries protocol messages only, and closing stdin ends the server.
"""

from __future__ import annotations

import base64
import json
import subprocess
import tomllib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from _helpers import CLI, FakeTime, at_step, cli_env
from mcp import Client

from skill import registry
from skill.emulator import EmulatorServer
from skill.mcp_server import build_server, without_nulls
from tools.configs import EXAMPLES_DIR
from tools.core import Context
from tools.platform import wire
from tools.platform.client import PlatformClient
from tools.platform.settings import resolve_settings


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-work")


@pytest.fixture(scope="module")
def env(module_emulator: EmulatorServer, workdir: Path) -> dict[str, str]:
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    return cli_env(module_emulator, home, workdir / "state", XDG_CACHE_HOME=str(home / ".cache"))


def with_client(env: dict[str, str], cwd: Path, scenario: Callable[[Client], Awaitable[Any]], *,
                mode: str = "legacy", elicitation: Any = None, time: Any = None) -> Any:
    """Connect the SDK client to the MCP server in this process and run ``scenario(client)``. Each call's
    Context reads ``env`` (HOME and the state folder from it) and works in ``cwd``; ``time`` (a
    :class:`FakeTime`): its clock and sleep, so a tool that waits moves the emulator's clock instead."""
    def context() -> Context:
        waits = {"clock": time.clock, "sleep": time.sleep} if time is not None else {}
        return Context(env=env, home=Path(env["HOME"]), state_dir=Path(env["MODEL_FACTORY_STATE_DIR"]), cwd=cwd,
                       **waits)

    async def main() -> Any:
        async with Client(build_server(context), mode=mode, elicitation_callback=elicitation,
                          read_timeout_seconds=60) as client:
            return await scenario(client)

    return anyio.run(main)


def structured(result: Any) -> dict[str, Any]:
    """The structured content, checked against the text block's JSON (same facts in both; the text
    leaves null fields out)."""
    assert isinstance(result.structured_content, dict)
    text = result.content[0].text
    assert json.loads(text.split("\n", 1)[-1]) == without_nulls(result.structured_content)
    assert text.startswith("{") is not result.is_error  # an error's code comes first, on a line of its own
    return result.structured_content


def create_run(module_emulator: EmulatorServer, env: dict[str, str], workdir: Path) -> str:
    config = tomllib.loads((EXAMPLES_DIR / "basic/reverse-text/rl.toml").read_text())
    with PlatformClient(resolve_settings(env=env, home=workdir / "home")) as client:
        return client.create_run(wire.build_create_body(config, name="mcp-test")).run_id


def prepare(client: Client, workdir: Path, name: str) -> Awaitable[Any]:
    return client.call_tool("mf_prepare_config", {"example": "basic/reverse-text/rl",
                                                  "dest": str(workdir / f"{name}.toml"), "name": name})


def test_lists_tools_and_calls_preflight_and_get_logs(
        module_emulator: EmulatorServer, env: dict[str, str], workdir: Path) -> None:
    run_id = create_run(module_emulator, env, workdir)
    module_emulator.state.advance(600)  # started, several steps, logs written

    async def scenario(client: Client) -> dict[str, Any]:
        listing = await client.list_tools()
        preflight = await client.call_tool("mf_preflight", {})
        logs = await client.call_tool("mf_get_logs", {"run_id": run_id, "tail_lines": 20})
        missing = await client.call_tool("mf_get_logs", {"run_id": "c" + "0" * 24})
        return {"listing": listing, "preflight": preflight, "logs": logs, "missing": missing}

    got = with_client(env, workdir, scenario)
    tools = {t.name: t for t in got["listing"].tools}
    assert list(tools) == [s.name for s in registry.TOOLS]
    expected = {t["name"]: t for t in registry.mcp_tools()}
    for name, tool in tools.items():
        assert tool.input_schema == expected[name]["inputSchema"]
        assert tool.output_schema is None and "outputSchema" not in expected[name]
        assert tool.annotations.read_only_hint is registry.get(name).read_only
        assert tool.annotations.destructive_hint is registry.get(name).destructive
    assert tools["mf_dispatch_run"].annotations.read_only_hint is False
    assert tools["mf_stop_run"].annotations.destructive_hint is True

    preflight = got["preflight"]
    assert preflight.is_error is False, preflight.content[0].text
    assert module_emulator.api_key not in preflight.content[0].text  # never shows the key
    logs = got["logs"]
    assert logs.is_error is False, logs.content[0].text
    payload = structured(logs)
    assert payload["run_id"] == run_id and payload["lines"]
    assert got["missing"].is_error is True
    assert structured(got["missing"])["code"] == "not_found"


def test_dispatch_refuses_without_valid_confirmation(
        module_emulator: EmulatorServer, env: dict[str, str], workdir: Path) -> None:
    """No elicitation capability: the gate answers confirmation_required, a made-up code is
    refused, and no run is created."""
    before = len(module_emulator.state.runs)

    async def scenario(client: Client) -> dict[str, Any]:
        prepared = await prepare(client, workdir, "gate")
        plan = await client.call_tool("mf_plan_run", {"config_path": str(workdir / "gate.toml"), "team": "personal"})
        plan_id = structured(plan)["plan_id"]
        bare = await client.call_tool("mf_dispatch_run", {"plan_id": plan_id})
        forged = await client.call_tool("mf_dispatch_run", {"plan_id": plan_id,
                                                            "confirmation": f"mfc_{plan_id}_0123456789abcdef"})
        return {"prepared": prepared, "plan_id": plan_id, "bare": bare, "forged": forged}

    got = with_client(env, workdir, scenario)
    assert got["prepared"].is_error is False, got["prepared"].content[0].text
    bare = structured(got["bare"])
    assert got["bare"].is_error is True and bare["code"] == "confirmation_required"
    assert f"model-factory approve {got['plan_id']}" in bare["fix"]
    forged = structured(got["forged"])
    assert got["forged"].is_error is True and forged["code"].startswith("confirmation_")
    assert len(module_emulator.state.runs) == before


def test_elicitation_accept_launches_and_decline_refuses(module_emulator: EmulatorServer, env: dict[str, str],
                                                         workdir: Path) -> None:
    import mcp_types as types

    asked: list[Any] = []
    answers = iter([types.ElicitResult(action="decline"),
                    types.ElicitResult(action="accept", content={"approve": False}),
                    types.ElicitResult(action="accept", content={"approve": True})])

    async def elicitation(context: Any, params: Any) -> Any:
        asked.append(params)
        return next(answers)

    before = len(module_emulator.state.runs)

    async def scenario(client: Client) -> dict[str, Any]:
        await prepare(client, workdir, "elicit")
        arguments = {"config_path": str(workdir / "elicit.toml"), "team": "personal"}
        plan = structured(await client.call_tool("mf_plan_run", arguments))
        declined = await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"]})
        runs_after_decline = len(module_emulator.state.runs)
        unticked = await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"]})
        accepted = await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"]})
        return {"plan": plan, "declined": declined, "runs_after_decline": runs_after_decline,
                "unticked": unticked, "accepted": accepted}

    got = with_client(env, workdir, scenario, elicitation=elicitation)
    assert got["declined"].is_error is True and structured(got["declined"])["code"] == "approval_refused"
    assert got["runs_after_decline"] == before
    assert got["unticked"].is_error is True and structured(got["unticked"])["code"] == "approval_refused"
    accepted = got["accepted"]
    assert accepted.is_error is False, accepted.content[0].text
    run_id = structured(accepted)["run_id"]
    assert run_id in module_emulator.state.runs and len(module_emulator.state.runs) == before + 1
    assert len(asked) == 3
    form = asked[0]
    assert got["plan"]["plan_id"] in form.message and got["plan"]["summary"].splitlines()[0] in form.message
    props = form.requested_schema["properties"]
    assert list(props) == ["approve"] and props["approve"]["type"] == "boolean"  # a yes/no, never a secret
    assert structured(accepted)["approval_channel"] == "mcp_elicitation"  # the ledger names the channel


def test_progress_notifications_and_plot_image(
        module_emulator: EmulatorServer, env: dict[str, str], workdir: Path) -> None:
    run_id = create_run(module_emulator, env, workdir)
    updates: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        updates.append((done, total, message))

    module_emulator.state.advance(at_step(3))  # step 4 comes within the wait

    async def scenario(client: Client) -> dict[str, Any]:
        waited = await client.call_tool("mf_wait_for_run", {"run_id": run_id, "until": "step", "step": 4,
                                                            "timeout_seconds": 55}, progress_callback=progress)
        waited_updates = list(updates)
        updates.clear()
        downloaded = await client.call_tool("mf_download_traces", {"run_id": run_id, "dest": str(workdir / "traces"),
                                                                   "max_traces": 40}, progress_callback=progress)
        plot = await client.call_tool("mf_plot_metrics", {"run_id": run_id, "dest": str(workdir / "plot.png")})
        return {"waited": waited, "waited_updates": waited_updates, "downloaded": downloaded, "plot": plot}

    got = with_client(env, workdir, scenario, time=FakeTime(module_emulator))  # each poll's wait moves its clock
    assert got["waited"].is_error is False, got["waited"].content[0].text
    assert structured(got["waited"])["latest_step"] >= 4
    for seen in (got["waited_updates"], updates):
        assert seen, "no progress notification arrived"
        dones = [u[0] for u in seen]
        assert dones == sorted(dones) and len(set(dones)) == len(dones)  # strictly increasing
    assert got["downloaded"].is_error is False, got["downloaded"].content[0].text
    assert updates[-1][0] <= 40 and all(u[2] for u in updates)  # each update says what it counts
    plot = got["plot"]
    assert plot.is_error is False, plot.content[0].text
    images = [c for c in plot.content if c.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    png = base64.b64decode(images[0].data)
    assert png == (workdir / "plot.png").read_bytes() and png.startswith(b"\x89PNG")


def test_bad_calls_are_error_results(env: dict[str, str], workdir: Path) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        return {
            "bad": await client.call_tool("mf_get_logs", {"run_id": 42, "tail_lines": "many", "colour": "red"}),
            "unknown": await client.call_tool("mf_make_coffee", {}),
        }

    got = with_client(env, workdir, scenario)
    bad = structured(got["bad"])
    assert got["bad"].is_error is True and bad["code"] == "bad_arguments"
    paths = {f["path"] for f in bad["fields"]}
    assert {"run_id", "tail_lines", "colour"} <= paths
    assert "Traceback" not in got["bad"].content[0].text
    assert got["unknown"].is_error is True and structured(got["unknown"])["code"] == "unknown_tool"


def test_modern_protocol_client_lists_calls_and_approves(module_emulator: EmulatorServer, env: dict[str, str],
                                                         workdir: Path) -> None:
    """A 2026-07-28 client (the SDK's default ``auto`` mode) is served too. It has no
    server-to-client requests, so the approval form travels in an ``input_required`` round
    that the client answers and retries: a decline refuses, an explicit yes launches."""
    import mcp_types as types

    answers = iter([types.ElicitResult(action="decline"),
                    types.ElicitResult(action="accept", content={"approve": True})])
    asked: list[Any] = []

    async def elicitation(context: Any, params: Any) -> Any:
        asked.append(params)
        return next(answers)

    before = len(module_emulator.state.runs)

    async def scenario(client: Client) -> dict[str, Any]:
        got = {"version": client.protocol_version, "listing": await client.list_tools(),
               "examples": await client.call_tool("mf_list_examples", {"mode": "sft"})}
        await prepare(client, workdir, "modern")
        plan = structured(await client.call_tool("mf_plan_run", {"config_path": str(workdir / "modern.toml"),
                                                                 "team": "personal"}))
        got["declined"] = await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"]})
        got["runs_after_decline"] = len(module_emulator.state.runs)
        got["accepted"] = await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"]})
        got["plan"] = plan
        return got

    got = with_client(env, workdir, scenario, mode="auto", elicitation=elicitation)
    assert got["version"] == "2026-07-28"
    assert [t.name for t in got["listing"].tools] == [s.name for s in registry.TOOLS]
    assert got["examples"].is_error is False and structured(got["examples"])["examples"]
    assert got["declined"].is_error is True and structured(got["declined"])["code"] == "approval_refused"
    assert got["runs_after_decline"] == before
    accepted = structured(got["accepted"])
    assert got["accepted"].is_error is False and accepted["approval_channel"] == "mcp_elicitation"
    assert accepted["run_id"] in module_emulator.state.runs and len(module_emulator.state.runs) == before + 1
    assert len(asked) == 2 and got["plan"]["plan_id"] in asked[0].message


# -- the stdio boundary: the real console script over raw pipes -----------------------------------


class RawServer:
    """``model-factory mcp`` over raw pipes; every stdout line must be JSON-RPC."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(CLI), "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self, request_id: Any) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, f"server closed stdout; stderr: {self.proc.stderr.read().decode()[-2000:]}"
            message = json.loads(line)
            assert message["jsonrpc"] == "2.0"
            if message.get("id") == request_id:
                return message


def test_stdout_carries_protocol_only_and_stdin_close_ends_the_server(env: dict[str, str]) -> None:
    server = RawServer(env)
    server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    assert server.answer(1)["result"]["serverInfo"]["name"] == "model-factory"
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    server.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert [t["name"] for t in server.answer(3)["result"]["tools"]] == [s.name for s in registry.TOOLS]
    server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "mf_validate_config", "arguments": {"config_path": "/nonexistent.toml"}}})
    call = server.answer(2)["result"]  # every line read on the way was JSON-RPC 2.0
    assert call["isError"] is True and call["structuredContent"]["code"] == "config_not_found"
    out, err = server.proc.communicate(timeout=60)  # closes stdin: the server must exit by itself
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in out.decode().splitlines())
    assert server.proc.returncode == 0
    assert b"Traceback" not in out + err


def test_input_required_approvals_are_single_use_and_bound_to_the_plan() -> None:
    import mcp_types as types

    from skill.mcp_server import Approvals

    class Request:
        action, plan_hash = "launch", "sha256:" + "a" * 64

    approvals = Approvals()
    yes = {"approval": types.ElicitResult(action="accept", content={"approve": True})}
    state = approvals.ask(Request())
    assert approvals.answer("made-up-state", yes) is None  # only a state this server issued
    assert approvals.answer(state, yes) == ("launch", Request.plan_hash, True)
    assert approvals.answer(state, yes) is None  # once
    unticked = approvals.ask(Request())
    assert approvals.answer(unticked, {"approval": types.ElicitResult(action="accept", content={"approve": False})}) \
        == ("launch", Request.plan_hash, False)
    declined = approvals.ask(Request())
    assert approvals.answer(declined, {"approval": types.ElicitResult(action="decline")})[2] is False
    assert approvals.answer(approvals.ask(Request()), {})[2] is False  # no answer is no
