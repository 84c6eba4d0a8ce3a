"""Runs at scale on the emulator, over real HTTP: a day-long run with 210,000 log lines and
errors spread over its life (``long_run``), and runs with 2,000 to 50,000 traces or 5 GB of
raw trace bytes (``many_traces``), all generated on demand. Counters on the generators show
that a read makes only what it serves; nothing here measures time.
"""

from __future__ import annotations

import json
import re
import tracemalloc
from collections import Counter

import httpx
import pytest
import test_emulator
from _helpers import T, at_step
from test_emulator import create, get_run, logs

from skill.emulator import EmulatorServer

emu, api = test_emulator.emu, test_emulator.api
DAY = 86400


@pytest.fixture
def long_run(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> str:
    """A 20-step run stretched over 24 h (``long_run`` defaults), COMPLETED."""
    emu.state.set_scenario("long_run")
    run_id = create(api, rl_config)
    emu.state.advance(T.queue_seconds + T.startup_seconds + DAY + 60)
    assert get_run(api, run_id)["status"] == "COMPLETED"
    return run_id


def signature(line: str) -> str:
    """An error line's message with its numbers masked."""
    return re.sub(r"\d+", "N", json.loads(line.removeprefix("[rank0]: "))["message"])


# -- logs --------------------------------------------------------------------------------------------

def test_a_long_run_has_210000_lines_in_a_day_generated_only_when_read(long_run: str, emu: EmulatorServer,
                                                                      api: httpx.Client) -> None:
    run = emu.state.run(long_run)
    volume = run.log_volume()
    assert volume.count(run.started_at, run.started_at + DAY) >= 210_000
    assert volume.lines_made == 0
    newest = logs(api, long_run, component="trainer", tail_lines=5000)
    assert len(newest) == 5000 and volume.lines_made <= 5000 + 10
    stamps = [json.loads(line.removeprefix("[rank0]: "))["timestamp"] for line in newest]
    assert stamps == sorted(stamps)
    assert api.get(f"/rft/runs/{long_run}/logs", params={"tail_lines": 5001}).status_code == 422


def test_errors_from_hours_ago_are_found_by_level_and_time_window_not_by_the_tail(long_run: str,
                                                                                  api: httpx.Client) -> None:
    newest = logs(api, long_run, component="trainer", tail_lines=5000)
    assert not any("OutOfMemoryError" in line for line in newest)  # the OOMs were hours before the last 5,000 lines
    errors = logs(api, long_run, component="trainer", level="ERROR", since_seconds=DAY, tail_lines=5000)
    counts = Counter(signature(line) for line in errors)
    assert sorted(counts.values()) == [4, 5, 9, 12] and len(errors) == 30
    oom = [json.loads(line.removeprefix("[rank0]: ")) for line in errors if "OutOfMemoryError" in line]
    assert len(oom) == 12 and all(entry["exception"].startswith("Traceback (most recent call last)") for entry in oom)
    per_component = {c: len(logs(api, long_run, component=c, level="ERROR", since_seconds=DAY, tail_lines=5000))
                     for c in ("orchestrator", "inference", "env-server")}
    assert per_component == {"orchestrator": 30, "inference": 60, "env-server": 65}
    distinct = set(counts)
    for component in ("orchestrator", "inference", "env-server"):
        distinct |= {signature(line) for line in logs(api, long_run, component=component, level="ERROR",
                                                       since_seconds=DAY, tail_lines=5000)}
    assert len(distinct) == 8
    assert logs(api, long_run, component="trainer", level="ERROR") == []  # the default window is 15 minutes


def test_long_run_reads_keep_the_platforms_caps_and_filters(long_run: str, emu: EmulatorServer,
                                                           api: httpx.Client) -> None:
    volume = emu.state.run(long_run).log_volume()
    before = volume.lines_made
    info = logs(api, long_run, component="trainer", level="INFO", since_seconds=DAY, tail_lines=5000)
    assert len(info) == 5000 and all('"level":"INFO"' in line for line in info)
    assert volume.lines_made - before <= 5000 + 10  # lines of other levels are skipped, not generated
    now = emu.state.now()
    recent = logs(api, long_run, component="trainer", level="WARNING")
    assert recent and all(now - 900 <= emu.state.clock.from_iso(json.loads(line[9:])["timestamp"]) <= now
                          for line in recent)
    assert len(logs(api, long_run, component="trainer", search="NaN", since_seconds=DAY)) == 4
    timeouts = logs(api, long_run, component="orchestrator", search=r"Rollout request \d+ to the env server",
                    regex="true", since_seconds=DAY, tail_lines=5000)
    assert len(timeouts) == 30
    env = logs(api, long_run, component="env-server", env_name="reverse-text", tail_lines=50)
    assert len(env) == 50 and all(json.loads(line)["message"].startswith("reverse-text: ") for line in env)
    assert len(logs(api, long_run, tail_lines=5000)) == 200  # the orchestrator's unfiltered snapshot
    for bad in ({"since_seconds": DAY + 1}, {"since_seconds": 59}, {"tail_lines": 0}, {"level": "NOISY"}):
        assert api.get(f"/rft/runs/{long_run}/logs", params=bad).status_code == 422, bad


# -- traces --------------------------------------------------------------------------------------------

def many(api: httpx.Client, emu: EmulatorServer, rl_config: dict, **params: int) -> str:
    emu.state.set_scenario("many_traces", **params)
    run_id = create(api, rl_config)
    emu.state.advance(at_step(20) + T.finalize_seconds + T.trace_ingest_seconds)
    return run_id


def test_the_first_page_of_a_50000_trace_run_generates_about_one_page(api: httpx.Client, emu: EmulatorServer,
                                                                      rl_config: dict) -> None:
    run_id = many(api, emu, rl_config, count=50_000)
    store = emu.state.store
    assert store.records_made == 0
    first = api.get("/traces", params={"run_id": run_id, "limit": 100}).json()
    assert len(first["items"]) == 100 and first["next_cursor"] and store.records_made <= 110
    second = api.get("/traces", params={"run_id": run_id, "limit": 100, "cursor": first["next_cursor"]}).json()
    assert store.records_made <= 220
    both = first["items"] + second["items"]
    assert [t["created_at"] for t in both] == sorted((t["created_at"] for t in both), reverse=True)
    assert len({t["trace_id"] for t in both}) == 200
    assert {t["run_step"] for t in first["items"]} == {20}
    summary = api.get(f"/runs/{run_id}").json()
    assert (summary["trace_count"], summary["episode_count"], summary["step_count"]) == (50_000, 12_500, 20)
    assert emu.state.summary()["trace_count"] == 50_000 + 16  # and the 16 eval traces, stored as usual
    assert len(store.traces) == 16


def test_a_10000_trace_run_walks_page_by_page_with_each_trace_once(api: httpx.Client, emu: EmulatorServer,
                                                                   rl_config: dict) -> None:
    run_id = many(api, emu, rl_config, count=10_000, trace_bytes=4096)
    seen, cursors = [], [None]
    while True:
        page = api.get("/traces", params={"run_id": run_id, "limit": 100,
                                          **({"cursor": cursors[-1]} if cursors[-1] else {})}).json()
        seen += page["items"]
        if page["next_cursor"] is None:
            break
        cursors.append(page["next_cursor"])
    assert len(seen) == 10_000 == len({t["trace_id"] for t in seen})
    assert [t["created_at"] for t in seen] == sorted((t["created_at"] for t in seen), reverse=True)
    assert {t["size_bytes"] for t in seen} == {4096}
    steps = api.get(f"/runs/{run_id}/steps").json()["items"]
    assert [s["trace_count"] for s in steps] == [500] * 20 and [s["episode_count"] for s in steps] == [125] * 20
    trace = seen[1234]
    assert api.get(f"/traces/{trace['trace_id']}").json() == trace
    raw = api.get(f"/traces/{trace['trace_id']}", params={"raw": "true"})
    doc = json.loads(raw.content)
    assert len(raw.content) == 4096 and (doc["version"], doc["id"], doc["run_step"]) == (4, trace["trace_id"],
                                                                                         trace["run_step"])
    episodes = api.get("/episodes", params={"run_id": run_id, "run_step": 7, "limit": 100}).json()
    assert len(episodes["items"]) == 100 and episodes["next_cursor"]
    episode = episodes["items"][0]["episode_id"]
    members = api.get(f"/episodes/{episode}/traces").json()["items"]
    envelope = json.loads(api.get(f"/episodes/{episode}", params={"raw": "true"}).content)
    assert len(members) == 4 and sorted(envelope["traces"]) == sorted(t["trace_id"] for t in members)
    assert api.get(f"/episodes/{episode}").json()["traces"]["trace_count"] == 4
    changed = api.get("/traces", params={"run_id": run_id, "limit": 100, "outcome": "done", "cursor": cursors[50]})
    assert changed.status_code == 400 and changed.json()["error"]["code"] == "invalid_cursor"


def test_traces_of_a_large_run_land_step_by_step(api: httpx.Client, emu: EmulatorServer, rl_config: dict) -> None:
    emu.state.set_scenario("many_traces", count=2000)
    emu.state.set_scenario("missing_traces", steps=[2])
    run_id = create(api, rl_config)
    emu.state.advance(at_step(5) + T.trace_ingest_seconds)
    steps = api.get(f"/runs/{run_id}/steps").json()
    assert [s["step"] for s in steps["items"]] == [1, 3, 4, 5]
    assert api.get(f"/runs/{run_id}").json()["trace_count"] == 400


def test_a_5_gb_run_streams_each_raw_trace_with_bounded_server_memory(api: httpx.Client, emu: EmulatorServer,
                                                                      rl_config: dict) -> None:
    run_id = many(api, emu, rl_config, count=2000, total_bytes=5_000_000_000)
    total, cursor = 0, None
    while True:
        page = api.get("/traces", params={"run_id": run_id, "limit": 100, **({"cursor": cursor} if cursor else {})})
        total += sum(t["size_bytes"] for t in page.json()["items"])
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert total == 5_000_000_000
    first, trace = api.get("/traces", params={"run_id": run_id, "limit": 2}).json()["items"]
    # The emulator builds its 1 MiB of filler text once, at the first raw document it serves: before the measure,
    # whichever test of this process came first.
    with api.stream("GET", f"/traces/{first['trace_id']}", params={"raw": "true"}) as response:
        next(response.iter_raw(65536))
    tracemalloc.start()
    try:
        received, head = 0, b""
        with api.stream("GET", f"/traces/{trace['trace_id']}", params={"raw": "true"}) as response:
            assert int(response.headers["content-length"]) == trace["size_bytes"] == 2_500_000
            for chunk in response.iter_raw(65536):
                head = head or chunk[:200]
                received += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert received == 2_500_000 and head.startswith(b'{"version":4,"id":"' + trace["trace_id"].encode())
    assert peak < 2_000_000, peak  # chunks, never the whole document (client and server share this process)
    refused = api.get(f"/runs/{run_id}/search", params={"query": "Reverse the text"})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "search_limit_exceeded"
