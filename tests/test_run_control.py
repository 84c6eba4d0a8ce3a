"""mf_pause_run / mf_restart_run / mf_resume_run (and mf_stop_run's gate) over real HTTP against the
emulator, with real ledger files.

Pause, restart and stop act on a run that already bills: each needs a person's confirmation of
that action on that run, never a budget policy, and reports the state it reached. Resume starts a
NEW billed run: it is planned with its cost, may be approved by a policy within its limits, is sent
once and reconciled when its answer is lost, and a second resume of one pause needs a person who
was shown "already resumed as run X". The ledger records every action.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from _helpers import (
    EXAMPLE,
    T,
    approved_launch,
    call,
    dispatch,
    err,
    make_ctx,
    ok,
    past_step,
    store_bytes,
    write_policy,
)
from conftest import FakeTime

from skill.emulator import EmulatorServer
from tools.core import Context
from tools.errors import ToolError
from tools.launch import (
    ListLaunchesInput,
    PauseRunInput,
    RestartRunInput,
    ResumeRunInput,
    StopRunInput,
    approve_plan,
    list_launches,
    pause_run,
    restart_run,
    resume_run,
    stop_run,
)

FAKE_WANDB = "wandb_v1_FAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE01"
PLAN_IN = re.compile(r"plan (\w+) needs a person's confirmation")


@pytest.fixture
def ctx(emulator, tmp_path):
    """A Context on the frozen emulator whose waits move the emulator's clock (no wall time)."""
    time = FakeTime(emulator)
    c = make_ctx(emulator, tmp_path, env={"WANDB_API_KEY": FAKE_WANDB}, clock=time.clock, sleep=time.sleep)
    yield c
    c.close()


def running(ctx: Context, emulator: EmulatorServer, step: int = 3, ckpt_interval: int | None = None) -> str:
    """A run of the reverse-text RL example launched through this ledger (a person approved it at the
    terminal), RUNNING at ``step``; ``ckpt_interval`` sets ``[ckpt] interval``."""
    cfg = Path(ctx.cwd) / "rl.toml"
    shutil.copy(EXAMPLE, cfg)
    if ckpt_interval:
        cfg.write_text(cfg.read_text().replace("[ckpt]", f"[ckpt]\ninterval = {ckpt_interval}", 1))
    run_id = approved_launch(ctx, cfg)[1].run_id
    emulator.state.advance(past_step(step))
    assert emulator.state.run(run_id).status == "RUNNING"
    return run_id


def confirmed(ctx: Context, required: ToolError) -> str:
    """A person approves, at the terminal, the plan a confirmation_required error names."""
    assert required.code == "confirmation_required", f"{required.code}: {required.message}"
    return approve_plan(PLAN_IN.search(required.message).group(1), "terminal", ctx)


def paused(ctx: Context, emulator: EmulatorServer) -> str:
    run_id = running(ctx, emulator)
    required = pause_run(PauseRunInput(run_id=run_id), ctx)
    ok(pause_run(PauseRunInput(run_id=run_id, confirmation=confirmed(ctx, required)), ctx))
    assert emulator.state.run(run_id).status == "PAUSED"
    return run_id


def entries(ctx: Context, action: str) -> list:
    return [e for e in ok(list_launches(ListLaunchesInput(limit=50), ctx)).launches if e.action == action]


# -- pause, restart, stop: a person confirms that action on that run -----------------------------


def test_pause_is_refused_without_a_persons_confirmation_even_with_a_policy_then_pauses_and_is_verified(ctx, emulator):
    run_id = running(ctx, emulator)
    write_policy(ctx.home, "max_usd_per_run = 1000.0\n")
    required = err(pause_run(PauseRunInput(run_id=run_id), ctx), "confirmation_required")
    assert emulator.state.run(run_id).status == "RUNNING"  # nothing sent
    assert run_id in required.message and "Pause plan" in required.message and "approve pause_" in required.fix
    token = confirmed(ctx, required)
    result = ok(pause_run(PauseRunInput(run_id=run_id, confirmation=token), ctx))
    assert (result.outcome, result.status, result.approval_channel) == ("paused", "PAUSED", "terminal")
    assert result.waited_seconds >= T.pause_seconds  # verified by polling until PAUSED
    assert emulator.state.run(run_id).status == "PAUSED" and result.next_calls[0].tool == "mf_resume_run"
    again = ok(pause_run(PauseRunInput(run_id=run_id, confirmation=token), ctx))
    assert again.outcome == "already_paused" and again.plan_id is None
    [entry] = entries(ctx, "pause")
    assert (entry.status, entry.outcome, entry.acted_on, entry.approval_channel) == \
        ("dispatched", "created", run_id, "terminal")


