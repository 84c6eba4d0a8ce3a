"""Launch exactly once when the store cannot know: a copied state folder.

Before every create, dispatch asks the platform for a run carrying the plan's fingerprint; found,
it reconciles instead of sending. When the runs cannot be listed, it sends (the store shows no sent
attempt, and its damage is never read silently: tests/test_state_store.py). Real HTTP against the
emulator, real store files, the CLI in new processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _helpers import EXAMPLE, dispatch, emulator_env, mf

from skill.emulator import EmulatorServer
from tools.core import Context
from tools.errors import ToolError
from tools.launch import PlanRunInput, approve_plan, plan_run
from tools.platform.client import PlatformClient, RetryPolicy
from tools.platform.settings import resolve_settings


def project_ctx(emulator: EmulatorServer, folder: Path, home: Path) -> Context:
    """A context working in ``folder`` with its state folder ``folder/.model-factory`` (named, as
    MODEL_FACTORY_STATE_DIR names one), reading the runs once (no retry waits)."""
    env = emulator_env(emulator)
    settings = resolve_settings(env=env, home=home)
    client = PlatformClient(settings, retry=RetryPolicy(max_attempts=1))
    return Context(env=env, home=home, state_dir=folder / ".model-factory", cwd=folder, _settings=settings,
                   _platform=client)


def cli(emulator: EmulatorServer, folder: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = emulator_env(emulator, PRIME_DISABLE_VERSION_CHECK="1", HOME=str(home), PATH=os.environ.get("PATH", ""),
                       COLUMNS="200", MODEL_FACTORY_STATE_DIR=str(folder / ".model-factory"))
    return mf(*args, env=env, cwd=folder)


@pytest.fixture
def planned(emulator, tmp_path):
    """Project A with a plan approved at a terminal (the code); returns (ctx, plan, code, folder, home)."""
    home, folder = tmp_path / "home", tmp_path / "tu-A"
    home.mkdir()
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "my-run.toml")
    ctx = project_ctx(emulator, folder, home)
    plan = plan_run(PlanRunInput(config_path="my-run.toml", team="personal"), ctx)
    assert not isinstance(plan, ToolError), plan
    yield ctx, plan, approve_plan(plan.plan_id, "terminal", ctx), folder, home
    ctx.close()


def test_a_copied_state_folder_dispatched_in_both_copies_launches_one_run(emulator, planned):
    """The trial: plan and approve in tu-A, `cp -r tu-A tu-B`, dispatch with the same code in each."""
    ctx, plan, code, folder, home = planned
    copy = folder.parent / "tu-B"
    shutil.copytree(folder, copy)
    first = cli(emulator, folder, home, "dispatch-run", plan.plan_id, "--confirmation", code, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["status"] == "created"
    second = cli(emulator, copy, home, "dispatch-run", plan.plan_id, "--confirmation", code, "--json")
    assert second.returncode == 0, second.stderr
    answer = json.loads(second.stdout)
    assert answer["status"] == "already_dispatched" and answer["run_id"] == json.loads(first.stdout)["run_id"]
    assert "already launched" in answer["message"] and "nothing was sent again" in answer["message"]
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1
    again = cli(emulator, copy, home, "dispatch-run", plan.plan_id, "--confirmation", code)
    assert again.returncode == 0 and "already launched" in again.stdout + again.stderr
    assert len(emulator.state.runs) == 1


def test_a_store_launches_when_the_runs_cannot_be_listed_first(emulator, planned):
    ctx, plan, code, folder, home = planned
    emulator.faults.status(503, "GET", "/rft/runs", times=None)
    run = dispatch(ctx, plan.plan_id, code)
    assert not isinstance(run, ToolError) and run.status == "created" and len(emulator.state.runs) == 1


