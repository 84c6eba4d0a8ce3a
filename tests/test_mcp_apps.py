"""The MCP Apps approval view (skill/apps.py) through the SDK's in-memory client: a client that renders
MCP Apps gets the gated tools linked to the view and the app-only answer tool, a gated call that needs a
person carries the plan and a single-use nonce in its result's ``_meta``, and only that nonce, once, for
that plan, approves (channel ``mcp_app`` in the state store) or refuses. A client without Apps sees none
of it. The real browser test of the view is tests/test_approval_view_browser.py."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from _helpers import cli_env
from mcp import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from skill import apps
from skill.emulator import EmulatorServer
from skill.mcp_server import build_server
from tools.core import Context
from tools.launch import plan_request

pytestmark = pytest.mark.xdist_group("test_mcp_apps")

HOSTILE = "<img src=x onerror=alert(1)>&amp;<script>alert(2)</script>"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp-apps")


@pytest.fixture(scope="module")
def env(module_emulator: EmulatorServer, workdir: Path) -> dict[str, str]:
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    return cli_env(module_emulator, home, workdir / "state", XDG_CACHE_HOME=str(home / ".cache"))


def context_for(env: dict[str, str], cwd: Path) -> Callable[[], Context]:
    def context() -> Context:
        return Context(env=env, home=Path(env["HOME"]), state_dir=Path(env["MODEL_FACTORY_STATE_DIR"]), cwd=cwd)
    return context


def with_client(env: dict[str, str], cwd: Path, scenario: Callable[[Client], Awaitable[Any]], *,
                with_apps: bool = True) -> Any:
    extensions = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})] if with_apps else None

    async def main() -> Any:
        async with Client(build_server(context_for(env, cwd)), extensions=extensions,
                          read_timeout_seconds=60) as client:
            return await scenario(client)

    return anyio.run(main)


async def planned(client: Client, workdir: Path, name: str) -> dict[str, Any]:
    dest = str(workdir / f"{name}.toml")
    prepared = await client.call_tool("mf_prepare_config", {"example": "basic/reverse-text/rl", "dest": dest,
                                                            "num_train_gpus": 1, "num_infer_gpus": 1})
    assert not prepared.is_error, prepared.content[0].text
    plan = await client.call_tool("mf_plan_run", {"config_path": dest, "team": "personal", "name": name})
    assert not plan.is_error, plan.content[0].text
    return dict(plan.structured_content)


def view_of(result: Any) -> dict[str, Any]:
    assert result.is_error and result.structured_content["code"] == "confirmation_required", result
    return (result.meta or {})[apps.META_KEY]


def test_an_apps_client_gets_the_view_linked_and_the_answer_tool_marked_app_only(env, workdir) -> None:
    async def scenario(client: Client) -> Any:
        listed = await client.list_tools()
        resources = await client.list_resources()
        read = [await client.read_resource(uri) for uri in (apps.VIEW_URI, apps.CARD_URI)]
        return listed, resources, read

    listed, resources, read = with_client(env, workdir, scenario)
    tools = {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in listed.tools}
    answer = tools[apps.ANSWER_TOOL]
    assert answer["_meta"]["ui"] == {"resourceUri": apps.VIEW_URI, "visibility": ["app"]}
    for name in apps.GATED_TOOLS:
        assert tools[name]["_meta"]["ui"] == {"resourceUri": apps.VIEW_URI}, name
    for name in apps.CARD_TOOLS:
        assert tools[name]["_meta"]["ui"] == {"resourceUri": apps.CARD_URI}, name
    assert "_meta" not in tools["mf_get_run"]
    assert [r.uri for r in resources.resources] == [apps.VIEW_URI, apps.CARD_URI]
    for uri, answer in zip((apps.VIEW_URI, apps.CARD_URI), read, strict=True):
        (content,) = answer.contents
        assert content.mime_type == APP_MIME_TYPE and content.text == apps.view_html(uri)
        html = content.text
        # self-contained: no URL to fetch, a CSP that forbids every fetch, values only through textContent
        assert not re.search(r"(?i)\b(src|href)\s*=\s*[\"'](?!data:image/png;base64,)|https?://|@import|url\(",
                             html), uri  # the run card's plot is a data: image set from a tool result
        assert "default-src 'none'" in html and "innerHTML" not in html and "insertAdjacentHTML" not in html, uri


def test_a_client_without_apps_sees_no_view_and_cannot_call_the_answer_tool(env, workdir) -> None:
    async def scenario(client: Client) -> Any:
        listed = await client.list_tools()
        plan = await planned(client, workdir, "no-apps")
        bare = await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"]})
        forced = await client.call_tool(apps.ANSWER_TOOL, {"plan_id": plan["plan_id"], "nonce": "x",
                                                           "decision": "approve"})
        return listed, bare, forced

    listed, bare, forced = with_client(env, workdir, scenario, with_apps=False)
    assert apps.ANSWER_TOOL not in [t.name for t in listed.tools]
    assert all(t.meta is None for t in listed.tools)
    assert bare.is_error and bare.structured_content["code"] == "confirmation_required"
    assert apps.META_KEY not in (bare.meta or {})
    assert "model-factory approve" in bare.structured_content["fix"]  # the terminal channel, as before
    assert forced.is_error and forced.structured_content["code"] == "unknown_tool"


def test_only_the_views_nonce_once_for_its_plan_approves_and_the_launch_records_the_mcp_app_channel(
        module_emulator: EmulatorServer, env, workdir) -> None:
    before = len(module_emulator.state.runs)

    async def scenario(client: Client) -> dict[str, Any]:
        plan = await planned(client, workdir, "apps-approve")
        other = await planned(client, workdir, "apps-other")
        shown = await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"]})
        meta = view_of(shown)
        answer = apps.ANSWER_TOOL
        got = {"plan": plan, "shown": shown, "meta": meta}
        got["missing"] = await client.call_tool(answer, {"plan_id": plan["plan_id"], "decision": "approve"})
        got["made_up"] = await client.call_tool(answer, {"plan_id": plan["plan_id"], "nonce": "A" * 32,
                                                         "decision": "approve"})
        other_view = view_of(await client.call_tool("mf_dispatch_run", {"plan_id": other["plan_id"]}))
        got["other"], got["other_view"] = other, other_view
        got["crossed"] = await client.call_tool(answer, {"plan_id": plan["plan_id"], "nonce": other_view["nonce"],
                                                         "decision": "approve"})
        got["crossed_again"] = await client.call_tool(answer, {"plan_id": other["plan_id"],
                                                               "nonce": other_view["nonce"], "decision": "approve"})
        got["approved"] = await client.call_tool(answer, {"plan_id": plan["plan_id"], "nonce": meta["nonce"],
                                                          "decision": "approve"})
        got["replayed"] = await client.call_tool(answer, {"plan_id": plan["plan_id"], "nonce": meta["nonce"],
                                                          "decision": "approve"})
        code = (got["approved"].structured_content or {}).get("confirmation")
        got["launched"] = await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"], "confirmation": code})
        return got

    got = with_client(env, workdir, scenario)
    meta, plan = got["meta"], got["plan"]
    assert meta["plan_id"] == plan["plan_id"] and meta["action"] == "launch" and meta["owner"] == "personal"
    person = context_for(env, workdir)()
    try:  # the summary the terminal's `model-factory approve` prints, word for word
        assert got["other_view"]["summary"] == plan_request(got["other"]["plan_id"], person).summary
    finally:
        person.close()
    assert "x 2" in meta["summary"] and "Cost estimate:" in meta["summary"] and "Steps:" in meta["summary"]
    model_text = got["shown"].content[0].text  # what the model reads: no nonce, the view and the terminal named
    assert meta["nonce"] not in model_text and meta["nonce"] not in json.dumps(got["shown"].structured_content)
    assert "approval view" in model_text and "model-factory approve" in model_text
    for key in ("missing", "made_up", "crossed", "crossed_again", "replayed"):  # a spent nonce is spent
        refused = got[key]
        assert refused.is_error and refused.structured_content["code"] == "confirmation_required", key
        assert "nothing was approved" in refused.structured_content["message"], key
    approved = got["approved"].structured_content
    assert not got["approved"].is_error, got["approved"].content[0].text
    assert approved["decision"] == "approve" and approved["channel"] == "mcp_app"
    assert re.fullmatch(rf"mfc_{plan['plan_id']}_[0-9a-f]{{40}}", approved["confirmation"])
    assert approved["confirmation"] in approved["chat_message"] and "mf_dispatch_run(" in approved["chat_message"]
    launched = got["launched"].structured_content
    assert not got["launched"].is_error and launched["status"] == "created", got["launched"].content[0].text
    assert launched["approval_channel"] == "mcp_app"
    assert len(module_emulator.state.runs) == before + 1
    ctx = context_for(env, workdir)()
    try:
        approvals, attempts, _ = ctx.store().records_of([plan["plan_id"]])
    finally:
        ctx.close()
    assert [a.channel for a in approvals] == [a.channel for a in attempts] == ["mcp_app"]
    assert "MCP Apps view" in approvals[0].checked


def test_refuse_mints_nothing_and_the_plan_still_needs_a_person(module_emulator: EmulatorServer, env, workdir) -> None:
    before = len(module_emulator.state.runs)

    async def scenario(client: Client) -> dict[str, Any]:
        plan = await planned(client, workdir, HOSTILE)
        meta = view_of(await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"]}))
        refused = await client.call_tool(apps.ANSWER_TOOL, {"plan_id": plan["plan_id"], "nonce": meta["nonce"],
                                                            "decision": "refuse"})
        again = await client.call_tool("mf_dispatch_run", {"plan_id": plan["plan_id"]})
        return {"plan": plan, "meta": meta, "refused": refused, "again": again}

    got = with_client(env, workdir, scenario)
    assert HOSTILE in got["meta"]["summary"]  # the view shows the name as text (tests/test_approval_view_browser.py)
    refused = got["refused"].structured_content
    assert not got["refused"].is_error and refused["decision"] == "refuse" and refused.get("confirmation") is None
    assert view_of(got["again"])["nonce"] != got["meta"]["nonce"]  # a new view, a new nonce
    ctx = context_for(env, workdir)()
    try:
        assert ctx.store().records_of([got["plan"]["plan_id"]])[0] == []
        audit = [a for a in ctx.store().audit() if a.tool == apps.ANSWER_TOOL]
    finally:
        ctx.close()
    assert audit and all("nonce" not in a.arguments for a in audit)
    assert len(module_emulator.state.runs) == before


def test_a_stop_is_approved_in_the_view_for_its_run(module_emulator: EmulatorServer, env, workdir) -> None:
    import tomllib

    from _helpers import EXAMPLE

    from tools.platform import wire
    from tools.platform.client import PlatformClient
    from tools.platform.settings import resolve_settings

    with PlatformClient(resolve_settings(env=env, home=Path(env["HOME"]))) as platform:
        run_id = platform.create_run(wire.build_create_body(tomllib.loads(EXAMPLE.read_text()), name="stop-me")).run_id
    module_emulator.state.advance(600)

    async def scenario(client: Client) -> dict[str, Any]:
        meta = view_of(await client.call_tool("mf_stop_run", {"run_id": run_id, "timeout_seconds": 0}))
        approved = await client.call_tool(apps.ANSWER_TOOL, {"plan_id": meta["plan_id"], "nonce": meta["nonce"],
                                                             "decision": "approve"})
        return {"meta": meta, "approved": approved.structured_content}

    got = with_client(env, workdir, scenario)
    assert got["meta"]["action"] == "stop" and got["meta"]["run_id"] == run_id
    assert "cannot be undone" in got["meta"]["meaning"]
    code = got["approved"]["confirmation"]
    assert f'mf_stop_run(run_id="{run_id}", confirmation="{code}")' in got["approved"]["chat_message"]
