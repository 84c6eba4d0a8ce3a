"""Contract tests: our client sends what the real ``prime`` CLI 0.18.0 sends.

Each cassette in ``tests/cassettes/`` holds requests captured from the real CLI (and the
traces SDK it ships) by ``tests/cassettes/capture_cli.py``, with responses of the shapes in
reference/prime-api.md §8.2. They are replayed with pytest-recording in
``record_mode="none"``, matching on method, path, query and body (JSON bodies compared as
parsed objects), so they pin our wire format to the CLI's independently of the emulator.

Why these tests fail when the wire format drifts (reasoned once, for ``list_runs``):
``list_runs.yaml`` recorded ``GET /api/v1/rft/runs?page=1&limit=20&team_id=cteam...``.
If ``PlatformClient.list_runs`` sent ``teamId`` instead of ``team_id`` (or dropped
``limit``, or called ``/rft/run``), vcrpy's ``query`` (or ``path``) matcher would find no
recorded interaction; in record mode "none" it then raises
``CannotOverwriteExistingCassetteException`` from inside the httpx transport. The client
maps only ``httpx`` exceptions, so that exception reaches the test and fails it. For a
POST, the ``body`` matcher compares the parsed JSON, so renaming ``wandbApiKey`` or adding
``mode: "rl"`` to an RL create fails the same way. (Checked by hand: renaming the
``team_id`` query key in ``list_runs`` makes ``test_list_runs`` fail with that exception.)
The ``contract`` fixture also requires every recorded interaction to be played (no request
skipped, none added) and compares the ``X-Prime-Team-ID`` / ``Content-Type`` headers with
the CLI's, and checks ``Authorization: Bearer <key>``, which the cassettes leave out.
"""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import pytest

from tools.platform import errors as perr
from tools.platform import wire
from tools.platform.client import PlatformClient, RetryPolicy, TracesClient
from tools.platform.settings import resolve_settings

CASSETTES = Path(__file__).parent / "cassettes"
API_KEY = "fake-prime-api-key"
TEAM = "cteam0000000000000000000001"
RUN = "cmrun0000000000000000000a1"
RL_CONFIG = {"name": "demo", "model": {"name": "Qwen/Qwen3-4B"}, "trainer": {}, "orchestrator": {}}
SFT_CONFIG = {
    "name": "s",
    "model": {"name": "Qwen/Qwen3-0.6B"},
    "data": {"name": "willcb/R1-reverse-wikipedia-paragraphs-v1-1000", "seq_len": 4096},
}
RAW_TRACE = b'{"version":4,"id":"tr_01","nodes":[{"role":"user","content":"abc"}]}'


@pytest.fixture(scope="module")
def vcr_config():
    return {
        "record_mode": "none",
        "match_on": ["method", "path", "query", "body"],
        "filter_headers": ["authorization"],
        "allow_playback_repeats": False,
    }


@pytest.fixture(scope="module")
def vcr_cassette_dir():
    return str(CASSETTES)


class SpyTransport(httpx.BaseTransport):
    """Records each request, then hands it to a real HTTPTransport (which vcrpy patches)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.inner.handle_request(request)


class Contract:
    def __init__(self, tmp_path: Path, sleeps: list[float], retry: RetryPolicy) -> None:
        settings = resolve_settings(env={"PRIME_API_KEY": API_KEY}, home=tmp_path)
        self.spy = SpyTransport()
        self.sleeps = sleeps
        self.platform = PlatformClient(settings, transport=self.spy, retry=retry)
        self.traces = TracesClient(settings, transport=self.spy, retry=retry)


@pytest.fixture
def contract(vcr, tmp_path):
    """Clients over the cassette; afterwards: all interactions played, headers as the CLI's."""
    sleeps: list[float] = []
    retry = RetryPolicy(sleep=sleeps.append, jitter=False)
    c = Contract(tmp_path, sleeps, retry)
    yield c
    c.platform.close()
    c.traces.close()
    assert vcr.all_played, f"not every recorded request was sent: {vcr.play_counts}"
    assert len(c.spy.requests) == len(vcr.requests)
    for ours, recorded in zip(c.spy.requests, vcr.requests, strict=True):
        assert ours.headers.get("authorization") == f"Bearer {API_KEY}"
        for name in ("x-prime-team-id", "content-type"):  # vcrpy headers: case-insensitive
            assert ours.headers.get(name) == recorded.headers.get(name), (name, ours.url)
        assert ours.headers["user-agent"].startswith("model-factory-skill/")


def cassette(name: str):
    """Mark a test to replay ``tests/cassettes/<name>.yaml``."""
    return lambda fn: pytest.mark.vcr(pytest.mark.default_cassette(name)(fn))


