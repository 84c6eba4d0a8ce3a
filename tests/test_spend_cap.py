"""A spend cap that pauses: a person sets it (``approve PLAN --max-usd 5``, recorded with the approval, or
the budget policy), and ``mf_wait_for_run`` or ``model-factory watch RUN`` pauses the run, a checkpoint
kept, before its spend passes it; exactly once, through the control-action path. Real HTTP against the
emulator; its clock moves only with the tools' own waits (``FakeTime``).

Run: the bundled wordle RL example (8 GPUs on demand), 200 steps: about $14.40 an hour on H100_80GB, far
past $5.
"""

from __future__ import annotations

import pytest
from _helpers import EXAMPLES_DIR, call, cli, dispatch, err, ok, planned, write_policy

from tools.guardrails import confirmation as gate
from tools.launch import approve_plan, watch

WORDLE = EXAMPLES_DIR / "basic" / "wordle" / "rl.toml"


def _capped_run(ctx, max_usd: float | None = 5.0) -> tuple[str, object]:
    plan = planned(ctx, WORDLE, team="personal", run_kind="full")
    assert plan.cost.usd_low > 5.0  # the run would pass the cap
    token = approve_plan(plan.plan_id, "terminal", ctx, max_usd=max_usd)
    return ok(dispatch(ctx, plan.plan_id, token)).run_id, plan


def _cap_pauses(ctx, run_id: str) -> list:
    return [s for s in gate.list_launches(ctx.store(), 100, platform_url=ctx.settings.base_url)
            if s.plan.action == "pause" and s.plan.run_id == run_id]


def _assert_paused_before_cap(ctx, emulator, run_id: str, cap: float = 5.0) -> None:
    run = emulator.state.run(run_id)
    assert run.status == "PAUSED"
    billed = ctx.platform().get_usage(run_id).total_cost_usd
    assert 4.0 < billed < cap, billed  # close to the cap, never past it
    emulator.state.advance(60)  # the pause checkpoint uploads
    emulator.state.advance(7200)  # and a paused run bills nothing more
    assert ctx.platform().get_usage(run_id).total_cost_usd == billed
    ready = [c for c in ok(call(ctx, "mf_list_checkpoints", run_id=run_id)).checkpoints if c.status == "READY"]
    assert ready and max(c.step for c in ready) == run.current_step > 0
    pauses = _cap_pauses(ctx, run_id)
    assert len(pauses) == 1 and pauses[0].status == "dispatched"
    assert [a.channel for a in pauses[0].approvals] == ["spend_cap"]


def test_approve_records_the_cap_with_the_approval(frozen_ctx, emulator):
    run_id, plan = _capped_run(frozen_ctx)
    state = gate.plan_of_run(frozen_ctx.store(), run_id, platform_url=frozen_ctx.settings.base_url)
    assert [a.terms for a in state.approvals] == [{"max_usd": 5.0}]


def test_a_5_usd_cap_pauses_the_wordle_run_before_5_usd_through_wait_for_run(frozen_ctx, emulator, fake_time):
    run_id, _ = _capped_run(frozen_ctx)
    for _ in range(200):  # an agent looping on short waits
        waited = ok(call(frozen_ctx, "mf_wait_for_run", run_id=run_id))
        if waited.terminal or (waited.spend_cap and waited.spend_cap.action != "none"):
            break
    cap = waited.spend_cap
    assert cap.action in ("paused", "pausing") and cap.cap_usd == 5.0 and "--max-usd" in cap.cap_source
    assert "PAUSED by the spend cap" in cap.message or "pausing by the spend cap" in cap.message
    assert [c.tool for c in waited.next_calls] == ["mf_resume_run"]
    emulator.state.advance(30)
    _assert_paused_before_cap(frozen_ctx, emulator, run_id)
    again = ok(call(frozen_ctx, "mf_wait_for_run", run_id=run_id))  # exactly once: nothing sent again
    assert again.terminal and len(_cap_pauses(frozen_ctx, run_id)) == 1


def test_a_5_usd_cap_pauses_the_wordle_run_before_5_usd_through_watch(frozen_ctx, emulator, fake_time):
    run_id, _ = _capped_run(frozen_ctx)
    lines: list[str] = []
    result = watch(frozen_ctx, run_id, interval_seconds=60, say=lines.append)
    assert result.ended_because in ("paused", "pausing") and result.checks > 10
    assert all("of the $5.00 cap" in line for line in lines)
    emulator.state.advance(30)
    _assert_paused_before_cap(frozen_ctx, emulator, run_id)
    after = watch(frozen_ctx, run_id, interval_seconds=60)  # a second watcher sends nothing
    assert after.ended_because == "ended" and len(_cap_pauses(frozen_ctx, run_id)) == 1


