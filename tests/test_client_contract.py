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
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
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


# --------------------------------------------------------------------------------------
# Our own contract beyond the CLI (httpx MockTransport): errors, retries, create ambiguity,
# secrets kept out of messages. These pin behaviour the CLI does not have.
# --------------------------------------------------------------------------------------

from tools.platform.client import parse_retry_after  # noqa: E402


class Script:
    """A MockTransport that answers from a list (callables may raise) and logs requests."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return answer(request) if callable(answer) else answer


def raises(exc_type):
    def answer(request):
        raise exc_type("injected", request=request)

    return answer


def clients(tmp_path, script, *, key=API_KEY, sleeps=None, **retry):
    env = {"PRIME_API_KEY": key} if key else {}
    settings = resolve_settings(env=env, home=tmp_path)
    policy = RetryPolicy(sleep=(sleeps if sleeps is not None else []).append, jitter=False, **retry)
    transport = httpx.MockTransport(script)
    return (PlatformClient(settings, transport=transport, retry=policy),
            TracesClient(settings, transport=transport, retry=policy))


def test_missing_key_raises_before_sending(tmp_path):
    script = Script(httpx.Response(200, json={}))
    platform, traces = clients(tmp_path, script, key=None)
    for call in (lambda: platform.get_run(RUN), lambda: platform.create_run({"config": {}}),
                 lambda: traces.list_traces(), lambda: traces.stream_raw_trace("t")):
        with pytest.raises(perr.CredentialsMissing):
            call()
    assert script.requests == []


def test_headers_timeouts_and_team_placement(tmp_path):
    script = Script(httpx.Response(200, json={"runs": [], "items": [], "next_cursor": None, "runId": "r",
                                              "tokenValue": "t", "contract_version": 1}))
    platform, traces = clients(tmp_path, script)
    platform.list_runs()
    platform.prepare_run(mode="rl")
    platform.create_run(wire.build_create_body({}))
    traces.list_traces(team_id=TEAM)
    listed, prepared, created, traced = script.requests
    assert "team_id" not in listed.url.params and listed.headers["content-type"] == "application/json"
    assert json.loads(prepared.content) == {"mode": "rl", "teamId": None}
    assert listed.extensions["timeout"] == {"connect": 10.0, "read": 30.0, "write": 30.0, "pool": 30.0}
    assert created.extensions["timeout"]["read"] == 120.0 and created.extensions["timeout"]["connect"] == 10.0
    assert traced.headers["x-prime-team-id"] == TEAM and "content-type" not in traced.headers
    assert traced.extensions["timeout"]["read"] == 120.0
    assert listed.headers["authorization"] == f"Bearer {API_KEY}"
    assert listed.headers["user-agent"].startswith(f"model-factory-skill/{version('model-factory-skill')}")


def test_ids_are_one_path_segment(tmp_path):
    script = Script(httpx.Response(200, json={"run": {"id": "a b", "status": "RUNNING"}, "trace_id": ".."}))
    platform, traces = clients(tmp_path, script)
    platform.get_run("a b/c?d")
    traces.get_trace("..")
    assert script.requests[0].url.raw_path == b"/api/v1/rft/runs/a%20b%2Fc%3Fd"
    assert script.requests[1].url.raw_path == b"/api/v1/traces/%2E%2E"
    for bad in ("", "x/y"):
        with pytest.raises(perr.InvalidRequest):
            traces.get_trace(bad)
    with pytest.raises(perr.InvalidRequest):
        platform.get_run("")
    assert len(script.requests) == 2


@pytest.mark.parametrize(
    ("status", "error", "retryable"),
    [(401, perr.Unauthorized, False), (402, perr.PaymentRequired, False), (403, perr.Forbidden, False),
     (404, perr.NotFound, False), (405, perr.InvalidRequest, False), (409, perr.Conflict, False),
     (400, perr.InvalidRequest, False), (418, perr.InvalidRequest, False), (500, perr.Unavailable, True)],
)
def test_status_mapping_without_retry(tmp_path, status, error, retryable):
    script = Script(httpx.Response(status, json={"detail": "nope"}))
    platform, _ = clients(tmp_path, script)
    with pytest.raises(error) as info:
        platform.get_progress(RUN)
    assert info.value.status == status and info.value.retryable is retryable
    assert info.value.endpoint == f"GET /rft/runs/{RUN}/progress"
    assert len(script.requests) == 1  # 500 is not retried (only 429/502/503/504 and transport)


def test_reads_retry_then_succeed(tmp_path):
    sleeps: list[float] = []
    script = Script(httpx.Response(503, json={"detail": "busy"}), raises(httpx.ReadTimeout),
                    httpx.Response(200, json={"latestStep": 3}))
    platform, _ = clients(tmp_path, script, sleeps=sleeps, max_attempts=3)
    assert platform.get_progress(RUN).latest_step == 3
    assert sleeps == [1.0, 2.0] and len(script.requests) == 3


def test_each_call_gets_the_full_attempts_and_backoff_again(tmp_path):
    sleeps: list[float] = []
    busy = httpx.Response(503, json={"detail": "busy"})
    script = Script(busy, httpx.Response(200, json={"latestStep": 1}), busy, busy,
                    httpx.Response(200, json={"latestStep": 2}))
    platform, _ = clients(tmp_path, script, sleeps=sleeps, max_attempts=3)
    assert platform.get_progress(RUN).latest_step == 1
    assert platform.get_progress(RUN).latest_step == 2  # a second call starts again at attempt 1
    assert sleeps == [1.0, 1.0, 2.0] and len(script.requests) == 5


def test_threads_sharing_a_client_retry_independently(tmp_path):
    both_failed_once = threading.Barrier(2, timeout=10)
    busy = httpx.Response(503, json={"detail": "busy"})
    script = Script(busy, busy, httpx.Response(200, json={"latestStep": 4}))
    settings = resolve_settings(env={"PRIME_API_KEY": API_KEY}, home=tmp_path)
    policy = RetryPolicy(sleep=lambda seconds: both_failed_once.wait(), jitter=False, max_attempts=2)
    platform = PlatformClient(settings, transport=httpx.MockTransport(script), retry=policy)
    with ThreadPoolExecutor(2) as pool:  # each thread: one 503, then (after both failed once) its second attempt
        steps = list(pool.map(lambda _: platform.get_progress(RUN).latest_step, range(2)))
    assert steps == [4, 4] and len(script.requests) == 4


def test_connect_errors_exhaust_the_attempts(tmp_path):
    script = Script(raises(httpx.ConnectError))
    platform, _ = clients(tmp_path, script, max_attempts=3)
    with pytest.raises(perr.Unavailable) as info:
        platform.get_run(RUN)
    assert info.value.sent is False and len(script.requests) == 3


def test_read_timeout_on_a_read_is_sent_true(tmp_path):
    script = Script(raises(httpx.ReadTimeout))
    platform, _ = clients(tmp_path, script, max_attempts=2)
    with pytest.raises(perr.Unavailable) as info:
        platform.get_run(RUN)
    assert info.value.sent is True and not info.value.ambiguous and len(script.requests) == 2


def test_retry_after_is_capped_and_the_total_wait_is_bounded(tmp_path):
    sleeps: list[float] = []
    script = Script(httpx.Response(429, headers={"Retry-After": "3600"}, json={"detail": "slow"}))
    platform, _ = clients(tmp_path, script, sleeps=sleeps, max_attempts=5, retry_after_cap_seconds=2.0,
                          total_wait_cap_seconds=5.0)
    with pytest.raises(perr.RateLimited) as info:
        platform.list_runs()
    assert sleeps == [2.0, 2.0] and len(script.requests) == 3  # a third wait would pass 5 s
    assert info.value.retry_after == 3600.0


def test_parse_retry_after():
    from datetime import UTC, datetime

    now = datetime(2026, 8, 20, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0 and parse_retry_after("-3") == 0.0
    assert parse_retry_after("Thu, 20 Aug 2026 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Thu, 20 Aug 2026 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


@pytest.mark.parametrize(
    ("answer", "error", "sent"),
    [
        (raises(httpx.ConnectError), perr.Unavailable, False),
        (raises(httpx.ConnectTimeout), perr.Unavailable, False),
        (raises(httpx.ReadTimeout), perr.Ambiguous, True),
        (raises(httpx.ReadError), perr.Ambiguous, True),
        (raises(httpx.RemoteProtocolError), perr.Ambiguous, True),
        (raises(httpx.WriteError), perr.Ambiguous, True),
        (httpx.Response(500, json={"detail": "boom"}), perr.Ambiguous, True),
        (httpx.Response(502, text="bad gateway"), perr.Ambiguous, True),
        (httpx.Response(503, json={"detail": "busy"}, headers={"Retry-After": "1"}), perr.Ambiguous, True),
        (httpx.Response(200, text="<html>"), perr.Ambiguous, True),
        (httpx.Response(201, json=["not", "an", "object"]), perr.Ambiguous, True),
        (httpx.Response(200, json={"tokenValue": "pit_run_fake_token"}), perr.Ambiguous, True),
        (httpx.Response(409, json={"detail": "duplicate"}), perr.Conflict, True),
        (httpx.Response(429, json={"detail": "slow"}, headers={"Retry-After": "1"}), perr.RateLimited, True),
    ],
)
def test_create_never_retries_and_reports_ambiguity(tmp_path, answer, error, sent):
    script = Script(answer)
    platform, _ = clients(tmp_path, script, max_attempts=5)
    body = wire.build_create_body({"a": 1}, wandb_api_key="fake-wandb-key", hf_token="fake-hf-token")
    with pytest.raises(error) as info:
        platform.create_run(body)
    assert len(script.requests) == 1
    exc = info.value
    assert exc.ambiguous is (error is perr.Ambiguous)
    if isinstance(exc, perr.Unavailable):
        assert exc.sent is sent
    for secret in ("fake-wandb-key", "fake-hf-token", API_KEY, "pit_run_fake_token"):
        assert secret not in str(exc)


def test_resume_and_volume_create_are_treated_like_create(tmp_path):
    script = Script(raises(httpx.ReadTimeout))
    platform, _ = clients(tmp_path, script)
    with pytest.raises(perr.Ambiguous):
        platform.resume_run(RUN, wandb_api_key="fake-wandb-key")
    with pytest.raises(perr.Ambiguous):
        platform.create_volume(name="v", size="1Ti")
    with pytest.raises(perr.Unavailable):  # stop is a plain write: not ambiguous, not retried
        platform.stop_run(RUN)
    assert len(script.requests) == 3


def test_secrets_echoed_by_the_server_are_redacted(tmp_path):
    echo = lambda request: httpx.Response(400, json={"detail": f"bad body {request.content.decode()} key {API_KEY}"})  # noqa: E731
    script = Script(echo)
    platform, _ = clients(tmp_path, script)
    with pytest.raises(perr.InvalidRequest) as info:
        platform.create_run(wire.build_create_body({}, wandb_api_key="fake-wandb-key", hf_token="fake-hf-token"))
    text = str(info.value)
    assert "fake-wandb-key" not in text and "fake-hf-token" not in text and API_KEY not in text
    assert "[redacted]" in text and info.value.__cause__ is None and info.value.__context__ is None


def test_422_detail_input_values_are_not_shown(tmp_path):
    detail = [{"loc": ["body", "wandbApiKey"], "msg": "too short", "type": "x", "input": "fake-wandb-key-echo"}]
    script = Script(httpx.Response(422, json={"detail": detail}))
    platform, _ = clients(tmp_path, script)
    with pytest.raises(perr.InvalidRequest) as info:
        platform.create_run(wire.build_create_body({}))
    assert info.value.field_errors == [("wandbApiKey", "too short")]
    assert "fake-wandb-key-echo" not in str(info.value)


def test_non_object_2xx_on_a_read_is_retried_as_unavailable_and_204_is_fine(tmp_path):
    script = Script(*[httpx.Response(200, json=[1, 2])] * 3, httpx.Response(204))
    platform, _ = clients(tmp_path, script, max_attempts=3)
    with pytest.raises(perr.Unavailable) as garbled:
        platform.get_progress(RUN)
    assert garbled.value.retryable and len(script.requests) == 3  # retried as after a 5xx, then given up
    assert platform.delete_run(RUN) is None


def test_shape_errors_do_not_leak_values(tmp_path):
    script = Script(httpx.Response(200, json={"run": {"id": "r", "status": {"secret": "fake-value-xyz"}}}))
    platform, _ = clients(tmp_path, script)
    with pytest.raises(perr.InvalidRequest) as info:
        platform.get_run(RUN)
    assert "fake-value-xyz" not in str(info.value) and "status" in str(info.value)


def test_models_404_is_empty_like_the_cli(tmp_path):
    script = Script(httpx.Response(404, json={"detail": "Not Found"}))
    platform, _ = clients(tmp_path, script)
    assert platform.list_models().on_demand_beta_access is None
    with pytest.raises(perr.NotFound):
        platform.list_models(missing_ok=False)


def test_traces_error_envelope(tmp_path):
    script = Script(httpx.Response(409, json={"error": {"code": "trace_not_indexed", "message": "indexing"}}),
                    httpx.Response(403, json={"error": {"code": "service_not_enabled", "message": "off"}}))
    _, traces = clients(tmp_path, script)
    with pytest.raises(perr.Conflict) as conflict:
        traces.get_trace("t")
    with pytest.raises(perr.Forbidden) as forbidden:
        traces.get_trace("t")
    assert (conflict.value.service_code, forbidden.value.service_code) == ("trace_not_indexed", "service_not_enabled")


class CutStream(httpx.SyncByteStream):
    def __iter__(self):
        yield b"abc"
        raise httpx.ReadError("connection cut")


def test_stream_retries_before_the_first_byte_only(tmp_path):
    script = Script(httpx.Response(503, json={"error": {"code": "storage_unavailable", "message": "x"}}),
                    httpx.Response(200, content=b"0123456789"))
    _, traces = clients(tmp_path, script)
    assert b"".join(traces.stream_raw_trace("t", chunk_size=4)) == b"0123456789"
    assert len(script.requests) == 2 and script.requests[0].url.params["raw"] == "true"

    cut = Script(httpx.Response(200, stream=CutStream()))
    _, traces = clients(tmp_path, cut)
    received = []
    with pytest.raises(perr.Unavailable) as info:
        for chunk in traces.stream_raw_trace("t"):
            received.append(chunk)
    assert received == [b"abc"] and len(cut.requests) == 1 and "after 3 bytes" in str(info.value)


def test_failed_download_to_a_path_keeps_the_old_file(tmp_path):
    dest = tmp_path / "out" / "t.json"
    dest.parent.mkdir()
    dest.write_bytes(b"old")
    _, traces = clients(tmp_path, Script(httpx.Response(200, stream=CutStream())))
    with pytest.raises(perr.Unavailable):
        traces.download_raw_trace("t", dest)
    assert dest.read_bytes() == b"old" and sorted(p.name for p in dest.parent.iterdir()) == ["t.json"]


def test_query_encoding_of_lists_booleans_and_context(tmp_path):
    script = Script(httpx.Response(200, json={"items": [], "next_cursor": None}))
    _, traces = clients(tmp_path, script)
    traces.list_traces(upload_id=["u1", "u2"], is_truncated=True, context={"run_type": "eval"})
    traces.list_runs(run_type=["eval", "train"], created_by="me")
    first, second = script.requests
    assert first.url.params.get_list("upload_id") == ["u1", "u2"] and first.url.params["is_truncated"] == "true"
    assert first.url.params["context.run_type"] == "eval"
    assert second.url.params.get_list("run_type") == ["eval", "train"] and second.url.params["created_by"] == "me"


def test_context_manager_closes_and_repr_hides_the_key(tmp_path):
    platform, traces = clients(tmp_path, Script(httpx.Response(200, json={})))
    with platform, traces:
        assert API_KEY not in repr(platform) and API_KEY not in repr(traces)
    assert platform._http.is_closed and traces._http.is_closed


def test_transport_errors_carry_no_httpx_exception(tmp_path):
    platform, _ = clients(tmp_path, Script(raises(httpx.ReadTimeout)), max_attempts=1)
    with pytest.raises(perr.Unavailable) as info:
        platform.get_run(RUN)
    assert info.value.__cause__ is None and info.value.__context__ is None
