"""Monitoring tools against the emulator over real HTTP: get/list runs, every verdict of
mf_check_progress on its scenario, metrics downsampling and budget, the PNG plot,
checkpoints, and the bounded wait.

The clock is frozen (speed 0) and moved with ``advance`` except where a test needs time
to pass (mf_wait_for_run), which uses the emulator's fast clock instead of sleeping.
Runs are created from the bundled prime-rl example ``basic/reverse-text/rl.toml``
(20 steps; emulator timing: 60 s queued, 90 s start-up, 30 s per step, 10 s finalize).
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from _helpers import call, mf_json, ok, past_step, progress, size

from skill import registry
from skill.emulator import TEAM_EVALS_ID, EmulatorServer, TraceShape
from skill.emulator.logs import make_line
from tools.core import OUTPUT_BUDGET_CHARS, Context
from tools.errors import ToolError
from tools.errors import call as tool_call
from tools.monitor import PNG_SIGNATURE
from tools.platform import wire

QUEUE, STARTUP, STEP, FINALIZE = 60.0, 90.0, 30.0, 10.0


# -- mf_get_run / mf_list_runs ----------------------------------------------------------------------


def test_get_run_reads_the_wire_run(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(3))
    run = ok(call(frozen_ctx, "mf_get_run", run_id=run_id))
    assert (run.run_id, run.status, run.terminal, run.mode) == (run_id, "RUNNING", False, "rl")
    assert run.model == "PrimeIntellect/Qwen3-0.6B-Reverse-Text-SFT" and run.environments == ["reverse-text"]
    assert (run.max_steps, run.batch_size, run.owner) == (20, 128, "personal account")
    assert run.running_seconds == pytest.approx(past_step(3) - QUEUE, abs=2)
    assert run.dashboard_url is None  # the emulator's run is not on the real dashboard
    assert run.failure_analysis is None and run.error_message is None


def test_the_dashboard_link_on_the_emulator_opens_the_emulators_page_for_the_run(emulator, mf_env, tmp_path, launch):
    import httpx

    launch()
    run_id = next(iter(emulator.state.runs))
    linked = Context(env={**mf_env, "PRIME_FRONTEND_URL": emulator.base_url}, home=tmp_path / "home")
    url = ok(call(linked, "mf_get_run", run_id=run_id)).dashboard_url
    linked.close()
    assert url == f"{emulator.base_url}/dashboard/training/{run_id}"
    page = httpx.get(url)
    assert page.status_code == 200 and run_id in page.text and "text/html" in page.headers["content-type"]


def test_get_run_of_a_failed_run_has_the_failure_analysis(frozen_ctx, emulator, launch):
    run_id = launch("fail", at_step=4)
    emulator.state.advance(past_step(5))
    run = ok(call(frozen_ctx, "mf_get_run", run_id=run_id))
    assert run.status == "FAILED" and run.terminal and run.error_message == "trainer pod OOMKilled"
    assert run.failure_analysis.root_cause == "CUDA OOM in trainer at step 4"
    assert run.failure_analysis.confidence == 0.86 and len(run.failure_analysis.evidence) == 2


def test_get_run_clips_long_server_texts(frozen_ctx, emulator, launch):
    run_id = launch("fail", at_step=1)
    emulator.state.advance(past_step(2))
    run = emulator.state.run(run_id)
    run.error_message = "E" * 50_000
    run.failure_analysis["evidence"] = ["line " * 2000] * 40
    result = ok(call(frozen_ctx, "mf_get_run", run_id=run_id))
    assert size(result) <= OUTPUT_BUDGET_CHARS
    assert len(result.error_message) <= 600 and len(result.failure_analysis.evidence) == 8
    assert size(progress(frozen_ctx, run_id)) <= OUTPUT_BUDGET_CHARS


def test_get_run_unknown_id(frozen_ctx):
    result = call(frozen_ctx, "mf_get_run", run_id="cdoesnotexist00000000000000")
    assert isinstance(result, ToolError) and result.code == "not_found" and "mf_list_runs" in result.fix


def test_list_runs_pages_newest_first_and_filters_status(frozen_ctx, emulator, launch):
    ids = []
    for _ in range(3):
        ids.append(launch())
        emulator.state.advance(5)
    frozen_ctx.platform().stop_run(ids[1])
    first = ok(call(frozen_ctx, "mf_list_runs", limit=2))
    second = ok(call(frozen_ctx, "mf_list_runs", limit=2, page=2))
    assert [r.run_id for r in first.runs + second.runs] == ids[::-1]
    assert (first.total, first.next_page, second.next_page) == (3, 2, None)
    assert first.owner.startswith("personal account")
    stopped = ok(call(frozen_ctx, "mf_list_runs", status="stopped"))
    assert [(r.run_id, r.status, r.terminal) for r in stopped.runs] == [(ids[1], "STOPPED", True)]
    assert stopped.total == 1 and stopped.scan_complete


def test_list_runs_owner_is_explicit(frozen_ctx, launch):
    team_run = launch(team_id=TEAM_EVALS_ID)
    personal_run = launch()
    assert [r.run_id for r in ok(call(frozen_ctx, "mf_list_runs", team=TEAM_EVALS_ID)).runs] == [team_run]
    assert [r.run_id for r in ok(call(frozen_ctx, "mf_list_runs", team="personal")).runs] == [personal_run]
    bad = call(frozen_ctx, "mf_list_runs", team="not-a-team")
    assert isinstance(bad, ToolError) and bad.code == "invalid_team"


def test_list_runs_stays_in_budget(frozen_ctx, emulator, launch):
    emulator.state.max_concurrent_runs = 1000  # an account allowed this many runs at once
    for _ in range(60):
        launch()
    result = ok(call(frozen_ctx, "mf_list_runs", limit=100))
    assert size(result) <= OUTPUT_BUDGET_CHARS
    assert result.truncated and result.omitted == 60 - len(result.runs) > 0
    narrow = result.next_calls[-1]  # fewer runs a page, starting where this page starts: every row fits
    assert str(narrow) in result.narrow_hint and narrow.arguments["limit"] <= len(result.runs)
    smaller = ok(call(frozen_ctx, narrow.tool, **narrow.arguments))
    ids = [r.run_id for r in smaller.runs]
    assert not smaller.truncated and ids == [r.run_id for r in result.runs][:len(ids)]


def test_list_runs_says_why_started_runs_past_the_first_twenty_of_a_page_show_no_latest_step(frozen_ctx, emulator,
                                                                                             launch):
    emulator.state.max_concurrent_runs = 1000  # an account allowed this many runs at once
    for _ in range(22):
        launch()
    emulator.state.advance(past_step(2))
    result = ok(call(frozen_ctx, "mf_list_runs", limit=22))
    assert sum(r.latest_step == 2 for r in result.runs) == 20 and sum(r.latest_step is None for r in result.runs) == 2
    assert "first 20 started runs of a page: 2 more show none" in result.note, result.note


# -- mf_check_progress: one test per verdict ---------------------------------------------------------


def calls(result) -> list[tuple[str, dict]]:
    """The calls a result's next step names; each is quoted in its text, as agents read it."""
    assert all(str(c) in result.next_step for c in result.next_calls), result.next_step
    return [(c.tool, c.arguments) for c in result.next_calls]


