"""``model-factory approve PLAN_ID``: the real CLI in a subprocess, at a pipe and at a pseudo-terminal.

Refused (exit 4) without a terminal on stdin and stdout or with ``--json``; at a terminal it
shows the recorded plan, checks the config file's bytes and the plan's age, wants the plan id's
last four characters, and prints a confirmation code that then launches the run. It needs only
the state folder: no API key, platform settings or forwarded secrets in the person's shell.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from datetime import timedelta
from typing import Any

import pytest
from _helpers import (
    CHALLENGE,
    CLI,
    EXAMPLE,
    TOKEN,
    T,
    cli_env,
    dispatch,
    dispatch_approved,
    emulator_env,
    in_terminal,
    make_ctx,
    pasted,
    planned,
)

from tools.core import Context
from tools.errors import ToolError, ToolFailure
from tools.guardrails import confirmation as gate
from tools.guardrails.records import utc_now
from tools.launch import (
    PLAN_MAX_AGE_SECONDS,
    PauseRunInput,
    ResumeRunInput,
    StopRunInput,
    approve_plan,
    pause_run,
    resume_run,
    stop_run,
)


@pytest.fixture
def setup(emulator, tmp_path) -> dict[str, Any]:
    home, project, state = tmp_path / "home", tmp_path / "project", tmp_path / "state"
    ctx = make_ctx(emulator, tmp_path)
    cfg = project / "rl.toml"
    shutil.copy(EXAMPLE, cfg)
    plan = planned(ctx, cfg, team="personal")
    proc_env = cli_env(emulator, home, state, TERM="dumb", COLUMNS="200")
    yield {"ctx": ctx, "plan": plan, "cfg": cfg, "env": proc_env, "cwd": project}
    ctx.close()


def approvals(ctx: Context, plan_id: str) -> int:
    return len(gate.launch_state(ctx.store(), plan_id).approvals)


def printed_command(out: str, command: str) -> str:
    """The line of ``out`` that is the printed ``command``, whole: no indent, no backticks."""
    lines = [line for line in out.splitlines() if f" {command} " in line]
    assert len(lines) == 1, out
    assert lines[0].startswith("MODEL_FACTORY_STATE_DIR=") and "`" not in lines[0], lines[0]
    return lines[0]


def attempts(ctx):
    """The approval attempts in the audit trail: (plan id, outcome), in order."""
    return [(a.plan_id, a.outcome) for a in ctx.store().audit() if a.tool == "approve"]


def test_refused_without_a_terminal(setup):
    plan = setup["plan"]
    done = subprocess.run([str(CLI), "approve", plan.plan_id], input=plan.plan_id[-4:] + "\n", env=setup["env"],
                          cwd=setup["cwd"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 4 and "interactive terminal" in done.stderr
    assert not TOKEN.search(done.stdout + done.stderr) and approvals(setup["ctx"], plan.plan_id) == 0
    assert attempts(setup["ctx"]) == [(plan.plan_id, "refused_no_terminal")]  # the audit trail has the attempt


def test_refused_with_json_even_at_a_terminal(setup):
    plan = setup["plan"]
    code, out = in_terminal([CLI, "approve", plan.plan_id, "--json"], setup["env"], setup["cwd"])
    assert code == 4 and "--json" in out and not TOKEN.search(out)
    assert approvals(setup["ctx"], plan.plan_id) == 0


def test_terminal_approval_prints_a_code_that_launches(setup, emulator):
    plan = setup["plan"]
    code, out = in_terminal([CLI, "approve", plan.plan_id], setup["env"], setup["cwd"], CHALLENGE)
    assert code == 0, out
    assert plan.run_name in out and "LAUNCH" in out and "valid 15 minutes" in out
    token = TOKEN.search(out).group(0)
    state = gate.launch_state(setup["ctx"].store(), plan.plan_id)
    assert [a.channel for a in state.approvals] == ["terminal"]
    result = dispatch(setup["ctx"], plan.plan_id, token)
    assert result.status == "created" and result.approval_channel == "terminal"
    assert list(emulator.state.runs) == [result.run_id]
    approved = [a for a in setup["ctx"].store().audit() if a.tool == "approve"]
    assert [(a.outcome, a.surface, a.usd_approved) for a in approved] == [("approved", "terminal", plan.cost.usd_high)]
    assert token not in approved[0].arguments and token[-40:] not in approved[0].model_dump_json()


def test_three_wrong_answers_or_a_changed_plan_are_not_approved(setup):
    plan = setup["plan"]
    code, out = in_terminal([CLI, "approve", plan.plan_id], setup["env"], setup["cwd"], ["nope", "nah", "no"])
    assert code == 4 and "Not approved" in out and not TOKEN.search(out)
    assert out.count("type the letters") == 3 and "2 more tries" in out and "1 more try" in out
    assert "To try again, run" in out and printed_command(out, "approve").endswith(f"approve {plan.plan_id}")
    setup["cfg"].write_text(setup["cfg"].read_text().replace("max_steps = 20", "max_steps = 400"))
    code, out = in_terminal([CLI, "approve", plan.plan_id], setup["env"], setup["cwd"])
    assert code == 4 and "plan_changed" in out and "file_sha256" in out and not TOKEN.search(out)
    code, out = in_terminal([CLI, "approve", "plan_000000000000"], setup["env"], setup["cwd"])
    assert code == 3 and "unknown_plan" in out
    assert approvals(setup["ctx"], plan.plan_id) == 0
    assert attempts(setup["ctx"]) == [(plan.plan_id, "wrong_check_word"), (plan.plan_id, "plan_changed"),
                                      ("plan_000000000000", "unknown_plan")]


def test_ctrl_c_or_sigterm_at_the_prompt_says_interrupted_on_a_line_of_its_own_and_approves_nothing(setup):
    plan = setup["plan"]
    for sig, exit_code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        code, out = in_terminal([CLI, "approve", plan.plan_id], setup["env"], setup["cwd"], [sig])
        assert code == exit_code and re.search(r"type the letters [a-z]+: \nInterrupted\.\n$", out), out[-200:]
    assert approvals(setup["ctx"], plan.plan_id) == 0
    assert attempts(setup["ctx"]) == [(plan.plan_id, "interrupted")] * 2
    # Ctrl-D (the harness types a newline after it)
    code, out = in_terminal([CLI, "approve", plan.plan_id], setup["env"], setup["cwd"], ["\x04"])
    assert code == 4 and re.search(r"type the letters [a-z]+: \n+Not approved; nothing was done\.\n$", out), out[-200:]
    assert attempts(setup["ctx"])[-1] == (plan.plan_id, "not_approved")


def test_a_typo_gets_another_try_and_the_code_comes_with_the_command_that_uses_it(setup, emulator):
    plan = setup["plan"]
    code, out = in_terminal([CLI, "approve", plan.plan_id], setup["env"], setup["cwd"], ["typo", CHALLENGE])
    assert code == 0 and "2 more tries" in out, out
    token = TOKEN.search(out).group(0)
    command = printed_command(out, "dispatch-run")
    assert command.split()[-3:] == [plan.plan_id, "--confirmation", token]
    assert command.startswith(f"MODEL_FACTORY_STATE_DIR={setup['ctx'].state_path().resolve()} ")
    done = subprocess.run(command, shell=True, env={**setup["env"], "MODEL_FACTORY_STATE_DIR": "/nonexistent"},
                          cwd=setup["cwd"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(emulator.state.runs) == 1


def test_terminal_approval_of_a_stop(setup, emulator):
    ctx, plan = setup["ctx"], setup["plan"]
    code, out = in_terminal([CLI, "approve", plan.plan_id], setup["env"], setup["cwd"], CHALLENGE)
    run = dispatch(ctx, plan.plan_id, TOKEN.search(out).group(0))
    required = stop_run(StopRunInput(run_id=run.run_id), ctx)
    stop_plan = re.search(r"model-factory approve (stop_\w+)", required.fix).group(1)
    code, out = in_terminal([CLI, "approve", stop_plan], setup["env"], setup["cwd"], CHALLENGE)
    assert code == 0 and "STOP this run" in out and run.run_id in out
    stopped = stop_run(StopRunInput(run_id=run.run_id, confirmation=TOKEN.search(out).group(0)), ctx)
    assert stopped.status == "STOPPED" and stopped.approval_channel == "terminal"


def test_terminal_approval_of_a_second_resume_shows_its_cost_and_the_earlier_run_and_its_command_works(
        setup, emulator, recorder):
    ctx, plan = setup["ctx"], setup["plan"]
    run = dispatch_approved(ctx, plan.plan_id)
    emulator.state.advance(400)
    paused = pause_run(PauseRunInput(run_id=run.run_id), ctx)
    pause_plan = re.search(r"model-factory approve (pause_\w+)", paused.fix).group(1)
    code, out = in_terminal([CLI, "approve", pause_plan], setup["env"], setup["cwd"], CHALLENGE)
    assert code == 0 and "PAUSE this run" in out and run.run_id in out
    command = printed_command(out, "pause-run")  # pasted into the person's shell as printed
    shell = subprocess.Popen(["bash", "-c", command], env=setup["env"], cwd=setup["cwd"], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    recorder.wait_for("POST", f"/training/runs/{run.run_id}/pause")  # sent: the pause completes while it polls
    emulator.state.advance(T.pause_seconds + 1)
    stdout, stderr = shell.communicate(timeout=120)
    done = subprocess.CompletedProcess(shell.args, shell.returncode, stdout, stderr)
    assert done.returncode == 0, done.stderr
    assert emulator.state.run(run.run_id).status == "PAUSED" and "PAUSED" in done.stderr + done.stdout

    first = resume_run(ResumeRunInput(run_id=run.run_id, confirmation=approve_plan(
        re.search(r"plan (resume_\w+)", resume_run(ResumeRunInput(run_id=run.run_id), ctx).message).group(1),
        "terminal", ctx)), ctx)
    again = resume_run(ResumeRunInput(run_id=run.run_id), ctx)
    resume_plan = re.search(r"model-factory approve (resume_\w+)", again.fix).group(1)
    code, out = in_terminal([CLI, "approve", resume_plan], setup["env"], setup["cwd"], CHALLENGE)
    assert code == 0 and "RESUME this run as a NEW run" in out, out
    for shown in (f"already resumed as run {first.run_id}", "Owner (pays):  personal account", "Cost estimate: low $",
                  "/GPU-hour", "GPUs:"):
        assert shown in out, shown
    command = printed_command(out, "resume-run")
    done = pasted(command, setup["env"], setup["cwd"], timeout=60)
    # the command runs as pasted; the platform (as the emulator) resumes a paused run once, and says so
    assert done.returncode == 3 and f"already resumed as run {first.run_id}" in done.stdout + done.stderr
    assert len(emulator.state.runs) == 2  # the launch and the first resume: nothing was started


def test_the_person_needs_only_the_state_folder(emulator, tmp_path):
    """The agent (or MCP server) holds the API settings and the forwarded secret; the person's shell
    has neither, nor the same HOME. The approval still works, and dispatch stays the binding check."""
    fake_wandb = "fake-wandb-key-only-the-agent-has"
    agent_home, person_home, project, state = (tmp_path / d for d in ("agent", "person", "project", "state"))
    for folder in (agent_home, person_home, project):
        folder.mkdir()
    env = emulator_env(emulator, WANDB_API_KEY=fake_wandb)
    ctx = Context(env=env, home=agent_home, state_dir=state, cwd=project)
    cfg = project / "rl.toml"
    shutil.copy(EXAMPLE, cfg)
    plan = planned(ctx, cfg, team="personal", secrets=["WANDB_API_KEY"])
    person = {"env": {"HOME": str(person_home), "MODEL_FACTORY_STATE_DIR": str(state),
                      "PATH": os.environ.get("PATH", ""), "TERM": "dumb", "COLUMNS": "200"}, "cwd": project}
    code, out = in_terminal([CLI, "approve", plan.plan_id], person["env"], person["cwd"], CHALLENGE)
    assert code == 0, out
    assert plan.run_name in out and "WANDB_API_KEY" in out and "recorded at" in out and "recomputes" in out
    assert "agent's environment" not in out and fake_wandb not in out
    token = TOKEN.search(out).group(0)

    # The approval is bound to the recorded plan: a price that moved since is refused at dispatch, by name.
    emulator.state.seed.gpu(plan.gpu_type).price_per_gpu_hour = 2.1
    moved = dispatch(ctx, plan.plan_id, token)
    assert isinstance(moved, ToolError) and moved.code == "plan_changed", moved
    assert f"usd_per_gpu_hour {plan.usd_per_gpu_hour} -> 2.1" in moved.message
    assert emulator.state.create_attempts == 0
    emulator.state.seed.gpu(plan.gpu_type).price_per_gpu_hour = plan.usd_per_gpu_hour
    result = dispatch(ctx, plan.plan_id, token)
    assert not isinstance(result, ToolError), result
    assert result.approval_channel == "terminal" and emulator.state.run(result.run_id).wandb_api_key == fake_wandb
    ctx.close()


def test_a_plan_that_does_not_show_an_unresolved_launch_of_its_config_is_not_approved(setup, emulator):
    first = setup["plan"]
    second = planned(setup["ctx"], setup["cfg"], team="personal", max_steps=5)
    token = approve_plan(first.plan_id, "terminal", setup["ctx"])
    emulator.faults.commit_then_timeout(mode="drop")
    emulator.faults.status(503, "GET", "/rft/runs", times=None)
    lost = dispatch(setup["ctx"], first.plan_id, token)
    assert lost.code == "ambiguous_launch"
    code, out = in_terminal([CLI, "approve", second.plan_id], setup["env"], setup["cwd"], CHALLENGE)
    assert code == 3 and "unresolved_launch" in out and first.plan_id in out, out
    assert f"model-factory dispatch-run {first.plan_id}" in out and "mf_" not in out
    assert not TOKEN.search(out) and approvals(setup["ctx"], second.plan_id) == 0


def test_a_plan_older_than_a_day_is_not_approved(setup):
    plan, ctx = setup["plan"], setup["ctx"]
    with pytest.raises(ToolFailure) as stale:
        approve_plan(plan.plan_id, "terminal", ctx, now=utc_now() + timedelta(seconds=PLAN_MAX_AGE_SECONDS + 60))
    assert stale.value.error.code == "plan_expired" and "plan again" in stale.value.error.fix.lower()
    assert approvals(ctx, plan.plan_id) == 0
    assert approve_plan(plan.plan_id, "terminal", ctx, now=utc_now() + timedelta(hours=1)).startswith("mfc_")


def test_the_approval_screen_fits_80_columns_and_prints_its_command_whole_on_a_line_of_its_own(
        setup, emulator, tmp_path):
    """At 80 columns no word of the plan or the prose is cut: lines break at spaces; a path or an id
    wider than the room left stands alone; the dispatch command, longer than a line, is one line
    with no indent and no backticks, and it launches the run when pasted."""
    plan = setup["plan"]
    deep = tmp_path / ("a-project-folder-with-a-rather-long-name-" * 2) / "and-deeper"
    state = deep / ".model-factory"
    deep.mkdir(parents=True)
    shutil.copytree(setup["ctx"].state_path(), state)
    setup = {**setup, "env": {**setup["env"], "COLUMNS": "80", "MODEL_FACTORY_STATE_DIR": str(state)}}
    code, out = in_terminal([CLI, "approve", plan.plan_id], setup["env"], setup["cwd"], CHALLENGE)
    assert code == 0, out
    command = printed_command(out, "dispatch-run")
    assert len(command) > 80
    words = [plan.plan_id, plan.run_name, str(setup["cfg"]), str(state)]
    for line in out.splitlines():
        assert len(line) <= 80 or line == command or len(line.split()) == 1, line
        last = line.split()[-1] if line.split() else ""
        assert not [w for w in words if 4 <= len(last) < len(w) and w.startswith(last)], line  # nothing split
    done = pasted(command, setup["env"], setup["cwd"], timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(emulator.state.runs) == 1


def test_approve_with_a_spend_cap_says_how_it_is_kept_warns_when_the_plan_passes_it_and_records_it(setup):
    ctx, plan = setup["ctx"], setup["plan"]
    code, out = in_terminal([CLI, "approve", plan.plan_id, "--max-usd", "0.05"], setup["env"], setup["cwd"],
                            CHALLENGE)
    assert code == 0, out
    assert "Spend cap: $0.05 for this run" in out and "model-factory watch RUN_ID" in out
    assert "Warning: the low cost estimate" in out and "already passes the cap" in out
    state = gate.launch_state(ctx.store(), plan.plan_id)
    assert [a.terms for a in state.approvals] == [{"max_usd": 0.05}]


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "five"])
def test_a_spend_cap_that_is_not_a_positive_amount_is_refused_before_anything(setup, value):
    plan = setup["plan"]
    code, out = in_terminal([CLI, "approve", plan.plan_id, "--max-usd", value], setup["env"], setup["cwd"])
    assert code == 2 and "--max-usd" in out and approvals(setup["ctx"], plan.plan_id) == 0