def test_a_pause_still_saving_its_checkpoint_is_reported_as_still_pausing(ctx, emulator):
    run_id = running(ctx, emulator)
    token = confirmed(ctx, pause_run(PauseRunInput(run_id=run_id), ctx))
    result = ok(pause_run(PauseRunInput(run_id=run_id, confirmation=token, timeout_seconds=5), ctx))
    assert (result.outcome, result.status) == ("still_pausing", "PAUSING")
    assert result.next_calls[0].tool == "mf_wait_for_run"


def test_restart_is_refused_without_a_persons_confirmation_even_with_a_policy_then_restarts_and_is_verified(
        ctx, emulator):
    run_id = running(ctx, emulator, step=12, ckpt_interval=5)
    write_policy(ctx.home, "max_usd_per_run = 1000.0\n")
    required = err(restart_run(RestartRunInput(run_id=run_id), ctx), "confirmation_required")
    assert "Restart plan" in required.message and emulator.state.run(run_id).attempt == 0
    pause_token = confirmed(ctx, pause_run(PauseRunInput(run_id=run_id), ctx))  # a real code, for another action
    err(restart_run(RestartRunInput(run_id=run_id, confirmation=pause_token), ctx), "confirmation_invalid")
    assert emulator.state.run(run_id).status == "RUNNING"
    result = ok(restart_run(RestartRunInput(run_id=run_id, confirmation=confirmed(ctx, required)), ctx))
    sim = emulator.state.run(run_id)
    assert (result.outcome, result.status, sim.attempt) == ("restarted", "RUNNING", 1)
    assert result.latest_step is not None and result.latest_step < 12  # back to its latest READY checkpoint
    assert [(e.outcome, e.acted_on) for e in entries(ctx, "restart")] == [("created", run_id)]


def test_restarting_a_run_that_is_not_running_is_a_conflict_and_sends_nothing(ctx, emulator):
    run_id = running(ctx, emulator)
    emulator.state.run(run_id).status = "QUEUED"
    error = err(restart_run(RestartRunInput(run_id=run_id), ctx), "conflict")
    assert "only a RUNNING run" in error.message and entries(ctx, "restart") == []


def test_stop_is_never_approved_by_a_budget_policy(ctx, emulator):
    run_id = running(ctx, emulator)
    write_policy(ctx.home, "max_usd_per_run = 1000.0\n")
    required = err(stop_run(StopRunInput(run_id=run_id), ctx), "confirmation_required")
    assert emulator.state.run(run_id).status == "RUNNING"
    stopped = ok(stop_run(StopRunInput(run_id=run_id, confirmation=confirmed(ctx, required)), ctx))
    assert stopped.outcome == "stopped" and [e.outcome for e in entries(ctx, "stop")] == ["created"]


# -- resume: a new billed run, planned and approved like a launch --------------------------------


def test_resume_within_the_budget_policy_is_approved_by_it_and_starts_one_new_billed_run(ctx, emulator):
    run_id = paused(ctx, emulator)
    write_policy(ctx.home, "max_usd_per_run = 1000.0\n")
    before = len(emulator.state.runs)
    result = ok(resume_run(ResumeRunInput(run_id=run_id, secrets=["WANDB_API_KEY"]), ctx))
    assert (result.status, result.approval_channel, result.resumed_from) == ("created", "policy", run_id)
    assert result.run_id != run_id and len(emulator.state.runs) == before + 1
    new = emulator.state.run(result.run_id)
    assert new.resumed_from == run_id and new.wandb_api_key == FAKE_WANDB  # forwarded by name, read at sending
    assert result.usd_per_gpu_hour is not None
    [entry] = entries(ctx, "resume")
    assert (entry.run_id, entry.acted_on, entry.outcome, entry.secret_names) == \
        (result.run_id, run_id, "created", ["WANDB_API_KEY"])
    assert entry.usd_high is not None and entry.gpu_count == new.spec.gpu_count
    assert FAKE_WANDB.encode() not in store_bytes(ctx.state_path())


