"""mf_compare_runs / ``model-factory compare-runs A B ...``: two to eight runs side by side (learning verdicts,
steps to 50% and 90% of the change, best and last, pace, cost from the platform and the plan, config differences
by key path, one PNG aligned by step), RL beside SFT on what they share, and bad input refused before any read."""

from __future__ import annotations

import copy
import json
import tomllib

import pytest
from _helpers import CLI, EXAMPLE, approved_launch, call, err, in_terminal, ok, past_step

from skill.cli import main
from tools.configs import EXAMPLES_DIR
from tools.monitor import PNG_SIGNATURE
from tools.platform import wire

RL = tomllib.loads(EXAMPLE.read_text())
SFT = tomllib.loads((EXAMPLES_DIR / "basic" / "wordle" / "sft.toml").read_text())


@pytest.fixture
def two_runs(frozen_ctx, emulator):
    """(learning run, flat run with a lower learning rate), both COMPLETED, created straight on the platform."""
    slow = copy.deepcopy(RL)
    slow["trainer"]["optim"]["lr"] = 1e-7
    fast = frozen_ctx.platform().create_run(wire.build_create_body(RL, name="fast")).run_id
    emulator.state.set_scenario("flat", level=0.3)
    flat = frozen_ctx.platform().create_run(wire.build_create_body(slow, name="slow")).run_id
    emulator.state.advance(past_step(20) + 60)
    return fast, flat


def test_two_runs_side_by_side_say_which_learned_faster_what_differs_and_what_each_cost(frozen_ctx, two_runs,
                                                                                       tmp_path):
    fast, flat = two_runs
    result = ok(call(frozen_ctx, "mf_compare_runs", run_ids=[fast, flat], plot_path=str(tmp_path / "c.png")))
    a, b = result.runs
    assert (a.run_id, a.verdict, b.run_id, b.verdict) == (fast, "learning", flat, "flat")
    assert a.metric == b.metric == "reward/all/mean" and a.last_step == b.last_step == 20
    assert 0 < a.steps_to_50 < a.steps_to_90 < 20 and b.steps_to_50 is None and b.steps_to_90 is None
    assert a.best >= a.last > a.first and a.best_step <= 20
    assert a.steps_per_hour == b.steps_per_hour == 120.0  # one step every 30 s
    assert a.platform_usd > 0 and b.platform_usd > 0 and a.plan_expected_usd is None  # no plan in this folder
    assert b.problems == ["reward_trend"] and a.problems is None
    assert [(d.path, d.values) for d in result.config_differences] == [("trainer.optim.lr", ["3e-06", "1e-07"])]
    assert result.config_same_paths > 5 and result.not_compared is None and not result.truncated
    assert f"{fast} learned fastest: 50% of its change in {a.steps_to_50} steps ({flat} never)" in result.summary
    assert "Their configs differ in 1 key path(s): trainer.optim.lr." in result.summary and a.first_step == 1
    assert (tmp_path / "c.png").read_bytes()[:8] == PNG_SIGNATURE and result.plotted == ["reward/all/mean"]
    assert result.plot_path == str(tmp_path / "c.png")
    assert [c.tool for c in result.next_calls] == ["mf_check_progress"] and flat in result.next_step


def test_a_run_launched_from_this_state_folder_shows_its_plans_expected_cost(frozen_ctx, emulator, tmp_path):
    config = tmp_path / "rl.toml"
    config.write_text(EXAMPLE.read_text())
    plan, run = approved_launch(frozen_ctx, config)
    other = frozen_ctx.platform().create_run(wire.build_create_body(RL, name="other")).run_id
    emulator.state.advance(past_step(20) + 60)
    result = ok(call(frozen_ctx, "mf_compare_runs", run_ids=[run.run_id, other]))
    assert result.runs[0].plan_expected_usd == plan.cost.usd_expected and result.runs[1].plan_expected_usd is None
    assert f"{run.run_id} ${result.runs[0].platform_usd:,.2f} (plan ${plan.cost.usd_expected:,.2f})" in result.summary
    assert result.plot_path.endswith(".png") and "/plots/compare-" in result.plot_path
    assert {r.status for r in result.runs} == {"COMPLETED"} and "so far" not in result.summary
    going = frozen_ctx.platform().create_run(wire.build_create_body(RL, name="going")).run_id
    assert "so far for a run still going" in ok(call(frozen_ctx, "mf_compare_runs",
                                                     run_ids=[run.run_id, going])).summary


