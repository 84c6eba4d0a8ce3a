"""Fixtures shared by the whole suite: the emulator on loopback, an env pointing at it, the examples."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from skill.emulator import DEMO_SPEED, EmulatorServer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def emulator() -> Iterator[EmulatorServer]:
    """A fresh emulator on a free loopback port, clock at the demo speed (200x: a 20-step run
    completes in about 4 s). Freeze it with ``emulator.state.set_speed(0)`` and move it with
    ``emulator.state.advance(seconds)`` for exact states."""
    with EmulatorServer(speed=DEMO_SPEED) as server:
        yield server


@pytest.fixture
def mf_env(emulator: EmulatorServer, tmp_path: Path) -> dict[str, str]:
    """Environment for subprocesses and tools: key, base and traces URLs of ``emulator``, no
    version check, temporary ``HOME`` and ``MODEL_FACTORY_STATE_DIR``, ``PATH`` kept."""
    home = tmp_path / "home"
    state = tmp_path / "state"
    home.mkdir(exist_ok=True)
    state.mkdir(exist_ok=True)
    return {
        "PRIME_API_KEY": emulator.api_key,
        "PRIME_API_BASE_URL": emulator.base_url,
        "PRIME_TRACES_URL": emulator.base_url,
        "PRIME_DISABLE_VERSION_CHECK": "1",
        "HOME": str(home),
        "MODEL_FACTORY_STATE_DIR": str(state),
        "PATH": os.environ.get("PATH", ""),
    }


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    """``tools/examples``: the verbatim prime-rl example configs bundled with the package."""
    return ROOT / "tools" / "examples"