def test_resume_over_the_budget_policy_shows_its_cost_and_waits_for_a_person(ctx, emulator):
    run_id = paused(ctx, emulator)
    write_policy(ctx.home, "max_usd_per_run = 0.01\n")
    required = err(resume_run(ResumeRunInput(run_id=run_id), ctx), "confirmation_required")
    for shown in ("Resume plan", "Owner (pays):  personal account", "Cost estimate: low $", "/GPU-hour", "GPUs:",
                  "does not cover it"):
        assert shown in required.message, shown
    assert len(emulator.state.runs) == 1
    result = ok(resume_run(ResumeRunInput(run_id=run_id, confirmation=confirmed(ctx, required)), ctx))
    assert (result.status, result.approval_channel) == ("created", "terminal") and len(emulator.state.runs) == 2


def test_a_second_resume_of_one_pause_needs_a_fresh_approval_whose_summary_names_the_earlier_run(ctx, emulator):
    run_id = paused(ctx, emulator)
    early = confirmed(ctx, resume_run(ResumeRunInput(run_id=run_id), ctx))  # approved before the first went out
    write_policy(ctx.home, "max_usd_per_run = 1000.0\n")
    first = ok(resume_run(ResumeRunInput(run_id=run_id), ctx))
    assert first.approval_channel == "policy"

    required = err(resume_run(ResumeRunInput(run_id=run_id), ctx), "confirmation_required")  # the policy declines
    assert f"already resumed as run {first.run_id}" in required.message and "never approves" in required.message
    stale = err(resume_run(ResumeRunInput(run_id=run_id, confirmation=early), ctx), "plan_changed")
    assert first.run_id in stale.message and len(emulator.state.runs) == 2  # that approval did not cover a second run
    # approved, it is sent, and the platform (as the emulator: a paused run is resumed once) refuses it
    refused = err(resume_run(ResumeRunInput(run_id=run_id, confirmation=confirmed(ctx, required)), ctx), "conflict")
    assert f"already resumed as run {first.run_id}" in refused.message and "Nothing was started" in refused.fix
    assert len(emulator.state.runs) == 2
    assert {e.run_id for e in entries(ctx, "resume") if e.outcome == "created"} == {first.run_id}


def test_a_resume_whose_answer_is_lost_is_reconciled_and_never_sent_twice(ctx, emulator):
    run_id = paused(ctx, emulator)
    token = confirmed(ctx, resume_run(ResumeRunInput(run_id=run_id), ctx))
    emulator.faults.commit_then_timeout("POST", f"/training/runs/{run_id}/resume")  # created, answer lost
    emulator.faults.status(503, "GET", "/rft/runs", times=None)  # and the runs cannot be listed yet
    lost = err(resume_run(ResumeRunInput(run_id=run_id, confirmation=token), ctx), "ambiguous_launch")
    assert lost.ambiguous and len(emulator.state.runs) == 2  # the run exists; nobody knows it yet
    plan_id = lost.next_calls[0].arguments["plan_id"]
    emulator.faults.clear()
    found = ok(dispatch(ctx, plan_id))
    new = next(r for r in emulator.state.runs if r != run_id)
    assert (found.status, found.run_id, found.resumed_from) == ("reconciled", new, run_id)
    again = ok(resume_run(ResumeRunInput(run_id=run_id, confirmation=token), ctx))
    assert (again.status, again.run_id) == ("already_dispatched", new)
    assert len(emulator.state.runs) == 2 and emulator.state.create_attempts == 2  # the launch and the one resume


def test_resuming_a_run_that_is_not_paused_is_a_clear_conflict_and_plans_nothing(ctx, emulator):
    run_id = running(ctx, emulator)
    error = err(resume_run(ResumeRunInput(run_id=run_id), ctx), "conflict")
    assert "RUNNING, not PAUSED" in error.message and error.next_calls[0].tool == "mf_pause_run"
    stop_token = confirmed(ctx, stop_run(StopRunInput(run_id=run_id), ctx))
    ok(stop_run(StopRunInput(run_id=run_id, confirmation=stop_token), ctx))
    stopped = err(resume_run(ResumeRunInput(run_id=run_id), ctx), "conflict")
    assert "STOPPED" in stopped.message and "mf_plan_run" in stopped.fix
    assert entries(ctx, "resume") == [] and len(emulator.state.runs) == 1


