"""A headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: file
descriptors 3 and 4, NUL-separated JSON; standard library only), and a minimal MCP Apps host page: it
renders a view's HTML in a sandboxed iframe and speaks the Apps bridge (JSON-RPC over ``postMessage``) as
a host would. ``ui/initialize`` and the tool notifications are answered in the page; the view's
``tools/call`` and ``ui/message`` requests go to the test through a DevTools binding, which answers them.

Used by tests/test_approval_view_browser.py. The browser is Debian's ``chromium`` (``.ci/run`` installs it).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

#: Chromium's switches: headless, no sandbox (root in CI), nothing in the background, a fresh profile, and
#: no name resolution (the pages here need no network; a stray fetch fails at once).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
         "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars", "--remote-debugging-pipe",
         "--host-resolver-rules=MAP * ~NOTFOUND")
#: Seconds any one wait on the browser may take before the test fails (a bound, not a measurement).
WAIT_SECONDS = 30.0


def chromium_binary() -> str | None:
    """Debian's ``chromium`` (or another Chromium build on PATH), or None."""
    return next((found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None)


class BrowserError(RuntimeError):
    """The browser answered a command with an error, closed the pipe, or did not answer in time."""


class Chromium:
    """One headless browser for a test session; :meth:`page` opens a tab."""

    def __init__(self, binary: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="mf-chromium-")
        to_browser_r, self._write = os.pipe()
        self._read, from_browser_w = os.pipe()
        # the browser's ends moved to 10 and up, so that putting them at 3 and 4 never closes one of them
        to_browser_r, from_browser_w = (_above(fd, 10) for fd in (to_browser_r, from_browser_w))
        # bash (sh may not take a descriptor above 9) puts the two ends at 3 and 4, where the browser looks
        script = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-'
        self.proc = subprocess.Popen(["bash", "-c", script, binary, *FLAGS, f"--user-data-dir={self.profile}",
                                      "about:blank"], pass_fds=(to_browser_r, from_browser_w),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer, self._next_id, self.events = b"", 0, []
        self.version = self.send("Browser.getVersion")["product"]

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are kept in :attr:`events`)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive(time.monotonic() + WAIT_SECONDS)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def event(self, method: str, session: str | None, deadline: float) -> dict[str, Any]:
        """The first unread event ``method`` of ``session`` (waiting until ``deadline``); it is removed."""
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self.events.pop(i)["params"]
            self.events.append(self._receive(deadline))

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise BrowserError("the browser did not answer in time")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed its pipe")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(line)

    def page(self, width: int = 820, height: int = 780) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, target, session, width, height)

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One tab: navigate, evaluate in the page or in a child frame, click at an element, screenshot."""

    def __init__(self, browser: Chromium, target: str, session: str, width: int, height: int) -> None:
        self.browser, self.target, self.session = browser, target, session
        for method in ("Page.enable", "Runtime.enable"):
            self.send(method)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False})
        self.send("Runtime.addBinding", {"name": "mfHost"})
        # a sandboxed iframe runs in a process of its own: attach to it as its own target when it appears
        self.send("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True})

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, self.session)

    def open(self, path: Path) -> None:
        self.send("Page.navigate", {"url": path.as_uri()})
        self.browser.event("Page.loadEventFired", self.session, time.monotonic() + WAIT_SECONDS)

    def evaluate(self, expression: str, frame: str | None = None) -> Any:
        """The value of ``expression`` in the page, or in the frame whose session is ``frame``."""
        params: dict[str, Any] = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        got = self.browser.send("Runtime.evaluate", params, frame or self.session)
        if "exceptionDetails" in got:
            raise BrowserError(f"{expression[:60]}: {got['exceptionDetails'].get('text')}")
        return got["result"].get("value")

    def frame(self) -> str:
        """The session of the view's frame (an out-of-process iframe the page auto-attaches)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            attached = self.browser.event("Target.attachedToTarget", self.session, deadline)
            if attached["targetInfo"].get("type") == "iframe":
                return attached["sessionId"]

    def wait_for(self, expression: str, frame: str | None = None) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            value = self.evaluate(expression, frame)
            if value:
                return value
            time.sleep(0.05)
        raise BrowserError(f"never true: {expression}")

    def click(self, selector: str, frame: str) -> None:
        """A real mouse click (pressed, released) at the middle of ``selector`` in the view's frame."""
        box = self.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                            ".getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })()", frame)
        frame = self.evaluate("(() => { const r = document.querySelector('iframe').getBoundingClientRect();"
                              " return [r.x, r.y]; })()")
        x, y = frame[0] + box[0] + box[2] / 2, frame[1] + box[1] + box[3] / 2
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def host_request(self) -> dict[str, Any]:
        """The next request the view sent the host that the page passes to the test (tools/call, ui/message)."""
        called = self.browser.event("Runtime.bindingCalled", self.session, time.monotonic() + WAIT_SECONDS)
        return json.loads(called["payload"])

    def reply(self, request_id: Any, result: dict[str, Any] | None = None, error: str | None = None) -> None:
        """Answer the view's request ``request_id`` through the host page."""
        self.evaluate(f"window.mfReply({json.dumps(request_id)}, {_js(result)}, {json.dumps(error)})")

    def screenshot(self, dest: Path) -> Path:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        dest.write_bytes(base64.b64decode(data))
        return dest

    def dialogs(self) -> list[dict[str, Any]]:
        """Every alert/confirm/prompt the page or the view opened (none should)."""
        return [e for e in self.browser.events if e.get("method") == "Page.javascriptDialogOpening"]

    def close(self) -> None:
        self.browser.send("Target.closeTarget", {"targetId": self.target})


