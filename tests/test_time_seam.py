"""Time is injected through the Context, over real HTTP against the emulator: its timeouts bound a
held answer (for the shared clients and for the clients of calls with a bound of their own), its
sleep takes every wait (retry back-off, ``Retry-After``, polls) without wall time, and its retry
policy replaces the default. Also what the fault matrix leans on: the emulator's
record of requests and routes, waiting out a held answer, and a download that refuses an answer
cut short in a well-framed body.

Nothing here asserts on measured time: a held answer that would arrive is refused instead, and
waits are read from the ``fake_time`` fixture (tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skill import registry
from skill.emulator import route_path
from tools.core import Context
from tools.errors import ToolError
from tools.platform import RetryPolicy, Timeouts, wire
from tools.platform.client import PlatformClient

SHORT = Timeouts(read_seconds=0.3, connect_seconds=0.3, create_seconds=0.3, traces_seconds=0.3)


def seam(frozen_ctx: Context, **kw) -> Context:
    """A context on the same env and folders as ``frozen_ctx``, with the time seams ``kw``."""
    return Context(env=frozen_ctx.env, home=frozen_ctx.home, state_dir=frozen_ctx.state_dir, **kw)


def test_the_context_timeouts_bound_an_answer_held_past_them(frozen_ctx, emulator, launch, fake_time):
    run_id = launch()
    rule = emulator.faults.delay(3.0, "GET", route_path("/api/v1/rft/runs/{run_id}"), times=None)
    ctx = seam(frozen_ctx, timeouts=SHORT, clock=fake_time.clock, sleep=fake_time.sleep)
    result = registry.call_tool("mf_get_run", {"run_id": run_id}, ctx)
    ctx.close()
    assert isinstance(result, ToolError) and result.code == "unavailable" and result.retryable
    assert rule.hits == 3 and len(fake_time.slept) == 2  # three attempts, two back-offs, on the context's sleep
    emulator.faults.clear()
    assert emulator.faults.wait_idle(10)


def test_a_call_with_its_own_bound_keeps_the_context_timeouts(frozen_ctx, emulator, launch, fake_time):
    run_id = launch()
    rule = emulator.faults.delay(3.0, "GET", route_path("/api/v1/rft/runs/{run_id}"), times=None)
    ctx = seam(frozen_ctx, timeouts=SHORT, clock=fake_time.clock, sleep=fake_time.sleep)
    result = registry.call_tool("mf_wait_for_run", {"run_id": run_id, "timeout_seconds": 10}, ctx)
    ctx.close()
    assert isinstance(result, ToolError) and result.code == "unavailable"  # each poll gave up after 0.3 s
    assert rule.hits == len(fake_time.slept) + 1 == 3 and sum(fake_time.slept) == 5  # the last poll 5 s before the end
    emulator.faults.clear()
    assert emulator.faults.wait_idle(10)


def test_retry_after_is_waited_with_the_context_sleep(frozen_ctx, emulator, launch, fake_time):
    run_id = launch()
    emulator.faults.status(429, "GET", route_path("/api/v1/rft/runs/{run_id}"), retry_after=7)
    result = registry.call_tool("mf_get_run", {"run_id": run_id}, seam(frozen_ctx, sleep=fake_time.sleep))
    assert not isinstance(result, ToolError) and result.run_id == run_id
    assert fake_time.slept == [7.0]


def test_a_context_retry_policy_replaces_the_default(frozen_ctx, emulator, launch):
    run_id = launch()
    sleeps: list[float] = []
    rule = emulator.faults.status(503, "GET", route_path("/api/v1/rft/runs/{run_id}"), times=None)
    ctx = seam(frozen_ctx, retry=RetryPolicy(max_attempts=5, sleep=sleeps.append, jitter=False))
    result = registry.call_tool("mf_get_run", {"run_id": run_id}, ctx)
    assert isinstance(result, ToolError) and result.code == "unavailable"
    assert rule.hits == 5 and sleeps == [1.0, 2.0, 4.0, 8.0]


def test_stop_run_waits_for_the_teardown_with_the_context_sleep(frozen_ctx, emulator, launch, fake_time):
    emulator.state.set_timing(stop_seconds=600)
    run_id = launch(after=400)
    ctx = seam(frozen_ctx, clock=fake_time.clock, sleep=fake_time.sleep, approver=lambda request: True)
    result = registry.call_tool("mf_stop_run", {"run_id": run_id, "timeout_seconds": 30}, ctx)
    assert not isinstance(result, ToolError) and result.outcome == "still_tearing_down"
    assert result.waited_seconds == 30.0 == sum(fake_time.slept) and fake_time.slept == [3.0] * 10


def test_timeouts_capped_keep_each_phase_under_the_bound():
    capped = Timeouts().capped(5, connect_seconds=3)
    assert capped == Timeouts(read_seconds=5, connect_seconds=3, create_seconds=5, traces_seconds=5)
    assert Timeouts(read_seconds=1).capped(60) == Timeouts(read_seconds=1, connect_seconds=10, create_seconds=60,
                                                           traces_seconds=60)


# -- what the emulator notes ----------------------------------------------------------------------


def test_the_emulator_notes_each_request_with_the_route_that_served_it(frozen_ctx, emulator, launch):
    run_id = launch()
    emulator.faults.seen.clear()
    registry.call_tool("mf_check_progress", {"run_id": run_id}, frozen_ctx)
    routes = {(s.method, s.route) for s in emulator.faults.seen}
    assert ("GET", "/api/v1/rft/runs/{run_id}") in routes
    assert all(s.path.startswith("/api/v1/rft/runs/" + run_id) for s in emulator.faults.seen)
    assert emulator.faults.wait_idle(5) and emulator.faults.in_flight == 0


def test_a_route_path_faults_one_route_and_not_the_routes_below_it(frozen_ctx, emulator, launch):
    run_id = launch(after=300)
    emulator.faults.status(503, "GET", route_path("/api/v1/rft/runs/{run_id}"), times=None)
    platform = seam(frozen_ctx, retry=RetryPolicy(max_attempts=1)).platform()
    assert platform.get_progress(run_id).latest_step is not None  # /rft/runs/{id}/progress: untouched
    with pytest.raises(Exception) as info:
        platform.get_run(run_id)
    assert getattr(info.value, "status", None) == 503


def test_waiting_for_idle_outlasts_a_held_create_the_client_gave_up_on(frozen_ctx, emulator, rl_config):
    emulator.faults.delay(1.0, "POST", "/training/runs")
    with seam(frozen_ctx, timeouts=SHORT).platform_client() as client, pytest.raises(Exception) as info:
        client.create_run(wire.build_create_body(rl_config, name="held"))
    assert type(info.value).__name__ == "Ambiguous"
    assert emulator.faults.wait_idle(10) and emulator.faults.in_flight == 0
    assert len(emulator.state.runs) == 1  # processed after the hold: ambiguous was the right answer


def test_a_reset_emulator_serves_its_new_traces(frozen_ctx, emulator, launch):
    emulator.state.reset()
    run_id = launch(after=60 + 90 + 30 * 2 + 5)
    page = frozen_ctx.traces().list_traces(run_id=run_id)
    assert page.items and {t.run_id for t in page.items} == {run_id}


# -- a body cut short in a well-framed answer -------------------------------------------------------


def test_a_trace_answer_shorter_than_its_size_is_never_saved(frozen_ctx, emulator, launch, tmp_path: Path):
    run_id = launch(after=60 + 90 + 30 * 2 + 5)
    emulator.faults.truncate("GET", route_path("/api/v1/traces/{trace_id}"), times=None)
    dest = tmp_path / "traces-out"
    args = {"run_id": run_id, "dest": str(dest), "max_traces": 3, "include_episodes": False}
    cut = registry.call_tool("mf_download_traces", args, frozen_ctx)
    assert isinstance(cut, ToolError) and cut.code == "unavailable" and cut.retryable
    assert "stream cut" in cut.message and list((dest / "traces").iterdir()) == []
    emulator.faults.clear()
    whole = registry.call_tool("mf_download_traces", args, frozen_ctx)
    assert not isinstance(whole, ToolError) and whole.traces_on_disk == 3
    for path in (dest / "traces").iterdir():
        assert path.read_bytes() == frozen_ctx.traces().get_raw_trace(path.stem)


def test_an_episode_envelope_cut_short_is_never_saved(frozen_ctx, emulator, launch, tmp_path: Path):
    run_id = launch(after=60 + 90 + 30 * 2 + 5)
    emulator.faults.truncate("GET", route_path("/api/v1/episodes/{episode_id}"), times=None)
    dest = tmp_path / "episodes-out"
    cut = registry.call_tool("mf_download_traces", {"run_id": run_id, "dest": str(dest), "max_traces": 2}, frozen_ctx)
    assert isinstance(cut, ToolError) and cut.code == "unavailable" and "not a whole JSON document" in cut.message
    assert list((dest / "episodes").iterdir()) == []


def test_summarize_logs_stops_asking_a_logs_api_that_does_not_answer(frozen_ctx, emulator, launch, fake_time):
    run_id = launch(after=400)
    rule = emulator.faults.delay(2.0, "GET", route_path("/api/v1/rft/runs/{run_id}/logs"), times=None)
    ctx = seam(frozen_ctx, timeouts=SHORT, clock=fake_time.clock, sleep=fake_time.sleep)
    result = registry.call_tool("mf_summarize_logs", {"run_id": run_id}, ctx)
    ctx.close()
    assert not isinstance(result, ToolError), result
    first, *rest = result.streams
    assert not first.read and first.note.startswith("could not read") and rest
    assert all(not r.read and r.note.startswith("not tried") for r in rest)
    assert rule.hits == 3  # one stream's three attempts, not every stream's
    emulator.faults.clear()
    assert emulator.faults.wait_idle(10)


@given(seconds=st.floats(min_value=0.01, max_value=600), read=st.floats(min_value=0.1, max_value=120),
       connect=st.floats(min_value=0.1, max_value=60))
def test_a_bounded_request_ends_within_the_time_left_even_held_twice(seconds, read, connect):
    from tools.platform.settings import resolve_settings

    client = PlatformClient(resolve_settings(env={"PRIME_API_KEY": "k"}, home=Path("/nonexistent")), timeout=read,
                            connect_timeout=connect)
    client.bound_requests(seconds)
    t = client._http.timeout
    assert t.connect + 2 * max(t.read, t.write) <= seconds + 1e-9  # connect, then a held answer and a held body
    assert t.read <= read and t.connect <= connect
    client.close()