# --------------------------------------------------------------------------------------
# Dispatch: prepare, volume check, create (§3.2, §3.5, §4)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("as_model", [False, True])
@cassette("dispatch_rl")
def test_dispatch_rl(contract, as_model):
    prep = contract.platform.prepare_run(mode="rl", team_id=TEAM, image_tag="v0.5.0")
    assert prep.mode == "rl" and prep.submission_supported is False
    assert prep.contract_problems() == []
    volumes = contract.platform.list_volumes(team_id=TEAM)
    assert [(v.name, v.status) for v in volumes] == [("research", "RUNNING")]
    kwargs = dict(
        name="demo",
        team_id=TEAM,
        image_tag="v0.5.0",
        gpu_type="H200_141GB",
        volume="research",
    )
    if as_model:
        body = wire.CreateRunBody(config=RL_CONFIG, wandb_api_key="fake-wandb-key", hf_token="fake-hf-token", **kwargs)
        assert "fake-wandb-key" not in repr(body) and "fake-hf-token" not in repr(body)
    else:
        body = wire.build_create_body(RL_CONFIG, wandb_api_key="fake-wandb-key", hf_token="fake-hf-token", **kwargs)
    created = contract.platform.create_run(body)
    assert created.run_id == "cmrun0000000000000000000a3"
    assert created.token_value.get_secret_value() == "pit_run_fake_token"
    assert "pit_run_fake_token" not in repr(created) and "pit_run_fake_token" not in created.model_dump_json()
    assert (created.on_demand, created.gpu_type, created.price_per_gpu_hour, created.estimated_cost_per_hour) == (
        True,
        "H200_141GB",
        2.5,
        20.0,
    )


@cassette("dispatch_sft")
def test_dispatch_sft(contract):
    prep = contract.platform.prepare_run(mode="sft", team_id=None)
    assert prep.mode == "sft" and prep.submission_supported is True
    created = contract.platform.create_run(wire.build_create_body(SFT_CONFIG, mode="sft", name="s"))
    assert created.run_id == "cmrun0000000000000000000a4"
    assert created.on_demand is False and created.price_per_gpu_hour is None


@cassette("dispatch_sft_ref")
def test_dispatch_sft_with_source_ref_and_old_platform(contract):
    with pytest.raises(perr.NotFound) as info:
        contract.platform.prepare_run(mode="sft", team_id=None, source_ref="main")
    assert info.value.status == 404
    created = contract.platform.create_run(wire.build_create_body(SFT_CONFIG, mode="sft", name="s", source_ref="main"))
    assert created.run_id == "cmrun0000000000000000000a5"


@cassette("dispatch_422")
def test_create_422_maps_field_errors(contract):
    with pytest.raises(perr.InvalidRequest) as prep:
        contract.platform.prepare_run(mode="sft")
    assert prep.value.status == 405
    with pytest.raises(perr.InvalidRequest) as info:
        contract.platform.create_run(wire.build_create_body(SFT_CONFIG, mode="sft", name="s"))
    exc = info.value
    assert not exc.ambiguous and exc.status == 422
    assert exc.field_errors == [("config.trainer.lr", "Input should be a valid number")]
    assert "config.trainer.lr: Input should be a valid number" in exc.message


# --------------------------------------------------------------------------------------
# Runs (§5.1-5.4, §3.4)
# --------------------------------------------------------------------------------------


@cassette("list_runs")
def test_list_runs(contract):
    page = contract.platform.list_runs(team_id=TEAM, page=1, limit=20)
    assert (page.total, page.page, page.limit, page.total_pages) == (41, 1, 20, 3)
    run = page.runs[0]
    assert (run.status, run.runs_ahead, run.queue_reason) == ("QUEUED", 2, "waiting for H200 capacity")


@cassette("list_runs_429")
def test_read_retries_429_honouring_retry_after(contract):
    page = contract.platform.list_runs(page=1, limit=20)
    assert page.total == 41
    assert contract.sleeps == [7.0]


@cassette("list_runs_429_date")
def test_429_with_http_date_retry_after(contract):
    contract.platform.retry_policy = RetryPolicy(max_attempts=1, sleep=contract.sleeps.append)
    with pytest.raises(perr.RateLimited) as info:
        contract.platform.list_runs(page=1, limit=20)
    assert info.value.retry_after == 0.0 and info.value.retryable and info.value.status == 429
    assert contract.sleeps == []


@cassette("get_run")
def test_get_run(contract):
    run = contract.platform.get_run(RUN)
    assert (run.id, run.status, run.kind, run.base_model, run.gpu_count) == (
        RUN,
        "RUNNING",
        "DEDICATED_FULL_FT",
        "Qwen/Qwen3-4B",
        8,
    )
    assert run.environment_labels() == ["primeintellect/reverse-text"]
    assert run.volume_name == "research" and not run.is_terminal()


