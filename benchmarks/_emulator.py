"""The emulator in its own process for the benchmarks (``skill.emulator.serve`` on a free loopback
port, clock frozen and moved through its admin routes), and finished runs of a scenario on it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
KEY = "mf-emulator-key-0000"
CONFIG = ROOT / "tools" / "configs" / "examples" / "basic" / "reverse-text" / "rl.toml"
#: Simulated seconds after which a 20-step run has finished and every trace has landed (default timing).
DONE_SECONDS = 60 + 90 + 30 * 20 + 10 + 60


class Emulator:
    """``skill.emulator.serve`` in a child process; ``url`` is its base URL, ``api`` an httpx client on it."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        code = f"from skill.emulator import serve; serve(port={self.port}, speed=0)"
        self.proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.api = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.api.get("/_emulator/state").raise_for_status()
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def env(self, home: Path) -> dict[str, str]:
        """The environment that points the tools (and the prime CLI) at this emulator."""
        return {"PRIME_API_KEY": KEY, "PRIME_API_BASE_URL": self.url, "PRIME_TRACES_URL": self.url,
                "PRIME_DISABLE_VERSION_CHECK": "1", "HOME": str(home)}

    def finished_run(self, scenario: str, *, seconds: float = DONE_SECONDS, **params: Any) -> str:
        """A run created under ``scenario`` (with ``params``), the clock moved ``seconds`` on: its id."""
        self.api.post("/_emulator/scenario", json={"name": scenario, "params": params}).raise_for_status()
        config = tomllib.loads(CONFIG.read_text())
        created = self.api.post("/api/v1/training/runs", json={"config": config, "name": f"bench-{scenario}"})
        created.raise_for_status()
        self.api.post("/_emulator/advance", json={"seconds": seconds}).raise_for_status()
        return created.json()["runId"]

    def close(self) -> None:
        self.api.close()
        self.proc.terminate()
        self.proc.wait(10)