def _above(fd: int, lowest: int) -> int:
    """``fd`` duplicated at ``lowest`` or above (the original closed)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, lowest)
    os.close(fd)
    return moved


def _js(value: Any) -> str:
    """``value`` as a JavaScript literal safe inside a page's script (no ``</script>`` can end it)."""
    return json.dumps(value).replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def host_page(view_html: str, tool_input: dict[str, Any], tool_result: dict[str, Any]) -> str:
    """The host: the view in ``<iframe sandbox="allow-scripts" srcdoc>`` (its own opaque origin, as hosts
    do), answering ``ui/initialize``, then sending ``ui/notifications/tool-input`` and ``tool-result``
    once the view says ``ui/notifications/initialized``; ``tools/call`` and ``ui/message`` go to the test
    (binding ``mfHost``), which answers with ``mfReply(id, result, error)``; every message is logged in
    ``window.mfLog``."""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>test host</title>
<style>body {{ margin: 0; background: #eef0f3; }} iframe {{ border: 0; width: 800px; height: 700px;
background: #fff; margin: 10px; display: block; }}</style></head>
<body><iframe id="view" sandbox="allow-scripts"></iframe>
<script>
"use strict";
const frame = document.getElementById("view");
window.mfLog = [];
function toView(message) {{ frame.contentWindow.postMessage(message, "*"); }}
window.mfReply = function (id, result, error) {{
  toView(error ? {{jsonrpc: "2.0", id: id, error: {{code: -32000, message: error}}}}
               : {{jsonrpc: "2.0", id: id, result: result || {{}}}});
}};
window.addEventListener("message", function (event) {{
  if (event.source !== frame.contentWindow) return;
  const message = event.data;
  window.mfLog.push(message);
  if (message.method === "ui/initialize") {{
    toView({{jsonrpc: "2.0", id: message.id, result: {{protocolVersion: "2026-01-26",
      hostInfo: {{name: "model-factory-test-host", version: "1"}},
      hostCapabilities: {{serverTools: {{}}, message: {{text: {{}}}}}},
      hostContext: {{theme: "light", displayMode: "inline", platform: "web"}}}}}});
  }} else if (message.method === "ui/notifications/initialized") {{
    toView({{jsonrpc: "2.0", method: "ui/notifications/tool-input", params: {{arguments: {_js(tool_input)}}}}});
    toView({{jsonrpc: "2.0", method: "ui/notifications/tool-result", params: {_js(tool_result)}}});
  }} else if (message.method === "tools/call" || message.method === "ui/message") {{
    window.mfHost(JSON.stringify(message));
  }} else if (message.method === "ui/notifications/size-changed" && message.params) {{
    frame.style.height = Math.min(740, Math.max(200, message.params.height)) + "px";
  }}
}});
frame.srcdoc = {_js(view_html)};
</script></body></html>
"""
