"""The approval view in a real browser: headless Chromium (Debian's ``chromium``) loads
``skill/views/approval.html`` through a minimal MCP Apps host (tests/_browser.py) that speaks the bridge
as a host would, with the real result of a gated call made through the MCP server (SDK in-memory client,
emulator behind it). A mouse click on Approve mints the approval (channel ``mcp_app``) and the code
reaches the chat; a click on Refuse mints nothing; a hostile run name is shown as text. One browser for
the whole session; each test opens a tab. Screenshots land in the test's temporary folder.

Without a browser the tests skip, except under ``MF_REQUIRE_BROWSER=1`` (.ci/run), where they fail."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _browser import Chromium, chromium_binary, host_page
from _helpers import EXAMPLE, at_step, cli_env, unavailable
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from skill import apps
from skill.emulator import EmulatorServer
from skill.mcp_server import build_server
from tools.core import Context
from tools.platform import wire

pytestmark = pytest.mark.xdist_group("browser")

HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>&amp;\"'"


@pytest.fixture(scope="session")
def browser() -> Iterator[Chromium]:
    binary = chromium_binary()
    if binary is None:
        unavailable("no chromium on PATH (Debian: apt-get install chromium)", "MF_REQUIRE_BROWSER")
    chromium = Chromium(binary)
    yield chromium
    chromium.close()


@pytest.fixture(scope="module")
def host(module_emulator: EmulatorServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """An MCP client that advertises MCP Apps, connected in memory to the server, callable from this thread."""
    work = tmp_path_factory.mktemp("view-host")
    (work / "home").mkdir()
    env = cli_env(module_emulator, work / "home", work / "state", XDG_CACHE_HOME=str(work / "home" / ".cache"))

    def context() -> Context:
        return Context(env=env, home=work / "home", state_dir=work / "state", cwd=work)

    connection = Client(build_server(context), extensions=[advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})],
                        read_timeout_seconds=60)
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(connection) as client:
        yield Host(portal, client, work, context)


class Host:
    """The test's side of the host: calls the server, and answers the view's requests as a host would."""

    def __init__(self, portal: BlockingPortal, client: Client, work: Path, context: Any) -> None:
        self.portal, self.client, self.work, self.context = portal, client, work, context
        listed = portal.call(client.list_tools)
        self.visibility = {t.name: ((t.meta or {}).get("ui") or {}).get("visibility", ["model", "app"])
                           for t in listed.tools}
        self.messages: list[str] = []

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return self.portal.call(self.client.call_tool, name, arguments)

    def gated_result(self, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """Plan the bundled smoke example under run name ``name`` and call mf_dispatch_run without a code:
        (its arguments, its CallToolResult as the host hands it to the view)."""
        dest = str(self.work / f"{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-') or 'hostile'}.toml")
        self.call("mf_prepare_config", {"example": "basic/reverse-text/rl", "dest": dest, "num_train_gpus": 1,
                                        "num_infer_gpus": 1})
        plan = self.call("mf_plan_run", {"config_path": dest, "team": "personal", "name": name})
        assert not plan.is_error, plan.content[0].text
        arguments = {"plan_id": plan.structured_content["plan_id"]}
        shown = self.call("mf_dispatch_run", arguments)
        assert shown.is_error and apps.META_KEY in (shown.meta or {}), shown
        return arguments, shown.model_dump(mode="json", by_alias=True, exclude_none=True)

    def serve(self, page: Any, message: bool = True) -> dict[str, Any]:
        """Answer the view's next request: a tools/call (only of a tool visible to apps, as a host must) is
        sent to the server, then (``message``) the ui/message that follows is taken into the chat. The
        tool's result."""
        request = page.host_request()
        assert request["method"] == "tools/call", request
        name = request["params"]["name"]
        if "app" not in self.visibility.get(name, []):
            page.reply(request["id"], error=f"{name} is not callable from an app")
            return {}
        result = self.call(name, request["params"].get("arguments") or {})
        answer = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        page.reply(request["id"], answer)
        if not message:
            return answer
        message = page.host_request()
        assert message["method"] == "ui/message" and message["params"]["role"] == "user", message
        self.messages.append(" ".join(block["text"] for block in message["params"]["content"]))
        page.reply(message["id"], {})
        return answer

    def approvals(self, plan_id: str) -> list[Any]:
        ctx = self.context()
        try:
            return ctx.store().records_of([plan_id])[0]
        finally:
            ctx.close()


def open_view(browser: Chromium, host: Host, tmp_path: Path, name: str) -> tuple[Any, str, dict[str, Any]]:
    arguments, result = host.gated_result(name)
    page, view = load(browser, tmp_path, apps.VIEW_URI, arguments, result)
    page.wait_for("!document.getElementById('approval').hidden", view)
    return page, view, result


def load(browser: Chromium, tmp_path: Path, uri: str, arguments: dict[str, Any], result: dict[str, Any]) -> Any:
    """A new tab with the host page rendering view ``uri`` for this tool call; (page, the view's frame)."""
    page_file = tmp_path / "host.html"
    page_file.write_text(host_page(apps.view_html(uri), arguments, result), encoding="utf-8")
    page = browser.page()
    page.open(page_file)
    return page, page.frame()