def test_verdict_queued(frozen_ctx, emulator, launch):
    run_id = launch("stay_queued", runs_ahead=3)
    emulator.state.advance(600)
    result = progress(frozen_ctx, run_id)
    assert (result.verdict, result.status, result.healthy) == ("queued", "QUEUED", True)
    assert "3 run(s) ahead" in result.evidence[0]
    assert calls(result) == [("mf_wait_for_run", {"run_id": run_id, "until": "running"})]


def test_verdict_starting(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(QUEUE + 30)
    result = progress(frozen_ctx, run_id)
    assert (result.verdict, result.status, result.latest_step) == ("starting", "RUNNING", None)
    assert result.env_servers[0].status == "Pending"


def test_verdict_progressing(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(8))
    result = progress(frozen_ctx, run_id)
    assert (result.verdict, result.latest_step, result.max_steps) == ("progressing", 8, 20)
    assert result.percent_complete == 40.0 and result.step_seconds == pytest.approx(STEP, abs=0.5)
    assert result.last_step_age_seconds == pytest.approx(1.0, abs=1.5)
    expected_reward = emulator.state.run(run_id).metrics[-1]["reward/all/mean"]
    assert (result.learning.metric, result.learning.last) == ("reward/all/mean", expected_reward)
    assert result.learning.verdict == "learning" and result.recent_error_lines == 0


def test_verdict_stalled_uses_the_threshold(frozen_ctx, emulator, launch):
    run_id = launch("stall", at_step=2)
    emulator.state.advance(past_step(2) + 90)
    assert progress(frozen_ctx, run_id).verdict == "progressing"  # 91 s without a step: under the 600 s floor
    short = progress(frozen_ctx, run_id, stall_after_seconds=60)
    assert short.verdict == "stalled" and short.stall_threshold_seconds == 60.0
    emulator.state.advance(600)
    result = progress(frozen_ctx, run_id)
    assert (result.verdict, result.status, result.healthy) == ("stalled", "RUNNING", False)
    assert result.last_step_age_seconds > result.stall_threshold_seconds == 600.0
    assert calls(result) == [("mf_summarize_logs", {"run_id": run_id}), ("mf_stop_run", {"run_id": run_id})]


def test_a_late_step_is_said_with_its_size_before_the_run_is_called_stalled(frozen_ctx, emulator, launch):
    run_id = launch("stall", at_step=2)
    emulator.state.advance(past_step(2) + 50)  # 51 s since step 2: under 3 step times
    on_time = progress(frozen_ctx, run_id)
    assert (on_time.verdict, on_time.healthy, on_time.step_overdue) == ("progressing", True, None)
    assert not on_time.evidence[0].startswith("No new step")
    emulator.state.advance(357)  # 408 s: 13.6 step times, still under the 600 s floor
    late = progress(frozen_ctx, run_id)
    assert (late.verdict, late.healthy, late.step_overdue) == ("progressing", False, True)
    assert re.fullmatch(r"No new step for 6 min 4\d s \(13\.[56] x the recent step time of 30 s\); it is called "
                        r"stalled after 10 min \(stall_after_seconds to change that\)\.", late.evidence[0]), \
        late.evidence[0]
    assert calls(late) == [("mf_summarize_logs", {"run_id": run_id}), ("mf_check_progress", {"run_id": run_id}),
                           ("mf_wait_for_run", {"run_id": run_id})]
    emulator.state.advance(200)  # 608 s: past the floor, the verdict changes as before
    assert (progress(frozen_ctx, run_id).verdict, progress(frozen_ctx, run_id).step_overdue) == ("stalled", None)


def test_verdict_crash_looping(frozen_ctx, emulator, launch):
    run_id = launch("crash_loop", at_step=2)
    emulator.state.advance(past_step(2) + 120)
    result = progress(frozen_ctx, run_id)
    assert result.verdict == "crash_looping" and not result.healthy
    assert [(e.env_name, e.status) for e in result.env_servers] == [("reverse-text", "CrashLoopBackOff")]
    assert calls(result)[0] == ("mf_get_logs", {"run_id": run_id, "component": "env-server",
                                                "env_name": "reverse-text", "level": "ERROR"})


def test_verdict_failing_on_recent_error_lines(frozen_ctx, emulator, launch, rl_config):
    run_id = launch(config={**rl_config, "max_steps": 100})
    emulator.state.advance(past_step(5))
    now = emulator.state.now()
    emulator.state.run(run_id).logs.append(
        make_line(now, emulator.state.clock.iso(now), "trainer", "ERROR", "NaN loss detected", prefix="[rank0]: "))
    result = progress(frozen_ctx, run_id)
    assert result.verdict == "failing" and result.recent_error_lines == 1
    assert calls(result)[0] == ("mf_summarize_logs", {"run_id": run_id, "components": ["trainer", "orchestrator"]})
    emulator.state.advance(20 * 60)  # the error leaves the 15-minute window; steps went on
    assert progress(frozen_ctx, run_id).verdict == "progressing"


def test_verdict_failed_surfaces_the_failure_analysis(frozen_ctx, emulator, launch):
    run_id = launch("fail", at_step=6)
    emulator.state.advance(past_step(7))
    result = progress(frozen_ctx, run_id)
    assert (result.verdict, result.status, result.terminal, result.latest_step) == ("failed", "FAILED", True, 5)
    assert result.failure_analysis.root_cause == "CUDA OOM in trainer at step 6"
    assert any("CUDA OOM in trainer at step 6" in line and "86%" in line for line in result.evidence)
    assert calls(result)[0][0] == "mf_summarize_logs"


def test_verdict_completed(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(20) + FINALIZE)
    result = progress(frozen_ctx, run_id)
    assert (result.verdict, result.latest_step, result.percent_complete) == ("completed", 20, 100.0)
    assert "mf_download_traces" in result.next_step


def test_verdict_stopped_and_paused(frozen_ctx, emulator, launch):
    stopped, paused = launch(), launch()
    emulator.state.advance(past_step(3))
    frozen_ctx.platform().stop_run(stopped)
    frozen_ctx.platform().pause_run(paused)
    assert progress(frozen_ctx, stopped).verdict == "stopped"
    pausing = progress(frozen_ctx, paused)
    assert (pausing.verdict, pausing.status) == ("paused", "PAUSING")
    emulator.state.advance(60)
    result = progress(frozen_ctx, paused)
    assert (result.verdict, result.status, result.terminal) == ("paused", "PAUSED", True)
    assert [c.tool for c in result.next_calls] == ["mf_resume_run"] and "approved like a launch" in result.next_step


def test_verdict_unknown_status(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(1))
    emulator.state.run(run_id).status = "MIGRATING"
    result = progress(frozen_ctx, run_id)
    assert (result.verdict, result.status, result.healthy) == ("unknown", "MIGRATING", False)
    assert "MIGRATING" in result.next_step


# -- mf_get_metrics / mf_plot_metrics ----------------------------------------------------------------


def test_metrics_downsample_keeps_first_and_last(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(20) + FINALIZE)
    stored = {m["step"]: m for m in emulator.state.run(run_id).metrics}
    result = ok(call(frozen_ctx, "mf_get_metrics", run_id=run_id, max_points=5))
    steps = [int(row[0]) for row in result.rows]
    assert len(steps) == 5 and steps[0] == 1 and steps[-1] == 20 and steps == sorted(steps)
    assert result.steps_available == 20 and result.omitted == 15 and result.truncated
    assert result.final["reward/all/mean"] == stored[20]["reward/all/mean"]
    assert result.columns[:3] == ["step", "reward/all/mean", "reward/all/std"]
    column = result.columns.index("loss")
    assert [row[column] for row in result.rows] == [stored[s]["loss"] for s in steps]
    loss = next(s for s in result.stats if s.name == "loss")
    assert (loss.first, loss.last, loss.min, loss.steps) == (
        stored[1]["loss"], stored[20]["loss"], min(m["loss"] for m in stored.values()), 20)


def test_metrics_range_and_names(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(12))
    result = ok(call(frozen_ctx, "mf_get_metrics", run_id=run_id, min_step=5, max_step=9, names=["reward", "loss"]))
    assert result.columns == ["step", "reward/all/mean", "reward/all/std", "loss"]
    assert [int(r[0]) for r in result.rows] == [5, 6, 7, 8, 9] and not result.truncated
    assert set(result.final) == {"reward/all/mean", "reward/all/std", "loss"}
    bad = call(frozen_ctx, "mf_get_metrics", run_id=run_id, names=["rewrd"])
    assert isinstance(bad, ToolError) and bad.code == "bad_arguments" and "reward/all/mean" in bad.message


def test_metrics_of_a_long_run_stay_in_budget(tmp_path, mf_env, rl_config):
    long = {**rl_config, "max_steps": 500}
    shape = TraceShape(episodes_per_step=1, traces_per_episode=1, eval_interval=0)
    with EmulatorServer(speed=0, shape=shape) as emu:
        env = {**mf_env, "PRIME_API_BASE_URL": emu.base_url, "PRIME_TRACES_URL": emu.base_url}
        context = Context(env=env, home=tmp_path / "home", state_dir=tmp_path / "state")
        run_id = context.platform().create_run(wire.build_create_body(long)).run_id
        emu.state.advance(past_step(500))
        result = ok(call(context, "mf_get_metrics", run_id=run_id, max_points=500))
        context.close()
    steps = [int(row[0]) for row in result.rows]
    assert size(result) <= OUTPUT_BUDGET_CHARS
    assert result.steps_available == 500 and 2 <= len(steps) < 500 and steps[0] == 1 and steps[-1] == 500
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    assert max(gaps) - min(gaps) <= 1  # evenly spread
    assert result.truncated and result.omitted == 500 - len(steps) and "min and max step" in result.narrow_hint


def test_plot_writes_a_png(frozen_ctx, emulator, launch, tmp_path):
    run_id = launch()
    emulator.state.advance(past_step(10))
    result = ok(call(frozen_ctx, "mf_plot_metrics", run_id=run_id))
    data = Path(result.path).read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) == result.size_bytes > 1000
    assert result.path.startswith(str((tmp_path / "state").resolve()))
    assert result.metrics == ["reward/all/mean", "loss", "entropy"]
    assert (result.steps, result.first_step, result.last_step) == (10, 1, 10)
    chosen = ok(call(frozen_ctx, "mf_plot_metrics", run_id=run_id, names=["grad_norm"],
                     dest=str(tmp_path / "out" / "g.png")))
    other = Path(chosen.path).read_bytes()
    assert chosen.metrics == ["grad_norm"] and other[:8] == PNG_SIGNATURE and other != data
    assert not list((tmp_path / "out").glob(".*partial"))