@cassette("get_run_401")
def test_get_run_401(contract):
    with pytest.raises(perr.Unauthorized) as info:
        contract.platform.get_run(RUN)
    assert info.value.status == 401 and API_KEY not in str(info.value)


@cassette("get_run_404")
def test_get_run_404(contract):
    with pytest.raises(perr.NotFound) as info:
        contract.platform.get_run("cmrun-missing")
    assert "Run not found" in info.value.message and not info.value.retryable


@cassette("stop_run")
def test_stop_run(contract):
    run = contract.platform.stop_run(RUN)
    assert run.status == "STOPPED" and run.is_terminal()


@cassette("pause_run")
def test_pause_run(contract):
    assert contract.platform.pause_run(RUN).status == "PAUSING"


@cassette("resume_run")
def test_resume_run(contract):
    created = contract.platform.resume_run(RUN, gpu_type="H200_141GB", wandb_api_key="fake-wandb-key")
    assert created.run_id == "cmrun0000000000000000000a3"


# --------------------------------------------------------------------------------------
# Monitoring (§5.5-5.10)
# --------------------------------------------------------------------------------------


@cassette("logs_default")
def test_logs_default(contract):
    logs = contract.platform.get_logs(RUN)
    assert len(logs.lines()) == 4 and logs.lines()[-1] == "plain text line"


@cassette("logs_filtered")
def test_logs_filtered(contract):
    contract.platform.get_logs(RUN, tail_lines=200, search="Step \\d", regex=True, level="error", since_seconds=7200)


@cassette("logs_all_trainer")
def test_logs_all_trainer(contract):
    contract.platform.get_logs(RUN, tail_lines=5000, since_seconds=86400, component="trainer")


@cassette("logs_env_component")
def test_logs_env_server_component(contract):
    contract.platform.get_logs(RUN, component="env-server", env_name="reverse-text")


@cassette("env_server_logs")
def test_env_server_logs(contract):
    assert contract.platform.get_run(RUN).kind == "SHARED_RFT_HOSTED"
    logs = contract.platform.get_env_server_logs(RUN, env_name="reverse-text", env_index=1)
    assert "slow batch" in logs.logs


@cassette("env_servers")
def test_env_servers(contract):
    contract.platform.get_run(RUN)
    servers = contract.platform.list_env_servers(RUN)
    assert [(s.env_name, s.env_index, s.status) for s in servers] == [("primeintellect/reverse-text", 0, "Running")]


@cassette("metrics")
def test_metrics(contract):
    metrics = contract.platform.get_metrics(RUN, min_step=1, limit=2)
    assert [m["step"] for m in metrics.metrics] == [1, 2] and metrics.metrics[1]["reward/all/mean"] == 0.19


@cassette("progress")
def test_progress(contract):
    progress = contract.platform.get_progress(RUN)
    assert (progress.latest_step, progress.steps_with_samples) == (12, [5, 10])
    assert progress.last_updated_at == "2026-08-20T12:06:00Z"


@cassette("checkpoints")
def test_checkpoints(contract):
    (ckpt,) = contract.platform.list_checkpoints(RUN, status_filter="READY")
    assert (ckpt.step, ckpt.status, ckpt.size_bytes, ckpt.rft_run_id) == (100, "READY", 16106127360, RUN)


@cassette("samples")
def test_samples(contract):
    samples = contract.platform.get_samples(RUN, step=5, page=1, limit=100)
    assert samples.total == 1 and samples.samples[0]["reward"] == 0.75


@cassette("distributions")
def test_distributions(contract):
    dist = contract.platform.get_distributions(RUN, distribution_type="rewards", step=160)
    assert dist.step == 160 and [b["count"] for b in dist.bins] == [40, 88]


@cassette("usage")
def test_usage(contract):
    usage = contract.platform.get_usage(RUN)
    assert usage.total_cost_usd == 3.25 and usage.inference.output_tokens == 1000000
    assert usage.pricing.inference_output_per_mtok == 0.85


# --------------------------------------------------------------------------------------
# Catalogue and account (§2.4, §2.5, §2.7)
# --------------------------------------------------------------------------------------


@cassette("models")
def test_models(contract):
    models = contract.platform.list_models(team_id=TEAM)
    assert models.models[0].clusters[0].cluster_name == "athens"
    assert models.on_demand[0].price_per_gpu_hour == 2.5 and models.on_demand_beta_access is True


@cassette("gpus")
def test_gpus(contract):
    assert contract.platform.list_gpu_types(team_id=TEAM).gpu_types == ["B200_180GB", "H200_141GB"]


@cassette("teams")
def test_teams(contract):
    teams = contract.platform.list_teams(offset=0, limit=100)
    assert teams.total_count == 1 and teams.data[0].team_id == TEAM and teams.data[0].role == "ADMIN"


