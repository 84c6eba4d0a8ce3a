"""Every paged walk ends when the host's paging misbehaves, over real HTTP against the emulator's
cursor faults: a next cursor repeated (``repeat``: A, A, A...), cycled (``cycle``: A, B, A...) or
empty where more remain (``empty``), on the traces host's cursor lists, and on the platform's
page-numbered ``/rft/runs`` (the same page again, pages 1, 2, 1..., or an empty page). Each walk
stops with a note and the last cursor, keeps what it read, and never says it is complete.

Runs are the bundled ``basic/reverse-text/rl.toml`` example: 20 steps of 4 episodes x 4 traces
(320 traces, 80 episodes), or a ``many_traces`` run of 4,000 traces (50 episodes per step).
"""

from __future__ import annotations

import pytest
from _helpers import call, ok

from skill import registry
from tools.core import Context
from tools.errors import ToolError
from tools.platform import errors as perr
from tools.platform import wire

DONE = 60 + 90 + 30 * 20 + 10 + 5  # queued + start-up + 20 steps + finalize + ingest, simulated seconds
MODES = ["repeat", "cycle", "empty"]
#: Calls an agent makes at most in these tests before the walk must have ended.
AGENT_CALLS = 40


def agent_walk(ctx: Context, kind: str = "traces", **arguments) -> list:
    """The pages an agent gets following next_cursor; fails if the walk has not ended within AGENT_CALLS calls."""
    pages, cursor = [], None
    for _ in range(AGENT_CALLS):
        page = ok(call(ctx, "mf_list_traces", kind=kind, cursor=cursor, **arguments))
        pages.append(page)
        cursor = page.next_cursor
        if cursor is None:
            return pages
    raise AssertionError("the walk did not end")


def rows_of(pages: list, kind: str = "traces") -> list[str]:
    key = {"traces": "trace_id", "episodes": "episode_id", "eval_runs": "run_id"}[kind]
    return [getattr(row, key) for page in pages for row in getattr(page, kind)]


def assert_cut_short(pages: list, kind: str = "traces") -> None:
    last = pages[-1]
    assert last.next_cursor is None and not last.complete
    assert "possibly short" in last.note and "cursor" in last.note
    assert not any(page.complete for page in pages)
    ids = rows_of(pages, kind)
    assert len(ids) == len(set(ids))  # nothing read twice


# -- an agent walking mf_list_traces ---------------------------------------------------------------


def test_an_honest_walk_ends_on_its_last_page_marked_complete(frozen_ctx, launch):
    run_id = launch(after=DONE)
    pages = agent_walk(frozen_ctx, run_id=run_id, limit=30)
    assert len(set(rows_of(pages))) == 320 and pages[-1].complete and pages[-1].note is None
    assert not any(page.complete for page in pages[:-1])


@pytest.mark.parametrize("mode", MODES)
def test_a_misbehaving_trace_cursor_ends_the_agents_walk_with_a_note(frozen_ctx, emulator, launch, mode):
    run_id = launch(after=DONE)
    emulator.faults.cursor(mode, "GET", "/traces")
    pages = agent_walk(frozen_ctx, run_id=run_id, limit=30)
    assert_cut_short(pages)
    assert len(pages) == {"repeat": 2, "cycle": 3, "empty": 1}[mode]
    assert {"repeat": "the cursor it had just been sent", "cycle": "earlier in this walk",
            "empty": "empty cursor"}[mode] in pages[-1].note


@pytest.mark.parametrize("mode", MODES)
def test_a_misbehaving_episode_cursor_ends_the_agents_walk_with_a_note(frozen_ctx, emulator, launch, mode):
    run_id = launch(after=DONE)
    emulator.faults.cursor(mode, "GET", "/episodes")
    assert_cut_short(agent_walk(frozen_ctx, "episodes", run_id=run_id, limit=10), "episodes")


@pytest.mark.parametrize("mode", MODES)
def test_a_misbehaving_episode_page_cursor_ends_a_per_step_walk(frozen_ctx, emulator, launch, mode):
    # 200 traces in 50 episodes per step: 3 pages of 20
    run_id = launch("many_traces", count=4000, trace_bytes=2048, after=DONE)
    honest = agent_walk(frozen_ctx, run_id=run_id, step=7, limit=100)
    assert len(set(rows_of(honest))) == 200 and honest[-1].complete
    emulator.faults.cursor(mode, "GET", "/episodes")
    pages = agent_walk(frozen_ctx, run_id=run_id, step=7, limit=100)
    assert_cut_short(pages)
    assert set(rows_of(pages)) <= set(rows_of(honest))


@pytest.mark.parametrize("mode", MODES)
def test_a_misbehaving_member_trace_cursor_ends_a_per_step_walk(frozen_ctx, emulator, launch, mode):
    run_id = launch(after=DONE)
    emulator.faults.cursor(mode, "GET", "/episodes/*/traces")
    pages = agent_walk(frozen_ctx, run_id=run_id, step=3, limit=3)  # 3 members per page: the cursor is followed
    assert_cut_short(pages)
    assert len(rows_of(pages)) < 16


