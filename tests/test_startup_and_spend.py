"""mf_check_progress through a run's start-up, and what a run has cost so far, over real HTTP against
the emulator (clock frozen, moved with ``advance``): PENDING, pods Pending, an image still pulling and
a model loading are normal start-up within their stated allowance, then ``stalled``; an image that
cannot be pulled and a crash loop are failures with their evidence; errors of every component, env
servers included, are counted; spend so far is the usage endpoint's figure and elapsed time x the
plan's rate, beside the plan's estimate, with a warning past its high end.

Runs are the bundled ``basic/reverse-text/rl.toml`` (20 steps, 2 GPUs, priced on demand per GPU-hour);
emulator timing: 60 s queued, 90 s start-up of which 45 s pods Pending, 30 s per step.
"""

from __future__ import annotations

import io
import re

import pytest
from _helpers import EXAMPLE, approved_launch, call, ok, progress

from skill import render, terminal
from skill.emulator.logs import make_line
from tools import units
from tools.core import Context
from tools.monitor.progress import (
    IMAGE_PULL_GRACE_SECONDS,
    PENDING_GRACE_SECONDS,
    POD_SCHEDULING_GRACE_SECONDS,
    STARTUP_GRACE_SECONDS,
)

QUEUE, STARTUP, SCHEDULE, STEP = 60.0, 90.0, 45.0, 30.0


# -- start-up: normal within its allowance, then a problem ------------------------------------------


def test_pending_is_normal_start_up_for_its_allowance_then_stalled(frozen_ctx, emulator, launch):
    run_id = launch("pending", seconds=2 * PENDING_GRACE_SECONDS)
    emulator.state.advance(120)
    early = progress(frozen_ctx, run_id)
    assert (early.status, early.verdict, early.healthy, early.startup_phase) == ("PENDING", "pending", True, "pending")
    assert early.phase_allowance_seconds == PENDING_GRACE_SECONDS and abs(early.phase_seconds - 120) <= 1
    assert "normal for up to 10 min" in early.evidence[0] and "nothing is billed" in early.evidence[0]
    assert early.spend is None
    emulator.state.advance(PENDING_GRACE_SECONDS)
    late = progress(frozen_ctx, run_id)
    assert (late.verdict, late.healthy) == ("stalled", False)
    assert "longer than the 10 min the platform normally takes" in late.evidence[0]


def test_pods_pending_are_normal_scheduling_then_stalled(frozen_ctx, emulator, launch):
    emulator.state.set_timing(pod_schedule_seconds=2 * POD_SCHEDULING_GRACE_SECONDS,
                              startup_seconds=3 * POD_SCHEDULING_GRACE_SECONDS)
    run_id = launch()
    emulator.state.advance(QUEUE + 60)
    early = progress(frozen_ctx, run_id)
    assert (early.verdict, early.startup_phase) == ("starting", "scheduling") and abs(early.phase_seconds - 60) <= 1
    assert {e.status for e in early.env_servers} == {"Pending"}
    assert "env server pods Pending (no node assigned yet)" in early.evidence[-1]
    assert "normal for up to 15 min" in early.evidence[-1]
    emulator.state.advance(POD_SCHEDULING_GRACE_SECONDS)
    late = progress(frozen_ctx, run_id)
    assert late.verdict == "stalled" and "longer than the 15 min" in late.evidence[-1]


def test_an_image_still_pulling_is_normal_start_up_measured_from_the_pull_then_stalled(frozen_ctx, emulator, launch):
    run_id = launch("image_pull_slow", seconds=3 * IMAGE_PULL_GRACE_SECONDS)
    emulator.state.advance(QUEUE + SCHEDULE + 300)
    early = progress(frozen_ctx, run_id)
    assert (early.verdict, early.healthy, early.startup_phase) == ("starting", True, "pulling_image")
    assert abs(early.phase_seconds - 300) <= 1 and early.phase_allowance_seconds == IMAGE_PULL_GRACE_SECONDS
    assert {e.status for e in early.env_servers} == {"ContainerCreating"}
    assert "ghcr.io/primeintellect-ai/prime-rl:" in early.evidence[-1] and "normal for up to 20 min" in \
        early.evidence[-1] and "tens of GB" in early.evidence[-1]
    assert early.recent_error_lines == 0
    emulator.state.advance(IMAGE_PULL_GRACE_SECONDS)
    late = progress(frozen_ctx, run_id)
    assert (late.verdict, late.startup_phase) == ("stalled", "pulling_image")
    assert "longer than the 20 min that is normal" in late.evidence[-1]