@pytest.fixture
def no_matplotlib(monkeypatch):
    """This process as one without the plot extra: importing matplotlib (or any of its modules) fails as an
    absent package does (a ``None`` entry in ``sys.modules`` makes ``import`` raise ModuleNotFoundError)."""
    import sys

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + [
            "matplotlib", "matplotlib.backends.backend_agg", "matplotlib.figure", "matplotlib.ticker"]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError):
        import matplotlib.figure  # noqa: F401


def test_without_the_plot_extra_plots_say_dependency_missing_and_the_rest_works(frozen_ctx, emulator, launch,
                                                                               tmp_path, no_matplotlib):
    run_id, other = launch(), launch()
    emulator.state.advance(past_step(4))
    error = call(frozen_ctx, "mf_plot_metrics", run_id=run_id)
    assert isinstance(error, ToolError) and error.code == "dependency_missing", error
    assert "uv sync --extra plot" in error.fix and "model-factory-skill[plot]" in error.fix
    assert [c.tool for c in error.next_calls] == ["mf_get_metrics"]
    assert len(ok(call(frozen_ctx, "mf_get_metrics", run_id=run_id)).rows) == 4  # the numbers are still there
    compared = ok(call(frozen_ctx, "mf_compare_runs", run_ids=[run_id, other]))  # no picture, the comparison stands
    assert compared.plot_path is None and compared.plotted == [] and len(compared.runs) == 2
    asked = call(frozen_ctx, "mf_compare_runs", run_ids=[run_id, other], plot_path=str(tmp_path / "c.png"))
    assert isinstance(asked, ToolError) and asked.code == "dependency_missing" and not (tmp_path / "c.png").exists()
    report = ok(call(frozen_ctx, "mf_run_report", run_id=run_id, plot=True))
    assert report.plot_path is None and report.markdown.startswith(f"## Run {run_id}")


