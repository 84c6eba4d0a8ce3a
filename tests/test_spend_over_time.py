"""Spend that tells the truth over time, over real HTTP against the emulator (frozen clock): running
time counts only while the run holds GPUs (not queued, not paused), and a resume chain (paused ->
resumed, the state store's run links) is one line of spend in get-spend and run-report.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from _helpers import EXAMPLE, approved_launch, call, make_ctx, ok, past_step
from conftest import FakeTime

from tools.launch import PauseRunInput, ResumeRunInput, approve_plan, pause_run, resume_run

PLAN_IN = re.compile(r"plan (\w+) needs a person's confirmation")


@pytest.fixture
def ctx(emulator, tmp_path):
    time = FakeTime(emulator)
    c = make_ctx(emulator, tmp_path, clock=time.clock, sleep=time.sleep)
    yield c
    c.close()


def _confirmed(ctx, required) -> str:
    return approve_plan(PLAN_IN.search(required.message).group(1), "terminal", ctx)


def _paused_run(ctx, emulator) -> str:
    cfg = Path(ctx.cwd) / "rl.toml"
    shutil.copy(EXAMPLE, cfg)
    run_id = approved_launch(ctx, cfg, max_steps=20)[1].run_id
    emulator.state.advance(past_step(4))
    required = pause_run(PauseRunInput(run_id=run_id), ctx)
    ok(pause_run(PauseRunInput(run_id=run_id, confirmation=_confirmed(ctx, required)), ctx))
    assert emulator.state.run(run_id).status == "PAUSED"
    return run_id


def test_a_pause_of_ten_simulated_minutes_adds_nothing_to_either_figure(ctx, emulator):
    run_id = _paused_run(ctx, emulator)
    before = ok(call(ctx, "mf_get_spend", run_id=run_id))
    assert before.running_seconds > 0 and before.elapsed_x_rate_usd > 0 and before.platform_usd > 0
    emulator.state.advance(600)  # ten minutes paused
    after = ok(call(ctx, "mf_get_spend", run_id=run_id))
    assert after.running_seconds == before.running_seconds
    assert (after.elapsed_x_rate_usd, after.platform_usd) == (before.elapsed_x_rate_usd, before.platform_usd)
    emulator.state.advance(30 * 24 * 3600)  # a month paused: still no warning past the high estimate
    later = ok(call(ctx, "mf_get_spend", run_id=run_id))
    assert later.elapsed_x_rate_usd == before.elapsed_x_rate_usd and later.over_high_estimate is False


def test_a_resume_chain_is_one_line_of_spend_in_get_spend_and_run_report(ctx, emulator):
    run_id = _paused_run(ctx, emulator)
    required = resume_run(ResumeRunInput(run_id=run_id), ctx)
    resumed = ok(resume_run(ResumeRunInput(run_id=run_id, confirmation=_confirmed(ctx, required)), ctx))
    new = resumed.run_id
    emulator.state.advance(past_step(3))
    first = ok(call(ctx, "mf_get_spend", run_id=run_id))
    second = ok(call(ctx, "mf_get_spend", run_id=new))
    for spend in (first, second):  # either run of the chain shows the same chain
        chain = spend.chain
        assert [r.run_id for r in chain.runs] == [run_id, new]
        assert chain.platform_usd == round(first.platform_usd + second.platform_usd, 2) > first.platform_usd
        assert chain.elapsed_x_rate_usd == round(first.elapsed_x_rate_usd + second.elapsed_x_rate_usd, 2)
        assert chain.plan_id == first.plan_id and chain.plan_high_usd == first.plan_high_usd
        assert chain.line in spend.summary and chain.line.startswith("Resume chain of 2 runs: ")
    report = ok(call(ctx, "mf_run_report", run_id=new))
    assert f"- Resume chain cost: {second.chain.line}" in report.markdown


def test_a_run_on_its_own_has_no_chain(ctx, emulator):
    run_id = approved_launch(ctx, EXAMPLE, max_steps=5)[1].run_id
    emulator.state.advance(past_step(2))
    spend = ok(call(ctx, "mf_get_spend", run_id=run_id))
    assert spend.chain is None and "Resume chain" not in spend.summary
