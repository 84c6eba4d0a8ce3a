"""The learning verdict (mf_check_progress's ``learning``, the report's Learning line): per emulator scenario, its
verdict and its evidence, over real HTTP with the clock stopped; the trend as a slope with its uncertainty,
including the resumed run whose reward went 0.2323 -> 0.3141 over its six own steps; signals a run does not
log are unknown, never invented."""

from __future__ import annotations

import statistics
import tomllib
from typing import Any

import pytest
from _helpers import EXAMPLE, T, at_step, call, make_ctx, ok, past_step, progress

from skill.emulator import EmulatorServer
from skill.emulator.scenarios import scenario
from tools.configs import EXAMPLES_DIR
from tools.monitor import judge, trend
from tools.platform import wire

pytestmark = pytest.mark.xdist_group("test_learning")  # one emulator for the module (the world fixture)

RL = tomllib.loads(EXAMPLE.read_text())
SFT = tomllib.loads((EXAMPLES_DIR / "basic" / "wordle" / "sft.toml").read_text())
#: The six rewards of the resumed run (steps 70-75) that the old check called "flat": the first and last as
#: reported, the four between such that the old rule (means of the two halves within 0.02) said flat.
RESUMED = [0.2323, 0.2950, 0.2811, 0.2642, 0.2705, 0.3141]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One emulator (clock stopped) and a Context on it, for the whole module."""
    with EmulatorServer(speed=0) as server:
        ctx = make_ctx(server, tmp_path_factory.mktemp("learning"))
        yield server, ctx
        ctx.close()


def run(world, name: str | None = None, *, config: dict[str, Any] = RL, steps: int = 20, **params: Any) -> str:
    """A run of ``config`` under emulator scenario ``name``, advanced just past its step ``steps``."""
    server, ctx = world
    if name:
        server.state.set_scenario(name, **params)
    body = wire.build_create_body(config, mode="sft" if config is SFT else None, name=f"learning-{name}")
    run_id = ctx.platform().create_run(body).run_id
    server.state.advance(past_step(steps))
    return run_id


def finding(learning, signal: str):
    found = [f for f in learning.findings if f.signal == signal]
    assert found, [f.signal for f in learning.findings]
    return found[0]


# -- the trend: a slope with its uncertainty --------------------------------------------------------


def test_the_six_steps_the_old_check_called_flat_are_flat_with_the_noise_said_and_a_steady_rise_is_rising():
    pts = list(zip(range(70, 76), RESUMED, strict=True))
    half = len(RESUMED) // 2
    assert abs(statistics.fmean(RESUMED[half:]) - statistics.fmean(RESUMED[:half])) <= 0.02  # the old rule: flat
    noisy = trend("reward/all/mean", pts)
    assert noisy.direction == "flat" and noisy.slope == pytest.approx(0.0091, abs=0.0001)
    assert noisy.half_width == pytest.approx(0.016, abs=0.001) and noisy.half_width > noisy.slope  # holds zero
    assert noisy.words() == ("reward/all/mean 0.2323 -> 0.3141 over steps 70-75: +0.0091 per step "
                             "+/- 0.016 (95%), flat")
    steady = trend("reward/all/mean", list(zip(range(70, 76), [0.2323, 0.2478, 0.2690, 0.2812, 0.2975, 0.3141],
                                               strict=True)))
    assert steady.direction == "rising" and steady.slope - steady.half_width > 0
    falling = trend("loss", [(s, 1.0 - 0.05 * s) for s in range(1, 9)])
    assert falling.direction == "falling" and falling.half_width == pytest.approx(0.0)


def test_fewer_than_four_steps_give_no_trend_and_the_verdict_says_too_early(world):
    learning = progress(world[1], run(world, steps=2)).learning
    assert learning.verdict == "too_early"
    assert finding(learning, "reward_trend").text.endswith("over steps 1-2: a trend needs 4 steps.")


def test_the_resumed_run_with_0_2323_to_0_3141_over_its_own_six_steps_is_judged_with_the_steps_before_it(world):
    server, ctx = world
    config = {**RL, "max_steps": 100}
    paused = ctx.platform().create_run(wire.build_create_body(config, name="long-run")).run_id
    server.state.advance(at_step(69) + 1)
    ctx.platform().pause_run(paused)
    server.state.advance(T.pause_seconds + 1)
    resumed = ctx.platform().resume_run(paused, gpu_type=None, image_tag=None, wandb_api_key=None,
                                        hf_token=None).run_id
    server.state.advance(T.queue_seconds + T.startup_seconds + 6 * T.step_seconds + 1)
    for record, value in zip(server.state.run(resumed).metrics, RESUMED, strict=True):  # the reported case
        record["reward/all/mean"] = value
    for record in server.state.run(paused).metrics:  # the paused run's steps rose as steadily before
        record["reward/all/mean"] = round(0.2323 - 0.004 * (70 - record["step"]), 4)
    result = progress(ctx, resumed)
    assert (result.latest_step, result.learning.verdict) == (75, "learning")
    text = finding(result.learning, "reward_trend").text
    assert text.startswith("reward/all/mean 0.1763 -> 0.3141 over steps 56-75: +0.00") and "rising" in text
    assert f"Resumed: steps 1-69 are in run {paused} (steps 56-69 of it are in the trend)" in " ".join(result.evidence)


# -- one scenario, one verdict and its evidence -------------------------------------------------------


def test_a_learning_run_is_learning_with_no_finding_to_act_on_and_nothing_unknown(world):
    learning = progress(world[1], run(world, "learning", start=0.2, end=0.9)).learning
    assert (learning.verdict, learning.metric, learning.unknown) == ("learning", "reward/all/mean", None)
    assert all(f.ok for f in learning.findings) and [f.signal for f in learning.findings] == ["reward_trend"]
    assert "over steps 1-20:" in learning.findings[0].text and learning.findings[0].text.endswith(
        "(95%), rising.")


def test_a_flat_reward_is_flat_and_says_what_to_check(world):
    result = progress(world[1], run(world, "flat", level=0.4))
    learning = result.learning
    assert result.healthy and result.next_step.startswith("Learning: flat, with reward_trend: tell the person each")
    trend_finding = finding(learning, "reward_trend")
    assert learning.verdict == "flat" and not trend_finding.ok and trend_finding.text.endswith("(95%), flat.")
    assert "between 10% and 80%" in trend_finding.fix and "trainer.optim.lr" in trend_finding.fix


def test_a_saturated_reward_says_there_is_nothing_to_learn_and_to_check_the_base_model_first(world):
    learning = progress(world[1], run(world, "saturated", value=1.0)).learning
    saturated = finding(learning, "reward_saturated")
    assert learning.verdict == "saturated" and not saturated.ok
    assert saturated.text == ("reward/all/mean is 1 at steps 18-20: every rollout succeeds, so there is nothing to "
                              "learn from (no reward differences, zero advantages).")
    assert "base model first" in saturated.fix and "between 10% and 80%" in saturated.fix


def test_an_entropy_collapse_names_the_fall_from_its_first_value(world):
    collapse = finding(progress(world[1], run(world, "entropy_collapse", by_step=8)).learning, "entropy_collapse")
    assert not collapse.ok and collapse.metric == "entropy"
    assert collapse.text.startswith("entropy fell from ") and "(step 1) to " in collapse.text
    assert "of its start" in collapse.text and "temperature" in collapse.fix


def test_a_kl_spike_names_the_step_and_how_far_above_the_median_it_is(world):
    learning = progress(world[1], run(world, "kl_spike", at_step=12, factor=30.0)).learning
    kl, grad = finding(learning, "mismatch_kl_spike"), finding(learning, "grad_norm_spike")
    assert kl.metric == "mismatch_kl/all/mean" and " at step 12, " in kl.text and "x the median" in kl.text
    assert grad.metric == "grad_norm" and " at step 12, " in grad.text and "max_norm" in grad.fix


@pytest.mark.parametrize(("name", "signal", "metric", "bottleneck"), [
    ("trainer_bound", "orchestrator_waits", "time/wait_for_policy", "the trainer is the bottleneck"),
    ("orchestrator_bound", "trainer_waits", "time/wait_for_batch", "the orchestrator is the bottleneck"),
])
def test_which_side_waits_says_where_the_time_goes(world, name, signal, metric, bottleneck):
    waits = finding(progress(world[1], run(world, name, share=0.7)).learning, signal)
    assert waits.metric == metric and "70% of each step" in waits.text and bottleneck in waits.text
    assert waits.fix.startswith("Where the time goes: ")


def test_rising_truncation_and_error_rates_are_flagged_with_their_trend(world):
    learning = progress(world[1], run(world, "rollouts_degrade", from_step=5)).learning
    truncated, errors = finding(learning, "truncation_rising"), finding(learning, "errors_rising")
    assert truncated.metric == "train/agg/effective/agent/is_truncated/mean" and "of rollouts are truncated now" in \
        truncated.text and "max_completion_tokens" in truncated.fix
    assert errors.metric == "train/agg/all/agent/has_error/mean" and "mf_summarize_logs" in errors.fix


def test_an_sft_run_is_judged_by_its_loss_and_eval_loss_says_no_reward_and_offers_no_traces(world):
    result = progress(world[1], run(world, "sft_eval_loss", config=SFT, steps=21, interval=5))
    learning = result.learning
    assert (result.verdict, learning.verdict, learning.metric) == ("completed", "learning", "loss")
    assert finding(learning, "loss_trend").text.endswith("(95%), falling.")
    assert finding(learning, "eval_loss_trend").metric == "val/loss"
    assert "no reward, and no rollouts: no traces" in finding(learning, "no_reward").text
    assert [c.tool for c in result.next_calls] == ["mf_run_report", "mf_list_checkpoints"]
    assert "download" not in result.next_step
    waited = ok(call(world[1], "mf_wait_for_run", run_id=result.run_id))  # the wait that sees it end says the same
    assert waited.terminal and [c.tool for c in waited.next_calls] == ["mf_run_report"]
    assert "no traces" in waited.next_step


def test_an_sft_run_whose_eval_loss_rises_while_its_loss_falls_is_overfitting(world):
    learning = progress(world[1], run(world, "sft_eval_loss", config=SFT, interval=2, overfit_after=8)).learning
    assert learning.verdict == "overfitting"
    overfit = finding(learning, "overfitting")
    assert "val/loss" in overfit.text and "while loss falls" in overfit.text and "lowest eval loss" in overfit.fix
    assert "was lowest at step 8" in overfit.text


def test_signals_a_run_does_not_log_are_unknown_and_never_judged():
    records = [{"step": s, "reward/all/mean": 0.1 + 0.03 * s} for s in range(1, 11)]
    learning = judge(records, sft=False)
    assert learning.verdict == "learning" and [f.signal for f in learning.findings] == ["reward_trend"]
    assert learning.unknown == ["entropy", "mismatch_kl", "grad_norm", "truncation", "errors", "waits"]
    nothing = judge([{"step": s, "loss": 1.0} for s in range(1, 6)], sft=False)
    assert nothing.verdict == "unknown" and nothing.metric is None and "reward" in nothing.unknown
    sft = judge([{"step": s, "loss/mean": 2.0 - 0.1 * s} for s in range(1, 8)], sft=True)
    assert (sft.verdict, sft.metric) == ("learning", "loss/mean") and sft.unknown == ["eval_loss", "grad_norm"]


def test_prime_rl_s_own_metric_names_are_read():
    records = [{"step": s, "train/agg/all/solver/reward/mean": 0.2, "train/agg/effective/solver/reward/mean":
                0.1 + 0.04 * s, "entropy/all/mean": 1.0, "optim/grad_norm": 0.5, "mismatch_kl/all/mean": 0.001,
                "time/step": 30.0, "time/wait_for_batch": 25.0, "time/wait_for_policy": 1.0} for s in range(1, 9)]
    learning = judge(records, sft=False)
    assert (learning.verdict, learning.metric) == ("learning", "train/agg/effective/solver/reward/mean")
    assert finding(learning, "trainer_waits").text.startswith("The trainer waits for batches 83% of each step "
                                                              "(time/wait_for_batch median 25 s of 30 s")
    assert learning.unknown == ["truncation", "errors"]


def test_the_emulator_refuses_learning_scenario_parameters_out_of_range():
    for name, params, said in (("saturated", {"value": 0.5}, "value must be 0 or 1"),
                               ("trainer_bound", {"share": 2}, "share must be"),
                               ("kl_spike", {"factor": 0.5}, "factor must be"),
                               ("sft_eval_loss", {"interval": 0}, "interval must be")):
        with pytest.raises(ValueError, match=said):
            scenario(name, **params)
    assert scenario("flat") == {"level": 0.4}


def test_the_report_says_the_verdict_and_what_to_do_and_an_sft_report_offers_no_traces(world):
    server, ctx = world
    flat = run(world, "flat", steps=21)
    report = ok(call(ctx, "mf_run_report", run_id=flat, plot=False))
    line = next(ln for ln in report.markdown.splitlines() if ln.startswith("- Learning: "))
    assert report.learning == "flat" and line.startswith("- Learning: flat, not learning. reward/all/mean ")
    assert "(what to do: If it stays flat" in line
    sft = run(world, "sft_eval_loss", config=SFT, steps=21)
    report = ok(call(ctx, "mf_run_report", run_id=sft, plot=False))
    assert "- Traces: none: an SFT run trains on a dataset and uploads no rollouts" in report.markdown
    assert report.traces_complete is True and not any(c.tool == "mf_download_traces" for c in report.next_calls)