def test_a_pull_without_pod_events_is_measured_from_the_start_at_most(frozen_ctx, emulator, launch):
    emulator.state.set_timing(startup_seconds=2 * STARTUP_GRACE_SECONDS)
    run_id = launch()
    emulator.state.advance(QUEUE + 600)
    early = progress(frozen_ctx, run_id)
    assert (early.verdict, early.startup_phase) == ("starting", "pulling_image")  # no pod events: since the start
    assert "(since start-up began, at most)" in early.evidence[-1]


def test_an_image_that_cannot_be_pulled_is_a_failure_with_the_platform_s_evidence(frozen_ctx, emulator, launch):
    run_id = launch("image_pull_backoff", fail_after_seconds=0)
    emulator.state.advance(QUEUE + SCHEDULE + 120)
    result = progress(frozen_ctx, run_id)
    assert (result.verdict, result.healthy) == ("image_pull_failing", False)
    assert {e.status for e in result.env_servers} <= {"ErrImagePull", "ImagePullBackOff"}
    assert any(e.startswith("Env server reverse-text is ") for e in result.evidence)
    quoted = next(e for e in result.evidence if "Failed to pull image" in e)
    assert "not found" in quoted and "failed pull(s) since the start" in quoted
    assert [c.tool for c in result.next_calls] == ["mf_stop_run"] and "image_tag" in result.next_step


def watch(ctx: Context, run_id: str, waits: int = 40) -> tuple[list[str], list[str]]:
    """Loop on waits as the skill says: when a wait's next step names mf_check_progress, call it, and stop
    at a verdict that is not normal start-up. (the waits' next steps, the verdicts seen)."""
    hints, verdicts = [], []
    for _ in range(waits):
        wait = ok(call(ctx, "mf_wait_for_run", run_id=run_id))
        hints.append(wait.next_step)
        if wait.reached or wait.terminal or wait.latest_step:
            break
        if wait.next_calls[0].tool == "mf_check_progress":
            assert wait.next_calls[1].tool == "mf_wait_for_run" and str(wait.next_calls[0]) in wait.next_step
            verdicts.append(progress(ctx, run_id).verdict)
            if verdicts[-1] != "starting":
                break
    return hints, verdicts


def test_a_wait_sends_the_agent_to_check_progress_when_an_image_cannot_be_pulled_before_any_step(
        frozen_ctx, emulator, launch, fake_time):
    run_id = launch("image_pull_backoff", fail_after_seconds=0)
    emulator.state.advance(QUEUE)
    hints, verdicts = watch(frozen_ctx, run_id)
    assert verdicts == ["image_pull_failing"]
    assert "no step yet, and env server reverse-text is " in hints[-1] and "Pull" in hints[-1]
    assert all("mf_check_progress" not in h for h in hints[:-1])  # pods still Pending: normal, no check


def test_a_wait_through_a_normal_start_up_does_not_ask_for_a_progress_check(frozen_ctx, emulator, launch, fake_time):
    run_id = launch()
    emulator.state.advance(QUEUE)
    hints, verdicts = watch(frozen_ctx, run_id)
    assert verdicts == [] and len(hints) >= 2 and all("mf_check_progress" not in h for h in hints)


def test_a_wait_asks_for_a_progress_check_once_start_up_outlasts_the_shortest_phase_allowance(
        frozen_ctx, emulator, launch, fake_time):
    emulator.state.set_timing(startup_seconds=2 * STARTUP_GRACE_SECONDS)
    run_id = launch()
    emulator.state.advance(QUEUE)
    hints, verdicts = watch(frozen_ctx, run_id, waits=80)
    first = next(i for i, h in enumerate(hints) if "mf_check_progress" in h)
    assert re.search(r"no step yet after 15 min( \d+ s)? of start-up", hints[first]), hints[first]
    assert 40 * first < POD_SCHEDULING_GRACE_SECONDS <= 40 * (first + 1)  # the first wait to end past 15 min
    assert verdicts[0] == "starting" and verdicts[-1] == "stalled"


