"""Small guardrail gaps a new user found: a stop approved after the run had stopped, a secret in
install-skill's --dest, a spend verdict claimed without an estimate, unfriendly errors for a wrong
run id. Real HTTP against the emulator, the CLI in new processes, real files."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from _helpers import CHALLENGE, CLI, EXAMPLE, TOKEN, approved_launch, cli_env, in_terminal, make_ctx, mf

from skill.exit_codes import EXIT_TOOL_ERROR, EXIT_USAGE
from tools.core import Context
from tools.errors import ToolError
from tools.launch import StopRunInput, approve_plan, stop_run
from tools.monitor import GetSpendInput, get_spend

FAKE_TOKEN = "ghp_" + "FAKE" * 9


@pytest.fixture
def launched(emulator, tmp_path):
    """A run launched from this state folder, its clock frozen while RUNNING."""
    home, project, state = tmp_path / "home", tmp_path / "project", tmp_path / "state"
    ctx = make_ctx(emulator, tmp_path)
    shutil.copy(EXAMPLE, project / "rl.toml")
    plan, run = approved_launch(ctx, "rl.toml")
    emulator.state.advance(120)
    proc_env = cli_env(emulator, home, state, PATH="/usr/bin:/bin", TERM="dumb", COLUMNS="200")
    yield {"ctx": ctx, "run": run, "env": proc_env, "cwd": project, "plan": plan}
    ctx.close()


def stop_plan_of(ctx: Context, run_id: str) -> str:
    required = stop_run(StopRunInput(run_id=run_id), ctx)
    return re.search(r"model-factory approve (stop_\w+)", required.fix).group(1)


def test_approving_a_stop_of_a_run_that_has_stopped_since_is_refused(emulator, launched):
    ctx, run = launched["ctx"], launched["run"]
    assert emulator.state.run(run.run_id).status == "RUNNING"
    stale = stop_plan_of(ctx, run.run_id)
    other = stop_plan_of(ctx, run.run_id)
    stopped = stop_run(StopRunInput(run_id=run.run_id, confirmation=approve_plan(other, "terminal", ctx)), ctx)
    assert stopped.status == "STOPPED"
    code, out = in_terminal([CLI, "approve", stale], launched["env"], launched["cwd"], CHALLENGE)
    assert code == EXIT_TOOL_ERROR and "conflict" in out and "is STOPPED now" in out and "no longer applies" in out
    assert not TOKEN.search(out) and "status now RUNNING" not in out


def test_the_approve_screen_of_a_stop_shows_the_status_read_now(emulator, launched):
    stop_plan = stop_plan_of(launched["ctx"], launched["run"].run_id)
    code, out = in_terminal([CLI, "approve", stop_plan], launched["env"], launched["cwd"], CHALLENGE)
    assert code == 0, out
    assert "Status now:    RUNNING (read from the platform just now)" in out and "status when planned RUNNING" in out


def test_install_skill_refuses_a_secret_shaped_dest_and_writes_nothing(tmp_path):
    dest = tmp_path / FAKE_TOKEN
    proc = mf("install-skill", "--dest", str(dest), env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
              cwd=tmp_path)
    assert proc.returncode == EXIT_TOOL_ERROR and "--dest" in proc.stderr and "secret" in proc.stderr
    assert FAKE_TOKEN not in proc.stdout + proc.stderr and not dest.exists()
    ok = mf("install-skill", "--dest", str(tmp_path / "skills"), env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
            cwd=tmp_path)
    assert ok.returncode == 0 and (tmp_path / "skills" / "model-factory" / "SKILL.md").is_file()


def test_spend_of_a_run_without_a_plan_in_this_ledger_does_not_claim_it_is_within_the_estimate(emulator, launched,
                                                                                               tmp_path):
    run = launched["run"]
    elsewhere = Context(env=launched["ctx"].env, home=tmp_path / "home", state_dir=tmp_path / "other-state")
    spend = get_spend(GetSpendInput(run_id=run.run_id), elsewhere)
    elsewhere.close()
    assert not isinstance(spend, ToolError) and spend.plan_id is None
    assert spend.over_high_estimate is None and spend.elapsed_x_rate_usd is None
    env = {**launched["env"], "MODEL_FACTORY_STATE_DIR": str(tmp_path / "other-state")}
    for command in ("get-spend", "check-progress"):
        data = json.loads(mf(command, run.run_id, "--json", env=env, cwd=launched["cwd"]).stdout)
        spent = data if command == "get-spend" else data["spend"]
        assert spent["over_high_estimate"] is None, command
    mine = get_spend(GetSpendInput(run_id=run.run_id), launched["ctx"])
    assert mine.plan_id == launched["plan"].plan_id and mine.over_high_estimate is False


def test_stop_run_of_an_unknown_id_is_the_same_friendly_not_found_as_get_run(emulator, launched):
    answers = [mf(command, "nope", env=launched["env"], cwd=launched["cwd"]) for command in ("get-run", "stop-run")]
    assert [a.returncode for a in answers] == [EXIT_TOOL_ERROR, EXIT_TOOL_ERROR]
    assert all("No run 'nope' is visible to this API key." in a.stderr for a in answers)
    assert all("HTTP 404" not in a.stdout + a.stderr for a in answers)


@pytest.mark.parametrize("command", ["download-traces", "list-traces"])
def test_a_run_id_with_a_slash_is_a_bad_argument_naming_the_field(emulator, launched, command):
    args = [command, "../../x", "dl1"] if command == "download-traces" else [command, "../../x"]
    proc = mf(*args, "--json", env=launched["env"], cwd=launched["cwd"])
    error = json.loads(proc.stdout)
    assert proc.returncode == EXIT_USAGE and error["code"] == "bad_arguments"
    assert [f["path"] for f in error["fields"]] == ["run_id"] and "'/'" in error["fields"][0]["problem"]
    assert not (launched["cwd"] / "dl1").exists()