def test_plot_never_replaces_a_non_png(frozen_ctx, emulator, launch, tmp_path):
    run_id = launch()
    emulator.state.advance(past_step(2))
    precious = tmp_path / "notes.png"
    precious.write_text("my notes, not an image")
    refused = call(frozen_ctx, "mf_plot_metrics", run_id=run_id, dest=str(precious))
    assert isinstance(refused, ToolError) and refused.code == "bad_arguments"
    assert precious.read_text() == "my notes, not an image"
    wrong = call(frozen_ctx, "mf_plot_metrics", run_id=run_id, dest=str(tmp_path / "plot.jpg"))
    assert isinstance(wrong, ToolError) and wrong.code == "bad_arguments"
    queued = launch()
    empty = call(frozen_ctx, "mf_plot_metrics", run_id=queued)
    assert isinstance(empty, ToolError) and "no metrics yet" in empty.message


# -- mf_list_checkpoints ------------------------------------------------------------------------------


def test_checkpoints_newest_first_with_status(frozen_ctx, emulator, launch, rl_config):
    run_id = launch(config={**rl_config, "ckpt": {"interval": 5}})
    emulator.state.advance(past_step(10))  # step 10's checkpoint is 1 s old: still uploading (15 s)
    result = ok(call(frozen_ctx, "mf_list_checkpoints", run_id=run_id))
    assert [(c.step, c.status) for c in result.checkpoints] == [(10, "UPLOADING"), (5, "READY")]
    assert result.latest_ready_step == 5 and result.checkpoints[1].uploaded_at is not None
    assert result.total_size_bytes == sum(c.size_bytes for c in result.checkpoints) > 0
    assert all(c.storage_url.endswith(f"step_{c.step}") for c in result.checkpoints)
    ready = ok(call(frozen_ctx, "mf_list_checkpoints", run_id=run_id, status="READY"))
    assert [c.step for c in ready.checkpoints] == [5]


