"""A config whose launch is unresolved is not launched again by re-planning it.

The create of plan P1 reaches the platform and its answer is lost (emulator fault
``commit_then_timeout``), and the runs cannot be listed to find it (503 on GET ``/rft/runs``,
every time): P1 is unresolved. Then a new process plans the same config file again, as a
restarted agent would. Real HTTP against the emulator; new processes are the real
``model-factory`` CLI over the same state folder; in-process calls go through the registry.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from _helpers import EXAMPLE, call, cli_env, emulator_env, mf_json, ok, write_policy

from skill.emulator import EmulatorServer
from skill.exit_codes import EXIT_AMBIGUOUS, EXIT_CONFIRMATION, EXIT_OK
from tools.core import Context
from tools.errors import Call as ToolCall
from tools.guardrails import confirmation as gate
from tools.launch import approve_plan
from tools.platform.client import PlatformClient, RetryPolicy
from tools.platform.settings import resolve_settings

TEAM = "cteam00000000000000000001"


@pytest.fixture
def world(emulator, tmp_path) -> dict[str, Any]:
    """A project folder with the config, a home (with a budget policy that would cover these runs)
    outside it, a state folder, and a Context whose reads are tried once (no retry waits)."""
    home, project, state = tmp_path / "home", tmp_path / "project", tmp_path / "state"
    project.mkdir()
    write_policy(home, "max_usd_per_run = 100.0\n")
    cfg = project / "rl.toml"
    shutil.copy(EXAMPLE, cfg)
    env = emulator_env(emulator)
    settings = resolve_settings(env=env, home=home)
    ctx = Context(env=env, home=home, state_dir=state, cwd=project, _settings=settings,
                  _platform=PlatformClient(settings, retry=RetryPolicy(max_attempts=1)))
    proc_env = cli_env(emulator, home, state)
    yield {"ctx": ctx, "cfg": cfg, "env": proc_env, "cwd": project}
    ctx.close()


def cli(world: dict[str, Any], *args: str) -> tuple[int, dict[str, Any]]:
    """``model-factory ARGS --json`` in a new process over the same state folder."""
    return mf_json(*args, env=world["env"], cwd=world["cwd"])


def plan(world: dict[str, Any], **extra: Any) -> Any:
    return ok(call(world["ctx"], "mf_plan_run", config_path=str(world["cfg"]), team="personal", **extra))


def lose_the_answer(emulator: EmulatorServer, world: dict[str, Any], plan_id: str) -> None:
    """Dispatch ``plan_id`` (approved at the terminal) so that the run is created, its answer is
    lost and the runs cannot be listed: the launch is unresolved."""
    token = approve_plan(plan_id, "terminal", world["ctx"])
    emulator.faults.commit_then_timeout(mode="drop")
    emulator.faults.status(503, "GET", "/rft/runs", times=None)
    first = call(world["ctx"], "mf_dispatch_run", plan_id=plan_id, confirmation=token)
    assert first.code == "ambiguous_launch" and first.ambiguous, first
    assert len(emulator.state.runs) == 1


def plans_in_store(world: dict[str, Any]) -> list[str]:
    return [s.plan_id for s in gate.list_launches(world["ctx"].store(), 100)]


def test_replanning_an_unresolved_config_in_a_new_process_is_refused_whatever_the_other_arguments(emulator, world):
    p1 = plan(world)
    lose_the_answer(emulator, world, p1.plan_id)
    for extra in ((), ("--max-steps", "5"), ("--gpu-type", "H200_141GB", "--run-kind", "full")):
        code, out = cli(world, "plan-run", str(world["cfg"]), "--team", "personal", *extra)
        assert (code, out["code"]) == (EXIT_AMBIGUOUS, "unresolved_launch"), out
        assert p1.plan_id in out["message"] and p1.run_name in out["message"] and out["retryable"]
        assert {"tool": "mf_dispatch_run", "arguments": {"plan_id": p1.plan_id}} in out["next_calls"]
        assert any(c["tool"] == "mf_plan_run" and c["arguments"].get("acknowledge_unresolved") == p1.plan_id
                   for c in out["next_calls"])
        assert all(str(ToolCall(**c)) in out["fix"] for c in out["next_calls"])
    assert plans_in_store(world) == [p1.plan_id]  # nothing planned, so nothing to approve
    # The same through the registry, in this process.
    again = call(world["ctx"], "mf_plan_run", config_path=str(world["cfg"]), team="personal", max_steps=7)
    assert again.code == "unresolved_launch" and p1.plan_id in again.message
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1


def test_a_plan_made_before_the_launch_went_unresolved_is_not_dispatched(emulator, world):
    p1, p2 = plan(world), plan(world, max_steps=5)
    token2 = approve_plan(p2.plan_id, "terminal", world["ctx"])
    lose_the_answer(emulator, world, p1.plan_id)
    emulator.faults.clear()
    emulator.faults.status(503, "GET", "/rft/runs", times=None)
    for args in (("dispatch-run", p2.plan_id, "--confirmation", token2), ("dispatch-run", p2.plan_id)):
        code, out = cli(world, *args)
        assert (code, out["code"]) == (EXIT_AMBIGUOUS, "unresolved_launch"), out
        assert p1.plan_id in out["message"]
    assert len(emulator.state.runs) == 1 and emulator.state.create_attempts == 1
    assert gate.launch_state(world["ctx"].store(), p2.plan_id).attempts == []


def test_the_earlier_launch_is_reconciled_first_and_then_the_config_can_be_planned(emulator, world):
    p1 = plan(world)
    lose_the_answer(emulator, world, p1.plan_id)
    emulator.faults.clear()  # the platform lists runs again
    code, out = cli(world, "plan-run", str(world["cfg"]), "--team", "personal", "--max-steps", "5")
    assert code == EXIT_OK, out
    state = gate.launch_state(world["ctx"].store(), p1.plan_id)
    (run_id,) = emulator.state.runs
    assert (state.status, state.run_id, state.attempts[-1].outcome) == ("dispatched", run_id, "reconciled")
    assert "UNRESOLVED" not in out["summary"]


def test_only_a_person_can_approve_a_plan_that_acknowledges_the_unresolved_launch(emulator, world):
    p1 = plan(world)
    lose_the_answer(emulator, world, p1.plan_id)
    code, p2 = cli(world, "plan-run", str(world["cfg"]), "--team", "personal", "--max-steps", "5",
                   "--acknowledge-unresolved", p1.plan_id)
    assert code == EXIT_OK, p2
    assert f"UNRESOLVED:    plan {p1.plan_id}" in p2["summary"] and p1.run_name in p2["summary"]
    emulator.faults.clear()  # faults gone: the budget policy would cover this plan, but not over an unresolved launch
    emulator.faults.status(503, "GET", "/rft/runs", times=None)
    code, out = cli(world, "dispatch-run", p2["plan_id"])
    assert (code, out["code"]) == (EXIT_CONFIRMATION, "confirmation_required"), out
    assert "never approves" in out["message"] and len(emulator.state.runs) == 1

    shown: list[Any] = []
    world["ctx"].approver = lambda request: shown.append(request) or True  # a host asking a person
    second = call(world["ctx"], "mf_dispatch_run", plan_id=p2["plan_id"])
    assert second.status == "created" and second.approval_channel == "host_callback", second
    assert p1.plan_id in shown[0].summary and "ANOTHER run" in shown[0].summary
    assert len(emulator.state.runs) == 2


def test_acknowledging_a_plan_that_is_not_unresolved_is_a_bad_argument(emulator, world):
    p1 = plan(world)
    code, out = cli(world, "plan-run", str(world["cfg"]), "--team", "personal", "--acknowledge-unresolved",
                    p1.plan_id)
    assert (code, out["code"]) == (2, "bad_arguments") and p1.plan_id in out["message"]


def test_other_owners_and_other_configs_are_not_blocked(emulator, world):
    p1 = plan(world)
    lose_the_answer(emulator, world, p1.plan_id)
    other = world["cwd"] / "other.toml"  # another config: the same example with its own run name
    other.write_text('name = "other"\n' + EXAMPLE.read_text())
    code, out = cli(world, "plan-run", str(world["cfg"]), "--team", TEAM)
    assert code == EXIT_OK and out["owner"]["team_id"] == TEAM, out
    code, out = cli(world, "plan-run", str(other), "--team", "personal")
    assert code == EXIT_OK and "UNRESOLVED" not in out["summary"], out
