"""A resumed run and the run it continues: the trace download of the resumed run is complete when its own steps
are, naming the run that holds the steps before (and the download that fetches them); the report says the same;
the link comes from this state folder's resume plan, else from the platform's facts (owner, name, steps); a new
run that only shares a paused run's name is not linked. An SFT run's download finds nothing missing."""

from __future__ import annotations

import tomllib

from _helpers import EXAMPLE, T, approved_launch, call, make_ctx, ok, past_step, write_policy

from tools.configs import EXAMPLES_DIR
from tools.core import predecessors
from tools.launch import ResumeRunInput, resume_run
from tools.platform import wire

RL = tomllib.loads(EXAMPLE.read_text())


def pause(ctx, emulator, run_id: str, step: int) -> None:
    """Run ``run_id`` (created now) paused at ``step``."""
    emulator.state.advance(past_step(step))
    ctx.platform().pause_run(run_id)
    emulator.state.advance(T.pause_seconds + 1)


def resumed_on_the_platform(ctx, emulator, step: int = 3) -> tuple[str, str]:
    """(paused run, its resume) made straight on the platform (nothing in this state folder), the resume
    COMPLETED."""
    paused = ctx.platform().create_run(wire.build_create_body(RL, name="chain")).run_id
    pause(ctx, emulator, paused, step)
    new = ctx.platform().resume_run(paused, gpu_type=None, image_tag=None, wandb_api_key=None, hf_token=None).run_id
    emulator.state.advance(3600)
    return paused, new


def test_the_resumed_runs_download_is_complete_and_names_the_run_holding_its_first_steps(frozen_ctx, emulator,
                                                                                      tmp_path):
    paused, new = resumed_on_the_platform(frozen_ctx, emulator)
    result = ok(call(frozen_ctx, "mf_download_traces", run_id=new, dest=str(tmp_path / "new")))
    assert result.complete is True and result.missing.steps_without_traces == []
    assert result.missing.summary == f"complete: every counted trace is on disk; steps 1-3 are in run {paused}"
    assert [(e.run_id, e.first_step, e.last_step) for e in result.earlier_runs] == [(paused, 1, 3)]
    fetch = {"tool": "mf_download_traces", "arguments": {"run_id": paused, "dest": f"traces-{paused}"}}
    assert [c.model_dump() for c in result.next_calls] == [fetch]
    assert f"The traces of steps 1-3 are run {paused}'s: {result.next_calls[0]}." in result.note
    before = ok(call(frozen_ctx, "mf_download_traces", run_id=paused, dest=str(tmp_path / "paused")))
    assert before.complete is True and before.earlier_runs is None and before.traces_on_disk == 3 * 16


def test_the_resumed_runs_report_says_whose_steps_are_whose_and_its_traces_are_complete(frozen_ctx, emulator,
                                                                                     tmp_path):
    paused, new = resumed_on_the_platform(frozen_ctx, emulator, step=4)
    ok(call(frozen_ctx, "mf_download_traces", run_id=new, dest=str(tmp_path / "t")))
    report = ok(call(frozen_ctx, "mf_run_report", run_id=new, traces_dir=str(tmp_path / "t"), plot=False))
    fetch = f'mf_download_traces(run_id="{paused}", dest="traces-{paused}")'
    assert f"- Resumed: steps 1-4 are in run {paused} ({fetch})" in report.markdown
    assert report.traces_complete is True and "with no traces" not in report.markdown
    assert report.next_step is None and [str(c) for c in report.next_calls] == [fetch]


def test_the_link_comes_from_the_state_stores_resume_chain_else_from_the_platforms_facts(emulator, tmp_path):
    emulator.state.set_speed(0)
    (tmp_path / "here").mkdir()
    (tmp_path / "elsewhere").mkdir()
    ctx = make_ctx(emulator, tmp_path / "here")
    config = tmp_path / "rl.toml"
    config.write_text(EXAMPLE.read_text())
    paused = approved_launch(ctx, config)[1].run_id
    pause(ctx, emulator, paused, 5)
    write_policy(ctx.home, "max_usd_per_run = 1000.0\n")
    new = ok(resume_run(ResumeRunInput(run_id=paused), ctx)).run_id
    emulator.state.advance(T.queue_seconds + T.startup_seconds + 2 * T.step_seconds + 1)
    run = ctx.platform().get_run(new)
    assert [(p.run_id, p.steps, p.source) for p in predecessors(ctx, run)] == [(paused, "steps 1-5", "store")]
    elsewhere = make_ctx(emulator, tmp_path / "elsewhere")  # another state store: no resume chain there
    assert [(p.run_id, p.steps, p.source) for p in predecessors(elsewhere, run)] == [(paused, "steps 1-5",
                                                                                      "platform")]
    ctx.close()
    elsewhere.close()


def test_a_chain_of_two_resumes_names_both_earlier_runs_nearest_first(frozen_ctx, emulator):
    a = frozen_ctx.platform().create_run(wire.build_create_body(RL, name="long-chain")).run_id
    pause(frozen_ctx, emulator, a, 2)
    b = frozen_ctx.platform().resume_run(a, gpu_type=None, image_tag=None, wandb_api_key=None, hf_token=None).run_id
    emulator.state.advance(T.queue_seconds + T.startup_seconds + 3 * T.step_seconds + 1)
    frozen_ctx.platform().pause_run(b)
    emulator.state.advance(T.pause_seconds + 1)
    c = frozen_ctx.platform().resume_run(b, gpu_type=None, image_tag=None, wandb_api_key=None, hf_token=None).run_id
    emulator.state.advance(T.queue_seconds + T.startup_seconds + 1 * T.step_seconds + 1)
    chain = predecessors(frozen_ctx, frozen_ctx.platform().get_run(c))
    assert [(p.run_id, p.first_step, p.last_step) for p in chain] == [(b, 3, 5), (a, 1, 2)]


def test_a_new_run_that_only_shares_a_paused_runs_name_is_not_linked(frozen_ctx, emulator, tmp_path):
    paused = frozen_ctx.platform().create_run(wire.build_create_body(RL, name="same-name")).run_id
    pause(frozen_ctx, emulator, paused, 3)
    fresh = frozen_ctx.platform().create_run(wire.build_create_body(RL, name="same-name")).run_id
    emulator.state.advance(3600)
    assert predecessors(frozen_ctx, frozen_ctx.platform().get_run(fresh)) == []
    result = ok(call(frozen_ctx, "mf_download_traces", run_id=fresh, dest=str(tmp_path / "t")))
    assert result.complete is True and result.earlier_runs is None and result.next_calls is None


def test_an_sft_runs_download_finds_nothing_missing_and_points_at_its_eval_runs(frozen_ctx, emulator, tmp_path):
    sft = tomllib.loads((EXAMPLES_DIR / "basic" / "wordle" / "sft.toml").read_text())
    run_id = frozen_ctx.platform().create_run(wire.build_create_body(sft, mode="sft", name="sft")).run_id
    emulator.state.advance(3600)
    result = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(tmp_path / "t")))
    assert result.complete is True and result.missing.steps_without_traces == []
    assert result.missing.summary == "complete: an SFT run uploads no training traces (it trains on a dataset)"
    assert "SFT: the run trains on a dataset and uploads no rollouts" in result.note
    assert [(c.tool, c.arguments["kind"]) for c in result.next_calls] == [("mf_list_traces", "eval_runs")]