@pytest.mark.parametrize("mode", MODES)
def test_a_misbehaving_run_cursor_ends_the_eval_run_search_with_a_note(frozen_ctx, emulator, launch, mode):
    run_id = launch(after=DONE)
    launch(after=DONE), launch(after=DONE)  # newer runs: their eval runs come first, one per page with limit=1
    emulator.faults.cursor(mode, "GET", "/runs")
    pages = agent_walk(frozen_ctx, "eval_runs", run_id=run_id, limit=1)
    assert_cut_short(pages, "eval_runs")
    emulator.faults.clear()
    found = agent_walk(frozen_ctx, "eval_runs", run_id=run_id, limit=1)
    assert rows_of(found, "eval_runs") == [f"{run_id}-eval"] and found[-1].complete


def test_a_cursor_of_another_listing_is_refused(frozen_ctx, launch):
    run_id = launch(after=DONE)
    first = ok(call(frozen_ctx, "mf_list_traces", run_id=run_id, limit=5))
    for arguments in ({"kind": "episodes"}, {"step": 3}, {"cursor": "not-ours"}):
        refused = registry.call_tool("mf_list_traces", {"run_id": run_id, "cursor": first.next_cursor, **arguments},
                                     frozen_ctx)
        assert isinstance(refused, ToolError) and refused.code == "bad_arguments"


# -- whole-run walks ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_download_whose_trace_listing_misbehaves_stops_and_is_not_complete(frozen_ctx, emulator, launch, tmp_path,
                                                                             mode):
    run_id = launch(after=DONE)
    dest = tmp_path / "dl"
    rule = emulator.faults.cursor(mode, "GET", "/traces")
    cut = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    assert rule.hits <= 3  # the listing's requests: no loop
    assert not cut.complete and not cut.listing_complete and cut.missing.summary.startswith("partial")
    assert "trace listing stopped after" in cut.note and "cursor" in cut.note
    assert 0 < cut.traces_on_disk < 320 and cut.traces_on_disk == len(list((dest / "traces").iterdir()))
    emulator.faults.clear()
    done = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(dest)))
    assert done.complete and done.skipped_existing == cut.traces_on_disk + cut.episodes_on_disk


@pytest.mark.parametrize("mode", MODES)
def test_a_download_whose_episode_listing_misbehaves_is_not_complete(frozen_ctx, emulator, launch, tmp_path, mode):
    run_id = launch("many_traces", count=1200, trace_bytes=2048, after=DONE)  # 300 episodes: 3 pages of 100
    emulator.faults.cursor(mode, "GET", "/episodes")
    cut = ok(call(frozen_ctx, "mf_download_traces", run_id=run_id, dest=str(tmp_path / "dl")))
    assert cut.traces_on_disk == 1200 and cut.episodes_on_disk == 300  # every trace's episode is still fetched
    assert not cut.complete and not cut.listing_complete and "episode listing stopped after" in cut.note


@pytest.mark.parametrize("mode", MODES)
def test_the_client_trace_iterator_raises_after_what_it_read_when_the_cursor_misbehaves(frozen_ctx, emulator, launch,
                                                                                        mode):
    run_id = launch(after=DONE)
    emulator.faults.cursor(mode, "GET", "/traces")
    seen = []
    with pytest.raises(perr.InvalidRequest, match="possibly short"):
        for trace in frozen_ctx.traces().iter_traces(run_id=run_id, limit=50):
            seen.append(trace.trace_id)
    assert 0 < len(seen) == len(set(seen)) < 320


@pytest.mark.parametrize(("mode", "runs"), [("repeat", 105), ("cycle", 205), ("empty", 5)])
def test_a_status_scan_of_the_runs_list_ends_when_the_platform_pages_wrongly(frozen_ctx, emulator, rl_config, mode,
                                                                             runs):
    emulator.state.max_concurrent_runs = 1000  # an account allowed this many runs at once
    for n in range(runs):  # the scan reads pages of 100: a repeat shows on page 2, a cycle (1, 2, 1) on page 3
        frozen_ctx.platform().create_run(wire.build_create_body(rl_config, name=f"many-{n}"))
    honest = ok(call(frozen_ctx, "mf_list_runs", status="QUEUED", limit=100))
    assert honest.total == runs and honest.scan_complete
    rule = emulator.faults.cursor(mode, "GET", "/rft/runs")
    cut = ok(call(frozen_ctx, "mf_list_runs", status="QUEUED", limit=100))
    assert rule.hits <= 3 and not cut.scan_complete and cut.note and "page" in cut.note
    assert len({r.run_id for r in cut.runs}) == len(cut.runs) <= 100