def test_approve_clicked_in_the_view_mints_the_approval_and_the_code_reaches_the_chat(
        browser: Chromium, host: Host, tmp_path: Path) -> None:
    page, view, result = open_view(browser, host, tmp_path, "view-approve")
    try:
        meta = result["_meta"][apps.META_KEY]
        shown = page.evaluate("document.getElementById('summary').textContent", view)
        assert shown == meta["summary"] and "Owner (pays):" in shown and "Cost estimate:" in shown
        title = page.evaluate("document.getElementById('title').textContent", view)
        assert title == f"Approve launching plan {meta['plan_id']}?"
        page.screenshot(tmp_path / "approval.png")
        page.click("#approve", view)
        answer = host.serve(page)
        status = page.wait_for("document.getElementById('status').className === 'approved' && "
                               "document.getElementById('status').textContent", view)
        assert status.startswith(f"Approved plan {meta['plan_id']}")
        assert page.evaluate("document.getElementById('approve').disabled", view) is True
        page.screenshot(tmp_path / "approved.png")
    finally:
        page.close()
    code = answer["structuredContent"]["confirmation"]
    assert re.fullmatch(rf"mfc_{meta['plan_id']}_[0-9a-f]{{40}}", code)
    assert code in host.messages[-1] and f'mf_dispatch_run(plan_id="{meta["plan_id"]}"' in host.messages[-1]
    assert [a.channel for a in host.approvals(meta["plan_id"])] == ["mcp_app"]
    launched = host.call("mf_dispatch_run", {"plan_id": meta["plan_id"], "confirmation": code})
    assert not launched.is_error and launched.structured_content["approval_channel"] == "mcp_app"
    png = (tmp_path / "approval.png").read_bytes()
    assert png.startswith(b"\x89PNG") and int.from_bytes(png[16:20], "big") == 820


def test_refuse_clicked_in_the_view_mints_nothing(browser: Chromium, host: Host, tmp_path: Path) -> None:
    page, view, result = open_view(browser, host, tmp_path, "view-refuse")
    try:
        page.click("#refuse", view)
        answer = host.serve(page)
        page.wait_for("document.getElementById('status').className === 'refused'", view)
        assert page.evaluate("document.getElementById('paste').hidden", view) is True
    finally:
        page.close()
    plan_id = result["_meta"][apps.META_KEY]["plan_id"]
    refused = answer["structuredContent"]
    assert refused["decision"] == "refuse" and refused.get("confirmation") is None
    assert host.approvals(plan_id) == [] and host.messages[-1].startswith(f"I refused plan {plan_id}")


def test_a_hostile_run_name_is_shown_as_text(browser: Chromium, host: Host, tmp_path: Path) -> None:
    page, view, result = open_view(browser, host, tmp_path, HOSTILE)
    try:
        shown = page.evaluate("document.getElementById('summary').textContent", view)
        elements = page.evaluate("JSON.stringify({img: document.querySelectorAll('img').length,"
                                 " scripts: document.querySelectorAll('script').length,"
                                 " pre: document.getElementById('summary').children.length})", view)
        page.screenshot(tmp_path / "hostile.png")
        dialogs = page.dialogs()
    finally:
        page.close()
    assert HOSTILE in result["_meta"][apps.META_KEY]["summary"] and HOSTILE in shown
    assert json.loads(elements) == {"img": 0, "scripts": 1, "pre": 0}  # the view's own script only, no markup
    assert dialogs == []


def test_the_run_card_shows_a_running_run_and_its_plot_on_a_click(browser: Chromium, host: Host,
                                                                  module_emulator: EmulatorServer,
                                                                  tmp_path: Path) -> None:
    ctx = host.context()
    try:
        body = wire.build_create_body(tomllib.loads(EXAMPLE.read_text()), name="card-run")
        run_id = ctx.platform().create_run(body).run_id
    finally:
        ctx.close()
    module_emulator.state.advance(at_step(6))
    arguments = {"run_id": run_id}
    checked = host.call("mf_check_progress", arguments)
    assert not checked.is_error, checked.content[0].text
    result = checked.model_dump(mode="json", by_alias=True, exclude_none=True)
    page, view = load(browser, tmp_path, apps.CARD_URI, arguments, result)
    try:
        page.wait_for("!document.getElementById('card').hidden", view)
        title = page.evaluate("document.getElementById('title').textContent", view)
        badges = page.evaluate("document.getElementById('badges').textContent", view)
        spend = page.evaluate("document.getElementById('spend').textContent", view)
        page.click("#plot", view)
        plot = host.serve(page, message=False)
        width = page.wait_for("document.getElementById('image').complete && "
                              "document.getElementById('image').naturalWidth", view)
        page.screenshot(tmp_path / "run-card.png")
    finally:
        page.close()
    assert title == f"Run {run_id}" and "RUNNING" in badges and checked.structured_content["verdict"] in badges
    usd = checked.structured_content["spend"]["platform_usd"]
    assert spend == f"So far ${usd:.2f} by the platform's usage; no plan recorded here for this run."  # made off-plan
    assert not plot["isError"] and any(block["type"] == "image" for block in plot["content"]) and width > 100
