"""``tools.platform`` clients over real HTTP against the emulator (``skill.emulator``).

Covers what a cassette cannot: transport failures (a connection cut mid-body, a create
that commits and never answers, a refused connection), retries honouring ``Retry-After``
from a live server, and the streamed raw download. Faults come from the emulator's fault
injection (``emulator.faults``); the clock is frozen and advanced explicitly.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from _helpers import free_port

from skill.emulator import TEAM_RESEARCH_ID, EmulatorServer
from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.client import PlatformClient, RetryPolicy, TracesClient
from tools.platform.settings import resolve_settings

RL_CONFIG = {
    "name": "http-contract",
    "max_steps": 4,
    "model": {"name": "PrimeIntellect/Qwen3-0.6B"},
    "trainer": {},
    "orchestrator": {"batch_size": 8},
    "inference": {},
}


class Setup:
    def __init__(self, emulator: EmulatorServer, home: Path, **client_options) -> None:
        self.emulator = emulator
        self.sleeps: list[float] = []
        env = {
            "PRIME_API_KEY": emulator.api_key,
            "PRIME_API_BASE_URL": emulator.base_url + "/api/v1/",
            "PRIME_TRACES_URL": emulator.base_url,
        }
        self.settings = resolve_settings(env=env, home=home)
        retry = RetryPolicy(sleep=self.sleeps.append, jitter=False)
        self.platform = PlatformClient(self.settings, retry=retry, **client_options)
        self.traces = TracesClient(self.settings, retry=retry)

    def close(self) -> None:
        self.platform.close()
        self.traces.close()

    def launch(self, config: dict | None = None, **body) -> str:
        body = wire.build_create_body(config or RL_CONFIG, name="http-contract", **body)
        return self.platform.create_run(body).run_id

    def finish(self, run_id: str) -> wire.RLRun:
        for _ in range(200):
            self.emulator.state.advance(60)
            run = self.platform.get_run(run_id)
            if run.is_terminal():
                return run
        raise AssertionError("run did not finish")


@pytest.fixture
def mf(emulator, tmp_path):
    setup = Setup(emulator, tmp_path)
    yield setup
    setup.close()


def test_catalogue_and_account(mf):
    assert mf.platform.whoami().id
    team_ids = [t.team_id for t in mf.platform.list_all_teams()]
    assert TEAM_RESEARCH_ID in team_ids
    models = mf.platform.list_models()
    assert any(m.name == "PrimeIntellect/Qwen3-0.6B" for m in models.models)
    assert all(g.price_per_gpu_hour is None or g.price_per_gpu_hour > 0 for g in models.on_demand)
    assert mf.platform.list_gpu_types().gpu_types
    assert [v.name for v in mf.platform.list_volumes(team_id=TEAM_RESEARCH_ID)] == ["research-data"]


def test_a_run_end_to_end(mf):
    prep = mf.platform.prepare_run(mode="rl", team_id=None)
    assert prep.mode == "rl"
    run_id = mf.launch()
    assert run_id in [r.id for r in mf.platform.list_runs(limit=50).runs]
    run = mf.finish(run_id)
    assert run.status == "COMPLETED"
    assert mf.platform.get_progress(run_id).latest_step == 4
    assert [m["step"] for m in mf.platform.get_metrics(run_id).metrics][-1] == 4
    assert mf.platform.get_logs(run_id, tail_lines=50).lines()
    assert mf.platform.get_usage(run_id).run_id == run_id
    mf.platform.list_checkpoints(run_id)
    mf.platform.list_env_servers(run_id)
    summary = mf.traces.get_run(run_id)
    steps = mf.traces.list_run_steps(run_id)
    assert summary.trace_count == sum(s.trace_count for s in steps.items) > 0
    listed = list(mf.traces.iter_traces(run_id=run_id, limit=7))
    assert len(listed) == summary.trace_count
    episodes = mf.traces.list_episodes(run_id=run_id, run_step=1, limit=100)
    assert episodes.items and mf.traces.get_episode(episodes.items[0].episode_id).traces is not None


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, perr.Unauthorized), (402, perr.PaymentRequired), (403, perr.Forbidden), (404, perr.NotFound),
     (409, perr.Conflict), (422, perr.InvalidRequest), (400, perr.InvalidRequest), (500, perr.Unavailable)],
)
def test_injected_statuses_map_to_typed_errors_without_retry(mf, status, error):
    rule = mf.emulator.faults.status(status, "GET", "/rft/runs", times=None)
    with pytest.raises(error) as info:
        mf.platform.list_runs()
    assert info.value.status == status and rule.hits == 1 and mf.sleeps == []
    if status == 422:
        assert info.value.field_errors == [("", "Injected validation failure")]


def test_traces_errors_use_the_service_envelope(mf):
    mf.emulator.faults.status(403, "GET", "/traces", times=1)
    with pytest.raises(perr.Forbidden) as info:
        mf.traces.list_traces()
    assert info.value.service_code
    with pytest.raises(perr.NotFound) as missing:
        mf.traces.get_run("cmrun-missing")
    assert missing.value.service_code == "run_not_found"


def test_reads_retry_honouring_retry_after(mf):
    rule = mf.emulator.faults.status(429, "GET", "/rft/runs", times=2, retry_after=3)
    assert mf.platform.list_runs().runs is not None
    assert rule.hits == 2 and mf.sleeps == [3.0, 3.0]


def test_reads_retry_5xx_gateway_errors(mf):
    mf.emulator.faults.status(503, "GET", "/user/whoami", times=1)
    mf.emulator.faults.status(502, "GET", "/user/whoami", times=1)
    assert mf.platform.whoami().id and mf.sleeps == [1.0, 2.0]


def test_retries_give_up_after_max_attempts(mf):
    rule = mf.emulator.faults.status(503, "GET", "/user/whoami", times=None, retry_after=1)
    with pytest.raises(perr.Unavailable) as info:
        mf.platform.whoami()
    assert rule.hits == 3 and info.value.status == 503 and mf.sleeps == [1.0, 1.0]


def test_create_that_commits_then_drops_is_ambiguous_and_not_resent(mf):
    before = mf.emulator.state.create_attempts
    mf.emulator.faults.commit_then_timeout(mode="drop")
    with pytest.raises(perr.Ambiguous) as info:
        mf.launch(wandb_api_key="fake-wandb-key")
    assert "fake-wandb-key" not in str(info.value) and mf.emulator.api_key not in str(info.value)
    assert mf.emulator.state.create_attempts == before + 1  # sent once, never re-sent
    names = [r.name for r in mf.platform.list_runs(limit=50).runs]
    assert names.count("http-contract") == 1  # ... and it did create the run: reconcile by listing


def test_create_that_commits_then_stalls_past_the_timeout_is_ambiguous(emulator, tmp_path):
    setup = Setup(emulator, tmp_path, create_timeout=0.5)
    try:
        emulator.faults.commit_then_timeout(mode="delay", delay=3.0)
        with pytest.raises(perr.Ambiguous):
            setup.launch()
        assert [r.name for r in setup.platform.list_runs(limit=50).runs].count("http-contract") == 1
    finally:
        setup.close()


def test_create_rejections_are_typed_and_not_ambiguous(mf):
    with pytest.raises(perr.InvalidRequest) as info:
        mf.launch({"name": "bad", "model": {"name": "PrimeIntellect/Qwen3-0.6B"}, "trainer": {"optim": {"lr": "x"}},
                   "inference": {}})
    assert info.value.status == 422
    assert ("config.trainer.optim.lr", "Input should be a valid number") in info.value.field_errors
    mf.emulator.faults.status(502, "POST", "/training/runs")
    with pytest.raises(perr.Ambiguous):
        mf.launch()


def test_connection_refused_means_nothing_was_sent(tmp_path):
    port = free_port()
    env = {"PRIME_API_KEY": "fake-prime-api-key", "PRIME_API_BASE_URL": f"http://127.0.0.1:{port}"}
    sleeps: list[float] = []
    with PlatformClient(resolve_settings(env=env, home=tmp_path), retry=RetryPolicy(sleep=sleeps.append)) as client:
        with pytest.raises(perr.Unavailable) as create:
            client.create_run(wire.build_create_body(RL_CONFIG))
        assert create.value.sent is False and not create.value.ambiguous and sleeps == []
        with pytest.raises(perr.Unavailable) as read:
            client.get_run("r")
        assert read.value.sent is False and len(sleeps) == 2


def test_read_timeouts_are_retried_then_reported(emulator, tmp_path):
    setup = Setup(emulator, tmp_path, timeout=0.3)
    try:
        rule = emulator.faults.delay(2.0, "GET", "/user/whoami", times=None)
        with pytest.raises(perr.Unavailable) as info:
            setup.platform.whoami()
        assert info.value.sent is True and rule.hits == 3
    finally:
        emulator.faults.clear()
        setup.close()


@pytest.fixture
def finished_run(mf):
    run_id = mf.launch()
    mf.finish(run_id)
    trace = mf.traces.list_traces(run_id=run_id, limit=1).items[0]
    return run_id, trace.trace_id


def test_streamed_raw_download(mf, finished_run, tmp_path):
    _, trace_id = finished_run
    whole = mf.traces.get_raw_trace(trace_id)
    assert whole.startswith(b"{") and len(whole) > 20
    chunks = list(mf.traces.stream_raw_trace(trace_id, chunk_size=16))
    assert b"".join(chunks) == whole and len(chunks) > 1
    sink = io.BytesIO()
    assert mf.traces.download_raw_trace(trace_id, sink) == len(whole) and sink.getvalue() == whole
    dest = tmp_path / "raw" / f"{trace_id}.json"
    dest.parent.mkdir()
    assert mf.traces.download_raw_trace(trace_id, dest) == len(whole) and dest.read_bytes() == whole


def test_stream_cut_before_the_first_byte_is_retried(mf, finished_run):
    _, trace_id = finished_run
    whole = mf.traces.get_raw_trace(trace_id)
    rule = mf.emulator.faults.cut(0, "GET", f"/traces/{trace_id}")
    assert mf.traces.get_raw_trace(trace_id) == whole
    assert rule.hits == 1 and len(mf.sleeps) == 1


def test_stream_cut_mid_body_fails_and_leaves_no_partial_file(mf, finished_run, tmp_path):
    _, trace_id = finished_run
    dest = tmp_path / "out.json"
    dest.write_bytes(b"previous")
    rule = mf.emulator.faults.cut(10, "GET", f"/traces/{trace_id}")
    with pytest.raises(perr.Unavailable) as info:
        mf.traces.download_raw_trace(trace_id, dest)
    assert "stream cut" in str(info.value) and rule.hits == 1 and mf.sleeps == []
    assert dest.read_bytes() == b"previous" and sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_search_over_http(mf, finished_run):
    run_id, _ = finished_run
    page = mf.traces.search_run(run_id, query="the", limit=5)
    assert page.next_cursor is None or isinstance(page.next_cursor, str)
