"""Launch exactly once when the ledger cannot know: a copied state folder, a damaged ledger.

Before every create, dispatch asks the platform for a run carrying the plan's fingerprint; found,
it reconciles instead of sending. When the runs cannot be listed, it sends only over an intact
ledger (or one whose only unreadable line is a torn last write) and refuses otherwise. Real HTTP
against the emulator, real ledger files, the CLI in new processes.
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
from skill.exit_codes import EXIT_AMBIGUOUS
from tools.core import Context
from tools.errors import ToolError
from tools.guardrails.ledger import Ledger
from tools.launch import (
    ListLaunchesInput,
    PlanRunInput,
    approve_plan,
    list_launches,
    plan_request,
    plan_run,
)
from tools.platform.client import PlatformClient, RetryPolicy
from tools.platform.settings import resolve_settings


def project_ctx(emulator: EmulatorServer, folder: Path, home: Path) -> Context:
    """A context working in ``folder`` with its state folder ``folder/.model-factory`` (the default
    place), reading the runs once (no retry waits)."""
    env = emulator_env(emulator)
    settings = resolve_settings(env=env, home=home)
    client = PlatformClient(settings, retry=RetryPolicy(max_attempts=1))
    return Context(env=env, home=home, state_dir=folder / ".model-factory", cwd=folder, _settings=settings,
                   _platform=client)


def cli(emulator: EmulatorServer, folder: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = emulator_env(emulator, PRIME_DISABLE_VERSION_CHECK="1", HOME=str(home), PATH=os.environ.get("PATH", ""),
                       COLUMNS="200")
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


def damage_records_of(ledger: Ledger, plan_id: str, events: tuple[str, ...]) -> list[int]:
    """Overwrite the ``events`` lines of ``plan_id`` with garbage (same file otherwise); their numbers."""
    lines = ledger.path.read_bytes().split(b"\n")
    hit = []
    for i, line in enumerate(lines):
        if line.strip() and (rec := json.loads(line))["event"] in events and rec.get("plan_id") == plan_id:
            lines[i] = b"\x00garbage" + line[: len(line) // 2]
            hit.append(i + 1)
    ledger.path.write_bytes(b"\n".join(lines))
    return hit


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


def test_a_plan_whose_attempt_and_outcome_lines_are_unreadable_is_not_launched_again(emulator, planned):
    ctx, plan, code, folder, home = planned
    run = dispatch(ctx, plan.plan_id, code)
    assert run.status == "created"
    ledger = ctx.store()
    lines = damage_records_of(ledger, plan.plan_id, ("attempt", "outcome"))
    assert len(lines) == 2
    again = cli(emulator, folder, home, "dispatch-run", plan.plan_id, "--confirmation", code, "--json")
    answer = json.loads(again.stdout)
    assert again.returncode == 0 and answer["status"] == "already_dispatched" and answer["run_id"] == run.run_id
    assert f"line {lines[0]}, {lines[1]}" in answer["message"]
    assert len(emulator.state.runs) == 1


def test_a_damaged_ledger_refuses_to_launch_while_the_runs_cannot_be_listed_and_the_same_code_works_later(
        emulator, planned):
    ctx, plan, code, folder, home = planned
    run = dispatch(ctx, plan.plan_id, code)
    ledger = ctx.store()
    damage_records_of(ledger, plan.plan_id, ("attempt", "outcome"))
    down = emulator.faults.status(503, "GET", "/rft/runs", times=None)
    refused = dispatch(ctx, plan.plan_id, code)
    assert isinstance(refused, ToolError) and refused.code == "unresolved_launch" and refused.retryable
    assert "was not sent" in refused.message and "unreadable line" in refused.message
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1
    by_cli = cli(emulator, folder, home, "dispatch-run", plan.plan_id, "--confirmation", code, "--json")
    assert by_cli.returncode == EXIT_AMBIGUOUS and json.loads(by_cli.stdout)["code"] == "unresolved_launch"
    emulator.faults.remove(down.id)
    found = dispatch(ctx, plan.plan_id, code)
    assert found.status == "already_dispatched" and found.run_id == run.run_id
    assert len(emulator.state.runs) == 1


def test_a_torn_last_line_does_not_stop_a_launch_while_the_runs_cannot_be_listed(emulator, planned):
    """A crash mid-append leaves a torn last line that records nothing: the plan is sent (once)."""
    ctx, plan, code, folder, home = planned
    ledger = ctx.store()
    with ledger.path.open("ab") as f:
        f.write(b'{"ts":"2026-12-01T00:00:00.000+00:00","event":"attempt","plan_id":"pla')
    emulator.faults.status(503, "GET", "/rft/runs", times=None)
    run = dispatch(ctx, plan.plan_id, code)
    assert not isinstance(run, ToolError), run
    assert run.status == "created" and len(emulator.state.runs) == 1
    assert "a write torn by a crash" in run.message


def test_an_intact_ledger_launches_when_the_runs_cannot_be_listed_first(emulator, planned):
    ctx, plan, code, folder, home = planned
    emulator.faults.status(503, "GET", "/rft/runs", times=None)
    run = dispatch(ctx, plan.plan_id, code)
    assert not isinstance(run, ToolError) and run.status == "created" and len(emulator.state.runs) == 1


def test_list_launches_names_unreadable_lines_instead_of_an_empty_ledger(emulator, planned):
    ctx, plan, code, folder, home = planned
    ledger = ctx.store()
    (folder / ".model-factory" / "launches.jsonl").write_bytes(b"garbage\n")
    listed = cli(emulator, folder, home, "list-launches")
    assert listed.returncode == 0
    assert "1 unreadable line (line 1)" in listed.stdout + listed.stderr and "No launches" in listed.stderr
    data = json.loads(cli(emulator, folder, home, "list-launches", "--json").stdout)
    assert data["unreadable_lines"] == [1] and data["launches"] == [] and "unreadable" in data["ledger_warning"]
    plan_again = plan_run(PlanRunInput(config_path="my-run.toml", team="personal"), ctx)
    ledger.path.write_bytes(ledger.path.read_bytes() + b"not json\n")
    middle = list_launches(ListLaunchesInput(), ctx)
    assert middle.unreadable_lines == [1, 3] and [e.plan_id for e in middle.launches] == [plan_again.plan_id]
    assert any("unreadable" in w for w in plan_run(PlanRunInput(config_path="my-run.toml", team="personal"),
                                                    ctx).warnings)
    assert "Ledger:        The launch ledger" in plan_request(plan_again.plan_id, ctx).summary
    assert "line 1, 3" in plan_request(plan_again.plan_id, ctx).summary