# -- mf_wait_for_run ------------------------------------------------------------------------------------


def wait_until(ctx, run_id: str, **arguments):
    """Loop on short waits, as the skill tells agents to: until reached (or the run ends)."""
    results = []
    while not results or not (results[-1].reached or results[-1].terminal):
        results.append(ok(call(ctx, "mf_wait_for_run", run_id=run_id, **arguments)))
        assert len(results) < 50
    return results


def test_wait_is_bounded_on_a_stalled_run(frozen_ctx, emulator, launch, fake_time):
    run_id = launch("stall", at_step=1)
    emulator.state.advance(past_step(1))
    result = ok(call(frozen_ctx, "mf_wait_for_run", run_id=run_id))
    assert result.waited_seconds == sum(fake_time.slept) == 40  # 45 s, the last poll 5 s before the end
    assert fake_time.slept[:3] == [2.0, 3.0, 4.5] and max(fake_time.slept) <= 15
    assert (result.status, result.terminal, result.reached, result.latest_step) == ("RUNNING", False, False, 1)
    assert result.polls == len(fake_time.slept) + 1
    # no new step during the wait: check whether it is stuck first, then wait again
    assert result.next_calls == [tool_call("mf_check_progress", run_id=run_id), tool_call("mf_wait_for_run",
                                                                                           run_id=run_id)]