@cassette("volumes")
def test_volumes(contract):
    (volume,) = contract.platform.list_volumes(team_id=TEAM)
    assert (volume.size, volume.pvc_name, volume.cluster_id) == ("5Ti", "vol-research", "cmpcl000000000000000000c1")


@cassette("whoami")
def test_whoami(contract):
    me = contract.platform.whoami(team_id=TEAM)
    assert me.id == "cmusr0000000000000000000u1" and me.scope["training"]["write"] is True


# --------------------------------------------------------------------------------------
# Traces host (§6)
# --------------------------------------------------------------------------------------


@cassette("traces_list")
def test_traces_list(contract):
    page = contract.traces.list_traces(team_id=TEAM, run_id=RUN, limit=100)
    trace = page.items[0]
    assert page.next_cursor == "eyJrIjoiMjAyNi0wOC0yMFQxMjowNjowMCJ9"
    assert (trace.run_step, trace.score.reward, trace.execution.has_error) == (12, 0.75, False)


@cassette("traces_list_filters")
def test_traces_list_query_encoding(contract):
    page = contract.traces.list_traces(
        run_id=RUN,
        environment_id="reverse-text",
        context={"source": "hosted_eval"},
        has_error=False,
        reward_min=0.5,
        limit=50,
        cursor="c1",
    )
    assert page.next_cursor is None


@cassette("traces_list_pages")
def test_traces_cursor_walk(contract):
    traces = list(contract.traces.iter_traces(run_id=RUN, has_error=True, limit=20))
    assert len(traces) == 2


@cassette("traces_get")
def test_traces_get(contract):
    trace = contract.traces.get_trace("tr_01", team_id=TEAM)
    assert trace.trace_id == "tr_01" and trace.size_bytes == 5120


@pytest.mark.parametrize("how", ["stream", "file_object", "path"])
@cassette("traces_raw")
def test_traces_raw_download(contract, how, tmp_path):
    if how == "stream":
        data = b"".join(contract.traces.stream_raw_trace("tr_01", team_id=TEAM, chunk_size=8))
    elif how == "file_object":
        sink = io.BytesIO()
        assert contract.traces.download_raw_trace("tr_01", sink, team_id=TEAM) == len(RAW_TRACE)
        data = sink.getvalue()
    else:
        dest = tmp_path / "tr_01.json"
        assert contract.traces.download_raw_trace("tr_01", dest, team_id=TEAM) == len(RAW_TRACE)
        data = dest.read_bytes()
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []
    assert data == RAW_TRACE


@cassette("traces_run")
def test_traces_run_and_steps(contract):
    summary = contract.traces.get_run(RUN, team_id=TEAM)
    assert (summary.trace_count, summary.episode_count, summary.step_count) == (2048, 256, 12)
    steps = contract.traces.list_run_steps(RUN, team_id=TEAM)
    assert [s.avg_reward for s in steps.items] == [0.12, None]


@cassette("traces_run_not_found")
def test_traces_run_not_found(contract):
    with pytest.raises(perr.NotFound) as info:
        contract.traces.get_run("cmrun-missing", team_id=TEAM)
    assert info.value.service_code == "run_not_found" and "no traces for run" in info.value.message


@cassette("traces_episodes")
def test_traces_episodes(contract):
    page = contract.traces.list_episodes(run_id=RUN, run_step=12, limit=20)
    assert page.items[0].episode_id == "ep_01" and page.items[0].error.type is None


@cassette("traces_episode_get")
def test_traces_episode_get(contract):
    episode = contract.traces.get_episode("ep_01")
    assert episode.traces.trace_count == 8 and episode.traces.agent_names == ["solver"]


@cassette("traces_runs_list")
def test_traces_runs_list(contract):
    page = contract.traces.list_runs(run_type="eval", limit=20)
    assert page.items[0].context["run_type"] == "eval"


@cassette("traces_search")
def test_traces_search(contract):
    page = contract.traces.search_run(RUN, query="Traceback", has_error=True)
    assert page.items[0].node_idx == 3 and page.coverage.examined_traces == 2048


# --------------------------------------------------------------------------------------
# Cassette hygiene
# --------------------------------------------------------------------------------------


def test_every_cassette_is_replayed_by_a_test():
    source = Path(__file__).read_text()
    names = sorted(p.stem for p in CASSETTES.glob("*.yaml"))
    assert names, "no cassettes"
    missing = [n for n in names if f'cassette("{n}")' not in source]
    assert missing == []


def test_cassettes_hold_no_credentials():
    for path in CASSETTES.glob("*.yaml"):
        text = path.read_text()
        assert "authorization:" not in text.lower(), path.name
        assert API_KEY not in text, path.name