def test_a_resume_code_with_other_arguments_than_its_plan_is_refused(ctx, emulator):
    run_id = paused(ctx, emulator)
    token = confirmed(ctx, resume_run(ResumeRunInput(run_id=run_id), ctx))
    error = err(resume_run(ResumeRunInput(run_id=run_id, confirmation=token, image_tag="v9"), ctx), "bad_arguments")
    assert "image_tag" in error.message and len(emulator.state.runs) == 1


def test_a_resume_approved_once_and_sent_from_a_copied_state_folder_starts_one_new_run(ctx, emulator, tmp_path):
    """The state folder was copied after the approval and both copies resumed with the same code: the
    second finds the new run of the paused run's name on the platform and sends nothing."""
    run_id = paused(ctx, emulator)
    token = confirmed(ctx, resume_run(ResumeRunInput(run_id=run_id), ctx))
    shutil.copytree(ctx.state_path(), tmp_path / "state-copy")
    copy = Context(env=ctx.env, home=ctx.home, state_dir=tmp_path / "state-copy", cwd=ctx.cwd, clock=ctx.clock,
                   sleep=ctx.sleep)
    first = ok(resume_run(ResumeRunInput(run_id=run_id, confirmation=token), ctx))
    second = ok(resume_run(ResumeRunInput(run_id=run_id, confirmation=token), copy))
    copy.close()
    assert first.status == "created" and second.status == "already_dispatched"
    assert second.run_id == first.run_id and "already resumed" in second.message
    assert len(emulator.state.runs) == 2


# -- every action exactly once: a lost answer or an HTTP error is never reported as done -------------


def test_a_restart_whose_answer_was_lost_is_never_sent_again_and_the_next_plan_names_it(ctx, emulator):
    run_id = running(ctx, emulator, step=12, ckpt_interval=5)
    first = confirmed(ctx, restart_run(RestartRunInput(run_id=run_id), ctx))
    emulator.faults.commit_then_timeout("PUT", f"/rft/runs/{run_id}/restart")  # restarted, answer lost
    lost = err(restart_run(RestartRunInput(run_id=run_id, confirmation=first), ctx), "ambiguous")
    assert lost.ambiguous and "not sent again" in lost.message and emulator.state.run(run_id).attempt == 1
    emulator.faults.clear()
    # The same code again: looked for, never re-sent (nothing a run shows says a restart happened).
    err(restart_run(RestartRunInput(run_id=run_id, confirmation=first), ctx), "ambiguous")
    assert emulator.state.run(run_id).attempt == 1
    # The next restart plan of that run names the first one; a person decides, and then it is sent once.
    required = err(restart_run(RestartRunInput(run_id=run_id), ctx), "confirmation_required")
    first_plan = next(e.plan_id for e in entries(ctx, "restart") if e.outcome == "still_unknown")
    assert f"UNRESOLVED:    restart plan {first_plan} was sent" in required.message
    assert "Approving this sends ANOTHER restart" in required.message
    second = confirmed(ctx, required)
    assert ctx.store().plan(PLAN_IN.search(required.message).group(1)).acknowledged_unresolved == [first_plan]
    done = ok(restart_run(RestartRunInput(run_id=run_id, confirmation=second), ctx))
    assert done.outcome == "restarted" and emulator.state.run(run_id).attempt == 2
    # Decided on: a later restart plan no longer names it.
    assert "UNRESOLVED" not in err(restart_run(RestartRunInput(run_id=run_id), ctx), "confirmation_required").message


def test_a_restart_answered_http_503_is_not_reported_restarted(ctx, emulator):
    run_id = running(ctx, emulator, step=12, ckpt_interval=5)
    code = confirmed(ctx, restart_run(RestartRunInput(run_id=run_id), ctx))
    emulator.faults.status(503, "PUT", f"/rft/runs/{run_id}/restart", times=1)
    result = restart_run(RestartRunInput(run_id=run_id, confirmation=code), ctx)
    error = err(result, "ambiguous")
    assert "HTTP 503" in error.message and "does not show whether the restart was carried out" in error.message
    assert error.ambiguous and emulator.state.run(run_id).attempt == 0
    [entry] = entries(ctx, "restart")
    assert (entry.status, entry.outcome) == ("ambiguous", "ambiguous")