def test_a_wait_on_a_run_whose_step_is_long_overdue_says_so_and_names_check_progress(frozen_ctx, emulator, launch,
                                                                                      fake_time):
    run_id = launch("stall", at_step=2)
    emulator.state.advance(past_step(2) + 360)
    result = ok(call(frozen_ctx, "mf_wait_for_run", run_id=run_id, step=20))
    assert (result.reached, result.latest_step, result.step_overdue) == (False, 2, True)
    assert result.last_step_age_seconds == pytest.approx(401, abs=1)  # 361 s before the wait, 40 s during it
    # the server's clock has one-second steps: 400 or 401 s
    assert re.search(r"no new step for 6 min 4\d s \(13\.[34] x the recent step time of 30 s\)", result.next_step)
    assert result.next_calls == [tool_call("mf_check_progress", run_id=run_id),
                                 tool_call("mf_wait_for_run", run_id=run_id, step=20)]
    assert all(str(c) in result.next_step for c in result.next_calls)
    healthy = launch()
    emulator.state.advance(past_step(3))
    moving = ok(call(frozen_ctx, "mf_wait_for_run", run_id=healthy, step=20))
    assert (moving.reached, moving.step_overdue, moving.last_step_age_seconds) == (False, None, None)


def test_one_wait_lasts_at_most_55_seconds_and_45_by_default():
    schema = registry.input_schema("mf_wait_for_run")["properties"]["timeout_seconds"]
    assert "Default: 45." in schema["description"] and "maximum 55" in schema["description"]
    refused = registry.check_arguments("mf_wait_for_run", {"run_id": "r1", "timeout_seconds": 60})
    assert isinstance(refused, ToolError) and "1 to 55" in refused.fields[0].problem