def test_the_budget_policy_s_per_run_cap_pauses_too_and_plan_warns_before_approval(frozen_ctx, emulator, fake_time):
    write_policy(frozen_ctx.home, "max_usd_per_run = 0.5\nspend_cap_usd_per_run = 5.0\n")
    plan = planned(frozen_ctx, WORDLE, team="personal", run_kind="full")
    warning = next(w for w in plan.warnings if "already passes the spend cap of $5.00" in w)
    assert "steps fit at the expected pace" in warning
    token = approve_plan(plan.plan_id, "terminal", frozen_ctx)  # no --max-usd: the policy's cap applies
    run_id = ok(dispatch(frozen_ctx, plan.plan_id, token)).run_id
    result = watch(frozen_ctx, run_id, interval_seconds=60)
    assert result.ended_because in ("paused", "pausing") and "spend_cap_usd_per_run" in result.spend_cap.cap_source
    emulator.state.advance(30)
    _assert_paused_before_cap(frozen_ctx, emulator, run_id)


def test_watch_without_a_cap_ends_at_once_and_says_how_to_set_one(frozen_ctx, emulator, fake_time):
    plan = planned(frozen_ctx, WORDLE, team="personal", max_steps=5)
    run_id = ok(dispatch(frozen_ctx, plan.plan_id, approve_plan(plan.plan_id, "terminal", frozen_ctx))).run_id
    result = watch(frozen_ctx, run_id)
    assert result.ended_because == "no_cap" and "--max-usd" in result.message and fake_time.slept == []


def test_a_cap_on_a_stop_plan_is_refused(frozen_ctx, emulator):
    run_id, _ = _capped_run(frozen_ctx, max_usd=None)
    required = err(call(frozen_ctx, "mf_stop_run", run_id=run_id), "confirmation_required")
    stop_plan = required.message.split("plan ")[1].split(" ")[0]
    with pytest.raises(Exception, match="spend cap goes with a plan that starts a billed run"):
        approve_plan(stop_plan, "terminal", frozen_ctx, max_usd=5)


def test_model_factory_watch_pauses_a_run_already_at_its_cap(emulator, tmp_path, frozen_ctx, mf_env):
    run_id, _ = _capped_run(frozen_ctx, max_usd=0.5)
    emulator.state.advance(60 + 90 + 300)  # five billed minutes: $1.20 spent, past the cap
    done = cli("watch", run_id, "--interval", "1", env=mf_env)  # the emulator's clock stands still: "pausing"
    assert done.returncode == 0, done.stderr
    assert f"Run {run_id} is pausing by the spend cap" in done.stdout
    assert f"resume-run {run_id}" in done.stdout  # the resume command, as a person pastes it


def test_the_per_day_cap_counts_the_days_runs_together(frozen_ctx, emulator, fake_time):
    write_policy(frozen_ctx.home, "max_usd_per_run = 0.5\nspend_cap_usd_per_day = 3.0\n")
    plan = planned(frozen_ctx, WORDLE, team="personal", run_kind="full")
    first = ok(dispatch(frozen_ctx, plan.plan_id, approve_plan(plan.plan_id, "terminal", frozen_ctx))).run_id
    emulator.state.advance(60 + 90 + 300)  # the first run bills five minutes ($1.20) and goes on unwatched
    plan = planned(frozen_ctx, WORDLE, team="personal", run_kind="full")
    second = ok(dispatch(frozen_ctx, plan.plan_id, approve_plan(plan.plan_id, "terminal", frozen_ctx))).run_id
    result = watch(frozen_ctx, second, interval_seconds=60)
    assert result.ended_because in ("paused", "pausing") and "spend_cap_usd_per_day" in result.spend_cap.cap_source
    emulator.state.advance(30)
    day = sum(frozen_ctx.platform().get_usage(r).total_cost_usd for r in (first, second))
    assert emulator.state.run(second).status == "PAUSED" and day < 3.0 + 0.5  # the first run, unwatched, went on
    assert result.spend_cap.spent_usd + result.spend_cap.next_check_usd > 3.0