def test_a_stop_whose_answer_was_lost_counts_as_done_only_when_the_run_stops(ctx, emulator):
    run_id = running(ctx, emulator)
    code = confirmed(ctx, stop_run(StopRunInput(run_id=run_id), ctx))
    emulator.faults.commit_then_timeout("PUT", f"/rft/runs/{run_id}/stop")  # stopped, answer lost
    result = ok(stop_run(StopRunInput(run_id=run_id, confirmation=code), ctx))
    assert result.outcome == "stopped" and "but the run reached STOPPED" in result.message
    [entry] = entries(ctx, "stop")
    assert (entry.status, entry.outcome) == ("dispatched", "reconciled")
    other = running(ctx, emulator)
    code = confirmed(ctx, stop_run(StopRunInput(run_id=other), ctx))
    emulator.faults.status(503, "PUT", f"/rft/runs/{other}/stop", times=1)  # refused, the run goes on
    error = err(stop_run(StopRunInput(run_id=other, confirmation=code, timeout_seconds=10), ctx), "ambiguous")
    assert "HTTP 503" in error.message and emulator.state.run(other).status == "RUNNING"


def test_resume_carries_the_paused_runs_secret_names_shown_in_its_plan_and_removable(ctx, emulator):
    cfg = Path(ctx.cwd) / "rl.toml"
    shutil.copy(EXAMPLE, cfg)
    run_id = approved_launch(ctx, cfg, secrets=["WANDB_API_KEY"])[1].run_id
    emulator.state.advance(past_step(3))
    ok(pause_run(PauseRunInput(run_id=run_id, confirmation=confirmed(ctx, pause_run(PauseRunInput(run_id=run_id),
                                                                                    ctx))), ctx))
    required = err(resume_run(ResumeRunInput(run_id=run_id), ctx), "confirmation_required")
    assert "Secrets:       WANDB_API_KEY (by name" in required.message
    assert "forwarded again, as the paused run had them" in required.message
    result = ok(resume_run(ResumeRunInput(run_id=run_id, confirmation=confirmed(ctx, required)), ctx))
    assert emulator.state.run(result.run_id).wandb_api_key == FAKE_WANDB  # read by name at sending
    without = err(resume_run(ResumeRunInput(run_id=result.run_id, keep_secrets=False), ctx), "conflict")
    assert "not PAUSED" in without.message  # the new run is running; a paused run is what resumes


def test_resume_without_the_carried_secrets_says_none_are_forwarded(ctx, emulator):
    cfg = Path(ctx.cwd) / "rl.toml"
    shutil.copy(EXAMPLE, cfg)
    run_id = approved_launch(ctx, cfg, secrets=["WANDB_API_KEY"])[1].run_id
    emulator.state.advance(past_step(3))
    ok(pause_run(PauseRunInput(run_id=run_id, confirmation=confirmed(ctx, pause_run(PauseRunInput(run_id=run_id),
                                                                                    ctx))), ctx))
    required = err(resume_run(ResumeRunInput(run_id=run_id, keep_secrets=False), ctx), "confirmation_required")
    assert "Secrets:       none forwarded" in required.message and "forwarded again" not in required.message


def test_a_restart_plan_names_the_checkpoint_step_and_the_steps_done_again(ctx, emulator):
    run_id = running(ctx, emulator, step=12, ckpt_interval=5)
    emulator.state.advance(30)  # the step-10 checkpoint is uploaded (READY)
    required = err(restart_run(RestartRunInput(run_id=run_id), ctx), "confirmation_required")
    latest = ok(call(ctx, "mf_check_progress", run_id=run_id)).latest_step
    assert f"from its latest READY checkpoint at step 10; steps 11-{latest} ({latest - 10}) are done again" \
        in required.message


def test_a_restart_without_a_ready_checkpoint_is_refused_and_nothing_is_planned(ctx, emulator):
    run_id = running(ctx, emulator, step=3)  # [ckpt] saves at the end only: none READY yet
    error = err(restart_run(RestartRunInput(run_id=run_id), ctx), "conflict")
    assert "has no READY checkpoint: a restart would go back to its start" in error.message
    assert [c.tool for c in error.next_calls] == ["mf_list_checkpoints"]
    assert entries(ctx, "restart") == [] and emulator.state.run(run_id).attempt == 0