def test_the_last_poll_of_a_wait_is_cut_at_the_time_left(frozen_ctx, emulator, launch, fake_time):
    from skill.emulator import route_path

    run_id = launch()
    emulator.state.advance(past_step(1))
    # polls at 0, 2, 5, 9.5, 16.25, 26.4 and 40 s: the seventh read of the run is held 4 s, which a
    # request with the context's 30 s timeouts would wait out; 5 s before the end it gets less than 2 s
    rule = emulator.faults.delay(4.0, "GET", route_path("/api/v1/rft/runs/{run_id}"), skip=6, times=1)
    result = call(frozen_ctx, "mf_wait_for_run", run_id=run_id, step=20)
    assert rule.hits == 1 and isinstance(result, ToolError) and result.code == "unavailable"
    assert "is 14 s old and stale" in result.message  # the read at 26.4 s was the last that answered
    assert emulator.faults.wait_idle(10)


def test_wait_until_terminal_reports_progress(frozen_ctx, emulator, launch, fake_time):
    reports = []
    frozen_ctx.progress = lambda done, total, message: reports.append((done, total, message))
    run_id = launch()
    emulator.state.advance(QUEUE + STARTUP + 2 * STEP)
    results = wait_until(frozen_ctx, run_id)  # 18 steps and finalize: 550 s, in waits of 40 s
    result = results[-1]
    assert (result.status, result.terminal, result.reached, result.latest_step) == ("COMPLETED", True, True, 20)
    assert sum(r.waited_seconds for r in results) == round(sum(fake_time.slept), 2)
    assert 18 * STEP + FINALIZE <= sum(fake_time.slept) < 18 * STEP + FINALIZE + 45
    assert all(r.waited_seconds <= 40 for r in results) and len(results) == 14
    dest = f"traces-{run_id}"  # the traces first, then the report reads that same folder
    assert result.next_calls == [tool_call("mf_download_traces", run_id=run_id, dest=dest),
                                 tool_call("mf_run_report", run_id=run_id, traces_dir=dest)]
    assert all(str(c) in result.next_step for c in result.next_calls)
    done = [d for d, _, _ in reports]
    assert done == sorted(done) and done[-1] == 20 and {t for _, t, _ in reports} == {20}


def test_wait_until_running_and_until_step(frozen_ctx, emulator, launch, fake_time):
    queued = launch("stay_queued")
    result = ok(call(frozen_ctx, "mf_wait_for_run", run_id=queued, until="running", timeout_seconds=30))
    assert (result.status, result.reached, result.latest_step, result.waited_seconds) == ("QUEUED", False, None, 25)
    run_id = launch()
    result = wait_until(frozen_ctx, run_id, until="step", step=3)[-1]
    assert result.reached and result.latest_step >= 3 and not result.terminal
    bad = call(frozen_ctx, "mf_wait_for_run", run_id=run_id, until="step")
    assert isinstance(bad, ToolError) and bad.code == "bad_arguments"


def test_wait_rides_out_a_transient_outage(frozen_ctx, emulator, launch, fake_time):
    run_id = launch()
    emulator.state.advance(past_step(20) + FINALIZE)
    emulator.faults.status(503, "GET", f"/rft/runs/{run_id}", times=1)
    result = ok(call(frozen_ctx, "mf_wait_for_run", run_id=run_id, timeout_seconds=10))
    assert (result.status, result.reached, result.polls, fake_time.slept) == ("COMPLETED", True, 2, [2.0])
    missing = call(frozen_ctx, "mf_wait_for_run", run_id="cnope000000000000000000000", timeout_seconds=5)
    assert isinstance(missing, ToolError) and missing.code == "not_found"


# -- filters people type ------------------------------------------------------------------------------


def test_an_unknown_status_filter_is_refused_with_the_accepted_statuses(frozen_ctx):
    error = call(frozen_ctx, "mf_list_runs", status="bogus")
    assert isinstance(error, ToolError) and error.code == "bad_arguments"
    assert [f.path for f in error.fields] == ["status"] and "RUNNING" in error.fields[0].problem
    assert ok(call(frozen_ctx, "mf_list_runs", status="running")).runs == []  # any case