def test_an_rl_run_beside_an_sft_run_is_compared_on_what_they_share_and_says_what_not(frozen_ctx, emulator):
    rl = frozen_ctx.platform().create_run(wire.build_create_body(RL, name="rl")).run_id
    sft = frozen_ctx.platform().create_run(wire.build_create_body(SFT, mode="sft", name="sft")).run_id
    emulator.state.advance(past_step(20) + 60)
    result = ok(call(frozen_ctx, "mf_compare_runs", run_ids=[rl, sft]))
    assert [(r.mode, r.metric) for r in result.runs] == [("rl", "reward/all/mean"), ("sft", "loss")]
    assert result.not_compared.startswith(f"{sft} is SFT (a loss, no reward, no rollouts)")
    assert result.plotted == ["reward/all/mean", "loss"] and "learned fastest" not in result.summary
    assert any(d.path == "data.name" for d in result.config_differences)


@pytest.mark.parametrize(("run_ids", "problem"), [
    (["only-one"], "at least 2 items"), ([f"r{i}" for i in range(9)], "at most 8 items"),
])
def test_fewer_than_two_or_more_than_eight_runs_are_refused(frozen_ctx, run_ids, problem):
    error = err(call(frozen_ctx, "mf_compare_runs", run_ids=run_ids), "bad_arguments")
    assert problem in " ".join(f.problem for f in error.fields)


def test_a_run_given_twice_an_unknown_run_or_a_plot_path_that_is_no_png_is_refused(frozen_ctx, two_runs, tmp_path):
    fast, flat = two_runs
    twice = err(call(frozen_ctx, "mf_compare_runs", run_ids=[fast, fast]), "bad_arguments")
    assert twice.message == f"Run {fast} is given more than once."
    err(call(frozen_ctx, "mf_compare_runs", run_ids=[fast, "no-such-run"]), "not_found")
    error = err(call(frozen_ctx, "mf_compare_runs", run_ids=[fast, flat], plot_path=str(tmp_path / "c.txt")),
                "bad_arguments")
    assert "does not end with .png" in error.message and not (tmp_path / "c.txt").exists()


def test_compare_runs_at_80_columns_shows_the_table_and_the_json_has_every_field(emulator, mf_env, two_runs,
                                                                                 tmp_path, monkeypatch, capsys):
    fast, flat = two_runs
    code, out = in_terminal([CLI, "compare-runs", fast, flat, "--plot-path", tmp_path / "c.png"],
                            {**mf_env, "TERM": "xterm", "NO_COLOR": "1"}, tmp_path)
    assert code == 0, out
    # A printed command stays on one line so that it pastes: only it may pass 80 columns (a long install path).
    assert all(len(line) <= 80 or line.strip().startswith(str(CLI)) for line in out.splitlines()), out
    table = out[out.index("runs (2)"):]
    assert f"{fast}  learning" in table and f"{flat}  flat" in table and "$" in table
    assert "trainer.optim.lr  3e-06 | 1e-07" in out and "compare-runs" not in out.split("runs (2)")[1]
    for name, value in mf_env.items():  # the same command in this process (no second start-up)
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert exit_code(["compare-runs", fast, flat, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in data["runs"]] == [fast, flat] and data["plot_path"].endswith(".png")
    assert data["config_differences"] == [{"path": "trainer.optim.lr", "values": ["3e-06", "1e-07"]}]
    assert exit_code(["compare-runs", "--run-id", fast]) == 2
    assert "compare-runs RUN_ID...` (any options after)" in capsys.readouterr().err


def exit_code(argv: list[str]) -> int:
    """``model-factory ARGV`` in this process: its exit code."""
    with pytest.raises(SystemExit) as ended:
        main(argv)
    return ended.value.code


def test_two_runs_with_the_same_curve_are_called_level_and_equally_fast_never_one_the_winner(frozen_ctx, emulator):
    first = frozen_ctx.platform().create_run(wire.build_create_body(RL, name="first")).run_id
    second = frozen_ctx.platform().create_run(wire.build_create_body(RL, name="second")).run_id
    emulator.state.advance(past_step(20) + 60)
    for mine, theirs in zip(emulator.state.run(second).metrics, emulator.state.run(first).metrics, strict=True):
        mine["reward/all/mean"] = theirs["reward/all/mean"]
    result = ok(call(frozen_ctx, "mf_compare_runs", run_ids=[first, second]))
    assert result.runs[0].steps_to_50 == result.runs[1].steps_to_50 is not None
    assert f"{first} and {second} end level (reward/all/mean" in result.summary
    assert f"{first} and {second} learned equally fast: 50% of their change in" in result.summary
    assert "ends best" not in result.summary and "learned fastest" not in result.summary
