"""The MCP Inspector's CLI mode (npm ``@modelcontextprotocol/inspector``, the TypeScript SDK
client) lists and calls the tools of ``model-factory mcp``: the command docs/mcp.md shows.

Skips when ``npx`` is not on PATH, or when the package cannot be fetched from the npm
registry (first run only; npx caches it), unless ``MF_REQUIRE_INSPECTOR=1`` (set by ``.ci/run``),
which turns that into a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from _helpers import CLI, unavailable

from skill import registry

NPX = shutil.which("npx")
INSPECTOR = "@modelcontextprotocol/inspector"



def inspector(mf_env: dict[str, str], *args: str) -> dict:
    """``npx -y @modelcontextprotocol/inspector --cli -e K=V ... model-factory mcp ARGS``."""
    if NPX is None:
        unavailable("npx is not on PATH (install Node.js to run the Inspector)", "MF_REQUIRE_INSPECTOR")
    forwarded = [part for key in ("PRIME_API_KEY", "PRIME_API_BASE_URL", "PRIME_TRACES_URL",
                                  "PRIME_DISABLE_VERSION_CHECK", "MODEL_FACTORY_STATE_DIR", "HOME")
                 for part in ("-e", f"{key}={mf_env[key]}")]
    command = [NPX, "-y", INSPECTOR, "--cli", *forwarded, str(CLI), "mcp", *args]
    env = {**os.environ, "XDG_CACHE_HOME": str(Path(mf_env["HOME"]) / ".cache"), "NO_COLOR": "1"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
    except subprocess.TimeoutExpired:
        unavailable("the Inspector did not finish in 300 s (npm registry unreachable?)", "MF_REQUIRE_INSPECTOR")
    if done.returncode != 0 and any(s in done.stderr for s in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED",
                                                               "ETIMEDOUT", "network", "404 Not Found")):
        unavailable(f"cannot fetch {INSPECTOR} from the npm registry: {done.stderr[-300:]}", "MF_REQUIRE_INSPECTOR")
    assert done.returncode == 0, f"inspector exited {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return json.loads(done.stdout)


def test_inspector_cli_lists_every_tool(mf_env: dict[str, str]) -> None:
    listing = inspector(mf_env, "--method", "tools/list")
    tools = {t["name"]: t for t in listing["tools"]}
    assert list(tools) == [s.name for s in registry.TOOLS]
    assert tools["mf_dispatch_run"]["annotations"]["readOnlyHint"] is False
    assert tools["mf_get_run"]["inputSchema"]["required"][0] == "run_id"


def test_inspector_cli_calls_a_tool(mf_env: dict[str, str]) -> None:
    result = inspector(mf_env, "--method", "tools/call", "--tool-name", "mf_list_examples", "--tool-arg", "mode=sft")
    assert result["isError"] is False
    examples = result["structuredContent"]["examples"]
    assert examples and all(e["mode"] == "sft" for e in examples)
    refused = inspector(mf_env, "--method", "tools/call", "--tool-name", "mf_get_run", "--tool-arg", "run_id=nope")
    assert refused["isError"] is True and refused["structuredContent"]["code"]