def test_an_empty_reward_range_is_refused(frozen_ctx, launch):
    error = call(frozen_ctx, "mf_list_traces", run_id=launch(), reward_min=2, reward_max=-1)
    assert isinstance(error, ToolError) and error.code == "bad_arguments"
    assert "reward_min must be at most reward_max" in error.fields[0].problem


def test_a_step_alone_means_waiting_for_that_step(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(2))
    result = ok(call(frozen_ctx, "mf_wait_for_run", run_id=run_id, step=1, timeout_seconds=1))
    assert (result.until, result.reached) == ("step", True)
    refused = call(frozen_ctx, "mf_wait_for_run", run_id=run_id, step=1, until="running")
    assert isinstance(refused, ToolError) and refused.code == "bad_arguments"


def test_metric_names_match_by_the_start_of_the_full_name_and_every_match_is_shown(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(past_step(3))
    grad = ok(call(frozen_ctx, "mf_get_metrics", run_id=run_id, names=["grad"]))
    assert grad.columns == ["step", "grad_norm"]
    reward = ok(call(frozen_ctx, "mf_get_metrics", run_id=run_id, names=["reward"]))
    assert len(reward.columns) > 2 and all(c.startswith("reward") for c in reward.columns[1:])
    assert set(reward.columns[1:]) == {n for n in reward.metric_names if n.startswith("reward")}
    none = call(frozen_ctx, "mf_get_metrics", run_id=run_id, names=["nope"])
    assert isinstance(none, ToolError) and "grad_norm" in none.message


@pytest.mark.parametrize("fault", ["503", "reset", "429"])
def test_a_wait_that_loses_the_platform_fails_and_calls_the_last_status_stale(frozen_ctx, emulator, launch, fake_time,
                                                                               fault):
    run_id = launch()
    emulator.state.advance(past_step(3))
    where = ("GET", f"/rft/runs/{run_id}*")  # the run and its progress
    if fault == "503":
        emulator.faults.status(503, *where, skip=2, times=None)  # the first poll answers, every later one fails
    elif fault == "reset":
        emulator.faults.cut(0, *where, mode="reset", skip=2, times=None)
    else:
        emulator.faults.status(429, *where, skip=2, times=None, retry_after=7)
    result = call(frozen_ctx, "mf_wait_for_run", run_id=run_id, timeout_seconds=55)
    assert isinstance(result, ToolError) and result.retryable
    assert result.code == ("rate_limited" if fault == "429" else "unavailable")
    assert "The last status read, RUNNING, step 3/20, is 50 s old and stale" in result.message
    assert "mf_preflight" in result.fix and sum(fake_time.slept) == 50


def test_a_wait_that_recovers_before_its_end_reports_a_fresh_status(frozen_ctx, emulator, launch, fake_time):
    run_id = launch()
    emulator.state.advance(past_step(3))
    emulator.faults.status(503, "GET", f"/rft/runs/{run_id}*", skip=2, times=3)  # an outage of three polls
    result = ok(call(frozen_ctx, "mf_wait_for_run", run_id=run_id, timeout_seconds=55))
    assert result.status == "RUNNING" and result.latest_step == 3 + round(sum(fake_time.slept) // STEP)


def test_the_cli_wait_exits_non_zero_when_the_platform_is_gone(emulator, mf_env, launch):
    run_id = launch()
    emulator.state.advance(past_step(2))
    emulator.faults.status(503, "GET", f"/rft/runs/{run_id}*", skip=2, times=None)
    code, error = mf_json("wait-for-run", run_id, "--timeout-seconds", "1", env=mf_env)
    assert code == 3 and error["code"] == "unavailable" and "stale" in error["message"]


def test_a_step_recorded_within_the_date_headers_second_is_zero_seconds_old_not_negative():
    # The Date header has whole seconds: a step recorded 0.6 s into that second reads "ahead" of it.
    from datetime import UTC, datetime, timedelta

    from tools.monitor import progress  # check-progress reads every age through these
    parse_time, seconds_since = progress.parse_time, progress.seconds_since
    header_now = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
    assert seconds_since(parse_time("2026-12-02T12:00:00.600Z"), header_now) == 0.0
    assert seconds_since(header_now - timedelta(seconds=42.25), header_now) == 42.2
    assert seconds_since(None, header_now) is None