def test_a_crash_loop_after_some_steps_makes_the_wait_ask_for_a_progress_check(frozen_ctx, emulator, launch, fake_time):
    run_id = launch("crash_loop", at_step=2)
    emulator.state.advance(QUEUE + STARTUP + 2 * STEP + 1)
    wait = ok(call(frozen_ctx, "mf_wait_for_run", run_id=run_id))
    assert wait.latest_step == 2 and "no new step during this wait" in wait.next_step
    assert wait.next_calls[0].tool == "mf_check_progress" and progress(frozen_ctx, run_id).verdict == "crash_looping"


def test_a_crash_loop_is_a_failure_with_the_env_server_s_errors_counted(frozen_ctx, emulator, launch):
    run_id = launch("crash_loop", at_step=2)
    emulator.state.advance(QUEUE + STARTUP + 2 * STEP + 300)
    result = progress(frozen_ctx, run_id)
    assert result.verdict == "crash_looping"
    assert result.recent_errors_by_component["env-server/reverse-text"] > 5
    assert result.recent_error_lines == sum(result.recent_errors_by_component.values())


def test_errors_of_an_env_server_alone_make_a_progressing_run_failing(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(QUEUE + STARTUP + 5 * STEP + 1)
    assert progress(frozen_ctx, run_id).verdict == "progressing"
    run, now = emulator.state.run(run_id), emulator.state.now()
    for i in range(58):
        run.logs.append(make_line(now - i, emulator.state.clock.iso(now - i), "env-server", "ERROR",
                                  f"reverse-text: reward function failed on task {i}", env_name="reverse-text"))
    result = progress(frozen_ctx, run_id)
    assert result.verdict == "failing" and result.recent_errors_by_component == {"env-server/reverse-text": 58}
    assert "env-server/reverse-text 58" in result.evidence[-1]


# -- spend so far ----------------------------------------------------------------------------------


@pytest.fixture
def dispatched(frozen_ctx, emulator):
    """A run launched through a plan the person approved at the terminal: (run id, the plan)."""
    def start(scenario: str | None = None, **params) -> tuple[str, object]:
        if scenario:
            emulator.state.set_scenario(scenario, **params)
        plan, run = approved_launch(frozen_ctx, EXAMPLE)
        return run.run_id, plan

    return start


def test_spend_so_far_shows_the_platform_s_figure_and_elapsed_time_x_rate_beside_the_plan(frozen_ctx, emulator,
                                                                                          dispatched):
    run_id, plan = dispatched()
    emulator.state.advance(QUEUE + STARTUP + 4 * STEP + 1)  # running 211 s
    spend = ok(call(frozen_ctx, "mf_get_spend", run_id=run_id))
    hourly = plan.usd_per_gpu_hour * plan.gpu_count
    running = STARTUP + 4 * STEP + 1  # seconds; the server's clock is read to the second (its Date header)
    assert spend.usd_per_hour == hourly > 0 and abs(spend.running_seconds - running) <= 1
    assert abs(spend.elapsed_x_rate_usd - running / 3600 * hourly) <= 0.01
    # the emulator bills the time since the image was pulled (the first step) at that price
    assert spend.platform_usd == round((running - STARTUP) / 3600 * hourly, 2)
    assert spend.platform_pricing.startswith("USD per million tokens: training ") and spend.platform_tokens > 0
    assert (spend.plan_id, spend.plan_low_usd, spend.plan_expected_usd, spend.plan_high_usd) == (
        plan.plan_id, plan.cost.usd_low, plan.cost.usd_expected, plan.cost.usd_high)
    assert not spend.over_high_estimate and spend.warning is None and "converted" in spend.units_note
    assert f"the platform reports ${spend.platform_usd:,.2f} so far" in spend.summary
    shown = progress(frozen_ctx, run_id).spend  # check_progress shows the same figures
    assert (shown.platform_usd, shown.elapsed_x_rate_usd, shown.plan_high_usd) == (
        spend.platform_usd, spend.elapsed_x_rate_usd, spend.plan_high_usd)


def test_spend_past_the_plan_s_high_estimate_warns_in_both_tools(frozen_ctx, emulator, dispatched):
    run_id, plan = dispatched("stall", at_step=3)  # stuck, still billed
    hours_over = plan.cost.usd_high / (plan.usd_per_gpu_hour * plan.gpu_count) + 0.5
    emulator.state.advance(QUEUE + hours_over * 3600)
    spend = ok(call(frozen_ctx, "mf_get_spend", run_id=run_id))
    assert spend.over_high_estimate and spend.platform_usd > plan.cost.usd_high
    assert spend.elapsed_x_rate_usd > plan.cost.usd_high
    assert spend.warning.startswith(f"Spend so far passes the plan's high estimate of ${plan.cost.usd_high:,.2f}: ")
    assert "the platform's usage $" in spend.warning and "elapsed time x rate $" in spend.warning
    assert [c.tool for c in spend.next_calls] == ["mf_stop_run", "mf_check_progress"]
    checked = progress(frozen_ctx, run_id)
    assert checked.verdict == "stalled" and checked.spend.over_high_estimate and spend.warning in checked.evidence


def test_a_run_without_a_plan_in_the_store_shows_the_estimate_as_unknown(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.state.advance(QUEUE + STARTUP + STEP)
    spend = ok(call(frozen_ctx, "mf_get_spend", run_id=run_id))
    assert spend.plan_id is None and spend.plan_high_usd is None and spend.elapsed_x_rate_usd is None
    assert spend.platform_usd > 0 and not spend.over_high_estimate
    assert f"the plan's estimate is unknown. No plan for run {run_id} in the state store of" in spend.summary


# -- amounts and durations as a person reads them --------------------------------------------------

_MONEY = re.compile(r"\$\d{1,3}(?:,\d{3})*\.\d\d(?:/h|/GPU-hour)?")
_DURATION = re.compile(r"\b\d[\d,]* (?:h(?: \d+ min)?|min(?: \d+ s)?|s)\b")


def _at_terminal(name: str, result: object) -> str:
    out, errs = io.StringIO(), io.StringIO()
    render.show(render.view_of(name, result), terminal.Terminal(out, 80, colour=False),
                terminal.Terminal(errs, 80, colour=False))
    return out.getvalue() + errs.getvalue()


def _amounts_and_durations(text: str) -> tuple[list[str], list[str]]:
    """Every line naming money (usd, cost, $) and every duration-like figure; fails on another shape."""
    money = []
    for line in text.splitlines():
        if re.search(r"\busd\b|\$", line):
            found = _MONEY.findall(line)
            assert found, line  # an amount that is not $x.xx
            assert not re.search(r"(?<![\w$.,])\d+\.\d+(?![\d%])(?! (?:steps?|GB|MB))", _MONEY.sub("", line)), line
            money += found
    assert not re.search(r"\d+\.\d+ (?:min|h)\b", text), text  # the other duration shape (12.3 min, 0.06 h)
    return money, _DURATION.findall(text)


def test_get_spend_and_dispatch_run_print_every_amount_in_dollars_and_every_duration_one_way(frozen_ctx, emulator,
                                                                                             dispatched):
    run_id, plan = dispatched()
    emulator.state.advance(QUEUE + STARTUP + 4 * STEP + 1)
    spend = ok(call(frozen_ctx, "mf_get_spend", run_id=run_id))
    text = _at_terminal("mf_get_spend", spend)
    money, durations = _amounts_and_durations(text)
    for value in (spend.platform_usd, spend.elapsed_x_rate_usd, spend.plan_low_usd, spend.plan_high_usd):
        assert units.usd(value) in money, (value, text)
    assert units.usd_per_hour(spend.usd_per_hour) in money and units.duration(spend.running_seconds) in durations
    assert re.fullmatch(r"3 min 3\d s", units.duration(spend.running_seconds))  # 211 s, read to the second

    again = ok(call(frozen_ctx, "mf_dispatch_run", plan_id=plan.plan_id))  # carried out before: the same facts
    text = _at_terminal("mf_dispatch_run", again)
    money, _ = _amounts_and_durations(text)
    assert units.usd_per_gpu_hour(again.usd_per_gpu_hour) in money, text
    assert units.usd_per_hour(again.estimated_usd_per_hour) in money, text
